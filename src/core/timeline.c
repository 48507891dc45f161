/* Timelines: sessions and the library's events (timeline.h). */
#include "timeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/error.h"
#include "../util/log.h"
#include "agree.h"
#include "clocks.h"

/* ---- sessions ---- */

static void host_name(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0) snprintf(buf, len, "?");
    buf[len - 1] = '\0';
    for (char *c = buf; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = '_';
}

/* ---- the files: one path per rank, and not two sessions of this process
 * on one path (two contexts would write over each other) ---- */

typedef struct open_path {
    char *path;
    struct open_path *next;
} open_path_t;
static pthread_mutex_t paths_lock = PTHREAD_MUTEX_INITIALIZER;
static open_path_t *paths; /* of the sessions recording in this process */

static int claim_path(const char *path)
{
    pthread_mutex_lock(&paths_lock);
    open_path_t *p = paths;
    while (p && strcmp(p->path, path) != 0) p = p->next;
    int free_to_take = !p;
    if (free_to_take && (p = malloc(sizeof *p)) != NULL && (p->path = strdup(path)) != NULL) {
        p->next = paths;
        paths = p;
    } else if (free_to_take) {
        free(p);
        free_to_take = -1; /* no memory */
    }
    pthread_mutex_unlock(&paths_lock);
    return free_to_take;
}

static void release_path(const char *path)
{
    pthread_mutex_lock(&paths_lock);
    for (open_path_t **pp = &paths; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->path, path) == 0) {
            open_path_t *p = *pp;
            *pp = p->next;
            free(p->path);
            free(p);
            break;
        }
    pthread_mutex_unlock(&paths_lock);
}

/* A session's files while it starts */
typedef struct pc_tl_session {
    char path[4096];   /* PREFIX.R.jsonl */
    char part[4104];   /* its temporary name until every rank could start */
    FILE *file, *spill;
    int claimed, renamed;
} pc_tl_session_t;

/* This rank's file, first under a temporary name (an existing file of the
 * prefix stays until every rank can start), and its spill (unlinked at
 * once: it lives until the recorder closes it); or an error naming the
 * prefix. */
static int open_files(pcoll_t *ctx, const char *prefix, const char *fn, pc_tl_session_t *s)
{
    memset(s, 0, sizeof *s);
    if (!prefix) return pc_error(PCOLL_ERR_NULL, fn, "prefix is NULL");
    if (!prefix[0]) return pc_error(PCOLL_ERR_ARG, fn, "prefix is empty: the files are named PREFIX.RANK.jsonl");
    if (pc_tl_on(ctx)) return pc_error(PCOLL_ERR_STATE, fn, "a timeline is already being recorded");
    if (snprintf(s->path, sizeof s->path, "%s.%d.jsonl", prefix, ctx->rank) >= (int)sizeof s->path)
        return pc_error(PCOLL_ERR_ARG, fn, "prefix is too long (%zu bytes)", strlen(prefix));
    snprintf(s->part, sizeof s->part, "%s.part", s->path);
    int claimed = claim_path(s->path);
    if (claimed <= 0)
        return claimed < 0 ? pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the timeline's path")
                           : pc_error(PCOLL_ERR_ARG, fn, "prefix: %s is being written by another context of this "
                                      "process", s->path);
    s->claimed = 1;
    char spill_path[sizeof s->part + 8];
    snprintf(spill_path, sizeof spill_path, "%s.spill", s->path);
    if (!(s->file = fopen(s->part, "w")))
        return pc_error(PCOLL_ERR_ARG, fn, "prefix: cannot create %s: %s", s->part, strerror(errno));
    if (!(s->spill = fopen(spill_path, "w+")))
        return pc_error(PCOLL_ERR_ARG, fn, "prefix: cannot create %s: %s", spill_path, strerror(errno));
    unlink(spill_path);
    return PCOLL_SUCCESS;
}

static void drop_files(pc_tl_session_t *s)
{
    if (s->file) fclose(s->file);
    if (s->spill) fclose(s->spill);
    if (s->file) unlink(s->renamed ? s->path : s->part);
    if (s->claimed) release_path(s->path);
    memset(s, 0, sizeof *s);
}

/* The offset at a start or a stop: on a duplicate of the context's
 * communicator, so that no message of the library's can match. */
