#include "tool.h"

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

void tool_json_end(tool_json_t *j, FILE *out)
{
    fprintf(out, "%s}\n", j->buf);
    fflush(out);
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
