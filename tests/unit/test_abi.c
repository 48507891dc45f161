/*
 * The public structs that callers allocate keep their sizes (pcoll.h,
 * "ABI"): a new field is taken from the reserved tail, so a caller compiled
 * against an older pcoll.h passes a struct as large as the library expects.
 * A change that grows one of them fails to compile here: take the field
 * from `reserved` instead.  At run time: the *_default functions and the
 * library's outputs leave the tail zero.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "pcoll.h"
#include "unit_check.h"

#define HOLDS(type, size)                                                                                              \
    _Static_assert(sizeof(type) == (size), #type " changed size: take new fields from its reserved tail");            \
    _Static_assert(offsetof(type, reserved) + sizeof(((type *)0)->reserved) == sizeof(type),                          \
                   #type ": the reserved tail must come last")
HOLDS(pcoll_stats_t, 96);
HOLDS(pcoll_progress_policy_t, 80);
HOLDS(pcoll_partial_config_t, 112);
HOLDS(pcoll_partial_info_t, 160);
HOLDS(pcoll_preduce_config_t, 120);
HOLDS(pcoll_preduce_info_t, 120);
HOLDS(pcoll_preduce_stats_t, 128);
HOLDS(pcoll_cost_model_t, 512);
HOLDS(pcoll_calibrate_config_t, 88);
HOLDS(pcoll_fusion_spec_t, 80);
HOLDS(pcoll_fusion_profile_t, 96);

static int zero_tail(const uint64_t *reserved)
{
    for (int i = 0; i < PCOLL_RESERVED; i++)
        if (reserved[i]) return 0;
    return 1;
}

int main(void)
{
    /* filled with garbage first: the library must zero the tails */
    pcoll_partial_config_t pc;
    memset(&pc, 0xab, sizeof pc);
    pcoll_partial_config_default(&pc);
    CHECK(zero_tail(pc.reserved));
    pcoll_preduce_config_t rc;
    memset(&rc, 0xab, sizeof rc);
    pcoll_preduce_config_default(&rc);
    CHECK(zero_tail(rc.reserved));
    pcoll_calibrate_config_t cc;
    memset(&cc, 0xab, sizeof cc);
    pcoll_calibrate_config_default(&cc);
    CHECK(zero_tail(cc.reserved));
    pcoll_fusion_spec_t fs;
    memset(&fs, 0xab, sizeof fs);
    CHECK(pcoll_fusion_spec_parse("fixed:4K", &fs) == PCOLL_SUCCESS && zero_tail(fs.reserved));
    pcoll_cost_model_t cm;
    memset(&cm, 0xab, sizeof cm);
    CHECK(pcoll_cost_model_linear(1, 0.5, &cm) == PCOLL_SUCCESS && zero_tail(cm.reserved));
    memset(&cm, 0xab, sizeof cm);
    double b[4] = {1000, 2000, 4000, 8000}, us[4] = {11, 12, 14, 18};
    CHECK(pcoll_cost_model_fit(b, us, 4, &cm) == PCOLL_SUCCESS && zero_tail(cm.reserved));
    printf("test_abi: 11 structs hold their sizes; %ld checks of their tails passed\n", checks);
    return 0;
}