static int measure_offset(pcoll_t *ctx, int64_t *offset, int64_t *err, const char *fn)
{
    MPI_Comm comm;
    int rc = MPI_Comm_dup(ctx->comm, &comm);
    if (rc != MPI_SUCCESS) return pc_mpi_error(rc, fn, "MPI_Comm_dup (for the clock offsets)");
    pc_clock_limits_t limits = {atomic_load(&ctx->stall_warn_s), atomic_load(&ctx->timeout_s)};
    int status = pc_clock_offset(comm, ctx->rec.shift_ns, &limits, offset, err, fn);
    MPI_Comm_free(&comm);
    return status;
}

/* Every rank's files can be made; then the offsets; every rank learns
 * whether each step worked everywhere (no rank records unless all do). */
int pc_timeline_begin(pcoll_t *ctx, const char *prefix, const char *fn)
{
    pc_tl_session_t s;
    int64_t offset_ns = 0, err_ns = -1;
    int rc = open_files(ctx, prefix, fn, &s);
    pc_agree_over_t all = pc_agree_group(ctx, NULL, 0);
    if ((rc = pc_agree_step(&all, fn, rc)) == PCOLL_SUCCESS) {
        if (rename(s.part, s.path) == 0)
            s.renamed = 1;
        else
            rc = pc_error(PCOLL_ERR_ARG, fn, "prefix: cannot make %s: %s", s.path, strerror(errno));
        if (rc == PCOLL_SUCCESS) rc = measure_offset(ctx, &offset_ns, &err_ns, fn);
        rc = pc_agree_step(&all, fn, rc);
    }
    if (rc != PCOLL_SUCCESS) {
        drop_files(&s);
        return rc;
    }
    char host[128], header[512];
    host_name(host, sizeof host);
    unsigned long long t = pc_rec_mono_ns() + (uint64_t)ctx->rec.shift_ns;
    snprintf(header, sizeof header,
             "\"pcoll_timeline\":1,\"rank\":%d,\"size\":%d,\"host\":\"%s\",\"pid\":%ld,\"clock\":\"monotonic\","
             "\"t\":%llu,\"offset_ns\":%lld,\"offset_err_ns\":%lld",
             ctx->rank, ctx->size, host, (long)getpid(), t, (long long)offset_ns, (long long)err_ns);
    pc_rec_open(&ctx->rec, s.file, s.spill, header);
    snprintf(ctx->tl_path, sizeof ctx->tl_path, "%s", s.path);
    pc_log(PCOLL_LOG_INFO, "%s: recording the timeline into %s (clock offset %lld ns, error %lld ns)", fn, s.path,
           (long long)offset_ns, (long long)err_ns);
    return PCOLL_SUCCESS;
}

/* The stop's offset, the rest of the events, the stop line.  A stop that
 * the ranks cannot agree on (another rank not recording, a timeout) still
 * ends this rank's file, with the offset unknown (offset_err_ns -1). */
int pc_timeline_end(pcoll_t *ctx, const char *fn)
{
    int recording = pc_tl_on(ctx);
    int rc = recording ? PCOLL_SUCCESS : pc_error(PCOLL_ERR_STATE, fn, "no timeline is being recorded");
    pc_agree_over_t all = pc_agree_group(ctx, NULL, 0);
    rc = pc_agree_step(&all, fn, rc);
    if (!recording) return rc;
    atomic_store(&ctx->rec.on, 0); /* the offset's messages are not events */
    int64_t offset = 0, err = -1;
    int status = rc == PCOLL_SUCCESS ? measure_offset(ctx, &offset, &err, fn) : rc;
    char keys[128];
    snprintf(keys, sizeof keys, "\"offset_ns\":%lld,\"offset_err_ns\":%lld", (long long)offset,
             (long long)(status == PCOLL_SUCCESS ? err : -1));
    int failed = pc_rec_close(&ctx->rec, keys);
    release_path(ctx->tl_path);
    ctx->tl_path[0] = '\0';
    if (status != PCOLL_SUCCESS) return status;
    if (failed)
        return pc_error(PCOLL_ERR_LIMIT, fn, "the timeline file could not be written: %s", strerror(failed));
    return PCOLL_SUCCESS;
}

int pcoll_timeline_start(pcoll_t *ctx, const char *prefix)
{
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    return pc_timeline_begin(ctx, prefix, __func__);
}

int pcoll_timeline_stop(pcoll_t *ctx)
{
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    return pc_timeline_end(ctx, __func__);
}

