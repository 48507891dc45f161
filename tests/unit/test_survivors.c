/*
 * The survivors' agreement of pcoll_shrink (core/survivors.c), over a
 * simulated network in steps: every rank that takes part sends its view
 * once per round to the others of its view, messages arrive after 0 to D
 * steps (D below a round's time T), and a rank ends a round when it heard
 * everyone of its view or after T steps of it.
 *   - everyone alive and on time: every rank decides every rank, in round 1;
 *   - dead ranks (never send; 1 to P/2 - 1 of them, random): every live rank
 *     decides the same view, the live ranks exactly;
 *   - a rank that starts late (after the others' round 0): the others decide
 *     without it, and it ends with a view that holds no majority;
 *   - a rank that starts a little late, within a round's time: nobody is
 *     left out;
 * each with random delays, many seeds, P from 1 to 64.
 */
#include <stdlib.h>
#include <string.h>

#include "../rng.h"
#include "core/survivors.h"
#include "unit_check.h"

#define MAXP 64
#define MAXMSG 200000

typedef struct msg {
    int src, dst, at; /* delivered at step `at` */
    uint32_t round;
    unsigned char view[(MAXP + 7) / 8];
} msg_t;

static msg_t q[MAXMSG];
static int nq;

typedef struct rank {
    pc_survivors_t s;
    int start;       /* the step it enters pcoll_shrink (-1: dead) */
    int sent_round;  /* the last round it sent (-1: none) */
    int round_began; /* the step its round began */
    int decided;
    int n, list[MAXP];
} rank_t;

static int bit(const unsigned char *b, int i) { return (b[i / 8] >> (i % 8)) & 1; }

/* runs the agreement; returns the steps taken */
static int run(rank_t *r, int P, int T, int D, rng_t *rng)
{
    nq = 0;
    for (int i = 0; i < P; i++) {
        CHECK(pc_survivors_init(&r[i].s, P, i) == 0);
        r[i].sent_round = -1;
        r[i].decided = 0;
    }
    int step;
    for (step = 0; step < 100 * T; step++) {
        int busy = 0;
        for (int i = 0; i < P; i++) {
            rank_t *x = &r[i];
            if (x->start < 0 || x->decided) continue;
            busy = 1;
            if (step < x->start) continue;
            if (x->sent_round != (int)x->s.round) { /* a new round: send the view */
                x->sent_round = (int)x->s.round;
                x->round_began = step;
                for (int j = 0; j < P; j++)
                    if (j != i && bit(x->s.view, j)) {
                        CHECK(nq < MAXMSG);
                        msg_t *m = &q[nq++];
                        m->src = i;
                        m->dst = j;
                        m->round = x->s.round;
                        m->at = step + (int)(rng_next(rng) % (unsigned)(D + 1));
                        memcpy(m->view, x->s.view, pc_survivors_bytes(P));
                    }
            }
        }
        if (!busy) break;
        for (int i = 0; i < P; i++) {
            rank_t *x = &r[i];
            if (x->start < 0 || x->decided || step < x->start) continue;
            for (int k = 0; k < nq; k++)
                if (q[k].dst == i && q[k].at <= step && q[k].round == x->s.round) pc_survivors_hear(&x->s, q[k].src, q[k].view);
            if (pc_survivors_complete(&x->s) || step - x->round_began >= T) {
                if (pc_survivors_end_round(&x->s)) {
                    x->decided = 1;
                    x->n = pc_survivors_list(&x->s, x->list);
                }
            }
        }
    }
    return step;
}

static void finish(rank_t *r, int P)
{
    for (int i = 0; i < P; i++) pc_survivors_destroy(&r[i].s);
}

int main(void)
{
    static rank_t r[MAXP];
    rng_t rng;
    rng_seed(&rng, 20261126);
    int T = 8, D = 3;
    for (int P = 1; P <= MAXP; P += (P < 8 ? 1 : 7)) {
        for (int seed = 0; seed < 20; seed++) {
            /* everyone, on time */
            for (int i = 0; i < P; i++) r[i].start = (int)(rng_next(&rng) % 2);
            run(r, P, T, D, &rng);
            for (int i = 0; i < P; i++) {
                CHECK(r[i].decided);
                CHECK(r[i].n == P);
                CHECK(r[i].s.round == 1);
            }
            finish(r, P);
            /* dead ranks */
            if (P >= 3) {
                int ndead = 1 + (int)(rng_next(&rng) % (unsigned)((P - 1) / 2));
                for (int i = 0; i < P; i++) r[i].start = 0;
                for (int k = 0; k < ndead; k++) r[rng_next(&rng) % (unsigned)P].start = -1;
                int alive = 0;
                for (int i = 0; i < P; i++) alive += r[i].start >= 0;
                run(r, P, T, D, &rng);
                int first = -1;
                for (int i = 0; i < P; i++) {
                    if (r[i].start < 0) continue;
                    CHECK(r[i].decided);
                    CHECK(r[i].n == alive);
                    for (int k = 0; k < r[i].n; k++) CHECK(r[r[i].list[k]].start >= 0);
                    if (first < 0) first = i;
                    CHECK(memcmp(r[i].list, r[first].list, sizeof(int) * (size_t)r[i].n) == 0);
                }
                finish(r, P);
            }
            /* one rank late by more than a round: left out, alone */
            if (P >= 3) {
                int late = (int)(rng_next(&rng) % (unsigned)P);
                for (int i = 0; i < P; i++) r[i].start = i == late ? 3 * T : 0;
                run(r, P, T, D, &rng);
                for (int i = 0; i < P; i++) {
                    CHECK(r[i].decided);
                    if (i == late) {
                        CHECK(r[i].n <= P / 2);
                    } else {
                        CHECK(r[i].n == P - 1);
                        for (int k = 0; k < r[i].n; k++) CHECK(r[i].list[k] != late);
                    }
                }
                finish(r, P);
            }
            /* one rank a little late (within a round's time): kept */
            if (P >= 2) {
                int late = (int)(rng_next(&rng) % (unsigned)P);
                for (int i = 0; i < P; i++) r[i].start = i == late ? T - D - 1 : 0;
                run(r, P, T, D, &rng);
                for (int i = 0; i < P; i++) CHECK(r[i].decided && r[i].n == P);
                finish(r, P);
            }
        }
    }
    printf("test_survivors: %ld checks passed\n", checks);
    return 0;
}
