/*
 * The node sums node to node, the way across nodes that a stopped node
 * leader cannot hold up (PCOLL_NODE_DEPUTY=1 with PCOLL_EXCLUDE_MS;
 * backend_shm.c; PCOLL_NODE_DEPUTY=2: from the first round).  Rounds add the
 * node sums up by the leaders' allreduce (internode.h) until a node's
 * deputy (its second rank) finds its leader silent and takes its round
 * over, or a node hears from one that did; from then on, until the
 * nodes go back (below), the node sums are added up node to node, in
 * chunks, by each node's finisher of the round (its leader, or the deputy
 * standing in): the round's data is cut in one chunk per node; each
 * finisher sends every other node's finisher that node's chunk of its node
 * sum (its part), adds the parts of its own chunk that come up in node
 * order (the same bits whoever does it), sends that chunk of the total to
 * every other node's finisher, and has the total once each node's chunk
 * came.  Each node sends and receives (n - 1) / n of the data twice, as
 * in the leaders' allreduce (it receives parts three times over when its
 * parts go to both its candidates: below).
 *
 * Nobody waits for a rank of another node by name.  A node's finisher is
 * its leader unless its deputy stands in, so a part goes to the node's
 * leader, and to its deputy too (the node's two smallest ranks are its
 * candidates) if the deputy sent a part or chunk of this round or the one
 * before, or if the sender did not finish the round before itself (it
 * stands in, or takes over: its part reaches whoever finishes the round
 * there).  A chunk goes to each candidate of the node a part of the round
 * came from.  A finisher that hears a part of round r from a rank it did
 * not send its own part or chunk of r to sends them again
 * (pc_nodesums_resend), or, done with r, its total.  So a deputy finishes
 * its node's rounds while its leader is stopped (pc_policy_finisher_step),
 * and a node that had the round by the allreduce (its leader's run ended
 * before the others' stopped) answers a part with its total.
 *
 *   finisher of node x, round r               finisher of node y
 *   ---------------------------               ------------------
 *   copy x's sum; NODESUM(r, PART, record)
 *   then y's chunk of it, to y's  -------->   keep the first part per node;
 *   leader (and deputy: above)                activate r here if it is not
 *                                             (the record travels with it)
 *                                  <--------  all parts of y's chunk here:
 *   keep; the other nodes' too                add up in node order, then
 *                                             NODESUM(r, CHUNK) to the
 *   x's chunk likewise; every chunk           ranks the parts came from
 *   here: the total; r done at x              y had r by the allreduce:
 *                                             NODESUM(r, TOTAL), the total
 *
 * Going back to the allreduce: node 0's leader, finishing round r after
 * a run of rounds whose every node sum came from its node's leader
 * (pc_nodesums_by_leaders: no deputy stands in), decides that the node
 * sums go back to the leaders' allreduce from round b = r + 2 on, and its
 * parts of r + 1 say so (NODESUM's back field; every node needs node 0's
 * part of r + 1 before it can sum r + 2).  A node whose leader is silent
 * again goes node to node again, and so does every node that hears its
 * part of a round it has not done (as above).
 *
 * A candidate keeps the parts and chunks it receives until its node is
 * done with the round, whoever finishes it there; one that takes a round
 * over gets what it lacks as the answers to its own part.
 * Rounds in flight at a candidate: done, done + 1 and done + 2 (a node
 * sums r + 2 only after r + 1 is done there, which needed this node's part
 * of r + 1).
 *
 * close: XFIN to every other candidate after the last round; drained once
 * an XFIN came from each and every receive posted is complete (MPI keeps a
 * sender's messages in order: its NODESUMs come before its XFIN).
 *
 * Everything here runs on the token holder.
 */
#ifndef PC_PARTIAL_NODESUMS_H
#define PC_PARTIAL_NODESUMS_H

#include <stdint.h>

#include "../util/nodes.h"
#include "backend.h"

typedef struct pc_nodesums pc_nodesums_t;

