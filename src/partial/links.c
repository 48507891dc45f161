/* Activation links and FIN among a partial object's participants: see links.h. */
#include "links.h"

#include <stdlib.h>
#include <string.h>

#include "../algo/activation.h"

static uint64_t all_links(int n)
{
    int d = pc_act_ndims(n);
    return d >= 64 ? ~0ULL : (1ULL << d) - 1;
}

static int rank_of(const pc_links_t *l, int idx) { return l->ranks ? l->ranks[idx] : idx; }

void pc_links_init(pc_links_t *l, int n, int me, const int *ranks)
{
    l->n = n;
    l->me = me;
    l->ranks = ranks;
    l->fins_pending = all_links(n);
    l->closed = 0;
    l->epoch = 0;
}

int pc_links_from(const pc_links_t *l, int src)
{
    int idx = src;
    if (l->ranks) {
        idx = -1;
        for (int i = 0; i < l->n && idx < 0; i++)
            if (l->ranks[i] == src) idx = i;
        if (idx < 0) return -1;
    }
    return pc_act_dim_from(l->n, l->me, idx);
}

uint64_t pc_links_forward(const pc_links_t *l, int h) { return pc_act_forward_mask(l->n, h); }

int pc_links_activate(const pc_links_t *l, const pc_backend_env_t *env, uint64_t round, int root, uint32_t flags,
                      const unsigned char *counted, uint64_t mask)
{
    if (!mask) return PCOLL_SUCCESS;
    size_t bytes = sizeof(pc_obj_msg_t) + (counted ? env->bitmap_bytes : 0);
    _Alignas(pc_obj_msg_t) unsigned char stack[sizeof(pc_obj_msg_t) + 64]; /* P <= 512: no allocation */
    pc_obj_msg_t *out = bytes <= sizeof stack ? (pc_obj_msg_t *)stack : malloc(bytes);
    if (!out) {
        env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory to forward an activation");
        return PCOLL_ERR_NOMEM;
    }
    pc_obj_msg_fill(out, PC_MSG_ACTIVATE, round, root, flags, l->epoch, counted, env->bitmap_bytes);
    for (int k = 0; mask; k++, mask >>= 1)
        if (mask & 1) env->send(env->owner, rank_of(l, pc_act_peer(l->n, l->me, k)), out, bytes);
    if ((unsigned char *)out != stack) free(out);
    return PCOLL_SUCCESS;
}

int pc_links_close(pc_links_t *l, const pc_backend_env_t *env)
{
    pc_obj_msg_t fin;
    pc_obj_msg_fill(&fin, PC_MSG_FIN, 0, env->me, 0, l->epoch, NULL, 0);
    l->closed = 1;
    for (int k = 0; k < pc_act_ndims(l->n); k++)
        env->send(env->owner, rank_of(l, pc_act_peer(l->n, l->me, k)), &fin, sizeof fin);
    return l->fins_pending == 0;
}

int pc_links_fin(pc_links_t *l, int h)
{
    l->fins_pending &= ~(1ULL << h);
    return l->closed && l->fins_pending == 0;
}
