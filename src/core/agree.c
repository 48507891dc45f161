#include "agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/error.h"
#include "context.h"

/* Appends "r, r, ..." of the ranks whose value at column `col` equals v
 * (at most 8 named, then "and N more"). */
static void list_ranks(const int64_t *all, int P, int width, int col, int64_t v, char *buf, size_t len)
{
    size_t at = strlen(buf);
    int named = 0, more = 0;
    for (int r = 0; r < P; r++) {
        if (all[(size_t)r * (size_t)width + (size_t)col] != v) continue;
        if (named < 8) {
            at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%d", named ? ", " : "", r);
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

int pc_agree(MPI_Comm comm, const char *fn, int status, int bad, const pc_agree_field_t *fields, int nfields,
             int differ_status)
{
    int P = 1, me = 0;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &me);
    int width = nfields + 2;
    int64_t *all = malloc(sizeof(int64_t) * (size_t)width * (size_t)P);
    /* first who failed (the lowest rank with the lowest status), which any
     * rank can say without memory; then, if nobody did, the values */
    if (!all && status == PCOLL_SUCCESS)
        status = pc_error(PCOLL_ERR_NOMEM, fn, "no memory to check the arguments against the other ranks");
    struct {
        int status, rank;
    } in = {status, me}, worst = {0, 0};
    int rc = MPI_Allreduce(&in, &worst, 1, MPI_2INT, MPI_MINLOC, comm);
    if (rc == MPI_SUCCESS && worst.status != PCOLL_SUCCESS) {
        /* the failing rank tells which field and why: its own message */
        struct {
            int field;
            char why[400];
        } told = {bad, ""};
        if (me == worst.rank) snprintf(told.why, sizeof told.why, "%s", pcoll_last_error());
        rc = MPI_Bcast(&told, (int)sizeof told, MPI_BYTE, worst.rank, comm);
        free(all);
        if (status != PCOLL_SUCCESS) return status; /* our own message says why */
        told.why[sizeof told.why - 1] = '\0';
        const char *why = rc == MPI_SUCCESS && told.why[0] ? told.why : pcoll_strerror(worst.status);
        const char *what = rc == MPI_SUCCESS && told.field >= 0 && told.field < nfields ? fields[told.field].name
                                                                                          : NULL;
        if (what)
            return pc_error(worst.status, fn, "%s is invalid at rank %d (there: %s); every rank fails", what,
                            worst.rank, why);
        return pc_error(worst.status, fn, "rank %d failed (there: %s); every rank fails", worst.rank, why);
    }
    if (rc != MPI_SUCCESS) {
        free(all);
        return status ? status : pc_mpi_error(rc, fn, "MPI_Allreduce (checking the call against the other ranks)");
    }
    int64_t *mine = all + (size_t)me * (size_t)width;
    mine[0] = status;
    mine[1] = bad;
    for (int i = 0; i < nfields; i++) mine[2 + i] = fields[i].value;
    rc = MPI_Allgather(MPI_IN_PLACE, width, MPI_INT64_T, all, width, MPI_INT64_T, comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        return pc_mpi_error(rc, fn, "MPI_Allgather (checking the arguments against the other ranks)");
    }
    int result = PCOLL_SUCCESS;
    for (int i = 0; i < nfields && result == PCOLL_SUCCESS; i++) {
        if (!fields[i].must_agree) continue;
        int64_t v0 = all[2 + i];
        int differs = 0;
        for (int r = 1; r < P; r++) differs |= all[(size_t)r * (size_t)width + 2 + (size_t)i] != v0;
        if (!differs) continue;
        /* "name differs between ranks: A at rank(s) 0, 2; B at rank(s) 1" (each value once) */
        char msg[400];
        snprintf(msg, sizeof msg, "%s differs between ranks:", fields[i].name);
        int shown = 0;
        for (int r = 0; r < P && shown < 4; r++) {
            int64_t v = all[(size_t)r * (size_t)width + 2 + (size_t)i];
            int seen = 0;
            for (int q = 0; q < r; q++) seen |= all[(size_t)q * (size_t)width + 2 + (size_t)i] == v;
            if (seen) continue;
            char val[64];
            size_t at = strlen(msg);
            snprintf(msg + at, sizeof msg - at, "%s %s at rank(s) ", shown ? ";" : "",
                     value_text(&fields[i], v, val, sizeof val));
            list_ranks(all, P, width, 2 + i, v, msg, sizeof msg);
            shown++;
        }
        result = pc_error(differ_status, fn, "%s; every rank must call it alike", msg);
    }
    free(all);
    return result;
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
    pc_agree_field_t count = {"the number of values", status == PCOLL_SUCCESS ? n : 0, 1, NULL};
    rc = pc_agree(ctx->comm, fn, status, -1, &count, 1, PCOLL_ERR_ARG);
    if (rc != PCOLL_SUCCESS) return rc;
    pc_agree_field_t *fields = calloc((size_t)(n > 0 ? n : 1), sizeof *fields);
    if (!fields) status = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for %d values", n);
    for (int i = 0; fields && i < n; i++) fields[i] = (pc_agree_field_t){names[i], values[i], 1, NULL};
    rc = pc_agree(ctx->comm, fn, status, -1, fields, fields ? n : 0, PCOLL_ERR_ARG);
    free(fields);
    return rc;
}