int pcoll_timeline_recording(const pcoll_t *ctx) { return ctx && pc_tl_on((pcoll_t *)ctx); }

int pcoll_timeline_mark(pcoll_t *ctx, const char *name, pcoll_mark_phase_t phase)
{
    if (!ctx) return PC_ERR(PCOLL_ERR_NULL, "ctx is NULL");
    if (!name) return PC_ERR(PCOLL_ERR_NULL, "name is NULL");
    if (phase != PCOLL_MARK_BEGIN && phase != PCOLL_MARK_END)
        return PC_ERR(PCOLL_ERR_ARG, "phase %d is not PCOLL_MARK_BEGIN or PCOLL_MARK_END", (int)phase);
    size_t n = strnlen(name, PCOLL_MARK_NAME_MAX + 1);
    if (n == 0 || n > PCOLL_MARK_NAME_MAX)
        return PC_ERR(PCOLL_ERR_ARG, "name \"%.16s%s\" must have 1 to %d bytes", name, n ? "..." : "",
                      PCOLL_MARK_NAME_MAX);
    if (!pc_tl_on(ctx)) return PCOLL_SUCCESS;
    int64_t f[PC_EV_FIELDS] = {pc_ev_str(phase == PCOLL_MARK_BEGIN ? "B" : "E")};
    pc_rec_event(&ctx->rec, PC_EV_MARK, pc_rec_now(), 0, f, NULL, 0, name);
    return PCOLL_SUCCESS;
}

/* ---- the library's events ---- */

static uint64_t since(uint64_t t0)
{
    uint64_t t = pc_rec_now();
    return t > t0 ? t - t0 : 1;
}

void pc_tl_allreduce(pcoll_t *ctx, uint64_t t0, uint64_t t1, const char *call, pcoll_allreduce_algo_t algo,
                     size_t count, pcoll_dtype_t dtype, const int *group, int n, int status)
{
    if (!t0 || !pc_tl_on(ctx)) return;
    int every_rank = group && n == ctx->size; /* a list of every rank in order is "all": as NULL */
    for (int i = 0; every_rank && i < n; i++) every_rank = group[i] == i;
    if (every_rank) group = NULL;
    int64_t f[PC_EV_FIELDS] = {pc_ev_str(call), pc_ev_str(pcoll_allreduce_algo_name(algo)),
                               (int64_t)(count * pcoll_dtype_size(dtype)), group ? n : ctx->size, status};
    uint64_t dur = t1 ? (t1 > t0 ? t1 - t0 : 1) : since(t0);
    pc_rec_event(&ctx->rec, PC_EV_ALLREDUCE, t0, dur, f, group, group ? n : 0, NULL);
}

void pc_tl_partial_call(pcoll_t *ctx, uint64_t t0, uint64_t obj, const char *kind, const char *fn, int64_t round,
                        int waited, uint64_t rounds, int status)
{
    if (!t0 || !pc_tl_on(ctx)) return;
    int64_t f[PC_EV_FIELDS] = {pc_ev_pair((int64_t)obj, round), pc_ev_str(kind), pc_ev_str(fn), pc_ev_pair(waited, status),
                               (int64_t)rounds};
    pc_rec_event(&ctx->rec, PC_EV_PARTIAL_CALL, t0, since(t0), f, NULL, 0, NULL);
}

void pc_tl_round_start(pcoll_t *ctx, uint64_t obj, uint64_t round, int root, int sync)
{
    if (!pc_tl_on(ctx)) return;
    int64_t f[PC_EV_FIELDS] = {(int64_t)obj, (int64_t)round, root, sync};
    pc_rec_event(&ctx->rec, PC_EV_ROUND_START, pc_rec_now(), 0, f, NULL, 0, NULL);
}

void pc_tl_round(pcoll_t *ctx, uint64_t obj, const char *kind, uint64_t round, int root, int64_t active,
                 int64_t contributions, int sync, int standin, const int *group, int n)
{
    if (!pc_tl_on(ctx)) return;
    int64_t stale = contributions > active ? contributions - active : 0;
    int64_t f[PC_EV_FIELDS] = {pc_ev_pair((int64_t)obj, (int64_t)round), pc_ev_str(kind), pc_ev_pair(root, active),
                               pc_ev_pair(contributions, stale), pc_ev_pair(sync, standin)};
    pc_rec_event(&ctx->rec, PC_EV_ROUND, pc_rec_now(), 0, f, group, n, NULL);
}

