/*
 * Rotating groups (WAGMA-SGD): which ranks reduce together in round t,
 * computed alike by every rank from (P, S, t) alone.  Pure: no MPI, no
 * state, no allocation.
 *
 *   P, S powers of two (S < P): the butterfly.  p = log2 P, s = log2 S;
 *     in round t the group of r is every rank that differs from r only in
 *     bit positions (t s + i) mod p, i < s.  P = 8, S = 4:
 *       t = 0: bits 0,1  {0,1,2,3} {4,5,6,7}
 *       t = 1: bits 2,0  {0,1,4,5} {2,3,6,7}
 *       t = 2: bits 1,2  {0,2,4,6} {1,3,5,7}
 *   otherwise: a mixed-radix grid.  D = ceil(log_S P) rounds reach
 *     everyone; b = the largest base with b^D <= P; the first j of the D
 *     digits have radix b + 1, the others b, for the largest j that keeps
 *     the grid's size Q <= P; digits of radix 1 (b = 1) are left out, as
 *     they would only make groups of one rank.  Ranks r < Q are grid
 *     points; in round t the groups are the lines along digit
 *     k = t mod (digits); a rank r >= Q joins line (r - Q) mod (Q / s_k) of
 *     that round.  P = 12, S = 3: D = 3, b = 2, radices 3,2,2, Q = 12
 *     (r = d0 + 3 d1 + 6 d2):
 *       t = 0: {0,1,2} {3,4,5} {6,7,8} {9,10,11}
 *       t = 1: {0,3} {1,4} {2,5} {6,9} {7,10} {8,11}
 *       t = 2: {0,6} {1,7} {2,8} {3,9} {4,10} {5,11}
 *     P = 6, S = 2: D = 3, b = 1, radices 2,2 (the third, 1, left out),
 *     Q = 4 (r = d0 + 2 d1), ranks 4 and 5 join the lines:
 *       t = 0: {0,1,4} {2,3,5}   t = 1: {0,2,4} {1,3,5}
 *   S >= P (or P = 1): one group of every rank.
 *
 * Properties (unit test over every P <= 200 and every S, from every
 * starting round): the groups of a round partition the ranks; no group has
 * more than S + 2 ranks, nor fewer than 2 (P >= 2); within pc_rot_depth(P, S)
 * consecutive rounds every rank's value reaches every other rank through
 * the groups.
 */
#ifndef PC_GROUPS_ROTATION_H
#define PC_GROUPS_ROTATION_H

#include <stdint.h>

/* The default group size of P ranks: max(2, round(sqrt(P))), at most P. */
int pc_rot_default_size(int P);

/* D: consecutive rounds after which every rank's value reached every other
 * (ceil(log_S P); 1 if S >= P). */
int pc_rot_depth(int P, int S);

/* Rounds after which the groups repeat. */
int pc_rot_period(int P, int S);

/* The largest group any round forms (for buffers): at most S + 2, or P. */
int pc_rot_max_size(int P, int S);

/* The group of `rank` in round t: its members in increasing order into
 * members (room for pc_rot_max_size ints); returns their number. */
int pc_rot_group(int P, int S, uint64_t t, int rank, int *members);

#endif
