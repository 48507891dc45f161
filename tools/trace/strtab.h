/* Interned strings: each distinct string gets a small integer id, so that
 * millions of events can name their object, kind or mark by an int. */
#ifndef PCOLL_TRACE_STRTAB_H
#define PCOLL_TRACE_STRTAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct strtab {
    char **strings; /* by id, NUL-terminated copies */
    size_t *lengths;
    size_t count, cap;
    int32_t *slots; /* open addressing: id + 1, 0 = empty */
    size_t nslots;
} strtab_t;

void strtab_init(strtab_t *t);
void strtab_free(strtab_t *t);
/* The id of text[0..len) (bytes, may hold NUL), adding it if new. */
int32_t strtab_intern(strtab_t *t, const char *text, size_t len);
/* The id of a known string, or -1. */
int32_t strtab_find(const strtab_t *t, const char *text, size_t len);
const char *strtab_get(const strtab_t *t, int32_t id);

#endif
