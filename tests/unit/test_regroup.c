/*
 * The rules of a view change for rounds by messages (partial/regroup.h):
 *   - every consistent state of n ranks (each has done D - 1, running, or
 *     D, running or not; one at least has D): every rank resumes at D; a
 *     donor exists exactly when a rank is at D - 1, and it has D; ranks at
 *     D - 1 receive, running ranks at D put back, idle ones do nothing;
 *     ranks left out are ignored;
 *   - the donor is the first rank at D that holds round D - 1's result;
 *     none holding it is refused;
 *   - states no rounds over every rank can make (a rank two rounds behind,
 *     a rank at D - 1 not running, nobody in the view) are refused;
 *   - a rank coming back: one round behind, even, or one ahead, and nothing
 *     else;
 *   - rounds summed inside groups (the skipping plan): for every state of n
 *     ranks up to W = 5 rounds apart, ranks coming back included, resume at
 *     the most any completed, activated from there on, no donor; no ranks:
 *     refused;
 * for n from 1 to 8 and every state (4^n: left-out ranks mixed in).
 */
#include <stdio.h>

#include "partial/regroup.h"
#include "unit_check.h"

static void consistent(int n, uint64_t D)
{
    pc_regroup_snap_t s[9];
    int states = 1;
    for (int i = 0; i < n; i++) states *= 4;
    for (int code = 0; code < states; code++) {
        int c = code, at_d = 0, behind = 0, members = 0;
        for (int i = 0; i < n; i++, c /= 4) {
            int k = c % 4; /* 0: D-1 running, 1: D idle, 2: D running, 3: left out */
            s[i] = (pc_regroup_snap_t){.done = k == 0 ? D - 1 : D, .activated = D + (uint64_t)(i % 2),
                                       .running = k == 0 || k == 2, .left_out = k == 3, .has_last = 1};
            if (k == 3) {
                s[i].done = (uint64_t)(7 * i); /* anything: ignored */
                s[i].activated = D + 5;        /* ignored too */
                continue;
            }
            members++;
            at_d += k != 0;
            behind += k == 0;
        }
        pc_regroup_t g;
        int rc = pc_regroup_plan(s, n, &g);
        if (members == 0 || at_d == 0) {
            /* nobody, or nobody at D: the max is D - 1, and then every rank
             * is "at D - 1 + 1" -- a consistent state of its own */
            if (members == 0) CHECK(rc == -1);
            continue;
        }
        CHECK(rc == 0);
        CHECK(g.resume == D);
        CHECK(g.activated >= D && g.activated <= D + 1);
        if (behind) {
            CHECK(g.donor >= 0 && !s[g.donor].left_out && s[g.donor].done == D);
        } else {
            CHECK(g.donor == -1);
        }
        for (int i = 0; i < n; i++) {
            if (s[i].left_out) continue;
            pc_regroup_action_t a = pc_regroup_action(&g, &s[i]);
            if (s[i].done + 1 == D) CHECK(a == PC_REGROUP_RECEIVE);
            else if (s[i].running) CHECK(a == PC_REGROUP_PUT_BACK);
            else CHECK(a == PC_REGROUP_NOTHING);
        }
    }
}

/* a donor must hold the round: the first rank at D that does */
static void donors(void)
{
    pc_regroup_t g;
    pc_regroup_snap_t s[4] = {{5, 5, 0, 0, 0, 0}, {4, 5, 1, 0, 1, 0}, {5, 6, 1, 0, 1, 0}, {5, 5, 0, 0, 1, 0}};
    CHECK(pc_regroup_plan(s, 4, &g) == 0 && g.donor == 2);
    s[2].has_last = 0;
    CHECK(pc_regroup_plan(s, 4, &g) == 0 && g.donor == 3);
    s[3].has_last = 0;
    CHECK(pc_regroup_plan(s, 4, &g) == -1); /* nobody can give round 4 */
    s[1].done = 5; /* nobody behind: no donor needed */
    CHECK(pc_regroup_plan(s, 4, &g) == 0 && g.donor == -1);
}

static void inconsistent(void)
{
    pc_regroup_t g;
    pc_regroup_snap_t two_behind[3] = {{5, 5, 0, 0, 1, 0}, {3, 4, 1, 0, 1, 0}, {5, 6, 1, 0, 1, 0}};
    CHECK(pc_regroup_plan(two_behind, 3, &g) == -1);
    pc_regroup_snap_t idle_behind[2] = {{5, 5, 0, 0, 1, 0}, {4, 5, 0, 0, 1, 0}};
    CHECK(pc_regroup_plan(idle_behind, 2, &g) == -1);
    pc_regroup_snap_t nobody[2] = {{5, 5, 0, 1, 1, 0}, {4, 5, 1, 1, 1, 0}};
    CHECK(pc_regroup_plan(nobody, 2, &g) == -1);
    pc_regroup_snap_t none[1] = {{0, 0, 0, 0, 0, 0}};
    CHECK(pc_regroup_plan(none, 0, &g) == -1);
}

static void coming_back(void)
{
    for (uint64_t D = 1; D < 50; D++) {
        CHECK(pc_regroup_return(D, D - 1) == 1);
        CHECK(pc_regroup_return(D, D) == 0);
        CHECK(pc_regroup_return(D, D + 1) == -1);
        CHECK(pc_regroup_return(D, D + 2) == -2);
        if (D >= 2) CHECK(pc_regroup_return(D, D - 2) == -2);
    }
}

static void skipping(void)
{
    enum { W = 5 };
    pc_regroup_t g;
    pc_regroup_snap_t s[5];
    CHECK(pc_regroup_plan_skip(s, 0, &g) == -1);
    for (int n = 1; n <= 5; n++) {
        int states = 1;
        for (int i = 0; i < n; i++) states *= 2 * W;
        for (int code = 0; code < states; code++) {
            uint64_t most = 0, act = 0, base = 100;
            for (int i = 0, c = code; i < n; i++, c /= 2 * W) {
                int behind = c % W, back = (c / W) % 2;
                s[i] = (pc_regroup_snap_t){.done = base - (uint64_t)behind,
                                           .activated = base - (uint64_t)behind + (uint64_t)((code + i) % 3),
                                           .running = (code >> i) & 1, .left_out = back};
                if (s[i].done > most) most = s[i].done;
                if (s[i].activated > act) act = s[i].activated;
            }
            CHECK(pc_regroup_plan_skip(s, n, &g) == 0);
            CHECK(g.resume == most);
            CHECK(g.activated == (act > most ? act : most));
            CHECK(g.donor == -1);
        }
    }
}

/* rounds in groups: skip the rounds behind D, hold round D's parts
 * (ACCUMULATE), else nothing */
static void skip_actions(void)
{
    for (uint64_t D = 1; D < 6; D++)
        for (uint64_t done = 0; done <= D; done++)
            for (int running = 0; running < 2; running++)
                for (int acc = 0; acc < 2; acc++) {
                    pc_regroup_snap_t s = {.done = done, .activated = D, .running = running};
                    pc_regroup_action_t want = done < D                ? PC_REGROUP_SKIP
                                               : acc && running ? PC_REGROUP_HOLD
                                                                : PC_REGROUP_NOTHING;
                    CHECK(pc_regroup_skip_action(D, &s, acc) == want);
                }
}

int main(void)
{
    for (int n = 1; n <= 8; n++)
        for (uint64_t D = 1; D < 4; D++) consistent(n, D);
    donors();
    inconsistent();
    coming_back();
    skipping();
    skip_actions();
    printf("test_regroup: %ld checks passed\n", checks);
    return 0;
}
