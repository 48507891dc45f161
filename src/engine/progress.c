#include "progress.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

#include "../util/error.h"
#include "../util/log.h"
#include "../util/recorder.h"
#include "doorbell.h"
#include "nodebar.h"

/* MPI counts are int: larger messages go out as several requests. */
#define PC_CHUNK_BYTES ((size_t)1 << 30)

/* After its doorbell rang the thread polls at least this long before it may
 * sleep again: the message may not be matched yet, or another thread inside
 * MPI (the application's own MPI calls, under MPI_THREAD_MULTIPLE) may match
 * it for us, and then nobody rings a second time. */
#define PC_RING_SPIN_US 100.0

/* A progress thread parked while an application thread holds the token
 * looks again after this long at the latest (a safety net: the holder wakes
 * it when it hands the token back with work left). */
#define PC_PARK_US 20000L

/* Who progresses the engine (holds the token). */
enum { TOKEN_FREE = 0, TOKEN_THREAD = 1, TOKEN_APP = 2 };

typedef struct owner {
    pc_sched_t *sched; /* a schedule step, or ...           */
    int step;
    pc_msg_fn fn;      /* ... a message with a callback     */
    void *arg;
    int listener;
    int send_to;       /* a send: its destination, else -1  */
    int control;       /* a control message (rings any sleeper) */
    int peer, tag;     /* for error messages                */
    int is_send;
    int passive;       /* not counted in nactive: a listener, or a
                          message of an abandoned run             */
    int abandoned;     /* of an abandoned run (counted in nabandoned) */
    int stale;         /* a send of a run given up, or a stale message being
                          dropped (counted in nstale): passive, tested with
                          the others, never a reason to poll */
} owner_t;

/* A place whose stale messages are received and dropped (pc_engine_drain). */
typedef struct drain {
    MPI_Comm comm;
    int *tags, ntags; /* 0: any tag */
    const void *owner;
} drain_t;

typedef struct keyed {
    pc_poll_fn fn;
    void *arg;
} keyed_t;

/* A barrier step waiting for the other members (nodebar.h). */
typedef struct waiting_barrier {
    pc_sched_t *sched;
    int step;
    uint64_t p;    /* the barrier's number */
    int abandoned; /* status to complete it with (its run was abandoned), or 0 */
} waiting_barrier_t;

struct pc_engine {
    MPI_Comm comm;      /* schedules' messages */
    MPI_Comm ctrl_comm; /* messages with callbacks (control) */
    pc_tags_t tags;
    pthread_t thread;
    int joined; /* the thread was joined */
    atomic_int stop; /* the thread ends once nothing is in flight */
    atomic_int halt; /* the thread ends now (pc_engine_halt) */
    /* pcoll_progress_policy_t, readable while the thread runs */
    atomic_int idle_spin_us, active_spin_us, wait_spin_us, max_sleep_us;

    /* application -> progress thread; peers and posts ring the doorbell */
    pthread_mutex_t qlock;
    pc_task_t *qhead, *qtail;
    atomic_int qlen;
    pc_doorbells_t *bells;

    /* the progress token, and application threads asking for it */
    atomic_int token;
    atomic_int app_wants;

    /* token holder -> application threads waiting without the token */
    pthread_mutex_t wlock;
    pthread_cond_t wcond;
    atomic_int nwaiters;

    /* the token holder only */
    uint32_t looked_seq;  /* doorbell seq at the last look for work */
    int thread_sleeps_forever; /* the progress thread sleeps without timeout */
    MPI_Request *reqs;
    owner_t *owners;
    int nreqs, capreqs;
    int nactive; /* outstanding requests that are not listeners */
    waiting_barrier_t *bars; /* barrier steps not reached yet: operations in
                                flight as much as requests (nactive) */
    int nbars, capbars;
    int nabandoned; /* outstanding requests of abandoned runs */
    int nstale;     /* outstanding stale requests (owner_t.stale) */
    drain_t *drains;
    int ndrains, capdrains;
    double drain_at_us; /* when the stale messages were last looked for */
    unsigned drain_looks; /* looks since: the clock is read every PC_DRAIN_LOOKS */
    uint32_t ctrl_received; /* control messages the listeners got */
    int kick_did;           /* what the keyed pollers of this look did */
    int *idx;
    MPI_Status *statuses;
    owner_t *done_owners;
    MPI_Status *done_status;
    int *done_rc;
    pc_issuer_t issuer;
    keyed_t *pollers;         /* by key (PC_KICK_KEYS), allocated at the first */
    char msg_error[320];      /* what failed, for the pc_msg_fn being called */
    int me;
    int log_id;               /* the context's number in log lines */

    /* keys (any thread, under qlock) */
    unsigned char *keys_used;

    atomic_ullong n_loops, n_sleeps, n_tasks, n_requests;
    atomic_ullong data_bytes, data_msgs, ctrl_bytes, ctrl_msgs; /* sent */
    atomic_ullong n_stale, n_dropped; /* nstale, for other threads; stale messages dropped */
};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* at post: count a control message (once) or offer data; at completion:
 * wake the destination again, in case it looked before the data was there */
static void ring_peer(pc_engine_t *e, const owner_t *o, int posted)
{
    if (!o->control)
        pc_doorbell_ring_data(e->bells, o->send_to);
    else if (posted)
        pc_doorbell_ring(e->bells, o->send_to);
    else
        pc_doorbell_nudge(e->bells, o->send_to);
}

static void stale_count(pc_engine_t *e, int delta)
{
    e->nstale += delta;
    atomic_store_explicit(&e->n_stale, (unsigned long long)e->nstale, memory_order_relaxed);
}

