/* The specs of dynamic-group objects: pcoll_preduce_config_default and
 * pcoll_preduce_config_parse, and the policies' names. */
#include <stdio.h>
#include <string.h>

#include "../util/error.h"
#include "../util/parse.h"
#include "object.h"

/* ---- configuration ---- */

void pcoll_preduce_config_default(pcoll_preduce_config_t *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->policy = PCOLL_PREDUCE_FIFO;
    cfg->alpha = 0.5;
    cfg->frozen_avoidance = 1;
    cfg->slow_threshold = 4;
    cfg->seed = 1;
}

pc_gen_config_t pc_preduce_gen_config(const pcoll_preduce_config_t *c, int P, const pc_nodes_t *nodes)
{
    pc_gen_config_t gc;
    memset(&gc, 0, sizeof gc);
    gc.kind = c->policy == PCOLL_PREDUCE_FIFO            ? PC_GEN_FIFO
              : c->policy == PCOLL_PREDUCE_RIPPLES_RANDOM ? PC_GEN_RANDOM
                                                          : PC_GEN_SMART;
    gc.P = P;
    gc.group_size = c->group_size;
    gc.dynamic = c->dynamic_weights;
    gc.alpha = c->alpha;
    gc.avoid_frozen = c->frozen_avoidance;
    gc.window = c->window;
    gc.slow_threshold = c->slow_threshold;
    gc.nodes = c->inter_intra ? nodes : NULL;
    gc.seed = c->seed;
    return gc;
}

const char *pc_preduce_policy_name(pcoll_preduce_policy_t p)
{
    return p == PCOLL_PREDUCE_FIFO             ? "fifo"
           : p == PCOLL_PREDUCE_RIPPLES_RANDOM ? "ripples:random"
           : p == PCOLL_PREDUCE_RIPPLES_SMART  ? "ripples:smart"
           : p == PCOLL_PREDUCE_RIPPLES_STATIC ? "ripples:static"
                                               : "?";
}

const char *pcoll_preduce_policy_name(pcoll_preduce_policy_t policy)
{
    const char *name = pc_preduce_policy_name(policy);
    return strcmp(name, "?") == 0 ? NULL : name;
}

int pcoll_preduce_config_parse(const char *spec, pcoll_preduce_config_t *cfg)
{
    static const char *fn = "pcoll_preduce_config_parse";
    if (!spec || !cfg) return pc_error(PCOLL_ERR_NULL, fn, "%s is NULL", !spec ? "spec" : "cfg");
    char buf[256];
    if (strlen(spec) >= sizeof buf) return pc_error(PCOLL_ERR_ARG, fn, "spec \"%.40s...\" is too long", spec);
    strcpy(buf, spec);
    pcoll_preduce_config_t c = *cfg;
    char *save = NULL, *tok = strtok_r(buf, ":", &save);
    if (!tok) return pc_error(PCOLL_ERR_ARG, fn, "spec \"%s\" is empty", spec);
    int sized = 0; /* a number (group size) may follow the policy */
    if (strcmp(tok, "fifo") == 0) {
        c.policy = PCOLL_PREDUCE_FIFO;
        sized = 1;
    } else if (strcmp(tok, "ripples") == 0) {
        char *sub = strtok_r(NULL, ":", &save);
        if (!sub) return pc_error(PCOLL_ERR_ARG, fn, "spec \"%s\": ripples needs random, smart or static", spec);
        if (strcmp(sub, "random") == 0)
            c.policy = PCOLL_PREDUCE_RIPPLES_RANDOM, sized = 1;
        else if (strcmp(sub, "smart") == 0)
            c.policy = PCOLL_PREDUCE_RIPPLES_SMART, sized = 1;
        else if (strcmp(sub, "static") == 0)
            c.policy = PCOLL_PREDUCE_RIPPLES_STATIC;
        else
            return pc_error(PCOLL_ERR_ARG, fn, "spec \"%s\": \"%s\" is not random, smart or static", spec, sub);
    } else {
        return pc_error(PCOLL_ERR_ARG, fn, "spec \"%s\": \"%s\" is not fifo or ripples", spec, tok);
    }
    int first = 1;
    while ((tok = strtok_r(NULL, ":", &save))) {
        long v;
        double d;
        int fifo = c.policy == PCOLL_PREDUCE_FIFO, smart = c.policy == PCOLL_PREDUCE_RIPPLES_SMART;
        if (first && sized && pc_parse_long(tok, 1, 1 << 20, &v) == 0) {
            c.group_size = (int)v;
        } else if (fifo && strcmp(tok, "const") == 0) {
            c.dynamic_weights = 0;
        } else if (fifo && strcmp(tok, "dyn") == 0) {
            c.dynamic_weights = 1;
        } else if (fifo && strcmp(tok, "noavoid") == 0) {
            c.frozen_avoidance = 0;
        } else if (fifo && strncmp(tok, "window=", 7) == 0 && pc_parse_long(tok + 7, 1, 1 << 20, &v) == 0) {
            c.window = (int)v;
        } else if (fifo && strncmp(tok, "alpha=", 6) == 0 && pc_parse_double(tok + 6, &d) == 0 && d >= 0 && d < 1) {
            c.alpha = d;
        } else if (smart && strncmp(tok, "c=", 2) == 0 && pc_parse_long(tok + 2, 0, 1 << 30, &v) == 0) {
            c.slow_threshold = (int)v;
        } else if (smart && strcmp(tok, "ii") == 0) {
            c.inter_intra = 1;
        } else if (strncmp(tok, "ctl=", 4) == 0 && pc_parse_long(tok + 4, 0, 1 << 30, &v) == 0) {
            c.controller = (int)v;
        } else if (strncmp(tok, "seed=", 5) == 0 && pc_parse_long(tok + 5, 0, 0x7fffffffL, &v) == 0) {
            c.seed = (uint64_t)v;
        } else {
            return pc_error(PCOLL_ERR_ARG, fn, "spec \"%s\": \"%s\" is not an option of %s", spec, tok,
                            pc_preduce_policy_name(c.policy));
        }
        first = 0;
    }
    *cfg = c;
    return PCOLL_SUCCESS;
}

