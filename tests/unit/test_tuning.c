/*
 * The allreduce tuning table (algo/tuning.c) and its place in the choice
 * (algo/allreduce.c), without MPI: parsing (comments, blank lines, byte
 * units, "max", rows in any order), every malformed line refused with the
 * line and the word named, lookup by ranks, nodes and size (rows of other
 * rank or node counts never borrowed), the text round trip, the hash, and
 * pc_allreduce_choose: a call takes the table's message algorithm, a forced
 * one wins, rounds and buckets keep their rules, shm rows leave the rule.
 */
#include <stdio.h>
#include <string.h>

#include "algo/allreduce.h"
#include "algo/tuning.h"
#include "unit_check.h"

static pc_tuning_t t, u;
static char why[256];

static void parsing_and_lookup(void)
{
    const char *text = "# written by a test\n"
                       "\n"
                       "4 1 max shm      # the node-shared path for everything else\n"
                       "4 1 64K  direct\n"
                       "  8\t2  2048 direct\r\n"
                       "8 2 1M recdbl\n"
                       "8 2 max ring";
    CHECK(pc_tuning_parse(text, &t, why, sizeof why) == 0);
    CHECK(t.nrows == 5);
    CHECK(pc_tuning_lookup(&t, 4, 1, 8) == PCOLL_ALGO_DIRECT);
    CHECK(pc_tuning_lookup(&t, 4, 1, 65536) == PCOLL_ALGO_DIRECT);
    CHECK(pc_tuning_lookup(&t, 4, 1, 65537) == PCOLL_ALGO_SHM);
    CHECK(pc_tuning_lookup(&t, 4, 1, (size_t)1 << 40) == PCOLL_ALGO_SHM);
    CHECK(pc_tuning_lookup(&t, 8, 2, 0) == PCOLL_ALGO_DIRECT);
    CHECK(pc_tuning_lookup(&t, 8, 2, 2049) == PCOLL_ALGO_RECDBL);
    CHECK(pc_tuning_lookup(&t, 8, 2, (1 << 20) + 1) == PCOLL_ALGO_RING);
    /* never borrowed from other rank or node counts */
    CHECK(pc_tuning_lookup(&t, 4, 2, 8) == PCOLL_ALGO_AUTO);
    CHECK(pc_tuning_lookup(&t, 8, 1, 8) == PCOLL_ALGO_AUTO);
    CHECK(pc_tuning_lookup(&t, 5, 1, 8) == PCOLL_ALGO_AUTO);
    CHECK(pc_tuning_lookup(NULL, 4, 1, 8) == PCOLL_ALGO_AUTO);
    CHECK(pc_tuning_has(&t, 8, 2) && !pc_tuning_has(&t, 8, 1) && !pc_tuning_has(NULL, 4, 1));
    /* beyond a table's last size: the rule */
    CHECK(pc_tuning_parse("2 1 4K recdbl\n", &u, why, sizeof why) == 0);
    CHECK(pc_tuning_lookup(&u, 2, 1, 4097) == PCOLL_ALGO_AUTO);
    /* an empty table */
    CHECK(pc_tuning_parse("# nothing\n\n", &u, why, sizeof why) == 0 && u.nrows == 0);
    CHECK(pc_tuning_lookup(&u, 2, 1, 8) == PCOLL_ALGO_AUTO);
}