static int add_request(pc_engine_t *e, MPI_Request r, owner_t o)
{
    if (e->nreqs == e->capreqs) {
        int cap = e->capreqs ? 2 * e->capreqs : 64;
        MPI_Request *nr = realloc(e->reqs, sizeof *nr * (size_t)cap);
        if (nr) e->reqs = nr;
        owner_t *no = realloc(e->owners, sizeof *no * (size_t)cap);
        if (no) e->owners = no;
        int *ni = realloc(e->idx, sizeof *ni * (size_t)cap);
        if (ni) e->idx = ni;
        MPI_Status *ns = realloc(e->statuses, sizeof *ns * (size_t)cap);
        if (ns) e->statuses = ns;
        owner_t *nd = realloc(e->done_owners, sizeof *nd * (size_t)cap);
        if (nd) e->done_owners = nd;
        MPI_Status *nds = realloc(e->done_status, sizeof *nds * (size_t)cap);
        if (nds) e->done_status = nds;
        int *nrc = realloc(e->done_rc, sizeof *nrc * (size_t)cap);
        if (nrc) e->done_rc = nrc;
        if (!nr || !no || !ni || !ns || !nd || !nds || !nrc) return PCOLL_ERR_NOMEM;
        e->capreqs = cap;
    }
    o.passive = o.listener || o.stale;
    e->reqs[e->nreqs] = r;
    e->owners[e->nreqs] = o;
    e->nreqs++;
    if (!o.passive) e->nactive++;
    if (o.stale) stale_count(e, 1);
    atomic_fetch_add_explicit(&e->n_requests, 1, memory_order_relaxed);
    return PCOLL_SUCCESS;
}

/* Posts one send or receive as ceil(bytes / chunk) requests (at least one). */
static int post_message(pc_engine_t *e, int is_send, void *buf, size_t bytes, int peer, int tag, owner_t o,
                        int *nposted)
{
    MPI_Comm comm = o.sched ? e->comm : e->ctrl_comm;
    int mpi_peer = peer; /* peer: in the engine's communicator (doorbells, messages) */
    if (o.sched && pc_sched_comm(o.sched)) {
        comm = *(const MPI_Comm *)pc_sched_comm(o.sched);
        mpi_peer = pc_sched_comm_peer(o.sched, o.step >= 0 ? pc_sched_step_peer(o.sched, o.step) : 0);
    }
    size_t off = 0;
    *nposted = 0;
    do {
        size_t len = bytes - off < PC_CHUNK_BYTES ? bytes - off : PC_CHUNK_BYTES;
        MPI_Request r;
        int rc = is_send ? MPI_Isend((char *)buf + off, (int)len, MPI_BYTE, mpi_peer, tag, comm, &r)
                         : MPI_Irecv((char *)buf + off, (int)len, MPI_BYTE, mpi_peer, tag, comm, &r);
        if (rc != MPI_SUCCESS) {
            char why[MPI_MAX_ERROR_STRING];
            snprintf(e->msg_error, sizeof e->msg_error, "%s rank %d (tag %d, %zu bytes) failed: %s",
                     is_send ? "MPI_Isend to" : "MPI_Irecv from", peer, tag, len, pc_mpi_strerror(rc, why, sizeof why));
            return PCOLL_ERR_MPI;
        }
        if (is_send && off == 0) { /* a sleeping neighbour starts polling */
            o.send_to = peer;
            ring_peer(e, &o, 1);
        }
        if ((rc = add_request(e, r, o)) != PCOLL_SUCCESS) {
            /* a receive is withdrawn; a send that cannot be tracked is let go
             * (MPI completes it on its own) */
            if (!is_send) MPI_Cancel(&r);
            MPI_Request_free(&r);
            snprintf(e->msg_error, sizeof e->msg_error, "no memory to track a message to or from rank %d", peer);
            return rc;
        }
        (*nposted)++;
        off += len;
    } while (off < bytes);
    if (is_send) { /* counted once posted: what this rank put on the wire */
        atomic_fetch_add_explicit(o.sched ? &e->data_bytes : &e->ctrl_bytes, bytes, memory_order_relaxed);
        atomic_fetch_add_explicit(o.sched ? &e->data_msgs : &e->ctrl_msgs, 1, memory_order_relaxed);
    }
    return PCOLL_SUCCESS;
}

void pc_engine_abandon(pc_engine_t *e, pc_sched_t *s, int status);

/* A barrier step: arrive (the last to come wakes every other member's
 * holder), then wait for the others in the list that every look tests. */
static int issue_barrier(pc_engine_t *e, pc_sched_t *s, int step)
{
    pc_nodebar_t *b = pc_sched_bound_barrier(s);
    uint64_t p = pc_sched_step_barrier(s, step);
    /* room first: a rank that arrived must wait, or the others pass a
     * barrier it has left */
    if (e->nbars == e->capbars) {
        int cap = e->capbars ? 2 * e->capbars : 16;
        waiting_barrier_t *nb = realloc(e->bars, sizeof *nb * (size_t)cap);
        if (!nb) {
            snprintf(e->msg_error, sizeof e->msg_error, "no memory to wait for a node-shared barrier");
            return PCOLL_ERR_NOMEM;
        }
        e->bars = nb;
        e->capbars = cap;
    }
    if (pc_nodebar_arrive(b, p))
        for (int i = 0; i < b->n; i++)
            if (i != b->me) pc_engine_nudge(e, pc_nodebar_rank(b, i));
    if (pc_nodebar_reached(b, p)) {
        pc_sched_step_done(s, step, PCOLL_SUCCESS, &e->issuer); /* queues its successors (drain runs them) */
        return PCOLL_SUCCESS;
    }
    e->bars[e->nbars++] = (waiting_barrier_t){s, step, p, 0};
    return PCOLL_SUCCESS;
}

/* Completes the barrier steps whose members all arrived (or whose run was
 * abandoned).  Completing one may issue more (appended here). */
static int test_barriers(pc_engine_t *e)
{
    int did = 0;
    for (int i = 0; i < e->nbars;) {
        waiting_barrier_t w = e->bars[i];
        if (!w.abandoned && !pc_nodebar_reached(pc_sched_bound_barrier(w.sched), w.p)) {
            i++;
            continue;
        }
        e->bars[i] = e->bars[--e->nbars];
        pc_sched_step_done(w.sched, w.step, w.abandoned, &e->issuer);
        did++;
    }
    return did;
}

