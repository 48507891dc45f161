/*
 * Persistent allreduce plans (as MPI-4's persistent collectives): the
 * schedule is built and the members' receive ids exchanged once, at
 * pcoll_allreduce_init; every pcoll_start reruns the same schedule with the
 * same buffers and tags, allocating nothing.
 *
 *   pcoll_allreduce_init     check, build, HELLO to every member with this
 *                            rank's id and the arguments; wait for every
 *                            member's (a disagreement fails everywhere)
 *   pcoll_start              post the plan's own request (its task is
 *     pcoll_wait / test      embedded): the schedule runs with the tags of
 *                            the init; the request is the plan's, never freed
 *   pcoll_plan_free          the id back to the pool (after the last start
 *                            completed here every message for it arrived)
 *
 * One start at a time: the previous one must have been completed by
 * pcoll_wait or pcoll_test (as MPI's persistent requests), so messages of
 * consecutive starts are kept apart by MPI's order (tags.h).
 */
#include <stdlib.h>
#include <string.h>

#include "../util/error.h"
#include "../util/log.h"
#include "agree.h"
#include "groupmap.h"
#include "op.h"
#include "plan.h"
#include "shm_group.h"
#include "timeline.h"

struct pcoll_plan {
    pcoll_t *ctx;
    pcoll_request_t *req; /* the init's, then every start's */
};

/* The plan's receive id back to the pool (unless messages for it may still
 * come: after a failed start its group is marked out of step), its group
 * record released, its schedule and request freed. */
static void release(pcoll_t *ctx, pcoll_request_t *req)
{
    pthread_mutex_lock(&ctx->lock);
    if (!req->group->broken) pc_idpool_put(&ctx->ids, req->my_id);
    pc_groups_put(&ctx->groups, req->group);
    pthread_mutex_unlock(&ctx->lock);
    pc_built_free(&req->b);
    pc_shm_group_close(req->shm);
    free(req->send_bases);
    free(req);
}

int pcoll_allreduce_init(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                         pcoll_op_t op, const int *group, int group_size, pcoll_plan_t **out)
{
    return pc_plan_init(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, PC_USE_CALL, PCOLL_ALGO_AUTO,
                        __func__, out);
}

int pc_plan_init(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype, pcoll_op_t op,
                 const int *group, int group_size, pc_algo_use_t use, pcoll_allreduce_algo_t algo, const char *fn,
                 pcoll_plan_t **out)
{
    if (out) *out = NULL;
    int rc = pc_ctx_check(ctx, fn), me;
    if (rc != PCOLL_SUCCESS) return rc;
    /* a member whose group list is unusable cannot know whom to agree with */
    if ((rc = pc_group_index(ctx, group, group_size, fn, &me)) != PCOLL_SUCCESS) return rc;
    /* what a member checks alone, agreed on by the members before the
     * handshake, so that a bad argument at one fails every one at once */
    rc = out ? pc_op_check_args(ctx, sendbuf, recvbuf, count, dtype, op, fn)
             : pc_error(PCOLL_ERR_NULL, fn, "plan (the output pointer) is NULL");
    pcoll_plan_t *plan = calloc(1, sizeof *plan);
    pcoll_request_t *req = calloc(1, sizeof *req);
    if (rc == PCOLL_SUCCESS && (!plan || !req)) rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for a plan");
    /* the members agree on the arguments and on the path before they map
     * a segment together (its size follows from them) */
    int n = group ? group_size : ctx->size;
    int shm = rc == PCOLL_SUCCESS && algo == PCOLL_ALGO_AUTO && pc_shm_group_takes(ctx, group, n, count, dtype, use);
    pc_agree_field_t fields[] = {{"count", (int64_t)count, 1, NULL},
                                 {"dtype", (int64_t)dtype, 1, NULL},
                                 {"op", (int64_t)op, 1, NULL},
                                 {"node-shared path (a forced algorithm or settings differ)", shm, 1, NULL}};
    pc_agree_over_t members = pc_agree_group(ctx, group, group_size);
    pc_shm_group_t *seg = NULL;
    if ((rc = pc_agree(&members, fn, rc, -1, fields, 4, PCOLL_ERR_ARG)) == PCOLL_SUCCESS) {
        req->ctx = ctx;
        pc_shm_group_open(ctx, group, n, me, count, dtype, shm, &seg);
        if (seg) {
            algo = PCOLL_ALGO_SHM;
        } else if (shm && use == PC_USE_TREE) {
            /* no segment (at every member: /dev/shm full, ...): the direct
             * algorithm adds in the same rank order as the other buckets */
            pc_log(PCOLL_LOG_WARN, "%s: no node-shared segment for a bucket of %zu B: direct messages instead", fn,
                   count * pcoll_dtype_size(dtype));
            algo = PCOLL_ALGO_DIRECT;
        } else if (algo == PCOLL_ALGO_AUTO && use != PC_USE_CALL) {
            algo = pc_ctx_algo(ctx, use, count * pcoll_dtype_size(dtype), n);
        }
        rc = pc_op_prepare(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, 1, NULL, algo, fn, req);
    }
    if (rc != PCOLL_SUCCESS) {
        pc_shm_group_close(seg);
        free(plan);
        free(req);
        return rc;
    }
    req->shm = seg;
    req->persistent = 1;
    plan->ctx = ctx;
    plan->req = req;
    pc_op_post(req, 1);
    rc = pc_op_wait(req, fn);
    if (rc == PCOLL_ERR_TIMEOUT) {
        pc_op_zombie(req);
        free(plan);
        return rc;
    }
    if ((rc = pc_fault_raise(&req->fault, fn)) != PCOLL_SUCCESS) {
        /* every member saw the disagreement (each sees every HELLO): nobody
         * sends to our id */
        release(ctx, req);
        free(plan);
        return rc;
    }
    req->kind = PC_OP_PLAN_START;
    *out = plan;
    return PCOLL_SUCCESS;
}

