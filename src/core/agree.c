/* Agreement of collective setup calls: see agree.h.
 *
 *   step 1  every member sets its bit if it failed here     (a sum of bitmaps)
 *   step 2  if any did: the first of them gives its status,
 *           the field at fault and its message              (a sum: only it adds)
 *   step 3  else every member fills its row of values       (a sum of rows)
 *
 * Every step is a sum of 64-bit integers in which each slot has one
 * contributor, so it is exact and the same at every member, over MPI or
 * over a pcoll group alike. */
#include "agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/error.h"
#include "context.h"
#include "op.h"

#define MSG_WORDS 50 /* a failing member's message: 400 bytes */

/* The number of members and this one's index; -1 if it is not a member. */
static int members(const pc_agree_over_t *o, int *n)
{
    if (o->comm != MPI_COMM_NULL) {
        int me = 0;
        MPI_Comm_size(o->comm, n);
        MPI_Comm_rank(o->comm, &me);
        return me;
    }
    *n = o->group ? o->group_size : o->ctx->size;
    if (!o->group) return o->ctx->rank;
    for (int i = 0; i < o->group_size; i++)
        if (o->group[i] == o->ctx->rank) return i;
    return -1;
}

/* buf (count words) summed over the members, in place */
static int sum(const pc_agree_over_t *o, int64_t *buf, size_t count, const char *fn)
{
    if (o->comm != MPI_COMM_NULL) {
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_INT64_T, MPI_SUM, o->comm);
        return rc == MPI_SUCCESS ? PCOLL_SUCCESS
                                 : pc_mpi_error(rc, fn, "MPI_Allreduce (checking the call against the other ranks)");
    }
    /* every rank as a group list, not as the context's own operations:
     * member-agreed ids, so that a rank that never comes is named in a
     * timeout and an earlier timed-out operation on all ranks is no matter */
    const int *group = o->group ? o->group : o->ctx->all_ranks;
    int n = o->group ? o->group_size : o->ctx->size;
    int rc = pc_allreduce_agreed(o->ctx, buf, count, group, n);
    return rc == PCOLL_SUCCESS ? rc
                               : pc_error(rc, fn, "checking the call against the other members failed: %s",
                                          pcoll_last_error());
}

/* the rank of member i */
static int rank_of(const pc_agree_over_t *o, int i) { return o->comm != MPI_COMM_NULL || !o->group ? i : o->group[i]; }

/* Appends "r, r, ..." of the members whose value in column `col` of the
 * rows is v (at most 8 named, then "and N more"). */
static void list_ranks(const pc_agree_over_t *o, const int64_t *rows, int n, int width, int col, int64_t v, char *buf,
                       size_t len)
{
    size_t at = strlen(buf);
    int named = 0, more = 0;
    for (int i = 0; i < n; i++) {
        if (rows[(size_t)i * (size_t)width + (size_t)col] != v) continue;
        if (named < 8) {
            at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%d", named ? ", " : "", rank_of(o, i));
            named++;
        } else {
            more++;
        }
    }
    if (more) snprintf(buf + at, at < len ? len - at : 0, " and %d more", more);
}

static const char *value_text(const pc_agree_field_t *f, int64_t v, char *buf, size_t len)
{
    if (f->text) return f->text(v, buf, len);
    snprintf(buf, len, "%lld", (long long)v);
    return buf;
}

/* Step 2: the first failing member tells its status, field and message. */
static int failed_elsewhere(const pc_agree_over_t *o, const char *fn, int status, int bad, int first, int me,
                            const pc_agree_field_t *fields, int nfields)
{
    int64_t told[2 + MSG_WORDS];
    memset(told, 0, sizeof told);
    if (me == first) {
        told[0] = status;
        told[1] = bad;
        snprintf((char *)(told + 2), MSG_WORDS * sizeof(int64_t), "%s", pcoll_last_error());
    }
    int rc = sum(o, told, 2 + MSG_WORDS, fn);
    if (status != PCOLL_SUCCESS) return status; /* our own message says why */
    if (rc != PCOLL_SUCCESS) return rc;
    char *why = (char *)(told + 2);
    why[MSG_WORDS * sizeof(int64_t) - 1] = '\0';
    int st = (int)told[0];
    if (st >= 0 || st < PCOLL_ERR_TIMEOUT) st = PCOLL_ERR_INTERNAL;
    const char *what = told[1] >= 0 && told[1] < nfields ? fields[told[1]].name : NULL;
    if (what)
        return pc_error(st, fn, "%s is invalid at rank %d (there: %s); every rank fails", what, rank_of(o, first),
                        why[0] ? why : pcoll_strerror(st));
    return pc_error(st, fn, "rank %d failed (there: %s); every rank fails", rank_of(o, first),
                    why[0] ? why : pcoll_strerror(st));
}

/* Step 3's verdict: the first must-agree field that differs, named with
 * its values and the members that hold them. */
