/*
 * The rules of partial rounds, pure: functions from what happened to what
 * to do, which send nothing and know nothing of MPI, threads or buffers
 * (the driver acts on them; unit tests feed them event sequences).
 *
 *   a call at rank x (partial.c)            the leader (driver.c at PC_LEADER)
 *   ----------------------------            ----------------------------------
 *   pc_policy_call_step: which step         pc_leader_arrival: WAIT / FLUSH /
 *     follows the contribution                FREE from rank x
 *   pc_policy_arrival: start round r         pc_leader_activated: round r runs
 *     itself, or tell the leader            pc_leader_decide: activate the next
 *                                             round now? (root, flags, the
 *                                             ranks counted as parked)
 *
 * Kinds: SOLO (any arriving rank starts the round), MAJORITY (initiator(r),
 * a seeded permutation of the ranks per block of P rounds, starts it; the
 * leader stands in when the initiator is blocked elsewhere), QUORUM(q) (the
 * leader starts it once q ranks arrived), GROUP(S) (started as SOLO; its
 * data phase runs inside the groups of groups/rotation.h).  Every
 * sync_every-th round and every flush or free round waits for all ranks
 * and moves data among all of them.  While the leader is silent, the other
 * ranks count for it: each keeps a pc_leader_t of the arrivals it knows of
 * (its own; QUORUM: those sent to every rank) and may start a MAJORITY or
 * QUORUM round on its behalf (pc_leader_decide_stand_in).
 *
 * The leader may hear of a round from an arrival before its activation
 * reaches it: under GROUP a rank completes round r with its group alone and
 * may arrive for r + 1 while r's activation is still on its way to the
 * leader.  Arrivals therefore carry what their sender knows (a WAIT for r:
 * rounds < r are activated; FLUSH, FREE: the sender's count of activated
 * rounds), and the leader decides nothing about round `next` while an
 * arrival showed that `next` is already activated somewhere.
 */
#ifndef PC_PARTIAL_POLICY_H
#define PC_PARTIAL_POLICY_H

#include <stdint.h>

#include "pcoll.h"

#define PC_LEADER 0 /* the rank that counts arrivals (quorum, synchronous rounds, flush, free) */

/* round flags (carried with activations) */
enum { PC_ROUND_SYNC = 1, PC_ROUND_FLUSH = 2, PC_ROUND_FREE = 4, PC_ROUND_STANDIN = 8 };

typedef struct pc_policy {
    pcoll_partial_kind_t kind;
    int P;
    int quorum;
    int group_size; /* GROUP: S >= 2 */
    int sync_every;
    uint64_t seed;
} pc_policy_t;

/* The rules of an object of P ranks with this configuration (GROUP's size:
 * cfg's, or pc_rot_default_size(P)): the real objects' and the simulator's. */
pc_policy_t pc_policy_of(const pcoll_partial_config_t *cfg, int P);

/* initiator(r) of MAJORITY: position r mod P of a permutation of the ranks
 * drawn for block r / P from the seed.  scratch: P ints. */
int pc_policy_initiator(const pc_policy_t *pol, uint64_t round, int *scratch);

/* 1 if round r is synchronous (every rank must arrive): every
 * sync_every-th. */
int pc_policy_is_sync(const pc_policy_t *pol, uint64_t round);

/* The ranks whose data round r (activated with `flags`) sums at rank me,
 * increasing, into members (room for P ints): every rank, unless a GROUP
 * round that is not synchronous: then me's group of the round.  Returns
 * their number. */
int pc_policy_members(const pc_policy_t *pol, uint64_t round, uint32_t flags, int me, int *members);
/* 1 if round r (activated with `flags`) sums inside groups, so that a rank
 * can complete it before every rank has been activated for it (a GROUP
 * round that is not synchronous and whose groups are smaller than P); 0 if
 * completing it needed every rank's part. */
int pc_policy_in_groups(const pc_policy_t *pol, uint64_t round, uint32_t flags);
/* "solo", "majority", "quorum", "group" ("?" for another value): the one
 * table of the kinds' names. */
const char *pc_policy_kind_name(int kind);
/* Rounds that can be activated and not complete at one rank at once: 2,
 * or for GROUP the rotation's depth + 2 (a rank completes round r only
 * after every rank completed round r - depth). */
