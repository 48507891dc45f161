/*
 * The node leaders' half of node-shared rounds that span several nodes
 * (backend_shm.c): inside a node, parts are taken and summed in shared
 * memory by whoever comes; between nodes, only each node's leader (its
 * smallest rank) sends and receives.
 *
 *   node A (leader a)                      node B (leader b)
 *   -----------------                      -----------------
 *   a rank of A activates r in A's     -->  b: ACTIVATE r (links among the
 *   record; a passes it on                  leaders, links.h): b writes r
 *                                           in B's record, passes it on
 *   A's parts summed in shared memory       B's parts summed likewise
 *   a: allreduce of the node sums     <-->  b: the same allreduce, in place
 *      in place (round r's tags)               in B's result slot
 *   r done at A: A's ranks copy it          r done at B
 *
 * A round activated at a node by one of its ranks is passed on by the
 * leader as by an initiator (every link); one that came on link h, on the
 * links above h, also after the node activated it otherwise.  A round done
 * at a node was activated at every node (its exchange needed every node's
 * sum): later activations of it are dropped.
 *
 * Everything here runs on the leader's token holder.
 */
#ifndef PC_PARTIAL_INTERNODE_H
#define PC_PARTIAL_INTERNODE_H

#include <stdint.h>

#include "backend.h"

typedef struct pc_internode pc_internode_t;

/* What the node-shared backend does when the leaders tell it something. */
typedef struct pc_internode_hooks {
    void *arg;
    /* round r's activation came from another node on link h: activate it
     * in this node's record (returns as backend ops->activate) */
    int (*activate)(void *arg, uint64_t r, int root, uint32_t flags, const unsigned char *counted, int h);
    /* round r's node sums are exchanged: it is done here */
    void (*exchanged)(void *arg, uint64_t r);
    /* after pc_internode_close: every other leader's FIN came */
    void (*drained)(void *arg);
    /* a run given up has finished: `out`, its output (lent, not handed
     * over: pc_internode_give_up), is written no more */
    void (*released)(void *arg, void *out);
} pc_internode_hooks_t;

/* leaders: the node leaders' ranks in node order (n >= 2), this rank
 * leaders[node]; kept, not copied.  inplace: the exchanges sum in place
 * (else from the node sum into another buffer).  forced, small_bytes: the allreduce
 * algorithm setting and threshold (algo/allreduce.h). */
int pc_internode_create(const pc_backend_env_t *env, const int *leaders, int n, int node,
                        pcoll_allreduce_algo_t forced, size_t small_bytes, int inplace,
                        const pc_internode_hooks_t *hooks, pc_internode_t **out);
void pc_internode_destroy(pc_internode_t *in);

/* Round r was activated at this node by one of its ranks (root, flags and
 * the parked bitmap from the node's record): pass it to the other nodes. */
int pc_internode_initiated(pc_internode_t *in, uint64_t r, int root, uint32_t flags, const unsigned char *counted);

/* Starts exchanging round r's node sum (count + PC_TRAILER elements) for
 * the total, written into out (inplace: out is sum; else sum is only
 * read); hooks.exchanged follows.  At most
 * one round at a time: returns 0 if one runs (or the exchange was given
 * up), 1 if started, -1 if it failed (env.failed). */
int pc_internode_exchange(pc_internode_t *in, uint64_t r, const void *sum, void *out);
/* 1 while an exchange runs; the round it exchanges. */
int pc_internode_running(const pc_internode_t *in);
uint64_t pc_internode_running_round(const pc_internode_t *in);
/* The leaders (ranks) the running exchange waits for, into out (room for
 * max); their number. */
int pc_internode_waiting_on(const pc_internode_t *in, int *out, int max);
/* The node sums go another way from round `from` on (nodesums.h): the
 * running exchange, if any, is given up (it may wait for a stopped leader
 * for good), and what the other leaders' runs of rounds from - 1 .. from
 * + 2 still send here is dropped (until close, or until an exchange after
 * pc_internode_resume would take their tags again).  No exchange runs
 * until then.  The run's schedule goes once its sends are received (or
 * stays until the process ends), and so does its output `out` if owned
 * (malloc'd: handed over), else hooks.released then tells of it.  Returns
 * 1 if a run was given up. */
int pc_internode_give_up(pc_internode_t *in, uint64_t from, void *out, int owned);
/* The node sums go by the exchange again from round `from` on (every
 * leader resumes before the same round): a new schedule if the one given
 * up went with its run. */
int pc_internode_resume(pc_internode_t *in, uint64_t from);

/* An ACTIVATE or FIN from another leader; done: rounds done at this node. */
void pc_internode_message(pc_internode_t *in, int src, const void *msg, size_t bytes, uint64_t done);

/* The last round is done here: FIN to the other leaders; hooks.drained
 * once theirs came. */
void pc_internode_close(pc_internode_t *in);

/* Stall report: the leaders whose node sum of round r has not come. */
void pc_internode_describe(pc_internode_t *in, uint64_t r, pc_stall_probe_t *p);

#endif