static void errors(void)
{
    struct {
        const char *text, *says;
    } bad[] = {
        {"4 1 64K\n", "line 1: 3 words"},
        {"# ok\n4 1 64K shm extra\n", "line 2: 5 words"},
        {"1 1 64K shm\n", "ranks \"1\""},
        {"4 0 64K shm\n", "nodes \"0\""},
        {"4 5 64K shm\n", "nodes \"5\""},
        {"4 1 64Q shm\n", "up-to-bytes \"64Q\""},
        {"4 1 -1 shm\n", "up-to-bytes \"-1\""},
        {"4 1 64K fast\n", "\"fast\" is not an algorithm"},
        {"4 1 64K auto\n", "\"auto\" is not an algorithm"},
        {"4 1 64K shm\n4 1 65536 direct\n", "two rows for 4 ranks, 1 nodes, up to 65536"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        CHECK(pc_tuning_parse(bad[i].text, &u, why, sizeof why) == -1);
        if (!strstr(why, bad[i].says)) fprintf(stderr, "case %zu: \"%s\"\n", i, why);
        CHECK(strstr(why, bad[i].says) != NULL);
    }
    char longline[400];
    memset(longline, ' ', sizeof longline - 1);
    longline[sizeof longline - 1] = '\0';
    CHECK(pc_tuning_parse(longline, &u, why, sizeof why) == -1 && strstr(why, "line 1: longer than"));
    static char many[PC_TUNING_MAX_ROWS * 24 + 64];
    size_t at = 0;
    for (int i = 0; i <= PC_TUNING_MAX_ROWS; i++) at += (size_t)sprintf(many + at, "4 1 %d shm\n", i + 1);
    CHECK(pc_tuning_parse(many, &u, why, sizeof why) == -1 && strstr(why, "more than"));
}

static void text_and_hash(void)
{
    char buf[4096];
    size_t need = pc_tuning_format(&t, buf, sizeof buf);
    CHECK(need < sizeof buf && strstr(buf, "8 2 max ring\n") && strstr(buf, "4 1 65536 direct\n"));
    CHECK(pc_tuning_parse(buf, &u, why, sizeof why) == 0 && u.nrows == t.nrows);
    CHECK(memcmp(&u.rows, &t.rows, sizeof t.rows[0] * (size_t)t.nrows) == 0);
    CHECK(pc_tuning_hash(&u) == pc_tuning_hash(&t));
    char small[10];
    CHECK(pc_tuning_format(&t, small, sizeof small) == need); /* as snprintf: the length it needed */
    /* one row different: another hash */
    CHECK(pc_tuning_parse("2 1 4K recdbl\n", &u, why, sizeof why) == 0);
    uint64_t h = pc_tuning_hash(&u);
    CHECK(pc_tuning_parse("2 1 4K ring\n", &u, why, sizeof why) == 0 && pc_tuning_hash(&u) != h);
    CHECK(pc_tuning_parse("2 1 8K recdbl\n", &u, why, sizeof why) == 0 && pc_tuning_hash(&u) != h);
}

static void the_choice(void)
{
    size_t direct = 32768, small = 8192;
    pcoll_allreduce_algo_t A = PCOLL_ALGO_AUTO;
    /* a call takes the table's message algorithm */
    CHECK(pc_allreduce_choose(PC_USE_CALL, A, PCOLL_ALGO_RING, direct, small, 8, 8) == PCOLL_ALGO_RING);
    CHECK(pc_allreduce_choose(PC_USE_CALL, A, A, direct, small, 8, 8) == PCOLL_ALGO_DIRECT);
    /* shm rows leave the message algorithm to the rule */
    CHECK(pc_allreduce_choose(PC_USE_CALL, A, PCOLL_ALGO_SHM, direct, small, 8, 8) == PCOLL_ALGO_DIRECT);
    /* forced wins */
    CHECK(pc_allreduce_choose(PC_USE_CALL, PCOLL_ALGO_RECDBL, PCOLL_ALGO_RING, direct, small, 8, 8) ==
          PCOLL_ALGO_RECDBL);
    /* rounds and buckets keep their rules */
    CHECK(pc_allreduce_choose(PC_USE_ROUND, A, PCOLL_ALGO_DIRECT, direct, small, 8, 8) == PCOLL_ALGO_RECDBL);
    CHECK(pc_allreduce_choose(PC_USE_TREE, A, PCOLL_ALGO_RING, direct, small, 1 << 20, 8) ==
          PCOLL_ALGO_RABENSEIFNER);
}

int main(void)
{
    parsing_and_lookup();
    errors();
    text_and_hash();
    the_choice();
    printf("test_tuning: %ld checks passed\n", checks);
    return 0;
}