static int issue_step(void *self, pc_sched_t *s, int step)
{
    pc_engine_t *e = self;
    if (pc_sched_step_kind(s, step) == PC_STEP_BARRIER) return issue_barrier(e, s, step);
    owner_t o = {.sched = s, .step = step, .send_to = -1};
    int is_send = pc_sched_step_kind(s, step) == PC_STEP_SEND;
    int t = pc_sched_step_tag(s, step, e->tags.step_mask);
    int peer = pc_sched_peer_rank(s, pc_sched_step_peer(s, step));
    o.peer = peer;
    o.tag = t;
    o.is_send = is_send;
    int n = 0;
    int rc = post_message(e, is_send, pc_sched_step_buf(s, step), pc_sched_step_bytes(s, step), peer, t, o, &n);
    *pc_sched_step_aux(s, step) = n; /* requests of this step still in flight */
    if (rc != PCOLL_SUCCESS) {
        /* the run cannot succeed: stop it (as a failed completion does) */
        pc_sched_fail_run(s, rc, "%s", e->msg_error);
        pc_engine_abandon(e, s, rc);
        /* some chunks are out: they complete the step */
        if (n > 0) return PCOLL_SUCCESS;
    }
    return rc;
}

int pc_engine_run(pc_engine_t *e, pc_sched_t *s) { return pc_sched_start(s, &e->issuer); }

void pc_engine_abandon(pc_engine_t *e, pc_sched_t *s, int status)
{
    if (!pc_sched_running(s)) return;
    pc_sched_abort(s, status);
    for (int i = 0; i < e->nbars; i++) /* completed at the next look */
        if (e->bars[i].sched == s) e->bars[i].abandoned = status;
    /* receives can be withdrawn; sends complete or not, as MPI decides:
     * neither keeps the engine busy (or pcoll_finalize waiting) any more */
    for (int i = 0; i < e->nreqs; i++) {
        owner_t *o = &e->owners[i];
        if (o->sched != s) continue;
        if (!o->passive) {
            o->passive = 1;
            o->abandoned = 1;
            e->nactive--;
            e->nabandoned++;
        }
        if (!o->is_send) {
            int rc = MPI_Cancel(&e->reqs[i]);
            if (rc != MPI_SUCCESS) pc_log(PCOLL_LOG_WARN, "MPI_Cancel of an abandoned receive failed (code %d)", rc);
        }
    }
}

void pc_engine_let_finish(pc_engine_t *e, pc_sched_t *s)
{
    for (int i = 0; i < e->nreqs; i++) {
        owner_t *o = &e->owners[i];
        if (o->sched != s || !o->abandoned || !o->is_send) continue;
        o->abandoned = 0;
        e->nabandoned--;
        o->stale = 1;
        stale_count(e, 1);
    }
}

void pc_engine_let_go(pc_engine_t *e, pc_sched_t *s)
{
    for (int i = 0; i < e->nreqs;) {
        owner_t *o = &e->owners[i];
        if (o->sched != s || !(o->abandoned || o->stale) || !o->is_send) {
            i++;
            continue;
        }
        MPI_Request_free(&e->reqs[i]); /* MPI finishes it, or not, on its own */
        if (o->abandoned) e->nabandoned--;
        else stale_count(e, -1);
        e->nreqs--;
        e->reqs[i] = e->reqs[e->nreqs];
        e->owners[i] = e->owners[e->nreqs];
    }
}

/* ---- stale messages (runs given up elsewhere) ---- */

int pc_engine_drain(pc_engine_t *e, const MPI_Comm *comm, const int *tags, int ntags, const void *owner)
{
    if (e->ndrains == e->capdrains) {
        int cap = e->capdrains ? 2 * e->capdrains : 8;
        drain_t *nd = realloc(e->drains, sizeof *nd * (size_t)cap);
        if (!nd) return PCOLL_ERR_NOMEM;
        e->drains = nd;
        e->capdrains = cap;
    }
    drain_t d = {comm ? *comm : e->comm, NULL, ntags, owner};
    if (ntags > 0) {
        if (!(d.tags = malloc(sizeof(int) * (size_t)ntags))) return PCOLL_ERR_NOMEM;
        memcpy(d.tags, tags, sizeof(int) * (size_t)ntags);
    }
    e->drains[e->ndrains++] = d;
    return PCOLL_SUCCESS;
}

void pc_engine_drain_forget(pc_engine_t *e, const void *owner)
{
    for (int i = 0; i < e->ndrains;) {
        if (!owner || e->drains[i].owner != owner) {
            i++;
            continue;
        }
        free(e->drains[i].tags);
        e->drains[i] = e->drains[--e->ndrains];
    }
}

static void dropped(pc_engine_t *e, void *arg, int status, const MPI_Status *st)
{
    (void)e, (void)status, (void)st;
    free(arg);
}

/* Receives (and drops) the messages that wait at one drain place, tag by
 * tag: a receive into a buffer of the message's size, completed like any
 * other request (a large one needs its sender to move it). */
static int drain_one(pc_engine_t *e, const drain_t *d)
{
    int n = 0;
    for (int k = 0; k < (d->ntags ? d->ntags : 1); k++) {
        int tag = d->ntags ? d->tags[k] : MPI_ANY_TAG;
        for (;;) {
            int flag = 0, bytes = 0;
            MPI_Message msg;
            MPI_Status st;
            if (MPI_Improbe(MPI_ANY_SOURCE, tag, d->comm, &flag, &msg, &st) != MPI_SUCCESS || !flag) break;
            MPI_Get_count(&st, MPI_BYTE, &bytes);
            void *buf = malloc(bytes > 0 ? (size_t)bytes : 1);
            MPI_Request r;
            owner_t o = {.fn = dropped, .arg = buf, .step = -1, .send_to = -1, .peer = st.MPI_SOURCE, .tag = st.MPI_TAG,
                         .stale = 1};
            if (!buf || MPI_Imrecv(buf, bytes, MPI_BYTE, &msg, &r) != MPI_SUCCESS) {
                pc_log(PCOLL_LOG_ERROR, "a stale message of %d bytes from rank %d could not be dropped", bytes,
                       st.MPI_SOURCE);
                free(buf);
                return n;
            }
            if (add_request(e, r, o) != PCOLL_SUCCESS) { /* no room to wait for it: now */
                MPI_Wait(&r, MPI_STATUS_IGNORE);
                free(buf);
            }
            atomic_fetch_add_explicit(&e->n_dropped, 1, memory_order_relaxed);
            n++;
        }
    }
    return n;
}

