/*
 * Rounds by messages that go on without a stopped rank
 * (partial/backend_msg_view.c), P >= 3, run with PCOLL_PARTIAL_SHM_BYTES=0
 * (PCOLL_EXCLUDE_MS=100 is set here).  For SOLO and then MAJORITY objects
 * (ACCUMULATE, 1000 float64): every rank contributes a vector of ones (times
 * its rank + 1) at every call, CALLS calls with a short sleep, then a flush.
 * Rank 1 stops itself (SIGSTOP; a child sends SIGCONT after 0.8 s) a third
 * of the way, and, with P >= 4, rank P - 1 once a round it got left a rank
 * out (rank 1, or a busy one: a view is installed), ten calls later at the
 * earliest (rank 0 stays: MAJORITY's leader).  A rank that stops during a
 * view change holds it up, by design: stopping at a fixed call, rank P - 1
 * fell now and then into the change that left rank 1 out or took it back
 * (on a busy machine), and was never left out itself.   Checks, at every rank:
 *   - every contribution is delivered once: what the calls returned adds
 *     up to sum over ranks (r + 1) * CALLS in every element, and the
 *     delivered contribution counts to P * CALLS;
 *   - the rounds went on without the stopped rank: the others report
 *     rounds that left it out, and it reports a catch-up;
 *   - the results are the same at every rank (the last flush's).
 * Then a GROUP object (group size 2, REPLACE: WAGMA's rounds, which skip
 * what a view change interrupts): rank j's contribution is one-hot, its
 * call number + 1 at element j and zeros elsewhere, so a result shows whose
 * contributions it holds.  Checks, at every rank: every round's result
 * holds its reported group's elements only (0 elsewhere, never a left-out
 * rank's), and so does every call's result with its info.group; the others
 * report rounds that left the stopped rank out; the stopped rank completes
 * rounds with others after it is back (not only the group of one it gets
 * for the rounds it missed); the flush (every rank) holds every rank's last
 * contribution.  With 6 ranks or more the views (5 or 4 ranks) still form
 * groups smaller than themselves.  Then the same GROUP object with
 * ACCUMULATE (rank j contributes 1 at element j at every call), whose
 * rounds skip too: a rank's parts of the round a view change gave up are
 * its group of one's result, or that round's parts when it runs again,
 * never put back.  Checks: every round as
 * above; each rank's own element adds up to CALLS over the run (each of
 * its contributions reached it once) and no element to more; and every
 * round's count of another rank's contributions equals that rank's own
 * count of the same round (it completed the round too, or it skipped the
 * round as a group of one holding those parts).
 * With the argument "pair" (P >= 4, one host): ranks 1 and 2 stop together
 * (at the same call, or as soon as the other is stopped), and nobody else:
 * the first view may leave only one of them out, and the other must not
 * hold its change up (a rank of a view that is not frozen for it and
 * leaves a ping unanswered for the limit is left out too).  The same
 * checks, and in the SOLO and MAJORITY runs every other rank completes
 * calls while both are stopped (5 at least, in 0.8 s).
 * With the argument "coordinator": rank 0 (the views' coordinator) stops
 * at call CALLS / 3 instead of rank 1; its deputy (rank 1) takes over and
 * makes the view that leaves it out.  With P >= 4 rank P - 1 stops as
 * above: it is left out by the deputy, and comes back in a view of rank 0
 * (its JOIN goes on to rank 0) or of the deputy, which keeps what it is
 * owed either way.  MAJORITY's rounds whose initiator is rank 0 (its leader)
 * or the stopped rank P - 1 are started by the ranks that wait for them,
 * and a QUORUM(2) object runs too: its rounds are counted by the waiting
 * ranks, which share their arrivals while the leader is silent.  The same
 * checks, and every other rank completes calls while rank 0 is stopped (5
 * at least, in 0.8 s).
 * With the argument "churn": nobody stops, PCOLL_EXCLUDE_MS=1 and ranks
 * spin 0-3 ms between calls instead of sleeping, so that busy ranks are
 * taken for silent, left out and taken back again and again (on an
 * oversubscribed machine); the run must end, with the same conservation
 * checks (the limit backs off by itself).
 * With the argument "churn-coordinator": the same, and rank 0 also stops for 100 ms every 30 calls: its deputy takes over
 * now and then, also while rank 0 makes a view of its own (the two views
 * of one epoch, the deputy's wins) or while ranks are frozen for one (the
 * takeover waits).
 * With the argument "leader" (4 ranks; PCOLL_RANKS_PER_NODE=2 is set here:
 * two nodes of two, the hierarchical data phase): rank 2, the second
 * node's leader, stops at its calls CALLS / 10 and CALLS / 5 (calls 4 ms
 * apart: the first stop ends well before the last call), and nobody else:
 * its deputy (rank 3) finishes the node's rounds, the node sums go node to
 * node, back to the leaders' allreduce once it answers again
 * (nodesums.h), and node to node again at the second stop.  The
 * same checks for SOLO, MAJORITY and QUORUM(2), and every other rank
 * completes calls while rank 2 is stopped; only its node's ranks are told
 * which rank a round left out (rank 3 must be).
 * Run plain and under ASan and TSan.
 */
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#include "../testutil.h"

