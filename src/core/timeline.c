/* Timelines: sessions and the library's events (timeline.h). */
#include "timeline.h"

#include <errno.h>
#include <stdio.h>
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

/* This rank's file and its spill (unlinked at once: it lives until the
 * recorder closes it), or an error naming the prefix. */
static int open_file(pcoll_t *ctx, const char *prefix, const char *fn, FILE **out, FILE **spill, char *path,
                     size_t len)
{
    *out = *spill = NULL;
    if (!prefix) return pc_error(PCOLL_ERR_NULL, fn, "prefix is NULL");
    if (!prefix[0]) return pc_error(PCOLL_ERR_ARG, fn, "prefix is empty: the files are named PREFIX.RANK.jsonl");
    if (pc_tl_on(ctx)) return pc_error(PCOLL_ERR_STATE, fn, "a timeline is already being recorded");
    if (snprintf(path, len, "%s.%d.jsonl", prefix, ctx->rank) >= (int)len)
        return pc_error(PCOLL_ERR_ARG, fn, "prefix is too long (%zu bytes)", strlen(prefix));
    *out = fopen(path, "w");
    if (!*out) return pc_error(PCOLL_ERR_ARG, fn, "prefix: cannot create %s: %s", path, strerror(errno));
    char spill_path[4200];
    snprintf(spill_path, sizeof spill_path, "%s.spill", path);
    *spill = fopen(spill_path, "w+");
    if (*spill) {
        unlink(spill_path);
        return PCOLL_SUCCESS;
    }
    int rc = pc_error(PCOLL_ERR_ARG, fn, "prefix: cannot create %s: %s", spill_path, strerror(errno));
    fclose(*out);
    *out = NULL;
    unlink(path);
    return rc;
}

/* The offset at a start or a stop: on a duplicate of the context's
 * communicator, so that no message of the library's can match. */
static int measure_offset(pcoll_t *ctx, int64_t *offset, int64_t *err, const char *fn)
{
    MPI_Comm comm;
    int rc = MPI_Comm_dup(ctx->comm, &comm);
    if (rc != MPI_SUCCESS) return pc_mpi_error(rc, fn, "MPI_Comm_dup (for the clock offsets)");
    int status = pc_clock_offset(comm, ctx->rec.shift_ns, offset, err, fn);
    MPI_Comm_free(&comm);
    return status;
}

int pc_timeline_begin(pcoll_t *ctx, const char *prefix, const char *fn)
{
    int64_t offset_ns, err_ns;
    FILE *file, *spill;
    char path[4096];
    int rc = open_file(ctx, prefix, fn, &file, &spill, path, sizeof path);
    pc_agree_over_t all = pc_agree_group(ctx, NULL, 0);
    if ((rc = pc_agree_step(&all, fn, rc)) == PCOLL_SUCCESS) rc = measure_offset(ctx, &offset_ns, &err_ns, fn);
    if (rc != PCOLL_SUCCESS) {
        if (file) {
            fclose(file);
            fclose(spill);
            unlink(path);
        }
        return rc;
    }
    char host[128], header[512];
    host_name(host, sizeof host);
    snprintf(header, sizeof header,
             "\"pcoll_timeline\":1,\"rank\":%d,\"size\":%d,\"host\":\"%s\",\"pid\":%ld,\"clock\":\"monotonic\","
             "\"t\":%llu,\"offset_ns\":%lld,\"offset_err_ns\":%lld",
             ctx->rank, ctx->size, host, (long)getpid(), (unsigned long long)(pc_rec_mono_ns() + (uint64_t)ctx->rec.shift_ns), (long long)offset_ns,
             (long long)err_ns);
    pc_rec_open(&ctx->rec, file, spill, header);
    pc_log(PCOLL_LOG_INFO, "%s: recording the timeline into %s (clock offset %lld ns, error %lld ns)", fn, path,
           (long long)offset_ns, (long long)err_ns);
    return PCOLL_SUCCESS;
}

int pc_timeline_end(pcoll_t *ctx, const char *fn)
{
    int rc = pc_tl_on(ctx) ? PCOLL_SUCCESS : pc_error(PCOLL_ERR_STATE, fn, "no timeline is being recorded");
    pc_agree_over_t all = pc_agree_group(ctx, NULL, 0);
    if ((rc = pc_agree_step(&all, fn, rc)) != PCOLL_SUCCESS) return rc;
    atomic_store(&ctx->rec.on, 0); /* the offset's messages are not events */
    int64_t offset = 0, err = -1;
    int status = measure_offset(ctx, &offset, &err, fn);
    char keys[128];
    snprintf(keys, sizeof keys, "\"offset_ns\":%lld,\"offset_err_ns\":%lld", (long long)offset, (long long)err);
    int failed = pc_rec_close(&ctx->rec, keys);
    if (status != PCOLL_SUCCESS) return status;
    if (failed) return pc_error(PCOLL_ERR_STATE, fn, "the timeline file could not be written: %s", strerror(failed));
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

void pc_tl_allreduce(pcoll_t *ctx, uint64_t t0, const char *call, pcoll_allreduce_algo_t algo, size_t count,
                     pcoll_dtype_t dtype, const int *group, int n, int status)
{
    if (!t0 || !pc_tl_on(ctx)) return;
    int64_t f[PC_EV_FIELDS] = {pc_ev_str(call), pc_ev_str(pcoll_allreduce_algo_name(algo)),
                               (int64_t)(count * pcoll_dtype_size(dtype)), group ? n : ctx->size, status};
    pc_rec_event(&ctx->rec, PC_EV_ALLREDUCE, t0, since(t0), f, group, group ? n : 0, NULL);
}

void pc_tl_partial_call(pcoll_t *ctx, uint64_t t0, uint64_t obj, const char *kind, const char *fn, int64_t round,
                        int waited, uint64_t rounds, int status)
{
    if (!t0 || !pc_tl_on(ctx)) return;
    int64_t f[PC_EV_FIELDS] = {(int64_t)obj, pc_ev_str(kind), pc_ev_str(fn), round, waited, (int64_t)rounds, status};
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
    int64_t f[PC_EV_FIELDS] = {(int64_t)obj, pc_ev_str(kind), (int64_t)round, root, active, contributions,
                               stale,        sync,            standin};
    pc_rec_event(&ctx->rec, PC_EV_ROUND, pc_rec_now(), 0, f, group, n, NULL);
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