static int compare(const pc_agree_over_t *o, const char *fn, const int64_t *rows, int n,
                   const pc_agree_field_t *fields, int nfields, int differ_status)
{
    for (int f = 0; f < nfields; f++) {
        if (!fields[f].must_agree) continue;
        int64_t v0 = rows[f];
        int differs = 0;
        for (int i = 1; i < n; i++) differs |= rows[(size_t)i * (size_t)nfields + (size_t)f] != v0;
        if (!differs) continue;
        /* "name differs between ranks: A at rank(s) 0, 2; B at rank(s) 1" (each value once) */
        char msg[400];
        snprintf(msg, sizeof msg, "%s differs between ranks:", fields[f].name);
        int shown = 0;
        for (int i = 0; i < n && shown < 4; i++) {
            int64_t v = rows[(size_t)i * (size_t)nfields + (size_t)f];
            int seen = 0;
            for (int q = 0; q < i; q++) seen |= rows[(size_t)q * (size_t)nfields + (size_t)f] == v;
            if (seen) continue;
            char val[64];
            size_t at = strlen(msg);
            snprintf(msg + at, sizeof msg - at, "%s %s at rank(s) ", shown ? ";" : "",
                     value_text(&fields[f], v, val, sizeof val));
            list_ranks(o, rows, n, nfields, f, v, msg, sizeof msg);
            shown++;
        }
        return pc_error(differ_status, fn, "%s; every rank must call it alike", msg);
    }
    return PCOLL_SUCCESS;
}

int pc_agree(const pc_agree_over_t *o, const char *fn, int status, int bad, const pc_agree_field_t *fields,
             int nfields, int differ_status)
{
    int n = 0, me = members(o, &n);
    if (me < 0) /* not a member: it cannot know whom to agree with (agree.h) */
        return status != PCOLL_SUCCESS ? status
                                       : pc_error(PCOLL_ERR_GROUP, fn, "this rank (%d) is not in the group",
                                                  o->ctx->rank);
    /* what step 3 needs is allocated first: a member without the memory
     * fails in step 1 like any other local failure */
    int64_t *rows = nfields > 0 ? calloc((size_t)n * (size_t)nfields, sizeof *rows) : NULL;
    if (nfields > 0 && !rows && status == PCOLL_SUCCESS)
        status = pc_error(PCOLL_ERR_NOMEM, fn, "no memory to check the call against the other ranks");
    /* step 1: the bitmap of failed members, summed 4096 members at a time
     * (on the stack: nothing here can fail for want of memory) */
    int rc = PCOLL_SUCCESS, first = -1;
    for (int base = 0; rc == PCOLL_SUCCESS && base < n; base += 64 * 64) {
        int64_t bits[64];
        memset(bits, 0, sizeof bits);
        size_t words = (size_t)((n - base < 64 * 64 ? n - base : 64 * 64) + 63) / 64;
        if (status != PCOLL_SUCCESS && me >= base && me < base + 64 * 64)
            bits[(me - base) / 64] |= (int64_t)((uint64_t)1 << ((me - base) % 64));
        rc = sum(o, bits, words, fn);
        for (size_t w = 0; rc == PCOLL_SUCCESS && first < 0 && w < words; w++)
            for (int b = 0; b < 64 && first < 0; b++)
                if ((uint64_t)bits[w] & ((uint64_t)1 << b)) first = base + (int)w * 64 + b;
    }
    if (rc != PCOLL_SUCCESS) {
        free(rows);
        return status != PCOLL_SUCCESS ? status : rc;
    }
    if (first >= 0) {
        free(rows);
        return failed_elsewhere(o, fn, status, bad, first, me, fields, nfields);
    }
    if (nfields == 0) return PCOLL_SUCCESS;
    for (int f = 0; f < nfields; f++) rows[(size_t)me * (size_t)nfields + (size_t)f] = fields[f].value;
    rc = sum(o, rows, (size_t)n * (size_t)nfields, fn);
    if (rc == PCOLL_SUCCESS) rc = compare(o, fn, rows, n, fields, nfields, differ_status);
    free(rows);
    return rc;
}

int pc_agree_step(const pc_agree_over_t *over, const char *fn, int status)
{
    return pc_agree(over, fn, status, -1, NULL, 0, PCOLL_ERR_ARG);
}

int pcoll_agree(pcoll_t *ctx, const char *what, int status, const char *why, int n, const char *const *names,
                const int64_t *values)
{
    const char *fn = what && what[0] ? what : "pcoll_agree";
    int rc = pc_ctx_check(ctx, fn);
    if (rc != PCOLL_SUCCESS) return rc; /* without a context nothing can be agreed */
    /* this rank's own failure, or bad arguments, become its status: the
     * others still reach both steps and fail with it */
    if (status > 0 || status < PCOLL_ERR_TIMEOUT) status = PCOLL_ERR_INTERNAL;
    if (status != PCOLL_SUCCESS)
        status = why ? pc_error(status, fn, "%s", why) : pc_error(status, fn, "%s", pcoll_last_error());
    else if (n < 0)
        status = pc_error(PCOLL_ERR_COUNT, fn, "n is %d; it must be >= 0", n);
    else if (n > 0 && (!names || !values))
        status = pc_error(PCOLL_ERR_NULL, fn, "%s is NULL", !names ? "names" : "values");
    for (int i = 0; status == PCOLL_SUCCESS && i < n; i++)
        if (!names[i]) status = pc_error(PCOLL_ERR_NULL, fn, "names[%d] is NULL", i);
    /* first the number of values (the second step's width), then the values */
    pc_agree_over_t over = pc_agree_group(ctx, NULL, 0);
    pc_agree_field_t count = {"the number of values", status == PCOLL_SUCCESS ? n : 0, 1, NULL};
    rc = pc_agree(&over, fn, status, -1, &count, 1, PCOLL_ERR_ARG);
    if (rc != PCOLL_SUCCESS || n == 0) return rc;
    pc_agree_field_t *fields = calloc((size_t)n, sizeof *fields);
    if (!fields) status = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for %d values", n);
    for (int i = 0; fields && i < n; i++) fields[i] = (pc_agree_field_t){names[i], values[i], 1, NULL};
    rc = pc_agree(&over, fn, status, -1, fields, fields ? n : 0, PCOLL_ERR_ARG);
    free(fields);
    return rc;
}
