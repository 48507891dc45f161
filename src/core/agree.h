/*
 * Agreement of collective setup calls: pcoll_init, the creation of partial,
 * preduce and fusion objects, calibration, persistent plans, and
 * pcoll_agree for the layers above.  Every member must call them with the
 * same arguments and configuration, and a failure at one member must not
 * leave the others waiting.  Each member brings its local status (what it
 * found alone: a bad argument, no memory) and the values that must agree;
 * after at most three sums every member knows whether to go on, and if
 * not, every member fails with a message naming what differs (or what
 * failed, and why, in the failing member's own words) and at which ranks:
 *
 *   pcoll_partial_create: count differs between ranks: 4 at rank(s) 0, 2, 3; 8 at rank(s) 1
 *   pcoll_init: PCOLL_SPIN_US is invalid at rank 2 (there: PCOLL_SPIN_US="5 " is not ...); every rank fails
 *
 *   step 1  each member sets its bit if it failed here    (a sum of bitmaps)
 *   step 2  only if one did: the first failing member gives its status,
 *           bad field and message; every member fails with them
 *   step 3  else each member fills its row of values; the first field that
 *           differs fails every member, naming it and the ranks
 *
 * Every setup call reaches its agreement whatever its local checks found, so
 * that a member with a bad argument fails the others at once instead of
 * leaving them in the next collective step.  The exceptions are the members
 * that cannot know whom to agree with, and fail alone: a NULL context (or,
 * for pcoll_init, MPI_COMM_NULL or MPI not initialized) and an unusable
 * group list (not a member, a rank out of range, a repeated rank).  The
 * others then wait in the agreement until the stall report and
 * PCOLL_TIMEOUT_S name the missing member.
 *
 * The rows travel over an MPI communicator (pcoll_init: before the context
 * exists) or over a group of the context (every other setup; all ranks as a
 * group list), as a pcoll_allreduce in which each member fills its own row:
 * a member that never comes is then named by the stall report and
 * PCOLL_TIMEOUT_S, as in any other blocking call.
 */
#ifndef PC_CORE_AGREE_H
#define PC_CORE_AGREE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "pcoll.h"

typedef struct pc_agree_field {
    const char *name;
    int64_t value;
    int must_agree; /* 0: carried only to name the field of a local failure */
    /* prints a value (NULL: as a number) */
    const char *(*text)(int64_t value, char *buf, size_t len);
} pc_agree_field_t;

/* Who agrees: every rank of `comm`, or (comm MPI_COMM_NULL) the members of
 * `group` (NULL: every rank) of context ctx, in their order. */
typedef struct pc_agree_over {
    MPI_Comm comm;
    pcoll_t *ctx;
    const int *group;
    int group_size;
} pc_agree_over_t;

static inline pc_agree_over_t pc_agree_comm(MPI_Comm comm) { return (pc_agree_over_t){comm, NULL, NULL, 0}; }
static inline pc_agree_over_t pc_agree_group(pcoll_t *ctx, const int *group, int group_size)
{
    return (pc_agree_over_t){MPI_COMM_NULL, ctx, group, group_size};
}

/*
 * Collective over `over`.  status: this member's result so far (an error
 * was raised here already, its message in pcoll_last_error()); bad: the
 * field a local failure is about (-1: none).  Returns PCOLL_SUCCESS when
 * every member succeeded and the must_agree fields are equal everywhere;
 * else every member returns an error: a member that failed its own status
 * (its message stays), the others the first failing member's status, or
 * differ_status when only the values differ.
 */
int pc_agree(const pc_agree_over_t *over, const char *fn, int status, int bad, const pc_agree_field_t *fields,
             int nfields, int differ_status);

/* A step of a setup with nothing to compare: the others learn whether it
 * failed here (pc_agree with no fields). */
int pc_agree_step(const pc_agree_over_t *over, const char *fn, int status);

#endif