/* Every PC_DRAIN_US while there are drain places or stale requests: the
 * stale messages are taken, and every request tested once (a look tests
 * them only while something else is in flight).  The clock is read only
 * every PC_DRAIN_LOOKS looks, so that a busy look after a view change
 * costs no more than one before it; an idle thread with only listeners
 * looks every 20 ms (sleep_timeout_us), so it drains about every 0.3 s. */
#define PC_DRAIN_US 20000.0
#define PC_DRAIN_LOOKS 16u
static int test_requests(pc_engine_t *e);
static int must_poll(pc_engine_t *e);
static int drain_tick(pc_engine_t *e)
{
    if (++e->drain_looks < PC_DRAIN_LOOKS) return 0;
    e->drain_looks = 0;
    double t = now_us();
    if (t - e->drain_at_us < PC_DRAIN_US) return 0;
    e->drain_at_us = t;
    int did = 0;
    for (int i = 0; i < e->ndrains; i++) did += drain_one(e, &e->drains[i]);
    if (e->nreqs && !must_poll(e)) did += test_requests(e);
    return did;
}

const char *pc_engine_msg_error(const pc_engine_t *e) { return e->msg_error; }

static int by_index_desc(const void *a, const void *b) { return *(const int *)b - *(const int *)a; }

int pc_engine_isend(pc_engine_t *e, const void *buf, size_t bytes, int peer, int tag, pc_msg_fn fn, void *arg)
{
    /* a message with a callback is control: it wakes the destination even
     * when idle (activations and arrivals reach idle ranks); schedule steps
     * wake only ranks that wait inside an operation */
    owner_t o = {.fn = fn, .arg = arg, .step = -1, .send_to = -1, .control = 1, .peer = peer, .tag = tag, .is_send = 1};
    int n;
    if (bytes > PC_CHUNK_BYTES) return PCOLL_ERR_INTERNAL; /* control messages are small */
    return post_message(e, 1, (void *)buf, bytes, peer, tag, o, &n);
}

int pc_engine_irecv(pc_engine_t *e, void *buf, size_t bytes, int peer, int tag, int listener, pc_msg_fn fn,
                    void *arg)
{
    owner_t o = {.fn = fn, .arg = arg, .step = -1, .listener = listener, .send_to = -1, .peer = peer, .tag = tag};
    int n;
    if (bytes > PC_CHUNK_BYTES) return PCOLL_ERR_INTERNAL;
    return post_message(e, 0, buf, bytes, peer, tag, o, &n);
}

/* What a failed request was, for the one who gets the error. */
static void describe_failure(pc_engine_t *e, const owner_t *o, int mpi_rc, int cancelled)
{
    char why[MPI_MAX_ERROR_STRING];
    if (cancelled)
        snprintf(why, sizeof why, "cancelled");
    else
        pc_mpi_strerror(mpi_rc, why, sizeof why);
    if (o->peer == MPI_ANY_SOURCE)
        snprintf(e->msg_error, sizeof e->msg_error, "MPI_Irecv from any rank (tag %d): %s", o->tag, why);
    else
        snprintf(e->msg_error, sizeof e->msg_error, "%s rank %d (tag %d): %s",
                 o->is_send ? "MPI_Isend to" : "MPI_Irecv from", o->peer, o->tag, why);
}

/* MPI_Testsome failed as a whole: test each request alone, so that the
 * failing ones are found; a request MPI cannot even test is failed. */
static int test_one_by_one(pc_engine_t *e, int *outcount)
{
    int n = 0;
    for (int i = 0; i < e->nreqs; i++) {
        int flag = 0;
        MPI_Status st;
        int rc = MPI_Test(&e->reqs[i], &flag, &st);
        if (rc != MPI_SUCCESS) {
            /* after_failure frees it */
            st.MPI_ERROR = rc;
            flag = 1;
        } else if (flag) {
            st.MPI_ERROR = MPI_SUCCESS;
        }
        if (flag) {
            e->idx[n] = i;
            e->statuses[n] = st;
            n++;
        }
    }
    *outcount = n;
    return n;
}

/* After a test that reported a failed request.  MPI leaves the failed
 * requests allocated (Open MPI's MPI_Testsome frees only the successful
 * ones): free them.  And Open MPI 4.1 can set another request that
 * completed to MPI_REQUEST_NULL without listing it: count such a handle as
 * completed (successfully: MPI frees only those), with no status (a
 * listener's message of unknown origin cannot be handled: it fails).
 * Returns the new number of completed requests. */
static int after_failure(pc_engine_t *e, int outcount)
{
    unsigned char *listed = calloc((size_t)e->nreqs + 1, 1);
    for (int k = 0; k < outcount; k++) {
        int i = e->idx[k];
        if (listed) listed[i] = 1;
        if (e->statuses[k].MPI_ERROR != MPI_SUCCESS && e->reqs[i] != MPI_REQUEST_NULL) MPI_Request_free(&e->reqs[i]);
    }
    for (int i = 0; listed && i < e->nreqs; i++) {
        if (listed[i] || e->reqs[i] != MPI_REQUEST_NULL) continue;
        e->idx[outcount] = i;
        memset(&e->statuses[outcount], 0, sizeof e->statuses[outcount]);
        e->statuses[outcount].MPI_SOURCE = e->owners[i].peer;
        e->statuses[outcount].MPI_ERROR = e->owners[i].peer == MPI_ANY_SOURCE ? MPI_ERR_OTHER : MPI_SUCCESS;
        outcount++;
    }
    free(listed);
    return outcount;
}

/* Tests every outstanding request once; runs the callbacks of those done.
 * Returns the number completed. */
