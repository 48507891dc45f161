/* The load-imbalance specs of pcoll-train (tools/train/imbalance.c): every
 * kind parses to the delays it promises, slow: takes a list of ranks and an
 * optional step time, and bad specs fail with a message naming the field. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "imbalance.h"
#include "testutil.h"

static void bad(const char *spec, const char *words)
{
    imbalance_t imb;
    CHECK_MSG(imbalance_parse(spec, 1, &imb) != 0, "\"%s\" was accepted", spec);
    CHECK_MSG(strstr(tr_error(), words) != NULL, "\"%s\": message \"%.200s\" lacks \"%s\"", spec, tr_error(), words);
}

int main(void)
{
    imbalance_t imb;
    /* slow with a rank list (unsorted in, sorted out) and a step time */
    CHECK(imbalance_parse("slow:5,0,3:2:9", 1, &imb) == 0);
    CHECK(imb.kind == IMB_SLOW && imb.count == 3 && imb.slow[0] == 0 && imb.slow[1] == 3 && imb.slow[2] == 5);
    CHECK_MSG(strcmp(imb.spec, "slow:0,3,5:2:9") == 0, "canonical spec \"%.60s\"", imb.spec);
    for (int r = 0; r < 8; r++) {
        double d = imbalance_delay_ms(&imb, r, 8, 17, 1.5);
        double want = (r == 0 || r == 3 || r == 5) ? 9.0 : 0.0; /* (F - 1) x 9 ms, compute ignored */
        CHECK_MSG(fabs(d - want) < 1e-12, "rank %d sleeps %g, not %g", r, d, want);
    }
    CHECK(imbalance_check(&imb, 6) == 0);
    CHECK(imbalance_check(&imb, 5) != 0 && strstr(tr_error(), "rank 5 does not exist"));
    /* without a step time: (F - 1) x the rank's compute time */
    CHECK(imbalance_parse("slow:2:3", 1, &imb) == 0);
    CHECK(imb.count == 1 && imb.slow[0] == 2);
    CHECK(fabs(imbalance_delay_ms(&imb, 2, 4, 0, 1.5) - 3.0) < 1e-12);
    CHECK(imbalance_delay_ms(&imb, 1, 4, 0, 1.5) == 0.0);
    /* the other kinds still parse */
    CHECK(imbalance_parse("random:2:4", 1, &imb) == 0 && imb.kind == IMB_RANDOM && imb.count == 2);
    int chosen = 0;
    for (int r = 0; r < 8; r++) chosen += imbalance_delay_ms(&imb, r, 8, 5, 1.0) == 4.0;
    CHECK_MSG(chosen == 2, "random:2:4 delayed %d ranks", chosen);
    CHECK(imbalance_parse("none", 1, &imb) == 0 && imb.kind == IMB_NONE);
    CHECK(imbalance_parse("skew:0:3", 1, &imb) == 0 && imb.kind == IMB_SKEW);
    /* errors name the field */
    bad("slow:1,1:2", "listed twice");
    bad("slow:1,x:2", "RANK \"x\"");
    bad("slow:-1:2", "RANK");
    bad("slow:1:0.5", "FACTOR must be in 1..1000");
    bad("slow:1:1e9:5", "FACTOR must be in 1..1000");
    bad("slow:1:2:1e300", "MS must be at most");
    bad("slow:1, 2:3", "RANK \" 2\"");
    bad("slow:,1:2", "RANK \"\"");
    bad("slow:1,:2", "RANK \"\"");
    bad("slow:2000000:2", "0..1000000");
    bad("slow:1:2:x", "MS \"x\"");
    bad("slow:1:2:3:4", "too many fields");
    bad("random:1:2:3", "too many fields");
    bad("random:0:2", "K \"0\"");
    bad("slow", "expected none");
    bad("fast:1:2", "unknown kind");
    printf("test_imbalance: %ld checks passed\n", tu_checks_);
    return 0;
}