#define COUNT 1000
#define CALLS 300

static int rank, size, churn, pair, coord, leader;
static pid_t pair_pids[3]; /* pair: the pids of ranks 0..2 (one host) */
static double stopped_from_ms, stopped_to_ms; /* the last stop_self, on CLOCK_MONOTONIC */

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void stop_self(int ms)
{
    stopped_from_ms = now_ms();
    pid_t parent = getpid(), child = fork();
    if (child == 0) {
        usleep((useconds_t)ms * 1000);
        kill(parent, SIGCONT);
        _exit(0);
    }
    raise(SIGSTOP);
    stopped_to_ms = now_ms();
    waitpid(child, NULL, 0);
}

/* Whether process pid is stopped (SIGSTOP): its state in /proc is T. */
static int process_stopped(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the state follows the command's name */
    return p && p[1] == ' ' && p[2] == 'T';
}

/* Whether this rank stops in the run (see the top). */
static int stopping_rank(void)
{
    if (churn) return 0;
    if (pair) return rank == 1 || rank == 2;
    if (leader) return rank == 2;
    if (coord) return rank == 0 || (size >= 4 && rank == size - 1);
    return rank == 1 || (size >= 4 && rank == size - 1);
}

/* Whether this rank stops before call c (not churn: see the top); seen:
 * rounds it got that left a rank out so far; *stopped: it did already. */
static int stops_now(int c, uint64_t seen, int *stopped)
{
    if (churn) return coord && rank == 0 && c % 30 == 15; /* short stops, again and again */
    if (leader) return rank == 2 && (c == CALLS / 10 || c == CALLS / 5); /* twice: away, back, away */
    if (*stopped) return 0;
    /* pair: at call CALLS / 3, or as soon as the other one is stopped (a
     * rank whose calls lag would stop too late to be found with it) */
    int now = coord && rank == 0 ? c == CALLS / 3
            : pair ? stopping_rank() && (c == CALLS / 3 || (c >= CALLS / 3 - 20 && process_stopped(pair_pids[3 - rank])))
                   : (rank == 1 && !coord && c == CALLS / 3) || (size >= 4 && rank == size - 1 && c >= CALLS / 3 + 10 && seen > 0);
    if (now) *stopped = 1;
    return now;
}

static void spin_ms(int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000.0 + (t.tv_nsec - t0.tv_nsec) / 1e6 < ms);
}

/* The messages of rounds given up at view changes finish once their
 * receivers drop them (the engine drains what comes for rounds given up):
 * then this rank holds no buffer for them.  Called after the flush, before
 * the free (which lets them go). */
static void check_given_up_finished(pcoll_t *ctx, const char *what)
{
    pcoll_stats_t s;
    for (int i = 0; i < 1000; i++) {
        CHECK_RC(pcoll_get_stats(ctx, &s));
        if (s.given_up_messages == 0) break;
        usleep(10000);
    }
    CHECK_MSG(s.given_up_messages == 0, "%s: %llu messages of rounds given up still out after 10 s", what,
              (unsigned long long)s.given_up_messages);
    uint64_t dropped = s.stale_messages_dropped, all = 0;
    MPI_Reduce(&dropped, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_exclude %s: every message of the rounds given up finished; %llu stale ones dropped so far "
               "(over all ranks)\n",
               what, (unsigned long long)all);
}

/* pair, coordinator: the calls this rank completed while the stopped
 * ranks were (both of them: pair); 5 at least if that lasted 200 ms (else,
 * pair: a rank blocked in a call until the view that left the other out,
 * the stops came one after the other, which the other runs test). */