static int test_requests(pc_engine_t *e)
{
    int outcount = 0;
    int rc = MPI_Testsome(e->nreqs, e->reqs, &outcount, e->idx, e->statuses);
    int per_request = rc == MPI_ERR_IN_STATUS;
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
        char why[MPI_MAX_ERROR_STRING];
        pc_log(PCOLL_LOG_ERROR, "MPI_Testsome failed (%s): testing the %d requests one by one", 
               pc_mpi_strerror(rc, why, sizeof why), e->nreqs);
        test_one_by_one(e, &outcount);
        per_request = 1;
    }
    if (outcount == MPI_UNDEFINED) outcount = 0;
    if (per_request) outcount = after_failure(e, outcount);
    if (outcount == 0) return 0;
    /* collect first: callbacks may post new requests and reshape the arrays */
    for (int k = 0; k < outcount; k++) {
        int i = e->idx[k];
        e->done_owners[k] = e->owners[i];
        e->done_status[k] = e->statuses[k];
        int err = per_request ? e->statuses[k].MPI_ERROR : MPI_SUCCESS;
        int cancelled = 0;
        if (err == MPI_SUCCESS && !e->owners[i].is_send) MPI_Test_cancelled(&e->statuses[k], &cancelled);
        e->done_rc[k] = err != MPI_SUCCESS ? err : cancelled ? -1 : MPI_SUCCESS;
    }
    /* remove completed entries, largest index first, by moving the last in */
    if (outcount > 1) qsort(e->idx, (size_t)outcount, sizeof(int), by_index_desc);
    for (int k = 0; k < outcount; k++) {
        int i = e->idx[k];
        if (!e->owners[i].passive) e->nactive--;
        if (e->owners[i].abandoned) e->nabandoned--;
        if (e->owners[i].stale) stale_count(e, -1);
        e->nreqs--;
        e->reqs[i] = e->reqs[e->nreqs];
        e->owners[i] = e->owners[e->nreqs];
    }
    for (int k = 0; k < outcount; k++) {
        owner_t *o = &e->done_owners[k];
        int status = PCOLL_SUCCESS;
        if (e->done_rc[k] != MPI_SUCCESS) {
            describe_failure(e, o, e->done_rc[k], e->done_rc[k] == -1);
            status = e->done_rc[k] == -1 ? PCOLL_ERR_TIMEOUT : PCOLL_ERR_MPI;
        }
        /* the data is at the destination now: make sure it looks */
        if (o->send_to >= 0) ring_peer(e, o, 0);
        if (o->listener) e->ctrl_received++;
        if (o->sched) {
            int32_t *left = pc_sched_step_aux(o->sched, o->step);
            if (status != PCOLL_SUCCESS && pc_sched_status(o->sched) == PCOLL_SUCCESS) {
                /* the run cannot succeed: stop it, so that nothing waits for
                 * peers that have moved on (its receives are withdrawn) */
                pc_sched_fail_run(o->sched, status, "%s", e->msg_error);
                pc_engine_abandon(e, o->sched, status);
            }
            if (--*left == 0) pc_sched_step_done(o->sched, o->step, PCOLL_SUCCESS, &e->issuer);
        } else if (o->fn) {
            o->fn(e, o->arg, status, &e->done_status[k]);
        }
    }
    return outcount;
}

static void run_kicked(void *arg, int key)
{
    pc_engine_t *e = arg;
    keyed_t *k = e->pollers ? &e->pollers[key] : NULL;
    if (k && k->fn) e->kick_did += k->fn(e, k->arg);
}

static int run_tasks(pc_engine_t *e)
{
    pthread_mutex_lock(&e->qlock);
    pc_task_t *t = e->qhead;
    e->qhead = e->qtail = NULL;
    atomic_store(&e->qlen, 0);
    pthread_mutex_unlock(&e->qlock);
    int n = 0;
    while (t) {
        pc_task_t *next = t->next; /* the caller may reuse its task once it ran */
        int heap = t->heap;
        t->fn(e, t->arg);
        if (heap) free(t);
        t = next;
        n++;
    }
    atomic_fetch_add_explicit(&e->n_tasks, (unsigned long long)n, memory_order_relaxed);
    return n;
}

/* Requests that no ring announces: operations in flight (MPI may need
 * polling to move them, and so may the messages of abandoned runs),
 * listeners for peers on other nodes (they cannot ring), or a control
 * message on its way that no listener matched yet.  Otherwise nothing can
 * complete, and a look need not even call MPI. */
static int must_poll(pc_engine_t *e)
{
    return e->nactive > 0 || e->nabandoned > 0 ||
           (e->nreqs > 0 && !(pc_doorbells_all_local(e->bells) && pc_doorbell_ctrl_sent(e->bells) == e->ctrl_received));
}

/* How long the thread may sleep when it found nothing to do. */
static long sleep_timeout_us(pc_engine_t *e, int *pause_us)
{
    /* nothing can arrive: until posted to, or rung (the last member to
     * reach a barrier rings every other member) */
    if (e->nreqs == 0) return -1;
    if (!must_poll(e)) return 20000; /* only listeners, every sender rings: a safety net */
    long t = *pause_us; /* growing pauses */
    int cap = atomic_load(&e->max_sleep_us);
    *pause_us = *pause_us * 2 > cap ? cap : *pause_us * 2;
    return t;
}

/* ---- the token and the two kinds of holder ---- */

/* What a thread progressing the engine remembers between looks. */
typedef struct driver {
    uint32_t seq;     /* doorbell seq at the previous look   */
    double last_work; /* when something last happened        */
    double rung;      /* when the doorbell last rang         */
    int pause_us;     /* next pause while operations are in flight */
} driver_t;

static void driver_init(pc_engine_t *e, driver_t *d)
{
    d->seq = pc_doorbell_seq(e->bells);
    d->last_work = now_us();
    d->rung = 0;
    d->pause_us = 1;
}

/* One look for work by the token holder: queued tasks, then every request.
 * Returns how many things it did. */
static int look(pc_engine_t *e, driver_t *d)
{
    atomic_fetch_add_explicit(&e->n_loops, 1, memory_order_relaxed);
    uint32_t seq = pc_doorbell_seq(e->bells); /* before looking: a later ring means more */
    if (seq != d->seq) {
        d->seq = seq;
        d->rung = now_us();
    }
    e->looked_seq = seq;
    int did = 0;
    if (atomic_load(&e->qlen)) did += run_tasks(e);
    if (e->nreqs && must_poll(e)) did += test_requests(e);
    if (e->nbars) did += test_barriers(e);
    if (e->ndrains || e->nstale) did += drain_tick(e);
    e->kick_did = 0;
    pc_doorbell_take_kicks(e->bells, run_kicked, e);
    did += e->kick_did;
    if (did) {
        d->last_work = now_us();
        d->pause_us = 1;
    }
    return did;
}

