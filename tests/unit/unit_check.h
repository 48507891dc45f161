/* CHECK for the unit tests (no MPI): print where and what failed, exit 1. */
#ifndef PCOLL_UNIT_CHECK_H
#define PCOLL_UNIT_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static long checks;
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(c)) {                                                                                \
            fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #c);                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
