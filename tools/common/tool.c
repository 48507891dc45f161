#include "tool.h"

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util/parse.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double tool_median(double *v, size_t n)
{
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double tool_mean(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    return n ? s / (double)n : NAN;
}

/* Appends to the object; what does not fit is dropped (whole fields: the
 * object stays valid JSON, with the fields that fitted). */
static void json_add(tool_json_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void json_add(tool_json_t *j, const char *fmt, ...)
{
    size_t room = sizeof j->buf - 1 - j->len; /* 1: the closing brace */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->buf + j->len, room + 1, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n > room) {
        j->buf[j->len] = '\0';
        j->full = 1;
    } else {
        j->len += (size_t)n;
    }
}

/* one field: key and value, or nothing when it does not fit */
static void json_field(tool_json_t *j, const char *key, const char *value)
{
    if (j->full) return;
    json_add(j, "%s\"%s\":%s", j->fields ? "," : "", key, value);
    if (!j->full) j->fields++;
}

void tool_json_begin(tool_json_t *j)
{
    j->len = 0;
    j->fields = 0;
    j->full = 0;
    json_add(j, "{");
}

void tool_json_str(tool_json_t *j, const char *key, const char *value)
{
    char quoted[512];
    size_t n = 0;
    quoted[n++] = '"';
    for (const char *c = value; *c && n + 3 < sizeof quoted; c++) {
        if (*c == '"' || *c == '\\') quoted[n++] = '\\';
        quoted[n++] = *c;
    }
    quoted[n++] = '"';
    quoted[n] = '\0';
    json_field(j, key, quoted);
}

static void num_text(double value, char *out, size_t len)
{
    if (isfinite(value))
        snprintf(out, len, "%.6g", value);
    else
        snprintf(out, len, "null");
}

void tool_json_num(tool_json_t *j, const char *key, double value)
{
    char text[32];
    num_text(value, text, sizeof text);
    json_field(j, key, text);
}

void tool_json_int(tool_json_t *j, const char *key, long long value)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", value);
    json_field(j, key, text);
}

void tool_json_nums(tool_json_t *j, const char *key, const double *values, size_t n)
{
    char *text = malloc(n * 16 + 3);
    if (!text) return;
    size_t len = 0;
    text[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        if (i) text[len++] = ',';
        num_text(values[i], text + len, 15);
        len += strlen(text + len);
    }
    text[len++] = ']';
    text[len] = '\0';
    json_field(j, key, text);
    free(text);
}

void tool_json_fusion_plan(tool_json_t *j, const char *strategy, int ranks, const pcoll_fusion_plan_t *pl,
                           double wfbp_us, double single_us, const pcoll_cost_model_t *model)
{
    tool_json_str(j, "bench", "fusion");
    tool_json_str(j, "strategy", strategy);
    tool_json_int(j, "ranks", ranks);
    tool_json_int(j, "layers", pl->nlayers);
    tool_json_int(j, "buckets", pl->nbuckets);
    tool_json_num(j, "predicted_iter_us", pl->iter_us);
    tool_json_num(j, "compute_us", pl->compute_us);
    tool_json_num(j, "comm_us", pl->comm_us);
    tool_json_num(j, "exposed_us", pl->exposed_us);
    tool_json_num(j, "speedup_vs_wfbp", wfbp_us / pl->iter_us);
    tool_json_num(j, "speedup_vs_single", single_us / pl->iter_us);
    tool_json_num(j, "model_a_us", model->a_us);
    tool_json_num(j, "model_b_us", model->b_us);
    tool_json_str(j, "cost", model->piecewise ? "piecewise" : "linear");
    double *first = malloc(sizeof(double) * (size_t)(pl->nbuckets > 0 ? pl->nbuckets : 1));
    if (!first) return;
    for (int b = 0; b < pl->nbuckets; b++) first[b] = pl->first[b];
    tool_json_nums(j, "bucket_first_layer", first, (size_t)pl->nbuckets);
    free(first);
}

void tool_json_fusion_measured(tool_json_t *j, const pcoll_fusion_plan_t *pl, double measured_us, double wfbp_us,
                               double single_us)
{
    tool_json_num(j, "measured_iter_us", measured_us);
    tool_json_num(j, "measured_over_predicted", measured_us / pl->iter_us);
    if (!isnan(wfbp_us)) tool_json_num(j, "measured_speedup_vs_wfbp", wfbp_us / measured_us);
    if (!isnan(single_us)) tool_json_num(j, "measured_speedup_vs_single", single_us / measured_us);
}

