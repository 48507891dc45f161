/*
 * The group registry and the receive-id pool (core/groupmap.c, core/idpool.c),
 * no MPI:
 *   - 100,000 distinct groups used once each: the registry never holds more
 *     than the groups in use at a time, and is empty afterwards;
 *   - HELLOs arriving before and after the operations that need them are
 *     matched in order (the k-th from a member to the k-th operation that
 *     needs one), and a record stays while HELLOs are queued in it;
 *   - lists that are not groups of this rank are refused; validation names
 *     the problem;
 *   - receive ids: never two in use at once, fresh ones first, then the
 *     one freed longest ago; exhaustion is reported, not wrapped.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/groupmap.h"
#include "pcoll.h"
#include "core/idpool.h"
#include "rng.h"
#include "unit_check.h"

static void test_idpool(void)
{
    pc_idpool_t p;
    pc_idpool_init(&p, 8);
    uint32_t id[8];
    for (uint32_t i = 0; i < 8; i++) {
        CHECK(pc_idpool_get(&p, &id[i]) == 0);
        CHECK(id[i] == i); /* fresh ones first */
    }
    uint32_t x;
    CHECK(pc_idpool_get(&p, &x) == -1); /* all in use: reported */
    CHECK(pc_idpool_in_use(&p) == 8);
    pc_idpool_put(&p, 5);
    pc_idpool_put(&p, 2);
    pc_idpool_put(&p, 7);
    CHECK(pc_idpool_get(&p, &x) == 0 && x == 5); /* the one freed longest ago */
    CHECK(pc_idpool_get(&p, &x) == 0 && x == 2);
    CHECK(pc_idpool_in_use(&p) == 7);
    pc_idpool_destroy(&p);

    /* random use: an id is never handed out twice while in use */
    rng_t r;
    rng_seed(&r, 3);
    pc_idpool_init(&p, 1000);
    unsigned char *inuse = calloc(1000, 1);
    uint32_t *held = malloc(sizeof(uint32_t) * 1000);
    int nheld = 0;
    for (int step = 0; step < 200000; step++) {
        if (nheld < 1000 && (nheld == 0 || rng_below(&r, 2))) {
            CHECK(pc_idpool_get(&p, &x) == 0);
            CHECK(x < 1000 && !inuse[x]);
            inuse[x] = 1;
            held[nheld++] = x;
        } else {
            int k = (int)rng_below(&r, (uint64_t)nheld);
            inuse[held[k]] = 0;
            pc_idpool_put(&p, held[k]);
            held[k] = held[--nheld];
        }
    }
    free(inuse);
    free(held);
    pc_idpool_destroy(&p);
}

static void test_validate(void)
{
    int me;
    int dup[3] = {0, 2, 2}, out[2] = {0, 9}, lacks[2] = {1, 2}, ok[3] = {3, 0, 1};
    CHECK(pc_group_validate(dup, 3, 4, 0, "t", &me) == PCOLL_ERR_GROUP);
    CHECK(pc_group_validate(out, 2, 4, 0, "t", &me) == PCOLL_ERR_GROUP);
    CHECK(pc_group_validate(lacks, 2, 4, 0, "t", &me) == PCOLL_ERR_GROUP);
    CHECK(pc_group_validate(ok, 0, 4, 0, "t", &me) == PCOLL_ERR_GROUP);
    CHECK(pc_group_validate(ok, 3, 4, 0, "t", &me) == PCOLL_SUCCESS && me == 1);
    int many[6] = {0, 1, 2, 3, 1, 0}; /* more entries than ranks */
    CHECK(pc_group_validate(many, 6, 4, 0, "t", &me) == PCOLL_ERR_GROUP);
}