static void check_during_stop(const double *ended_ms, const char *what)
{
    if ((!pair && !coord && !leader) || churn) return;
    double r1[2] = {stopped_from_ms, stopped_to_ms}, r2[2] = {stopped_from_ms, stopped_to_ms};
    int one = coord ? 0 : leader ? 2 : 1; /* the stopped rank (pair: the first) */
    MPI_Bcast(r1, 2, MPI_DOUBLE, one, MPI_COMM_WORLD);
    MPI_Bcast(r2, 2, MPI_DOUBLE, coord ? 0 : 2, MPI_COMM_WORLD); /* pair: rank 2's */
    double a = r1[0] > r2[0] ? r1[0] : r2[0], b = r1[1] < r2[1] ? r1[1] : r2[1];
    /* calls per second while the stopped ranks were, and before: between
     * the first and the last call that ended in each stretch (the others
     * may finish their calls well before the stop ends) */
    int during = 0, before = 0;
    double t[2][2] = {{0, 0}, {0, 0}}; /* [during, before][first, last] */
    for (int c = 0; c < CALLS; c++) {
        int k = ended_ms[c] > a && ended_ms[c] < b ? 0 : ended_ms[c] <= a ? 1 : -1;
        if (k < 0) continue;
        int *n = k == 0 ? &during : &before;
        if ((*n)++ == 0) t[k][0] = ended_ms[c];
        t[k][1] = ended_ms[c];
    }
    double rate[2];
    for (int k = 0; k < 2; k++) {
        int n = k == 0 ? during : before;
        rate[k] = n >= 2 && t[k][1] > t[k][0] ? (n - 1) * 1e3 / (t[k][1] - t[k][0]) : 0;
    }
    if (!stopping_rank() && b - a >= 200)
        CHECK_MSG(during >= 5, "%s: %d calls completed in the %.0f ms the stopped ranks were stopped", what, during,
                  b - a);
    int report = coord ? 1 : 0;
    if (rank == report)
        printf("test_exclude %s %s: rank %d completed %d calls in the %.0f ms %s stopped, at %.0f calls/s "
               "(%.0f before)%s\n",
               what, coord ? "coordinator" : leader ? "leader" : "pair", rank, during, b - a,
               coord ? "rank 0 was" : leader ? "rank 2 was" : "both ranks were", rate[0], rate[1],
               b - a >= 200 ? "" : " (too short to check)");
}

static void run(pcoll_t *ctx, pcoll_partial_kind_t kind)
{
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    cfg.kind = kind;
    cfg.quorum = 2;
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, COUNT, PCOLL_FLOAT64, &cfg, &p));
    static double mine[COUNT], out[COUNT], total[COUNT];
    for (int i = 0; i < COUNT; i++) {
        mine[i] = rank + 1;
        total[i] = 0;
    }
    uint64_t contributions = 0, left_out_rounds = 0, caught_up = 0;
    int did_stop = 0;
    static double ended_ms[CALLS]; /* when each call returned */
    pcoll_partial_info_t info;
    for (int c = 0; c < CALLS; c++) {
        if (stops_now(c, left_out_rounds, &did_stop)) stop_self(churn ? 100 : 800);
        CHECK_RC(pcoll_partial_allreduce(p, mine, out, &info));
        ended_ms[c] = now_ms();
        for (int i = 0; i < COUNT; i++) total[i] += out[i];
        contributions += info.contributions;
        left_out_rounds += info.left_out_rounds;
        caught_up += info.caught_up;
        if (churn) spin_ms((rank * 7 + c) % 4); /* busy, unevenly: the machine stays full */
        else usleep(leader ? 4000 : 1000); /* leader: the stop ends well before the last call */
    }
    CHECK_RC(pcoll_partial_flush(p, out, &info));
    for (int i = 0; i < COUNT; i++) total[i] += out[i];
    contributions += info.contributions;
    double want = (double)size * (size + 1) / 2 * CALLS;
    for (int i = 0; i < COUNT; i++)
        CHECK_MSG(total[i] == want, "%s: element %d adds up to %.1f, not %.1f", pcoll_partial_kind_name(kind), i,
                  total[i], want);
    CHECK_MSG(contributions == (uint64_t)size * CALLS, "%s: %llu contributions delivered, not %d",
              pcoll_partial_kind_name(kind), (unsigned long long)contributions, size * CALLS);
    int stopped = stopping_rank();
    check_during_stop(ended_ms, pcoll_partial_kind_name(kind));
    if (churn) {
        uint64_t all = 0;
        MPI_Reduce(&left_out_rounds, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("test_exclude churn %s: %llu rounds left a rank out (over all ranks)\n",
                   pcoll_partial_kind_name(kind), (unsigned long long)all);
    } else if (stopped)
        CHECK_MSG(caught_up > 0, "%s: rank %d was stopped and caught up no round", pcoll_partial_kind_name(kind), rank);
    else if (!leader || rank == 3) /* leader: the other node is not told whom its rounds left out */
        CHECK_MSG(left_out_rounds > 0, "%s: no round went on without the stopped rank",
                  pcoll_partial_kind_name(kind));
    /* the same totals everywhere */
    double mx = total[0], mn = total[0];
    MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    CHECK(mx == mn);
    if (rank == (coord ? 1 : leader ? 3 : 0) && !churn)
        printf("test_exclude %s: %llu rounds went on without a stopped rank at rank %d; every contribution "
               "delivered once\n",
               pcoll_partial_kind_name(kind), (unsigned long long)left_out_rounds, rank);
    check_given_up_finished(ctx, pcoll_partial_kind_name(kind));
    CHECK_RC(pcoll_partial_free(&p));
}

