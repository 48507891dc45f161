#include "survivors.h"

#include <stdlib.h>
#include <string.h>

#include "../util/bits.h"


size_t pc_survivors_bytes(int P) { return ((size_t)P + 7) / 8; }

static void begin_round(pc_survivors_t *s)
{
    size_t nb = pc_survivors_bytes(s->P);
    memset(s->heard, 0, nb);
    memset(s->left, 0, nb);
    s->differ = 0;
    s->nheard = 0;
    s->nothers = 0;
    for (int r = 0; r < s->P; r++)
        if (r != s->me && pc_bit_get(s->view, r)) s->nothers++;
}

int pc_survivors_init(pc_survivors_t *s, int P, int me)
{
    memset(s, 0, sizeof *s);
    size_t nb = pc_survivors_bytes(P);
    s->P = P;
    s->me = me;
    s->view = calloc(nb, 1);
    s->heard = calloc(nb, 1);
    s->left = calloc(nb, 1);
    if (!s->view || !s->heard || !s->left) {
        pc_survivors_destroy(s);
        return -1;
    }
    for (int r = 0; r < P; r++) pc_bit_set(s->view, r);
    begin_round(s);
    return 0;
}

void pc_survivors_destroy(pc_survivors_t *s)
{
    free(s->view);
    free(s->heard);
    free(s->left);
    s->view = s->heard = s->left = NULL;
}

int pc_survivors_hear(pc_survivors_t *s, int src, const unsigned char *view)
{
    if (src < 0 || src >= s->P || src == s->me || !pc_bit_get(s->view, src) || pc_bit_get(s->heard, src)) return 0;
    pc_bit_set(s->heard, src);
    s->nheard++;
    for (int r = 0; r < s->P; r++) {
        if (pc_bit_get(view, r) != pc_bit_get(s->view, r)) s->differ = 1;
        if (pc_bit_get(s->view, r) && !pc_bit_get(view, r)) pc_bit_set(s->left, r);
    }
    return 1;
}

int pc_survivors_complete(const pc_survivors_t *s) { return s->nheard == s->nothers; }

int pc_survivors_end_round(pc_survivors_t *s)
{
    if (s->round >= 1 && pc_survivors_complete(s) && !s->differ) return 1;
    for (int r = 0; r < s->P; r++)
        if (r != s->me && (!pc_bit_get(s->heard, r) || pc_bit_get(s->left, r))) pc_bit_clear(s->view, r);
    pc_bit_set(s->view, s->me); /* a view another rank heard without us is theirs to act on */
    s->round++;
    begin_round(s);
    return 0;
}

int pc_survivors_list(const pc_survivors_t *s, int *out)
{
    int n = 0;
    for (int r = 0; r < s->P; r++)
        if (pc_bit_get(s->view, r)) out[n++] = r;
    return n;
}