void pc_tl_left_out(pcoll_t *ctx, uint64_t obj, uint64_t round, uint64_t first, int catch_up, const int *ranks,
                    int n)
{
    if (!pc_tl_on(ctx)) return;
    int64_t f[PC_EV_FIELDS] = {pc_ev_pair((int64_t)obj, (int64_t)round), (int64_t)first, catch_up};
    pc_rec_event(&ctx->rec, PC_EV_LEFT_OUT, pc_rec_now(), 0, f, ranks, n, NULL);
}

void pc_tl_preduce(pcoll_t *ctx, uint64_t t0, uint64_t obj, const char *policy, uint64_t iteration,
                   const pcoll_preduce_info_t *info, int status)
{
    if (!t0 || !pc_tl_on(ctx)) return;
    int ok = status == PCOLL_SUCCESS;
    int64_t f[PC_EV_FIELDS] = {(int64_t)obj,
                               pc_ev_str(policy),
                               ok ? (int64_t)info->group_id : 0,
                               pc_ev_double(ok ? info->weight : 0.0),
                               (int64_t)iteration,
                               ok ? (int64_t)info->iteration : 0,
                               ok ? (int64_t)(info->wait_s * 1e9) : 0,
                               ok ? (int64_t)(info->reduce_s * 1e9) : 0,
                               status};
    pc_rec_event(&ctx->rec, PC_EV_PREDUCE, t0, since(t0), f, ok ? info->members : NULL, ok ? info->group_size : 0,
                 NULL);
}

void pc_tl_fusion_plan(pcoll_t *ctx, uint64_t obj, const pcoll_fusion_plan_t *plan)
{
    if (!pc_tl_on(ctx)) return;
    uint64_t t = pc_rec_now();
    for (int b = 0; b < plan->nbuckets; b++) {
        int64_t f[PC_EV_FIELDS] = {(int64_t)obj,
                                   b,
                                   plan->first[b],
                                   plan->last[b],
                                   (int64_t)plan->bytes[b],
                                   (int64_t)(plan->start_us[b] * 1e3),
                                   (int64_t)(plan->end_us[b] * 1e3),
                                   (int64_t)(plan->compute_us * 1e3),
                                   (int64_t)(plan->iter_us * 1e3)};
        pc_rec_event(&ctx->rec, PC_EV_FUSION_PLAN, t, 0, f, NULL, 0, NULL);
    }
}

void pc_tl_fusion_ready(pcoll_t *ctx, uint64_t obj, uint64_t step, int layer)
{
    if (!pc_tl_on(ctx)) return;
    int64_t f[PC_EV_FIELDS] = {(int64_t)obj, (int64_t)step, layer};
    pc_rec_event(&ctx->rec, PC_EV_FUSION_READY, pc_rec_now(), 0, f, NULL, 0, NULL);
}

void pc_tl_fusion_bucket(pcoll_t *ctx, uint64_t t0, uint64_t t1, uint64_t obj, uint64_t step, int bucket,
                         size_t bytes)
{
    if (!t0 || !pc_tl_on(ctx)) return;
    int64_t f[PC_EV_FIELDS] = {(int64_t)obj, (int64_t)step, bucket, (int64_t)bytes};
    pc_rec_event(&ctx->rec, PC_EV_FUSION_BUCKET, t0, t1 > t0 ? t1 - t0 : 1, f, NULL, 0, NULL);
}

void pc_tl_fusion_wait(pcoll_t *ctx, uint64_t t0, uint64_t obj, uint64_t step)
{
    if (!t0 || !pc_tl_on(ctx)) return;
    int64_t f[PC_EV_FIELDS] = {(int64_t)obj, (int64_t)step};
    pc_rec_event(&ctx->rec, PC_EV_FUSION_WAIT, t0, since(t0), f, NULL, 0, NULL);
}

void pc_tl_stall(pcoll_t *ctx, const char *fn, int timeout, const int *ranks, int n, const char *what)
{
    if (!pc_tl_on(ctx)) return;
    int64_t f[PC_EV_FIELDS] = {pc_ev_str(fn), timeout};
    pc_rec_event(&ctx->rec, PC_EV_STALL, pc_rec_now(), 0, f, ranks, n, what);
}
