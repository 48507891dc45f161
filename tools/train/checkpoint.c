/* pcoll-train's checkpoint file (layout in checkpoint.h). */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"

#define MAGIC "pcoll-train checkpoint 1\n"

static uint32_t endian_mark(void)
{
    const uint32_t v = 0x01020304u;
    unsigned char b[4];
    memcpy(b, &v, 4);
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* DIR/NAME into buf; 0 if it does not fit */
static int path_of(char *buf, size_t len, const char *dir, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < len;
}

static int write_floats(FILE *f, const float *x, uint64_t n)
{
    return fwrite(x, sizeof *x, (size_t)n, f) == (size_t)n ? 0 : -1;
}

int ckpt_prepare(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return tr_fail("--checkpoint: the path is too long");
    /* mkdir -p: every prefix ending at a '/', then the whole */
    for (char *p = path + 1;; p++) {
        const char c = *p;
        if (c != '/' && c != '\0') continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return tr_fail("--checkpoint %s: cannot create %s: %s", dir, path, strerror(errno));
        *p = c;
        if (c == '\0') break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return tr_fail("--checkpoint %s: not a directory", dir);
    if (access(dir, W_OK) != 0) return tr_fail("--checkpoint %s: cannot write there: %s", dir, strerror(errno));
    return 0;
}

int ckpt_write(const char *dir, const ckpt_header_t *h, const float *params, const float *velocity)
{
    char tmp[4096], dst[4096];
    if (!path_of(tmp, sizeof tmp, dir, "checkpoint.tmp") || !path_of(dst, sizeof dst, dir, "checkpoint"))
        return tr_fail("--checkpoint %s: the path is too long", dir);
    FILE *f = fopen(tmp, "wb");
    if (!f) return tr_fail("--checkpoint: cannot write %s: %s", tmp, strerror(errno));
    fputs(MAGIC, f);
    fprintf(f, "endian %" PRIu32 "\ntask %s\nmodel %s\nparameters %" PRIu64 "\nalgo %s\nseed %" PRIu64
               "\nranks %d\nstep %" PRIu64 "\nepoch %ld\nepoch_step %ld\nsteps_per_epoch %ld\ntotal_steps %" PRIu64
               "\nend\n",
            endian_mark(), h->task, h->model, h->nparams, h->algo, h->seed, h->ranks, h->step, h->epoch,
            h->epoch_step, h->steps_per_epoch, h->total_steps);
    int bad = write_floats(f, params, h->nparams) | write_floats(f, velocity, h->nparams);
    bad |= ferror(f) != 0; /* the header's writes too */
    bad |= fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad) {
        int e = errno;
        unlink(tmp);
        return tr_fail("--checkpoint: writing %s failed: %s", tmp, strerror(e));
    }
    if (rename(tmp, dst) != 0) {
        int e = errno;
        unlink(tmp);
        return tr_fail("--checkpoint: cannot rename %s to %s: %s", tmp, dst, strerror(e));
    }
    /* the rename itself reaches the disk with the directory */
    int d = open(dir, O_RDONLY | O_DIRECTORY);
    if (d >= 0) {
        fsync(d);
        close(d);
    }
    return 0;
}

/* A text value into a field; 0 if it is too long (a damaged header). */
static int copy_text(char *dst, size_t len, const char *val)
{
    size_t n = strlen(val);
    if (n >= len) return 0;
    memcpy(dst, val, n + 1);
    return 1;
}

/* The header's keys, each required once. */
enum { K_ENDIAN, K_TASK, K_MODEL, K_PARAMS, K_ALGO, K_SEED, K_RANKS, K_STEP, K_EPOCH, K_EPOCH_STEP, K_SPE, K_TOTAL, K_N };
static const char *const key_names[K_N] = {"endian", "task",  "model",      "parameters",      "algo",
                                           "seed",   "ranks", "step",       "epoch",           "epoch_step",
                                           "steps_per_epoch", "total_steps"};

/* A decimal number, the whole of val; 0 if it is not one. */
static int parse_u64(const char *val, uint64_t *out)
{
    if (val[0] < '0' || val[0] > '9') return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno || *end) return 0;
    *out = v;
    return 1;
}

