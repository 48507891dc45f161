/*
 * Activation broadcast, any P, any number of simultaneous initiators.
 *
 * Link k of rank x goes to x + 2^k (mod P), for every k with 2^k < P.  An
 * initiator sends on all its links; a rank activated by a message that came in
 * on link h forwards on its links k > h.  With one initiator (relative rank
 * v = x - root) this is the binomial tree: v receives on the highest bit of v
 * and forwards to v + 2^k, k above it.  P = 8, root 0:
 *
 *     0 --k0--> 1 --k1--> 3 --k2--> 7
 *     0 --k1--> 2 --k2--> 6
 *     0 --k2--> 4          1 --k2--> 5
 *
 * (for P not a power of two some links wrap around to ranks that already have
 * the message; the duplicates are absorbed).
 *
 * Several initiators: every link is used at most once per round (a rank
 * remembers the links it used), and a message on link h makes a rank forward
 * on its unused links above h, even if an earlier message activated it.  The
 * rule does not depend on the root, which is what makes it cover everything:
 * take any initiator R and any rank y with relative rank v = y - R and highest
 * bit h of v.  Its parent in R's tree, z = y - 2^h, has relative rank below 2^h,
 * so (by induction from R, which uses every link) z received something on a
 * link below h, or is R, and therefore used link h, which reaches y.  Letting
 * each rank forward only once, along the tree of the first root it heard from,
 * does not have this property: with two initiators a rank can be skipped by
 * both trees (a brute-force search finds such cases for small P).  The
 * argument needs every rank to forward every message by this rule, also
 * after its part of the round is over; a rank may drop a message only when
 * it knows every rank has been activated (it completed a round that needed
 * every rank's part).
 */
#include "activation.h"

int pc_act_ndims(int P)
{
    int d = 0;
    while (d < 62 && (1LL << d) < (long long)P) d++;
    return d;
}

int pc_act_peer(int P, int me, int k) { return (int)(((long long)me + (1LL << k)) % P); }

int pc_act_source(int P, int me, int k)
{
    long long s = ((long long)me - (1LL << k)) % P;
    return (int)(s < 0 ? s + P : s);
}

int pc_act_dim_from(int P, int me, int src)
{
    long long diff = ((long long)me - src) % P;
    if (diff < 0) diff += P;
    for (int k = 0; k < pc_act_ndims(P); k++)
        if ((1LL << k) == diff) return k;
    return -1;
}

uint64_t pc_act_forward_mask(int P, int h)
{
    int d = pc_act_ndims(P);
    uint64_t all = d >= 64 ? ~0ULL : ((1ULL << d) - 1);
    uint64_t below = h < 0 ? 0 : (h >= 63 ? ~0ULL : ((1ULL << (h + 1)) - 1));
    return all & ~below;
}

int pc_act_parent(int P, int root, int me)
{
    long long v = ((long long)me - root) % P;
    if (v < 0) v += P;
    if (v == 0) return -1;
    long long h = 1;
    while (h * 2 <= v) h *= 2; /* the highest bit of v */
    return (int)((root + (v - h)) % P);
}