void tool_json_end(tool_json_t *j, FILE *out)
{
    fprintf(out, "%s}\n", j->buf);
    fflush(out);
}

/* the text after "key": in a flat JSON object, blanks skipped; NULL if absent */
static const char *json_value(const char *text, const char *key)
{
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    return p;
}

int tool_json_get_num(const char *text, const char *key, double *out)
{
    const char *p = json_value(text, key);
    if (!p) return 0;
    char *end;
    double v = strtod(p, &end);
    if (end == p || !isfinite(v)) return -1;
    *out = v;
    return 1;
}

int tool_json_get_str(const char *text, const char *key, char *out, size_t len)
{
    const char *p = json_value(text, key);
    if (!p) return 0;
    if (*p != '"') return -1;
    p++;
    size_t n = 0;
    while (p[n] && p[n] != '"' && n + 1 < len) n++;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

int tool_parse_modes(const char *prog, const char *list, tool_mode_t *modes, int max)
{
    char names[TOOL_MAX_MODES][32];
    int n = tool_split_list(prog, "--modes", list, names, max < TOOL_MAX_MODES ? max : TOOL_MAX_MODES);
    for (int i = 0; i < n; i++) {
        tool_mode_t *m = &modes[i];
        memcpy(m->name, names[i], sizeof m->name); /* both 32 characters */
        m->kind = strcmp(names[i], "mpi") == 0 ? M_MPI : strcmp(names[i], "sync") == 0 ? M_SYNC : M_PARTIAL;
        pcoll_partial_config_default(&m->cfg);
        if (m->kind == M_PARTIAL && pcoll_partial_config_parse(names[i], &m->cfg) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--modes: \"%s\" is not mpi, sync, solo, majority, quorum:Q, group or group:S",
                             names[i]);
    }
    return n;
}

void tool_mpi_init(int *argc, char ***argv, int *rank, int *size)
{
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "MPI_Init_thread failed\n");
        exit(1);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
}

pcoll_t *tool_pcoll_init(void)
{
    pcoll_t *ctx = NULL;
    int rc = pcoll_init(MPI_COMM_WORLD, &ctx);
    if (rc != PCOLL_SUCCESS) {
        fprintf(stderr, "pcoll_init failed: %s\n", pcoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return ctx;
}

void tool_usage_error(const char *prog, const char *fmt, ...)
{
    int rank = 0, init = 0;
    MPI_Initialized(&init);
    if (init) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s: ", prog);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, " (see %s --help)\n", prog);
        va_end(ap);
    }
    if (init) MPI_Finalize();
    exit(2);
}

void tool_byte_range(const char *prog, size_t *min_bytes, size_t max_bytes)
{
    if (*min_bytes < 4) *min_bytes = 4;
    if (max_bytes < *min_bytes) tool_usage_error(prog, "--max-bytes is smaller than --min-bytes");
}

size_t tool_flag_bytes(const char *prog, const char *flag, const char *value)
{
    size_t v;
    if (pc_parse_bytes(value, &v) != 0)
        tool_usage_error(prog, "%s: \"%s\" is not a byte size (e.g. 64, 4K, 4M)", flag, value ? value : "");
    return v;
}

pcoll_allreduce_algo_t tool_flag_algo(const char *prog, const char *flag, const char *value)
{
    static const struct { const char *name; pcoll_allreduce_algo_t algo; } names[] = {
        {"auto", PCOLL_ALGO_AUTO}, {"recdbl", PCOLL_ALGO_RECDBL}, {"rabenseifner", PCOLL_ALGO_RABENSEIFNER},
        {"ring", PCOLL_ALGO_RING}, {"direct", PCOLL_ALGO_DIRECT}};
    for (size_t i = 0; value && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(value, names[i].name)) return names[i].algo;
    tool_usage_error(prog, "%s: \"%s\" is not auto|recdbl|rabenseifner|ring|direct", flag, value ? value : "");
}

long tool_flag_long(const char *prog, const char *flag, const char *value, long min, long max)
{
    long v;
    if (pc_parse_long(value, min, max, &v) != 0)
        tool_usage_error(prog, "%s: \"%s\" is not a whole number in %ld..%ld", flag, value ? value : "", min, max);
    return v;
}

double tool_flag_double(const char *prog, const char *flag, const char *value, double min, double max)
{
    double v;
    if (pc_parse_double(value, &v) != 0 || v < min || v > max)
        tool_usage_error(prog, "%s: \"%s\" is not a number in %g..%g", flag, value ? value : "", min, max);
    return v;
}

double tool_flag_rate(const char *prog, const char *flag, const char *value)
{
    static const struct {
        const char *unit;
        double bits;
    } units[] = {{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}};
    char num[64];
    const char *v = value ? value : "";
    size_t len = strlen(v);
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t ul = strlen(units[u].unit);
        double x;
        if (len <= ul || len - ul >= sizeof num || strcmp(v + len - ul, units[u].unit) != 0) continue;
        memcpy(num, v, len - ul);
        num[len - ul] = '\0';
        if (pc_parse_double(num, &x) == 0 && x > 0 && x < 1e6) return x * units[u].bits;
        break;
    }
    tool_usage_error(prog, "%s: \"%s\" is not a rate such as 1gbit, 100mbit or 500kbit", flag, v);
}