/* ---- GROUP ---- */

#define MAX_RECORDS (4 * CALLS)
#define MAX_CHECKED 16 /* ranks whose elements a record keeps */

/* ACCUMULATE: a round as this rank's observer saw it */
typedef struct group_record {
    uint64_t first, round;   /* the rounds it holds (a group of one: first..round) */
    int alone;               /* a view change skipped them here: a group of one */
    uint32_t members;        /* its group, a bit per rank (< 32) */
    double val[MAX_CHECKED]; /* element j: rank j's contributions in it */
} group_record_t;

typedef struct group_watch {
    atomic_int bad;            /* rounds whose result holds another's elements */
    atomic_ullong rounds;      /* rounds seen with another rank (not synchronous) */
    atomic_ullong left_out;    /* rounds that left a rank out */
    char first[200];           /* the first bad round (written once) */
    int accumulate;            /* keep a record of every round */
    atomic_int nrec;
    group_record_t rec[MAX_RECORDS];
} group_watch_t;

static void group_observer(const pcoll_round_t *r, void *arg)
{
    group_watch_t *w = arg;
    const double *v = r->result;
    int in[4096] = {0};
    for (int i = 0; i < r->group_size && r->group[i] < 4096; i++) in[r->group[i]] = 1;
    for (int i = 0; i < r->n_left_out; i++)
        if (r->left_out[i] < 4096 && in[r->left_out[i]] && atomic_fetch_add(&w->bad, 1) == 0)
            snprintf(w->first, sizeof w->first, "round %llu lists left-out rank %d in its group",
                     (unsigned long long)r->round, r->left_out[i]);
    for (size_t j = 0; j < COUNT; j++) {
        int ok = j < 4096 && in[j] ? v[j] >= 0 && v[j] <= CALLS : v[j] == 0;
        if (!ok && atomic_fetch_add(&w->bad, 1) == 0)
            snprintf(w->first, sizeof w->first, "round %llu: element %zu is %.1f, group of %d ranks",
                     (unsigned long long)r->round, j, v[j], r->group_size);
    }
    if (!r->synchronous && r->group_size >= 2) atomic_fetch_add(&w->rounds, 1);
    if (r->n_left_out > 0) atomic_fetch_add(&w->left_out, 1);
    if (!w->accumulate) return;
    int k = atomic_fetch_add(&w->nrec, 1);
    if (k >= MAX_RECORDS) return; /* counted: the check fails */
    group_record_t *g = &w->rec[k];
    g->first = r->first_round;
    g->round = r->round;
    g->alone = r->catch_up && r->group_size == 1;
    g->members = 0;
    for (int i = 0; i < r->group_size && r->group[i] < 32; i++) g->members |= 1u << r->group[i];
    for (int j = 0; j < MAX_CHECKED; j++) g->val[j] = j < size ? v[j] : 0;
}

/* ACCUMULATE: every part of a round reached each member that completed the
 * round with its owner's count, and its owner once, in that round or, if a
 * view change skipped the round at the owner, as its group of one (a part
 * put back would show as a record missing, or a count that differs).
 * Each rank checks its own records against everyone's. */
