/*
 * Staleness-aware weights of a group average (Partial Reduce, section 3.3,
 * "dynamic partial reduce").  Pure.
 *
 * Member i reports its iteration k_i; its age is v_i = max_j k_j - k_i + 1
 * (1 = the freshest), K = the largest age.  Age v has the weight of an
 * exponential moving average with bias correction:
 *
 *     beta_v = (1 - alpha) alpha^(v-1) / (1 - alpha^K),   v = 1 .. K
 *
 * which sum to 1.  Members of one age share its weight equally.  An age
 * that no member has (the paper would stand in the initial model for it)
 * gives its weight to the nearest age that has members, the fresher one on
 * a tie: the weights still sum to 1 and no model is needed that nobody
 * sent.  alpha = 0 gives everything to the freshest members; with every
 * member of one age the weights are 1/n, the constant rule.
 *
 *   alpha 0.5, ages 1 1 5 (two fresh members, one 4 iterations behind):
 *     beta = .516 .258 .129 .065 .032; ages 2, 3 -> 1, age 4 -> 5
 *     weights .452 .452 .097
 */
#ifndef PC_GROUPS_STALENESS_H
#define PC_GROUPS_STALENESS_H

#include <stdint.h>

/* The default decay. */
#define PC_STALENESS_ALPHA 0.5

/* Weights of n members with iterations iters[] into w[] (0 <= alpha < 1);
 * returns the largest iteration (what every member takes afterwards). */
uint64_t pc_staleness_weights(int n, const uint64_t *iters, double alpha, double *w);

/* 1/n each; returns the largest iteration. */
uint64_t pc_constant_weights(int n, const uint64_t *iters, double *w);

#endif
