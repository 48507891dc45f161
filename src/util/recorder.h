/*
 * The timeline recorder: events into per-thread buffers, written to one
 * file per rank as JSON lines (docs/timeline.md).  Pure C: no MPI, no
 * other pcoll layer; core/timeline.c starts and stops it and measures the
 * clocks.
 *
 *   thread A: pc_rec_event -> [buffer A] --full: copied by A--+
 *   thread B: pc_rec_event -> [buffer B] --full: copied by B--+--> spill (raw)
 *   stop:     every buffer's rest --------------------------- +
 *             then the spill formatted as JSON lines, the stop line --> PREFIX.R.jsonl
 *
 * A thread's first event of a session registers its buffer (a lock and,
 * the first time, an allocation); after that an event is a clock read and
 * a copy into the thread's own buffer: no lock, no allocation.  The owner
 * publishes each event by advancing `head`; whoever writes a buffer out
 * (the owner when it is full, the stop) does so under the file's lock, up
 * to the published head.  Nothing is dropped.  A process that dies before
 * the stop leaves only the header line.
 */
#ifndef PC_UTIL_RECORDER_H
#define PC_UTIL_RECORDER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* What an event is; docs/timeline.md lists each one's keys. */
typedef enum pc_ev_type {
    PC_EV_ALLREDUCE,
    PC_EV_PARTIAL_CALL,
    PC_EV_ROUND_START,
    PC_EV_ROUND,
    PC_EV_PREDUCE,
    PC_EV_FUSION_PLAN,
    PC_EV_FUSION_READY,
    PC_EV_FUSION_BUCKET,
    PC_EV_FUSION_WAIT,
    PC_EV_MARK,
    PC_EV_STALL,
    PC_EV_THREAD,
    PC_EV_LEFT_OUT,
    PC_EV_NTYPES
} pc_ev_type_t;

/* One event: a cache line, and as many more (`extra` slots of the same
 * size) as its payload needs.  The payload starts in the line's data: the
 * type's fields (integers, static strings: pointers to literals that live
 * as long as the process, or doubles: their bits; the type's description
 * in recorder.c says which), then a list of ranks, then a text.  The
 * common events (an allreduce, a mark with a short name) take one line. */
#define PC_EV_FIELDS 9 /* at most, per type */
#define PC_EV_DATA 40  /* payload bytes in the first line */
typedef struct pc_ev {
    uint64_t t, dur;     /* ns of CLOCK_MONOTONIC; dur 0 for instants */
    uint16_t type;       /* pc_ev_type_t */
    uint16_t extra;      /* slots that follow */
    uint16_t nlist;      /* ranks in the payload */
    uint16_t ntext;      /* bytes of text after them */
    unsigned char data[PC_EV_DATA];
} pc_ev_t;

#define PC_REC_BUF_EVENTS 4096 /* per thread: 256 KiB, within a core's cache */

typedef struct pc_rec_buf pc_rec_buf_t;

typedef struct pc_rec {
    /* read at every event site, written only by the open and the close: a
     * cache line of their own, shared by no field that changes */
    _Alignas(64) atomic_int on; /* recording */
    atomic_ullong session;  /* this session's number, unique in the process
                               (0: none yet): buffers of an older one start over */
    _Alignas(64) pthread_mutex_t lock; /* the buffer list, the file and every write */
    pc_rec_buf_t *bufs;     /* every thread's that recorded, ever */
    int nthreads;           /* tids handed out this session */
    FILE *file;             /* the JSON lines */
    FILE *spill;            /* full buffers, raw, until the close formats them */
    uint64_t written;       /* events written this session */
    _Atomic uint64_t tick0; /* the open's reading of the events' clock, */
    uint64_t mono0;         /* and of CLOCK_MONOTONIC at the same instant */
    int64_t shift_ns;       /* added to every time the files get (testing) */
    double ns_per_tick;     /* the close's: (mono1 - mono0) / (tick1 - tick0) */
    int write_failed;       /* errno of the first failed write, 0 */
} pc_rec_t;

/* CLOCK_MONOTONIC in nanoseconds: the files' clock. */
static inline uint64_t pc_rec_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Events' time stamps: the CPU's time-stamp counter where it is invariant
 * (x86-64 with constant_tsc and nonstop_tsc, and the kernel's clock source
 * is the TSC: a third of a clock call here), else CLOCK_MONOTONIC
 * nanoseconds.  The close turns them into the files'
 * clock by readings of both taken at the open and at the close. */
extern int pc_rec_use_tsc; /* set by the first pc_rec_init */
static inline uint64_t pc_rec_now(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (pc_rec_use_tsc) return __builtin_ia32_rdtsc();
#endif
    return pc_rec_mono_ns();
}

/* acquire: a thread that sees it on sees the session that the open wrote before */
static inline int pc_rec_on(pc_rec_t *r) { return r && atomic_load_explicit(&r->on, memory_order_acquire); }

int pc_rec_init(pc_rec_t *r);
void pc_rec_destroy(pc_rec_t *r); /* stopped first */

/* Opens the session on an open file for the JSON lines and an empty one
 * for full buffers (both the recorder's from here; the spill is best an
 * unlinked temporary: it is read back at the close); header: the header
 * line's keys after "ev" (JSON, without braces). */
void pc_rec_open(pc_rec_t *r, FILE *file, FILE *spill, const char *header);
/* Stops recording, writes every buffer's rest and the stop line (its keys
 * after "ev", "t" and "events"), closes the file.  0, or the errno of a
 * write that failed during the session. */
int pc_rec_close(pc_rec_t *r, const char *stop_keys);

/* Records one event (when on; callers test pc_rec_on first to skip
 * computing the fields): list, nlist ranks (NULL: none); text (NULL:
 * none; cut at PC_EV_TEXT_MAX bytes). */
#define PC_EV_LIST_MAX 4096
#define PC_EV_TEXT_MAX 1024
void pc_rec_event(pc_rec_t *r, pc_ev_type_t type, uint64_t t, uint64_t dur, const int64_t f[PC_EV_FIELDS],
                  const int *list, int nlist, const char *text);

/* The calling thread's name in the timeline files ("application" unless
 * set): the progress thread names itself. */
void pc_rec_thread_name(const char *name);

/* A double kept in an event field. */
static inline int64_t pc_ev_double(double d)
{
    union {
        double d;
        int64_t i;
    } u = {.d = d};
    return u.i;
}
static inline int64_t pc_ev_str(const char *s) { return (int64_t)(intptr_t)s; }
/* two integers of 32 bits (signed) in one field: small ones, paired so
 * that the frequent events fit in one line */
static inline int64_t pc_ev_pair(int64_t low, int64_t high)
{
    return (int64_t)(((uint64_t)(uint32_t)(int32_t)high << 32) | (uint32_t)(int32_t)low);
}
static inline int pc_ev_low(int64_t v) { return (int32_t)(uint32_t)((uint64_t)v & 0xffffffffu); }
static inline int pc_ev_high(int64_t v) { return (int32_t)(uint32_t)((uint64_t)v >> 32); }

#endif