/* Nothing found: 1 to look again after yielding the CPU, 0 to sleep.  An
 * operation in flight is polled much longer than idle listeners. */
static int keep_looking(pc_engine_t *e, const driver_t *d)
{
    int limit = e->nactive || e->nbars ? atomic_load(&e->active_spin_us) : atomic_load(&e->idle_spin_us);
    double t = now_us();
    return t - d->last_work < (double)limit || (e->nreqs && t - d->rung < PC_RING_SPIN_US);
}

static int take_token(pc_engine_t *e, int who)
{
    int expected = TOKEN_FREE;
    if (!atomic_compare_exchange_strong(&e->token, &expected, who)) return 0;
    if (who == TOKEN_APP) pc_doorbell_set_holder(e->bells, PC_SLEEPER_APP);
    return 1;
}

/* The progress thread hands the token back (to nobody in particular). */
static void thread_gives_token(pc_engine_t *e) { atomic_store(&e->token, TOKEN_FREE); }

/* An application thread hands the token back.  Rings from here on go to
 * the progress thread; it is woken if it has something to do that it would
 * not be rung for: requests to poll, queued tasks, receives while it sleeps
 * without a timeout, or a ring that came after our last look.  That last
 * test reads seq after the token is free: a ring before it is seen here, a
 * ring after it finds the thread as holder and a free token to take. */
static void app_gives_token(pc_engine_t *e)
{
    pc_doorbell_set_holder(e->bells, PC_SLEEPER_THREAD);
    uint32_t looked = e->looked_seq; /* the holder's fields: read while we hold it */
    int wake = must_poll(e) || e->nbars > 0 || atomic_load(&e->qlen) > 0 ||
               (e->thread_sleeps_forever && e->nreqs > 0);
    atomic_store(&e->token, TOKEN_FREE);
    if (wake || pc_doorbell_seq(e->bells) != looked) pc_doorbell_wake_thread(e->bells);
    if (atomic_load(&e->nwaiters)) pc_engine_notify(e); /* another waiter may take over */
}

static void *progress_main(void *arg)
{
    pc_engine_t *e = arg;
    /* short sleeps should be short: the default 50 us timer slack is not */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    pc_log_set_rank(e->me, e->log_id);
    pc_rec_thread_name("progress");
    /* give this thread its malloc arena now: glibc reserves 64 MiB of
     * address space for a thread's arena at its first malloc, which, made
     * later when memory is short (or RLIMIT_AS low), fails even for a few
     * bytes and loses the handshake being received (test_setup hung so) */
    void *volatile warm = malloc(1); /* volatile: the pair stays */
    free(warm);
    driver_t d;
    driver_init(e, &d);
    for (;;) {
        if (atomic_load(&e->app_wants) || !take_token(e, TOKEN_THREAD)) {
            /* an application thread progresses, or is about to: park until
             * it hands the token back with work left (it wakes us then) */
            uint32_t seq = pc_doorbell_seq(e->bells);
            if (atomic_load(&e->token) == TOKEN_APP)
                pc_doorbell_sleep(e->bells, seq, PC_PARK_US, PC_SLEEP_IDLE, PC_SLEEPER_THREAD);
            else
                sched_yield();
            continue;
        }
        int sleep = 0;
        while (!atomic_load(&e->app_wants)) {
            if (look(e, &d)) continue;
            /* stop: once nothing is in flight; halt (which sets stop too):
               now, whatever is */
            if (atomic_load(&e->stop) &&
                (atomic_load(&e->halt) || (e->nactive == 0 && e->nbars == 0 && !atomic_load(&e->qlen)))) {
                thread_gives_token(e);
                return NULL;
            }
            if (keep_looking(e, &d)) {
                sched_yield();
                continue;
            }
            sleep = 1;
            break;
        }
        if (!sleep) { /* an application thread asked for the token */
            thread_gives_token(e);
            continue;
        }
        long timeout = sleep_timeout_us(e, &d.pause_us);
        pc_sleep_mode_t mode = e->nactive || e->nbars ? PC_SLEEP_ACTIVE : PC_SLEEP_IDLE;
        uint32_t seq = e->looked_seq;
        e->thread_sleeps_forever = timeout < 0;
        atomic_fetch_add_explicit(&e->n_sleeps, 1, memory_order_relaxed);
        thread_gives_token(e); /* an application thread may take it while we sleep */
        pc_doorbell_sleep(e->bells, seq, timeout, mode, PC_SLEEPER_THREAD);
    }
}

int pc_engine_create(MPI_Comm comm, MPI_Comm ctrl_comm, MPI_Comm node, const pc_tags_t *tags,
                     const pcoll_progress_policy_t *policy, int log_id, pc_engine_t **out)
{
    static const char *fn = "pcoll_init";
    pc_engine_t *e = calloc(1, sizeof *e);
    if (!e) return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the progress engine");
    e->log_id = log_id;
    e->comm = comm;
    e->ctrl_comm = ctrl_comm;
    e->tags = *tags;
    int rc = MPI_Comm_rank(comm, &e->me);
    if (rc != MPI_SUCCESS) {
        free(e);
        return pc_mpi_error(rc, fn, "MPI_Comm_rank");
    }
    pc_engine_set_policy(e, policy);
    e->issuer.post = issue_step;
    e->issuer.self = e;
    if (!(e->keys_used = calloc(PC_KICK_KEYS, 1))) {
        free(e);
        return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the progress engine");
    }
    if ((rc = pc_doorbells_create(comm, node, &e->bells)) != PCOLL_SUCCESS) {
        free(e->keys_used);
        free(e);
        return pc_error(rc, fn, "cannot create the doorbells: %s", pcoll_strerror(rc));
    }
    pthread_mutex_init(&e->qlock, NULL);
    pthread_mutex_init(&e->wlock, NULL);
    pthread_cond_init(&e->wcond, NULL);
    rc = pthread_create(&e->thread, NULL, progress_main, e);
    if (rc != 0) {
        pc_doorbells_destroy(e->bells);
        free(e->keys_used);
        free(e);
        return pc_error(PCOLL_ERR_INTERNAL, fn, "cannot start the progress thread: %s", strerror(rc));
    }
    *out = e;
    return PCOLL_SUCCESS;
}

