/*
 * Activation broadcast for partial collectives: who forwards an activation to
 * whom, for any P.  Pure functions; the partial objects move the messages.
 */
#ifndef PC_ALGO_ACTIVATION_H
#define PC_ALGO_ACTIVATION_H

#include <stdint.h>

/* Links ("dimensions") k = 0 .. D-1 with 2^k < P; D = 0 when P == 1. */
int pc_act_ndims(int P);

/* The rank that link k of rank `me` sends to: (me + 2^k) mod P. */
int pc_act_peer(int P, int me, int k);

/* The link a message from `src` arrived on at `me` ((me - src) mod P == 2^k),
 * or -1 if src is not a link source of me. */
int pc_act_dim_from(int P, int me, int src);

/* Links to forward on after an activation that arrived on link h (h = -1:
 * this rank is an initiator): every k > h, as a bit mask. */
uint64_t pc_act_forward_mask(int P, int h);

/* The rank that sends to `me` on link k: (me - 2^k) mod P. */
int pc_act_source(int P, int me, int k);

/* The rank from which `me` hears an activation started by `root` alone
 * (its parent in root's binomial tree), or -1 when me == root. */
int pc_act_parent(int P, int root, int me);

#endif