/* 100,000 distinct ordered lists of ranks 0..P-1 containing rank 0. */
static void test_many_groups(void)
{
    enum { P = 64, GROUPS = 100000, INFLIGHT = 50 };
    pc_group_registry_t reg;
    CHECK(pc_groups_init(&reg, P, 0) == PCOLL_SUCCESS);
    rng_t r;
    rng_seed(&r, 11);
    pc_group_t *held[INFLIGHT] = {0};
    int list[8], maxlive = 0, used = 0;
    for (int g = 0; used < GROUPS; g++) {
        /* the number g, written in base 63 over ranks 1..63, after rank 0:
         * every g gives another list; lists with a repeated rank are not
         * groups and are skipped */
        int n = 1, v = g;
        list[0] = 0;
        do {
            list[n++] = 1 + v % 63;
            v /= 63;
        } while (v > 0);
        int rep = 0;
        for (int i = 1; i < n; i++)
            for (int k = 1; k < i; k++) rep |= list[i] == list[k];
        if (rep) continue;
        used++;
        pc_group_t *grp;
        CHECK(pc_groups_get(&reg, list, n, "t", &grp) == PCOLL_SUCCESS);
        CHECK(grp->n == n && grp->me == 0);
        /* a few operations in flight at a time, completing out of order */
        int slot = (int)rng_below(&r, INFLIGHT);
        if (held[slot]) pc_groups_put(&reg, held[slot]);
        held[slot] = grp;
        if (pc_groups_live(&reg) > maxlive) maxlive = pc_groups_live(&reg);
    }
    for (int i = 0; i < INFLIGHT; i++)
        if (held[i]) pc_groups_put(&reg, held[i]);
    CHECK(maxlive <= INFLIGHT);
    CHECK(pc_groups_live(&reg) == 0);
    printf("test_groups: %d distinct groups used once each, at most %d records alive at a time\n", used, maxlive);
    pc_groups_destroy(&reg);
}

static void test_hellos(void)
{
    pc_group_registry_t reg;
    CHECK(pc_groups_init(&reg, 4, 1) == PCOLL_SUCCESS); /* this is rank 1 */
    int list[3] = {2, 1, 3};
    pc_hello_t h = {0};
    pc_group_t *g = NULL, *rec;
    void *waiter = NULL;
    int j = -1;
    /* two HELLOs from rank 3 before any operation here: queued, the record lives */
    h.id = 100;
    CHECK(pc_groups_hello_in(&reg, 0, list, 3, 3, &h, &rec, &j, &waiter) == 0);
    h.id = 101;
    CHECK(pc_groups_hello_in(&reg, 0, list, 3, 3, &h, &rec, &j, &waiter) == 0);
    CHECK(pc_groups_live(&reg) == 1 && rec->queued == 2);
    CHECK(pc_groups_get(&reg, list, 3, "t", &g) == PCOLL_SUCCESS && g == rec);
    int opA = 0, opB = 0, opC = 0;
    pc_hello_t got;
    CHECK(pc_group_hello_take(&reg, g, 2, &opA, &got) == 1 && got.id == 100); /* member index 2 = rank 3 */
    CHECK(pc_group_hello_take(&reg, g, 2, &opB, &got) == 1 && got.id == 101);
    /* the third operation waits; the HELLO goes to it when it comes */
    CHECK(pc_group_hello_take(&reg, g, 2, &opC, &got) == 0);
    h.id = 102;
    CHECK(pc_groups_hello_in(&reg, 0, list, 3, 3, &h, &rec, &j, &waiter) == 1);
    CHECK(waiter == &opC && j == 2 && rec == g);
    pc_groups_put(&reg, g);
    CHECK(pc_groups_live(&reg) == 0);
    /* refused: a list without this rank, a repeat, a sender not in it, this rank itself */
    int without[2] = {0, 2}, repeat[3] = {1, 2, 1};
    CHECK(pc_groups_hello_in(&reg, 0, without, 2, 0, &h, &rec, &j, &waiter) == -1);
    CHECK(pc_groups_hello_in(&reg, 0, repeat, 3, 2, &h, &rec, &j, &waiter) == -1);
    CHECK(pc_groups_hello_in(&reg, 0, list, 3, 0, &h, &rec, &j, &waiter) == -1);
    CHECK(pc_groups_hello_in(&reg, 0, list, 3, 1, &h, &rec, &j, &waiter) == -1);
    CHECK(pc_groups_live(&reg) == 0);
    /* the whole communicator: members are ranks */
    CHECK(pc_groups_hello_in(&reg, 1, NULL, 0, 3, &h, &rec, &j, &waiter) == 0 && rec->world && rec->n == 4);
    CHECK(pc_groups_get(&reg, NULL, 0, "t", &g) == PCOLL_SUCCESS && g == rec);
    CHECK(pc_group_hello_take(&reg, g, 3, &opA, &got) == 1 && got.id == 102);
    pc_groups_put(&reg, g);
    CHECK(pc_groups_live(&reg) == 0);
    pc_groups_destroy(&reg);
}

int main(void)
{
    pcoll_set_log_level(PCOLL_LOG_NONE); /* validation errors are expected */
    test_idpool();
    test_validate();
    test_many_groups();
    test_hellos();
    printf("test_groups: %ld checks passed\n", checks);
    return 0;
}
