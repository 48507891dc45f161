/*
 * The activation links of a partial object's messages: the activation
 * broadcast (algo/activation.h) among n participants -- every rank
 * (backend_msg.c), or the leaders of the nodes (internode.c) -- and the FIN
 * that ends a participant's traffic on its links.
 *
 *   participant i is rank ranks[i] (ranks NULL: rank i)
 *   an initiator sends round r's activation on every out-link; a
 *   participant activated on link h passes it on along links k > h
 *   (each link at most once per round: `used`)
 *
 *   close: FIN on every out-link; drained once a FIN came in on every
 *   in-link (MPI keeps one source's messages in order, so nothing of the
 *   object can still be on its way)
 */
#ifndef PC_PARTIAL_LINKS_H
#define PC_PARTIAL_LINKS_H

#include <stdint.h>

#include "backend.h"

typedef struct pc_links {
    int n, me;            /* participants; this rank's index */
    const int *ranks;     /* index -> rank (NULL: the index is the rank) */
    uint64_t fins_pending; /* in-links whose FIN has not come (mask) */
    int closed;           /* this participant sent its FINs */
    uint32_t epoch;       /* written into its messages (pc_obj_msg_t.epoch) */
} pc_links_t;

/* ranks must outlive the links. */
void pc_links_init(pc_links_t *l, int n, int me, const int *ranks);

/* The in-link a message from rank src came on, or -1 if src sends to
 * this participant on none. */
int pc_links_from(const pc_links_t *l, int src);

/* The out-links to pass an activation on after it came on link h (-1:
 * this participant initiates), as a mask. */
uint64_t pc_links_forward(const pc_links_t *l, int h);

/* Sends round's activation on the out-links in `mask`; PCOLL_SUCCESS, or
 * PCOLL_ERR_NOMEM (after env->failed). */
int pc_links_activate(const pc_links_t *l, const pc_backend_env_t *env, uint64_t round, int root, uint32_t flags,
                      const unsigned char *counted, uint64_t mask);

/* Sends FIN on every out-link; returns 1 if drained already (no in-links,
 * or every FIN came first). */
int pc_links_close(pc_links_t *l, const pc_backend_env_t *env);

/* A FIN came on in-link h; returns 1 if that drained the links (closed and
 * every FIN in). */
int pc_links_fin(pc_links_t *l, int h);

#endif