int pc_policy_window(const pc_policy_t *pol);

/* The step a call takes after adding its contribution (docs/design.md,
 * section 5):
 *   PC_STEP_RESULTS  rounds completed (or done, not yet collected) since
 *                    the previous call: return them, the contribution waits
 *   PC_STEP_RUNNING  a round that took pending before the contribution was
 *                    added is not complete here: wait for it
 *   PC_STEP_NEXT     the next round takes the contribution: arrive for it
 * results: rounds are waiting; completed: rounds completed here; taken: the
 * round that takes this call's contribution. */
typedef enum { PC_STEP_RESULTS = 2, PC_STEP_RUNNING = 3, PC_STEP_NEXT = 4 } pc_call_step_t;
pc_call_step_t pc_policy_call_step(int results, uint64_t completed, uint64_t taken);

/* What a rank whose application arrived for round r does (r not activated):
 * PC_ARRIVE_START it starts r (*root = me); PC_ARRIVE_LEADER it tells the
 * leader (quorum, synchronous rounds, a MAJORITY round of another
 * initiator: the leader stands in for a parked initiator). */
typedef enum { PC_ARRIVE_START = 1, PC_ARRIVE_LEADER = 2 } pc_arrival_t;
pc_arrival_t pc_policy_arrival(const pc_policy_t *pol, int me, uint64_t round, int *scratch);

/* Whether a rank other than the leader whose application waits for round r
 * (not activated) counts arrivals itself once the leader is silent
 * (pc_leader_decide_stand_in): a MAJORITY or QUORUM round, not synchronous
 * (those wait for every rank, the leader too).  For QUORUM it then sends
 * its arrival to every rank (pc_policy_shares_arrivals), since any of them
 * may count the quorum. */
int pc_policy_counts_without_leader(const pc_policy_t *pol, int me, uint64_t round);
/* The MAJORITY initiator of round r that a rank `me`, whose application
 * waits for r (not activated), starts r for once it finds it silent
 * (PC_ROUND_STANDIN, the round named after the initiator), as the leader
 * does; -1 if none: another kind, a synchronous round, or `me` or the
 * leader initiates r (the leader's silence is counted for:
 * pc_leader_decide_stand_in).  The leader sees only some ranks' silence (in
 * node-shared memory, its own node's): whoever sees it starts the round. */
int pc_policy_initiator_to_cover(const pc_policy_t *pol, int me, uint64_t round, int *scratch);
/* Who finishes a node's round across nodes (backend_shm.c, nodesums.h):
 * one rank per node and round, the finisher, sends the node's sum to the
 * other nodes and writes the total.  The node leader claims each round;
 * its deputy (the node's second rank) only once the leader is known silent,
 * and either takes a claim over from a holder known silent, unless the
 * holder has begun writing the total.  role: 0 leader, 1 deputy; holder:
 * -1 unclaimed, else the holder's role. */
enum { PC_FINISH_WAIT = 0, PC_FINISH_CLAIM = 1, PC_FINISH_TAKE_OVER = 2, PC_FINISH_GO_ON = 3 };
int pc_policy_finisher_step(int role, int holder, int holder_writing, int leader_silent, int holder_silent);
/* 1 if a decision needs other ranks' arrivals (QUORUM); 0 if a rank's own
 * suffices (MAJORITY: the initiator's state decides). */
int pc_policy_shares_arrivals(const pc_policy_t *pol);

/* ---- the leader ---- */

enum { PC_ARR_WAIT = 1, PC_ARR_FLUSH = 2, PC_ARR_FREE = 3 };

typedef struct pc_leader {
    pc_policy_t pol;
    uint64_t next;           /* the first round not known activated here */
    uint64_t seen;           /* rounds < seen are activated somewhere (arrivals said) */
    uint64_t *wait_for;      /* rank waits for round wait_for - 1 (0: no) */
    unsigned char *waiting;  /* rank waits for round `next` */
    unsigned char *flushing; /* rank is in a flush */
    unsigned char *freeing;  /* rank frees the object */
    int nwaiting, nflushing, nfreeing;
    unsigned char *counted;  /* bitmap of the last decision */
    int *scratch;            /* P ints */
} pc_leader_t;