int tool_count_nodes(void)
{
    MPI_Comm node;
    int local_rank = 0, leaders = 1, is_leader;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &local_rank);
        MPI_Comm_free(&node);
    }
    is_leader = local_rank == 0;
    MPI_Allreduce(&is_leader, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return leaders;
}

int tool_read_csv(const char *path, const char *const *names, int n, double **cols, int *which, int *nrows, char *err,
                  size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    char line[4096];
    int pos[16], rows = 0, cap = 0, rc = -1;
    for (int c = 0; c < n; c++) cols[c] = NULL;
    if (n > 16 || !fgets(line, sizeof line, f)) {
        snprintf(err, errlen, "%s: no header line", path);
        goto out;
    }
    line[strcspn(line, "\r\n")] = '\0';
    for (int c = 0; c < n; c++) {
        pos[c] = -1;
        char alts[128];
        snprintf(alts, sizeof alts, "%s", names[c]);
        int alt = 0;
        for (char *a = strtok(alts, "|"); a && pos[c] < 0; a = strtok(NULL, "|"), alt++) {
            char hdr[4096];
            snprintf(hdr, sizeof hdr, "%s", line);
            int k = 0;
            for (char *save = NULL, *h = strtok_r(hdr, ",", &save); h; h = strtok_r(NULL, ",", &save), k++)
                if (!strcmp(h, a)) {
                    pos[c] = k;
                    if (which) which[c] = alt;
                    break;
                }
        }
        if (pos[c] < 0) {
            snprintf(err, errlen, "%s: no column %s in its header \"%s\"", path, names[c], line);
            goto out;
        }
    }
    for (int lineno = 2; fgets(line, sizeof line, f); lineno++) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0]) continue;
        if (rows == cap) {
            cap = cap ? 2 * cap : 64;
            for (int c = 0; c < n; c++) {
                double *p = realloc(cols[c], sizeof(double) * (size_t)cap);
                if (!p) {
                    snprintf(err, errlen, "%s: out of memory", path);
                    goto out;
                }
                cols[c] = p;
            }
        }
        for (int c = 0; c < n; c++) {
            char copy[4096], *save = NULL, *field = NULL;
            snprintf(copy, sizeof copy, "%s", line);
            int k = 0;
            for (char *h = strtok_r(copy, ",", &save); h; h = strtok_r(NULL, ",", &save), k++)
                if (k == pos[c]) field = h;
            if (!field || pc_parse_double(field, &cols[c][rows]) != 0) {
                snprintf(err, errlen, "%s line %d: column %s is not a number", path, lineno, names[c]);
                goto out;
            }
        }
        rows++;
    }
    *nrows = rows;
    rc = 0;
out:
    fclose(f);
    if (rc != 0)
        for (int c = 0; c < n; c++) {
            free(cols[c]);
            cols[c] = NULL;
        }
    return rc;
}

double tool_now_us(void) { return MPI_Wtime() * 1e6; }

int tool_split_list(const char *prog, const char *flag, const char *text, char out[][32], int max)
{
    char buf[512];
    if (strlen(text) >= sizeof buf) tool_usage_error(prog, "%s: list too long", flag);
    strcpy(buf, text);
    int n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (n == max) tool_usage_error(prog, "%s: at most %d entries", flag, max);
        if (strlen(tok) >= 32) tool_usage_error(prog, "%s: \"%s\" is too long", flag, tok);
        strcpy(out[n++], tok);
    }
    if (n == 0) tool_usage_error(prog, "%s: empty list", flag);
    return n;
}
