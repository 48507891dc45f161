/*
 * Agreement of collective setup calls (pcoll_init, pcoll_partial_create):
 * every rank must call them with the same arguments and configuration, and
 * a failure at one rank must not leave the others waiting.  Each rank brings
 * its local status and the values that must agree; one MPI_Allgather later
 * every rank knows whether to go on, and if not, every rank fails with a
 * message naming what differs (or what failed) and at which ranks:
 *
 *   pcoll_partial_create: count differs between ranks: 4 at ranks 0, 2, 3; 8 at rank 1
 *   pcoll_init: PCOLL_SPIN_US is invalid at rank 2; every rank fails
 */
#ifndef PC_CORE_AGREE_H
#define PC_CORE_AGREE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pc_agree_field {
    const char *name;
    int64_t value;
    int must_agree; /* 0: carried only to name the field of a local failure */
    /* prints a value (NULL: as a number) */
    const char *(*text)(int64_t value, char *buf, size_t len);
} pc_agree_field_t;

/*
 * Collective over comm.  status: this rank's result so far (an error was
 * raised here already); bad: the field a local failure is about (-1: none).
 * Returns PCOLL_SUCCESS when every rank succeeded and the must_agree fields
 * are equal everywhere; else every rank returns an error: a rank that
 * failed its own status (its message stays), the others the first failing
 * rank's status, or differ_status when only the values differ.
 */
int pc_agree(MPI_Comm comm, const char *fn, int status, int bad, const pc_agree_field_t *fields, int nfields,
             int differ_status);

#endif