int pc_leader_init(pc_leader_t *l, const pc_policy_t *pol); /* PCOLL_SUCCESS or PCOLL_ERR_NOMEM */
void pc_leader_destroy(pc_leader_t *l);

/* Rank `rank` arrived (PC_ARR_*); round: WAIT's round, or for FLUSH and
 * FREE the rounds the rank knew activated.  A WAIT for a round after `next`
 * is kept until `next` reaches it.  Returns PCOLL_SUCCESS, or
 * PCOLL_ERR_INTERNAL if the event is impossible (no such rank or type). */
int pc_leader_arrival(pc_leader_t *l, int type, int rank, uint64_t round);
/* Rank `rank` no longer waits for a round (it flushes or frees now): its
 * WAIT is forgotten (a rank's own counter, pc_leader_decide_stand_in). */
void pc_leader_withdraw(pc_leader_t *l, int rank);
/* Round `round` is activated (by anyone), with these flags. */
void pc_leader_activated(pc_leader_t *l, uint64_t round, uint32_t flags);

/* Whether rank r is blocked in a pcoll call about something else (then it
 * counts as arrived: its data is as fresh as it gets until it returns). */
typedef int (*pc_elsewhere_fn)(void *arg, int rank);

typedef struct pc_decision {
    uint64_t round;
    int root;
    uint32_t flags;
    const unsigned char *counted; /* ranks counted only as parked, or NULL */
} pc_decision_t;

/* Should the leader (rank me) activate round `next` now?  Never while an
 * arrival showed `next` activated elsewhere (next < seen).  1 and d filled:
 *   all P freeing:                 the last round (FREE | SYNC)
 *   all P flushing:                a flush round (FLUSH | SYNC)
 *   else, with a rank waiting:
 *     `next` synchronous:          when all P arrived
 *     QUORUM(q):                   when q arrived
 *     MAJORITY:                    when initiator(next) is parked (STANDIN,
 *                                  on its behalf: the round names it)
 * A rank arrived: waiting, flushing, freeing or blocked elsewhere.  Ranks
 * counted only because blocked elsewhere are listed in d->counted. */
int pc_leader_decide(pc_leader_t *l, int me, pc_elsewhere_fn elsewhere, void *arg, pc_decision_t *d);
/* The same, where silent(arg, r) says rank r's progress engine has not
 * answered for PCOLL_EXCLUDE_MS (NULL: none is): the leader stands in for a
 * silent MAJORITY initiator too.  A silent rank never counts as arrived:
 * synchronous rounds still wait for it, and QUORUM counts the ranks that
 * did arrive. */
int pc_leader_decide_silent(pc_leader_t *l, int me, pc_elsewhere_fn elsewhere, pc_elsewhere_fn silent, void *arg,
                            pc_decision_t *d);

/* 1 if some rank waits for round `next` (the leader's decision may change
 * when a rank becomes blocked elsewhere). */
int pc_leader_has_waiters(const pc_leader_t *l);

/* A rank other than the leader, whose counter l holds its own arrival and
 * those that ranks sent it after finding the leader silent: should it start
 * round `next` on the leader's behalf?  As pc_leader_decide_silent at the
 * leader (QUORUM: q arrived; MAJORITY: the initiator is silent, which covers
 * the leader's own rounds), never for a synchronous, flush or free round;
 * the round names the rank it is started for (the leader for QUORUM, the
 * initiator for MAJORITY) and is flagged STANDIN.  Several ranks may decide
 * so at once, and the leader too if it was only slow: the first activation
 * counts. */
int pc_leader_decide_stand_in(pc_leader_t *l, pc_elsewhere_fn silent, void *arg, pc_decision_t *d);

/* For stall reports: the ranks that a rank arrived as `type` (PC_ARR_*; for
 * WAIT, for round `round`) still waits for, as far as the leader knows, as a
 * bitmap (P bits): for a flush the ranks not flushing, for a free those not
 * freeing; for round `next`, those not arrived if it needs everyone or a
 * quorum, its initiator for MAJORITY; nothing for a round already
 * activated (its data phase is what waits). */
void pc_leader_missing(const pc_leader_t *l, int type, uint64_t round, pc_elsewhere_fn elsewhere, void *arg,
                       unsigned char *missing);

#endif