typedef struct pc_nodesums_hooks {
    void *arg;
    void (*arrived)(void *arg); /* a sum or a record came: look again */
    /* rank src sent its node's sum of round r (the backend answers with
     * the total if its node had round r by the leaders' allreduce) */
    void (*heard)(void *arg, int src, uint64_t r);
    /* a sum or total said: back to the leaders' allreduce from round b on */
    void (*back)(void *arg, uint64_t b);
    void (*drained)(void *arg); /* after pc_nodesums_close: no traffic left */
} pc_nodesums_hooks_t;

/* The candidates of a node: its two smallest ranks (one if it has one). */
int pc_nodesums_candidates(const pc_nodes_t *nodes, int node, int out[2]);

/* At a candidate (this rank is one of its node's); nodes is kept. */
int pc_nodesums_create(const pc_backend_env_t *env, const pc_nodes_t *nodes, const pc_nodesums_hooks_t *hooks,
                       pc_nodesums_t **out);
void pc_nodesums_destroy(pc_nodesums_t *x);

/* Sends this node's sum of round r (bytes of env, copied first) with the
 * round's record: to every other node's finisher its part (fresh: this rank
 * did not finish round r - 1 node to node); back: the round from
 * which the node sums go back to the leaders' allreduce (0: not decided;
 * sent along when > r). */
int pc_nodesums_send(pc_nodesums_t *x, uint64_t r, int fresh, int root, uint32_t flags,
                     const unsigned char *counted, const void *sum, uint64_t back);
/* Once every other node's part of this node's chunk of round r is here
 * (or the total), adds them and sum's up (in node order) and sends that
 * chunk of the total to every other node's finisher; 1 once done. */
int pc_nodesums_reduce(pc_nodesums_t *x, uint64_t r, const void *sum, uint64_t back);
/* 1 if rank (another node's candidate) may lack this node's part or chunk
 * of round r from this rank: it did not send them, or sent them to the
 * node's other candidate only. */
int pc_nodesums_lacks(const pc_nodesums_t *x, uint64_t r, int rank);
/* Sends this node's part and chunk of round r again, to rank, where they
 * went to rank's node's other candidate only (rank finishes r there now:
 * it sent its own part). */
int pc_nodesums_resend(pc_nodesums_t *x, uint64_t r, int rank, int root, uint32_t flags, const unsigned char *counted,
                       const void *sum, uint64_t back);
/* Sends round r's total to rank, a candidate of another node that
 * finishes r there (it sent its node's sum) and may lack this node's sum
 * (pc_nodesums_lacks; or its node had r by the leaders' allreduce): only
 * that one, which waits for it (the other may have drained by the time it
 * would come, at the object's end). */
int pc_nodesums_send_total(pc_nodesums_t *x, uint64_t r, int rank, const void *total, uint64_t back);
/* 1 once every chunk of round r's total is here, or the total. */
int pc_nodesums_ready(const pc_nodesums_t *x, uint64_t r);
/* sum = round r's total. */
void pc_nodesums_add(const pc_nodesums_t *x, uint64_t r, void *sum);
/* 1 if every other node's part of round r here came from its leader (its
 * smallest rank; not a total): no deputy stands in. */
int pc_nodesums_by_leaders(const pc_nodesums_t *x, uint64_t r);
/* The record of round r, if a sum of it came (0: none). */
int pc_nodesums_record(const pc_nodesums_t *x, uint64_t r, int *root, uint32_t *flags, const unsigned char **counted);
/* Rounds < done are done at this node: their sums are let go. */
void pc_nodesums_forget(pc_nodesums_t *x, uint64_t done);
/* A NODESUM or XFIN from rank src. */
void pc_nodesums_message(pc_nodesums_t *x, int src, const void *msg, size_t bytes);
/* The last round is done here: XFIN to every other candidate; returns 1
 * if drained already, else hooks.drained follows. */
int pc_nodesums_close(pc_nodesums_t *x);
/* Stall report: the nodes whose sum of round r has not come here. */
void pc_nodesums_describe(const pc_nodesums_t *x, uint64_t r, pc_stall_probe_t *p);

#endif