static void stop_thread(pc_engine_t *e, int halt)
{
    if (e->joined) return;
    if (halt) atomic_store(&e->halt, 1);
    atomic_store(&e->stop, 1);
    pc_doorbell_ring_self(e->bells);
    pthread_join(e->thread, NULL);
    e->joined = 1;
}

void pc_engine_halt(pc_engine_t *e)
{
    if (e) stop_thread(e, 1);
}

void pc_engine_destroy(pc_engine_t *e)
{
    if (!e) return;
    stop_thread(e, 0);
    /* listeners (nobody sends to them any more) and the receives of runs
     * abandoned after a timeout: cancelled; sends of abandoned runs that
     * never completed are let go */
    int left = 0;
    for (int i = 0; i < e->nreqs; i++) {
        if (e->owners[i].is_send) {
            MPI_Request_free(&e->reqs[i]);
            left++;
            continue;
        }
        int rc = MPI_Cancel(&e->reqs[i]); /* a stale message being dropped is matched: it completes */
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&e->reqs[i], MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) pc_log(PCOLL_LOG_WARN, "pcoll_finalize: cancelling a receive failed (code %d)", rc);
        if (e->owners[i].fn == dropped) free(e->owners[i].arg);
    }
    if (e->nreqs) PC_DEBUG("engine: %d receives cancelled, %d sends let go at shutdown", e->nreqs - left, left);
    free(e->reqs);
    free(e->owners);
    free(e->bars);
    free(e->idx);
    free(e->statuses);
    free(e->done_owners);
    free(e->done_status);
    free(e->done_rc);
    free(e->pollers);
    free(e->keys_used);
    for (int i = 0; i < e->ndrains; i++) free(e->drains[i].tags); /* their communicators stay: messages may come */
    free(e->drains);
    pc_doorbells_destroy(e->bells); /* collective: every rank is in pcoll_finalize */
    pthread_mutex_destroy(&e->qlock);
    pthread_mutex_destroy(&e->wlock);
    pthread_cond_destroy(&e->wcond);
    free(e);
}

void pc_engine_set_policy(pc_engine_t *e, const pcoll_progress_policy_t *p)
{
    atomic_store(&e->idle_spin_us, p->idle_spin_us);
    atomic_store(&e->active_spin_us, p->active_spin_us);
    atomic_store(&e->wait_spin_us, p->wait_spin_us);
    atomic_store(&e->max_sleep_us, p->max_sleep_us);
}

void pc_engine_get_policy(const pc_engine_t *e, pcoll_progress_policy_t *p)
{
    p->idle_spin_us = atomic_load(&e->idle_spin_us);
    p->active_spin_us = atomic_load(&e->active_spin_us);
    p->wait_spin_us = atomic_load(&e->wait_spin_us);
    p->max_sleep_us = atomic_load(&e->max_sleep_us);
}

static void enqueue(pc_engine_t *e, pc_task_t *t)
{
    t->next = NULL;
    pthread_mutex_lock(&e->qlock);
    if (e->qtail)
        e->qtail->next = t;
    else
        e->qhead = t;
    e->qtail = t;
    atomic_fetch_add(&e->qlen, 1);
    pthread_mutex_unlock(&e->qlock);
}

void pc_engine_post_task(pc_engine_t *e, pc_task_t *t, int quiet)
{
    t->heap = 0;
    enqueue(e, t);
    if (!quiet) pc_doorbell_ring_self(e->bells);
}

static int post_new(pc_engine_t *e, pc_task_fn fn, void *arg, int quiet)
{
    pc_task_t *t = malloc(sizeof *t);
    if (!t) return PCOLL_ERR_NOMEM;
    t->fn = fn;
    t->arg = arg;
    t->heap = 1;
    enqueue(e, t);
    if (!quiet) pc_doorbell_ring_self(e->bells);
    return PCOLL_SUCCESS;
}

int pc_engine_post(pc_engine_t *e, pc_task_fn fn, void *arg) { return post_new(e, fn, arg, 0); }
int pc_engine_post_quiet(pc_engine_t *e, pc_task_fn fn, void *arg) { return post_new(e, fn, arg, 1); }

/* The calling application thread progresses the engine until pred holds or
 * the deadline passes (< 0: none), sleeping on the doorbell in place of the
 * progress thread.  Returns 1 when pred holds. */
static int app_drives(pc_engine_t *e, pc_pred_fn pred, void *arg, double timeout_us, double *deadline_p)
{
    driver_t d;
    driver_init(e, &d);
    if (timeout_us >= 0 && *deadline_p < 0) *deadline_p = d.last_work + timeout_us; /* the clock just read */
    const double deadline = *deadline_p;
    for (;;) {
        int did = look(e, &d);
        if (pred(arg)) return 1;
        /* a busy look has just read the clock (d.last_work): no reading of
         * our own until the engine is idle */
        if (did) {
            if (deadline >= 0 && d.last_work >= deadline) return 0;
            continue;
        }
        double now = now_us();
        if (deadline >= 0 && now >= deadline) return 0;
        if (keep_looking(e, &d)) {
            sched_yield();
            continue;
        }
        atomic_fetch_add_explicit(&e->n_sleeps, 1, memory_order_relaxed);
        long timeout = sleep_timeout_us(e, &d.pause_us);
        if (deadline >= 0 && (timeout < 0 || (double)timeout > deadline - now)) timeout = (long)(deadline - now) + 1;
        pc_doorbell_sleep(e->bells, e->looked_seq, timeout, e->nactive || e->nbars ? PC_SLEEP_ACTIVE : PC_SLEEP_IDLE,
                          PC_SLEEPER_APP);
        /* a ring may be for another application thread waiting on a
         * predicate of its own (wait_notified): let it look again */
        pc_engine_notify(e);
    }
}

/* Takes the token for an application thread; 0 if another application
 * thread holds it.  The progress thread gives it up at its next look. */
