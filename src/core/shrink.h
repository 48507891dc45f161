/*
 * pcoll_shrink: a context over the ranks that are left after some died or
 * fell silent (include/pcoll.h has the call's contract).
 *
 *   application thread (every live rank)          token holder
 *   ------------------------------------          ------------
 *   per round of the agreement (survivors.h):
 *     post: send the view  ------------------->   PC_SVC_SHRINK to each
 *                                                 other rank of the view
 *     wait (a round's time at most) <----------   on_view: into the inbox
 *       the inbox's views of this round -> survivors.c
 *     end the round: decided?  else the next
 *   MPI_Comm_create_group(ctx->comm, the agreed ranks)   (only they take part)
 *   pcoll_init on it: the new context
 *   the old one is marked shrunk: its calls fail, pcoll_finalize only stops
 *   its progress thread (whatever it shares with the dead stays)
 */
#ifndef PC_CORE_SHRINK_H
#define PC_CORE_SHRINK_H

#include "pcoll.h"

typedef struct pc_shrink_state pc_shrink_state_t;

/* At pcoll_init (holder): the handler of the agreement's messages. */
void pc_shrink_open(pcoll_t *ctx);
/* At pcoll_finalize: its memory. */
void pc_shrink_close(pcoll_t *ctx);

#endif
