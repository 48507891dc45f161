/*
 * The allreduce tuning table (tuning.h): parsing, lookup, hash, text.
 *
 *   text --parse--> rows sorted by (ranks, nodes, up-to-bytes)
 *   lookup(n, nodes, bytes): the first row of (n, nodes) with
 *                            up-to-bytes >= bytes, else AUTO (built-in rule)
 */
#include "tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/parse.h"

static int algo_of(const char *word, int32_t *algo)
{
    for (int a = PCOLL_ALGO_RECDBL; a <= PCOLL_ALGO_SHM; a++)
        if (strcmp(word, pcoll_allreduce_algo_name((pcoll_allreduce_algo_t)a)) == 0) {
            *algo = a;
            return 0;
        }
    return -1;
}

static int by_key(const void *pa, const void *pb)
{
    const pc_tuning_row_t *a = pa, *b = pb;
    if (a->ranks != b->ranks) return a->ranks < b->ranks ? -1 : 1;
    if (a->nodes != b->nodes) return a->nodes < b->nodes ? -1 : 1;
    return a->max_bytes < b->max_bytes ? -1 : a->max_bytes > b->max_bytes;
}

/* One row from the words of a line: 0, or -1 with why. */
static int parse_row(char *words[4], pc_tuning_row_t *row, char *why, size_t len)
{
    long ranks, nodes;
    size_t bytes;
    memset(row, 0, sizeof *row);
    if (pc_parse_long(words[0], 2, 1L << 30, &ranks) != 0)
        return snprintf(why, len, "ranks \"%s\" is not a whole number from 2", words[0]), -1;
    if (pc_parse_long(words[1], 1, ranks, &nodes) != 0)
        return snprintf(why, len, "nodes \"%s\" is not a whole number from 1 to the ranks", words[1]), -1;
    if (strcmp(words[2], "max") == 0) {
        row->max_bytes = UINT64_MAX;
    } else if (pc_parse_bytes(words[2], &bytes) == 0) {
        row->max_bytes = bytes;
    } else {
        return snprintf(why, len, "up-to-bytes \"%s\" is not a byte size (e.g. 4096, 64K) or max", words[2]), -1;
    }
    if (algo_of(words[3], &row->algo) != 0)
        return snprintf(why, len, "\"%s\" is not an algorithm (recdbl|rabenseifner|ring|direct|shm)", words[3]), -1;
    row->ranks = (int32_t)ranks;
    row->nodes = (int32_t)nodes;
    return 0;
}

int pc_tuning_parse(const char *text, pc_tuning_t *t, char *why, size_t why_len)
{
    char detail[160];
    t->nrows = 0;
    int line_no = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        line_no++;
        char buf[256];
        if (n >= sizeof buf) {
            snprintf(why, why_len, "line %d: longer than %zu characters", line_no, sizeof buf - 1);
            return -1;
        }
        memcpy(buf, line, n);
        buf[n] = '\0';
        line = end ? end + 1 : NULL;
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        char *words[5], *save = NULL;
        int nw = 0;
        for (char *w = strtok_r(buf, " \t\r", &save); w; w = strtok_r(NULL, " \t\r", &save))
            if (nw < 5) words[nw++] = w;
            else nw++;
        if (nw == 0) continue;
        if (nw != 4) {
            snprintf(why, why_len, "line %d: %d words, expected 4 (ranks nodes up-to-bytes algorithm)", line_no, nw);
            return -1;
        }
        if (t->nrows == PC_TUNING_MAX_ROWS) {
            snprintf(why, why_len, "line %d: more than %d rows", line_no, PC_TUNING_MAX_ROWS);
            return -1;
        }
        if (parse_row(words, &t->rows[t->nrows], detail, sizeof detail) != 0) {
            snprintf(why, why_len, "line %d: %s", line_no, detail);
            return -1;
        }
        t->nrows++;
    }
    qsort(t->rows, (size_t)t->nrows, sizeof t->rows[0], by_key);
    for (int i = 1; i < t->nrows; i++)
        if (by_key(&t->rows[i - 1], &t->rows[i]) == 0) {
            snprintf(why, why_len, "two rows for %d ranks, %d nodes, up to %llu bytes", t->rows[i].ranks,
                     t->rows[i].nodes, (unsigned long long)t->rows[i].max_bytes);
            return -1;
        }
    return 0;
}

pcoll_allreduce_algo_t pc_tuning_lookup(const pc_tuning_t *t, int ranks, int nodes, size_t bytes)
{
    if (!t) return PCOLL_ALGO_AUTO;
    for (int i = 0; i < t->nrows; i++) {
        const pc_tuning_row_t *r = &t->rows[i];
        if (r->ranks == ranks && r->nodes == nodes && r->max_bytes >= bytes) return (pcoll_allreduce_algo_t)r->algo;
    }
    return PCOLL_ALGO_AUTO;
}

int pc_tuning_has(const pc_tuning_t *t, int ranks, int nodes)
{
    for (int i = 0; t && i < t->nrows; i++)
        if (t->rows[i].ranks == ranks && t->rows[i].nodes == nodes) return 1;
    return 0;
}

uint64_t pc_tuning_hash(const pc_tuning_t *t)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the rows' fields */
    for (int i = 0; i < t->nrows; i++) {
        uint64_t f[4] = {(uint64_t)t->rows[i].ranks, (uint64_t)t->rows[i].nodes, (uint64_t)t->rows[i].algo,
                         t->rows[i].max_bytes};
        for (int k = 0; k < 4; k++)
            for (int b = 0; b < 8; b++) h = (h ^ ((f[k] >> (8 * b)) & 0xff)) * 1099511628211ull;
    }
    return h;
}

size_t pc_tuning_format(const pc_tuning_t *t, char *buf, size_t len)
{
    size_t used = 0;
    int n = snprintf(buf, len, "# ranks nodes up-to-bytes algorithm\n");
    used += n > 0 ? (size_t)n : 0;
    for (int i = 0; i < t->nrows; i++) {
        const pc_tuning_row_t *r = &t->rows[i];
        char bytes[32];
        if (r->max_bytes == UINT64_MAX) snprintf(bytes, sizeof bytes, "max");
        else snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)r->max_bytes);
        n = snprintf(used < len ? buf + used : NULL, used < len ? len - used : 0, "%d %d %s %s\n", r->ranks, r->nodes,
                     bytes, pcoll_allreduce_algo_name((pcoll_allreduce_algo_t)r->algo));
        used += n > 0 ? (size_t)n : 0;
    }
    return used;
}