int pcoll_start(pcoll_plan_t *plan, pcoll_request_t **out)
{
    if (!plan || !out) return PC_ERR(PCOLL_ERR_NULL, "%s is NULL", !plan ? "plan" : "req");
    pcoll_request_t *req = plan->req;
    *out = NULL;
    int rc = pc_ctx_replaced(plan->ctx, "pcoll_start");
    if (rc != PCOLL_SUCCESS) return rc;
    if (req->abandoned || req->group->broken)
        return PC_ERR(PCOLL_ERR_STATE,
                      "an earlier start of this plan (or operation on its group) timed out or failed: the plan can "
                      "only be freed");
    /* as MPI's persistent requests: the previous start must have been
     * completed by pcoll_wait or pcoll_test, not merely have finished */
    if (req->outstanding)
        return PC_ERR(PCOLL_ERR_STATE,
                      "the previous start of this plan was not completed by pcoll_wait or pcoll_test (wait for it "
                      "first)");
    pcoll_t *ctx = plan->ctx;
    pthread_mutex_lock(&ctx->lock);
    req->group->active++;
    pthread_mutex_unlock(&ctx->lock);
    atomic_store(&req->done, 0);
    pc_fault_clear(&req->fault);
    req->outstanding = 1;
    req->tl_t0 = pc_tl_now(ctx);
    req->tl_call = "start";
    pc_op_post(req, 0);
    *out = req;
    return PCOLL_SUCCESS;
}

uint64_t pc_plan_completed_at(const pcoll_plan_t *plan) { return plan->req->tl_end; }

int pcoll_plan_free(pcoll_plan_t **pplan)
{
    if (!pplan || !*pplan) return PC_ERR(PCOLL_ERR_NULL, "plan is NULL");
    pcoll_plan_t *plan = *pplan;
    pcoll_request_t *req = plan->req;
    pcoll_t *ctx = plan->ctx;
    if (atomic_load(&ctx->shrunk) || req->abandoned) {
        /* its context was replaced (the request stays with it, whose memory
         * is kept until exit), or a start timed out (MPI may still use the
         * buffers): the handle goes, the request waits on the zombie list */
        pc_op_zombie(req);
    } else {
        if (req->outstanding)
            return PC_ERR(PCOLL_ERR_STATE,
                          "a start of this plan was not completed by pcoll_wait or pcoll_test (wait for it first)");
        release(ctx, req);
    }
    free(plan);
    *pplan = NULL;
    return PCOLL_SUCCESS;
}