static void check_group_records(const group_watch_t *w)
{
    int n = atomic_load(&w->nrec);
    CHECK_MSG(n <= MAX_RECORDS, "group accumulate: %d rounds, more than the %d a record holds", n, MAX_RECORDS);
    if (n > MAX_RECORDS) n = MAX_RECORDS;
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    int bytes = n * (int)sizeof(group_record_t), total = 0;
    MPI_Allgather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    for (int j = 0; j < size; j++) {
        displs[j] = total;
        total += counts[j];
    }
    group_record_t *all = malloc((size_t)total + 1);
    MPI_Allgatherv(w->rec, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    long checked[3] = {0, 0, 0}; /* parts checked; rounds skipped here that held parts; run again */
    for (int k = 0; k < n; k++) {
        const group_record_t *g = &w->rec[k];
        checked[1] += g->alone && g->val[rank] > 0;
        if (g->alone) continue;
        CHECK_MSG(g->first == g->round, "group accumulate: round %llu holds rounds from %llu, not alone",
                  (unsigned long long)g->round, (unsigned long long)g->first);
        for (int j = 0; j < size; j++) {
            if (j == rank || !(g->members >> j & 1u)) continue;
            const group_record_t *theirs = (const group_record_t *)((const char *)all + displs[j]), *s = NULL;
            for (int i = 0; i < counts[j] / (int)sizeof *theirs && !s; i++)
                if (theirs[i].first <= g->round && g->round <= theirs[i].round) s = &theirs[i];
            if (!s) {
                CHECK_MSG(0, "group accumulate: rank %d has no record of round %llu, which rank %d completed with it",
                          j, (unsigned long long)g->round, rank);
                break;
            }
            double want = s->alone && s->first != g->round ? 0 : s->val[j];
            CHECK_MSG(g->val[j] == want,
                      "group accumulate: round %llu holds %.0f of rank %d's contributions, and rank %d %.0f%s",
                      (unsigned long long)g->round, g->val[j], j, j, want, s->alone ? " (skipped there)" : "");
            /* (or j's run of the round was another one, without this rank:
             * a round given up at a view change runs again in the view's
             * groups, with the parts it had, and a rank left out at that
             * change may have completed the first run) */
            CHECK_MSG(s->alone || s->members == g->members || !(s->members >> rank & 1u),
                      "group accumulate: ranks %d and %d saw round %llu's group differently (%#x, %#x)", rank, j,
                      (unsigned long long)g->round, g->members, s->members);
            checked[0]++;
            checked[2] += !s->alone && s->members != g->members;
        }
    }
    free(all);
    free(counts);
    free(displs);
    long sum[3] = {0, 0, 0};
    MPI_Reduce(checked, sum, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_exclude group accumulate: %ld parts of other ranks checked against their owners' records "
               "(%ld of a round that ran again without this rank); %ld rounds skipped as a group of one held the "
               "rank's parts (over all ranks)\n",
               sum[0], sum[2], sum[1]);
}

static void run_group(pcoll_t *ctx, pcoll_contrib_mode_t mode)
{
    static group_watch_t w;
    int acc = mode == PCOLL_ACCUMULATE;
    const char *what = acc ? "group accumulate" : "group";
    atomic_init(&w.bad, 0);
    atomic_init(&w.rounds, 0);
    atomic_init(&w.left_out, 0);
    atomic_init(&w.nrec, 0);
    w.accumulate = acc;
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    cfg.kind = PCOLL_PARTIAL_GROUP;
    cfg.group_size = 2;
    cfg.mode = mode;
    cfg.observer = group_observer;
    cfg.observer_arg = &w;
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, COUNT, PCOLL_FLOAT64, &cfg, &p));
    static double mine[COUNT], out[COUNT], total[COUNT];
    memset(mine, 0, sizeof mine);
    memset(total, 0, sizeof total);
    pcoll_partial_info_t info;
    int stopped = stopping_rank();
    uint64_t before_back = 0;
    int did_stop = 0;
    static double ended_ms[CALLS];
    for (int c = 0; c < CALLS; c++) {
        if (stops_now(c, atomic_load(&w.left_out), &did_stop)) {
            stop_self(churn ? 100 : 800);
            before_back = atomic_load(&w.rounds);
        }
        mine[rank] = acc ? 1 : c + 1;
        CHECK_RC(pcoll_partial_allreduce(p, mine, out, &info));
        ended_ms[c] = now_ms();
        for (int j = 0; j < COUNT; j++) total[j] += out[j];
        /* REPLACE: the call's result holds its reported group's elements
         * only (ACCUMULATE's sums rounds of several groups: the observer
         * checks each) */
        int in[4096] = {0};
        for (int i = 0; i < info.group_size && info.group[i] < 4096; i++) in[info.group[i]] = 1;
        for (int j = 0; !acc && info.rounds > 0 && j < size && j < 4096; j++)
            if (!in[j] && out[j] != 0) {
                CHECK_MSG(0, "group: a call's result holds %.1f of rank %d, outside its group of %d", out[j], j,
                          info.group_size);
                break;
            }
        if (churn) spin_ms((rank * 7 + c) % 4);
        else usleep(1000);
    }
    uint64_t after_back = atomic_load(&w.rounds) - before_back;
    check_during_stop(ended_ms, what);
    CHECK_RC(pcoll_partial_flush(p, out, &info));
    for (int j = 0; j < COUNT; j++) total[j] += out[j];
    if (acc) { /* each of its own contributions reached it once; nobody's more than once */
        CHECK_MSG(total[rank] == CALLS, "group accumulate: its own element adds up to %.1f, not %d", total[rank],
                  CALLS);
        for (int j = 0; j < COUNT; j++)
            CHECK_MSG(total[j] <= (j < size ? CALLS : 0), "group accumulate: element %d adds up to %.1f", j,
                      total[j]);
    } else {
        for (int j = 0; j < size; j++)
            CHECK_MSG(out[j] == CALLS, "group: the flush holds %.1f of rank %d, not its last contribution %d", out[j],
                      j, CALLS);
    }
    CHECK_MSG(atomic_load(&w.bad) == 0, "%s: %d rounds hold elements outside their group; first: %s", what,
              atomic_load(&w.bad), w.first);
    if (stopped)
        CHECK_MSG(after_back > 0, "%s: rank %d completed no round after it was back", what, rank);
    else if (!churn)
        CHECK_MSG(atomic_load(&w.left_out) > 0, "%s: no round went on without the stopped rank", what);
    if (acc && size <= MAX_CHECKED) check_group_records(&w);
    unsigned long long lo = atomic_load(&w.left_out), all = 0;
    MPI_Reduce(&lo, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_exclude %s%s: %llu rounds left a rank out (over all ranks); every result holds its "
               "group's contributions only\n",
               what, churn ? " churn" : "", all);
    check_given_up_finished(ctx, what);
    CHECK_RC(pcoll_partial_free(&p));
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 300, &rank, &size);
    churn = argc > 1 && (strcmp(argv[1], "churn") == 0 || strcmp(argv[1], "churn-coordinator") == 0);
    pair = argc > 1 && strcmp(argv[1], "pair") == 0;
    coord = argc > 1 && (strcmp(argv[1], "coordinator") == 0 || strcmp(argv[1], "churn-coordinator") == 0);
    leader = argc > 1 && strcmp(argv[1], "leader") == 0;
    setenv("PCOLL_EXCLUDE_MS", churn ? "1" : "100", 1);
    if (leader) setenv("PCOLL_RANKS_PER_NODE", "2", 1);
    CHECK_MSG(size >= 3, "test_exclude needs 3 ranks or more, not %d", size);
    CHECK_MSG(!pair || size >= 4, "test_exclude pair needs 4 ranks or more, not %d", size);
    CHECK_MSG(!leader || size == 4, "test_exclude leader needs 4 ranks, not %d", size);
    pid_t pids[4096];
    pid_t me = getpid();
    if (pair && size <= 4096) {
        MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, pids, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD);
        memcpy(pair_pids, pids, sizeof pair_pids);
    }
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    run(ctx, PCOLL_PARTIAL_SOLO);
    run(ctx, PCOLL_PARTIAL_MAJORITY);
    if (coord || leader) run(ctx, PCOLL_PARTIAL_QUORUM);
    if (!leader) {
        run_group(ctx, PCOLL_REPLACE);
        run_group(ctx, PCOLL_ACCUMULATE);
    }
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0) printf("test_exclude: %ld checks passed at rank 0\n", (long)tu_checks_);
    MPI_Finalize();
    return 0;
}