static int app_takes_token(pc_engine_t *e)
{
    atomic_fetch_add(&e->app_wants, 1);
    int got;
    for (;;) {
        if ((got = take_token(e, TOKEN_APP)) || atomic_load(&e->token) == TOKEN_APP) break;
        sched_yield();
    }
    atomic_fetch_sub(&e->app_wants, 1);
    return got;
}

static int waiter_may_go(pc_engine_t *e, pc_pred_fn pred, void *arg)
{
    return pred(arg) || atomic_load(&e->token) != TOKEN_APP;
}

/* Another application thread progresses: wait for its notifications (until
 * the deadline, if any). */
static void wait_notified(pc_engine_t *e, pc_pred_fn pred, void *arg, double deadline)
{
    double t0 = now_us();
    double spin = (double)atomic_load(&e->wait_spin_us);
    while (now_us() - t0 < spin) {
        if (waiter_may_go(e, pred, arg)) return;
        sched_yield();
    }
    pthread_mutex_lock(&e->wlock);
    atomic_fetch_add(&e->nwaiters, 1);
    while (!waiter_may_go(e, pred, arg)) {
        if (deadline < 0) {
            pthread_cond_wait(&e->wcond, &e->wlock);
            continue;
        }
        double left = deadline - now_us();
        if (left <= 0) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts); /* the condition variable's clock */
        long long ns = ts.tv_nsec + (long long)(left * 1e3);
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&e->wcond, &e->wlock, &ts);
    }
    atomic_fetch_sub(&e->nwaiters, 1);
    pthread_mutex_unlock(&e->wlock);
}

int pc_engine_wait_for(pc_engine_t *e, pc_pred_fn pred, void *arg, double timeout_us, double *began_us)
{
    /* the deadline is set from the first clock reading the wait needs
     * anyway: a wait that completes at once reads the clock no more often
     * than one without a deadline */
    double deadline = -1.0;
    if (began_us) *began_us = -1.0;
    int ok = 1;
    while (!pred(arg)) {
        if (app_takes_token(e)) {
            ok = app_drives(e, pred, arg, timeout_us, &deadline);
            app_gives_token(e);
            break;
        }
        if (timeout_us >= 0) {
            double now = now_us();
            if (deadline < 0) deadline = now + timeout_us;
            if (now >= deadline) {
                ok = 0;
                break;
            }
        }
        /* tasks queued and keys marked quietly for this wait: the holder
         * runs them */
        if (atomic_load(&e->qlen) || pc_doorbell_kicked(e->bells)) pc_doorbell_ring_self(e->bells);
        wait_notified(e, pred, arg, deadline);
    }
    /* tasks queued by pc_engine_post_quiet, keys marked by pc_engine_mark
     * for this wait: someone runs them */
    if (atomic_load(&e->qlen) || pc_doorbell_kicked(e->bells)) pc_doorbell_ring_self(e->bells);
    if (began_us && deadline >= 0) *began_us = deadline - timeout_us;
    return ok;
}

void pc_engine_wait(pc_engine_t *e, pc_pred_fn pred, void *arg) { (void)pc_engine_wait_for(e, pred, arg, -1.0, NULL); }

void pc_engine_notify(pc_engine_t *e)
{
    /* pairs with the seq_cst increment in wait_notified: either the waiter
     * sees the predicate true, or we see the waiter and wake it */
    if (atomic_load(&e->nwaiters)) {
        pthread_mutex_lock(&e->wlock);
        pthread_cond_broadcast(&e->wcond);
        pthread_mutex_unlock(&e->wlock);
    }
}

int pc_engine_key_alloc(pc_engine_t *e)
{
    int key = -1;
    pthread_mutex_lock(&e->qlock);
    for (int k = 0; k < PC_KICK_KEYS && key < 0; k++)
        if (!e->keys_used[k]) {
            e->keys_used[k] = 1;
            key = k;
        }
    pthread_mutex_unlock(&e->qlock);
    return key;
}

void pc_engine_key_free(pc_engine_t *e, int key)
{
    if (key < 0 || key >= PC_KICK_KEYS) return;
    pthread_mutex_lock(&e->qlock);
    e->keys_used[key] = 0;
    pthread_mutex_unlock(&e->qlock);
}

void pc_engine_set_poller(pc_engine_t *e, int key, pc_poll_fn fn, void *arg)
{
    if (key < 0 || key >= PC_KICK_KEYS) return;
    if (!e->pollers && !(e->pollers = calloc(PC_KICK_KEYS, sizeof *e->pollers))) {
        pc_log(PCOLL_LOG_ERROR, "no memory for the keyed pollers");
        return;
    }
    e->pollers[key].fn = fn;
    e->pollers[key].arg = arg;
}

int pc_engine_kick(pc_engine_t *e, int peer, int key) { return pc_doorbell_kick(e->bells, peer, key, 1); }
void pc_engine_mark(pc_engine_t *e, int key) { pc_doorbell_kick(e->bells, e->me, key, 0); }
int pc_engine_nudge(pc_engine_t *e, int peer)
{
    if (!pc_doorbells_reachable(e->bells, peer)) return 0;
    pc_doorbell_nudge(e->bells, peer);
    return 1;
}
int pc_engine_can_kick(const pc_engine_t *e, int peer) { return pc_doorbells_reachable(e->bells, peer); }

const pc_tags_t *pc_engine_tags(const pc_engine_t *e) { return &e->tags; }

void pc_engine_stats(const pc_engine_t *e, pc_engine_stats_t *out)
{
    out->loops = atomic_load(&e->n_loops);
    out->sleeps = atomic_load(&e->n_sleeps);
    out->tasks = atomic_load(&e->n_tasks);
    out->requests = atomic_load(&e->n_requests);
    out->data_bytes = atomic_load(&e->data_bytes);
    out->data_msgs = atomic_load(&e->data_msgs);
    out->ctrl_bytes = atomic_load(&e->ctrl_bytes);
    out->ctrl_msgs = atomic_load(&e->ctrl_msgs);
    out->stale_requests = atomic_load(&e->n_stale);
    out->stale_dropped = atomic_load(&e->n_dropped);
}
