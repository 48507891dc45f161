/* String interning with an open-addressing hash table (FNV-1a). */
#include "strtab.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static uint64_t hash_bytes(const char *text, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)text[i];
        h *= 1099511628211ull;
    }
    return h;
}

void strtab_init(strtab_t *t)
{
    memset(t, 0, sizeof *t);
}

void strtab_free(strtab_t *t)
{
    for (size_t i = 0; i < t->count; i++) free(t->strings[i]);
    free(t->strings);
    free(t->lengths);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* the slot that holds text, or the empty one where it would go */
static size_t find_slot(const strtab_t *t, const char *text, size_t len)
{
    size_t mask = t->nslots - 1;
    size_t at = (size_t)hash_bytes(text, len) & mask;
    for (;;) {
        int32_t id = t->slots[at];
        if (id == 0) return at;
        if (t->lengths[id - 1] == len && memcmp(t->strings[id - 1], text, len) == 0) return at;
        at = (at + 1) & mask;
    }
}

static void rehash(strtab_t *t)
{
    free(t->slots);
    t->nslots = t->nslots ? t->nslots * 2 : 64;
    t->slots = xcalloc(t->nslots, sizeof *t->slots);
    for (size_t i = 0; i < t->count; i++) t->slots[find_slot(t, t->strings[i], t->lengths[i])] = (int32_t)i + 1;
}

int32_t strtab_find(const strtab_t *t, const char *text, size_t len)
{
    if (t->nslots == 0) return -1;
    return t->slots[find_slot(t, text, len)] - 1;
}

int32_t strtab_intern(strtab_t *t, const char *text, size_t len)
{
    if ((t->count + 1) * 2 > t->nslots) rehash(t);
    size_t at = find_slot(t, text, len);
    if (t->slots[at]) return t->slots[at] - 1;
    size_t cap_s = t->cap, cap_l = t->cap;
    GROW(t->strings, cap_s, t->count + 1);
    GROW(t->lengths, cap_l, t->count + 1);
    t->cap = cap_s;
    char *copy = xmalloc(len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    t->strings[t->count] = copy;
    t->lengths[t->count] = len;
    t->slots[at] = (int32_t)++t->count;
    return (int32_t)t->count - 1;
}

const char *strtab_get(const strtab_t *t, int32_t id)
{
    return id >= 0 && (size_t)id < t->count ? t->strings[id] : "";
}