/* One "key value" line into h; 0 if the key is unknown (ignored), -1 if
 * the value is bad. */
static int parse_field(ckpt_header_t *h, uint32_t *endian, int k, const char *val)
{
    uint64_t v = 0;
    switch (k) {
    case K_TASK: return copy_text(h->task, sizeof h->task, val) ? 0 : -1;
    case K_MODEL: return copy_text(h->model, sizeof h->model, val) ? 0 : -1;
    case K_ALGO: return copy_text(h->algo, sizeof h->algo, val) ? 0 : -1;
    default: break;
    }
    if (!parse_u64(val, &v) || v > (uint64_t)INT64_MAX) return -1;
    switch (k) {
    case K_ENDIAN: *endian = (uint32_t)v; break;
    case K_PARAMS: h->nparams = v; break;
    case K_SEED: h->seed = v; break;
    case K_RANKS: h->ranks = v <= INT32_MAX ? (int)v : 0; break;
    case K_STEP: h->step = v; break;
    case K_EPOCH: h->epoch = (long)v; break;
    case K_EPOCH_STEP: h->epoch_step = (long)v; break;
    case K_SPE: h->steps_per_epoch = (long)v; break;
    case K_TOTAL: h->total_steps = v; break;
    default: break;
    }
    return 0;
}

/* Opens DIR/checkpoint and parses its header; the stream stands at the
 * parameters.  NULL with a message. */
static FILE *open_header(const char *dir, ckpt_header_t *h)
{
    char path[4096];
    if (!path_of(path, sizeof path, dir, "checkpoint")) {
        tr_fail("--resume %s: the path is too long", dir);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        tr_fail("--resume %s: cannot read %s: %s", dir, path, strerror(errno));
        return NULL;
    }
    memset(h, 0, sizeof *h);
    char line[512];
    if (!fgets(line, sizeof line, f) || strcmp(line, MAGIC) != 0) {
        tr_fail("--resume %s: %s is not a pcoll-train checkpoint of format 1", dir, path);
        fclose(f);
        return NULL;
    }
    uint32_t endian = 0;
    int seen[K_N] = {0}, ended = 0, bad = 0;
    while (!bad && fgets(line, sizeof line, f)) {
        if (strcmp(line, "end\n") == 0) {
            ended = 1;
            break;
        }
        char key[32], val[300];
        if (sscanf(line, "%31s %299[^\n]", key, val) != 2) break;
        int k = 0;
        while (k < K_N && strcmp(key, key_names[k]) != 0) k++;
        if (k == K_N) continue; /* a key of a later minor addition: ignored */
        bad = seen[k]++ || parse_field(h, &endian, k, val) != 0;
    }
    int all = 1;
    for (int k = 0; k < K_N; k++) all &= seen[k] == 1;
    if (bad || !ended || !all || h->nparams == 0 || h->steps_per_epoch < 1 || h->ranks < 1 ||
        h->epoch_step >= h->steps_per_epoch) {
        tr_fail("--resume %s: the header of %s is incomplete or damaged", dir, path);
        fclose(f);
        return NULL;
    }
    if (endian != endian_mark()) {
        tr_fail("--resume %s: %s was written on a machine of another byte order", dir, path);
        fclose(f);
        return NULL;
    }
    return f;
}

int ckpt_read_header(const char *dir, ckpt_header_t *h)
{
    FILE *f = open_header(dir, h);
    if (!f) return -1;
    fclose(f);
    return 0;
}

int ckpt_read_state(const char *dir, const ckpt_header_t *want, float *params, float *velocity)
{
    ckpt_header_t h;
    FILE *f = open_header(dir, &h);
    if (!f) return -1;
    if (h.nparams != want->nparams || h.step != want->step) {
        fclose(f);
        return tr_fail("--resume %s: the checkpoint changed while it was read", dir);
    }
    const size_t n = (size_t)h.nparams;
    int bad = fread(params, sizeof *params, n, f) != n || fread(velocity, sizeof *velocity, n, f) != n;
    bad |= fgetc(f) != EOF; /* nothing after the momentum */
    fclose(f);
    if (bad) return tr_fail("--resume %s: the checkpoint's parameters are truncated or followed by other data", dir);
    return 0;
}
