/*
 * Doorbells: one word per rank that the rank's progressing thread sleeps on
 * (a futex).  The words of the ranks on one node share memory
 * (MPI_Win_allocate_shared), so a rank that sends a message to a sleeping
 * neighbour wakes it at once: an idle rank needs no timer, and an activation
 * reaches it in microseconds.  Ranks on other nodes cannot ring; the engine
 * then keeps polling with short pauses.  Without shared memory every doorbell
 * is private (only the process's own posts ring it).
 *
 * Two threads of a rank may sleep on its bell: the progress thread and an
 * application thread that holds the progress token (progress.h).  The bell
 * says which of them answers (`holder`); a ring wakes only that one, so the
 * other sleeps on undisturbed.
 *
 *   sleeper                            ringer (any thread, any local rank)
 *   seq = pc_doorbell_seq()            ... make the work visible ...
 *   look for work; none:               seq += 1
 *   mark itself sleeping               if the holder sleeps: futex wake it
 *   futex wait while seq unchanged
 *   unmark
 */
#ifndef PC_ENGINE_DOORBELL_H
#define PC_ENGINE_DOORBELL_H

#include <mpi.h>
#include <stdint.h>

typedef struct pc_doorbells pc_doorbells_t;

/* Collective over comm (node: this rank's node, a part of comm). Never
 * fails for lack of shared memory (falls back to a private doorbell);
 * returns an error only when out of memory. */
int pc_doorbells_create(MPI_Comm comm, MPI_Comm node, pc_doorbells_t **out);
/* Collective (frees the shared window). */
void pc_doorbells_destroy(pc_doorbells_t *d);

/* 1 when every rank of the communicator can ring this rank. */
int pc_doorbells_all_local(const pc_doorbells_t *d);
/* 1 when this rank can ring `peer` (a rank on its node, bells shared). */
int pc_doorbells_reachable(const pc_doorbells_t *d, int peer);

/* How a thread sleeps: with nothing in flight only control messages should
 * wake it; with an operation in flight, its data too. */
typedef enum { PC_SLEEP_IDLE = 1, PC_SLEEP_ACTIVE = 2 } pc_sleep_mode_t;

/* Who sleeps: the progress thread or the application thread holding the token. */
typedef enum { PC_SLEEPER_THREAD = 0, PC_SLEEPER_APP = 1 } pc_sleeper_t;

/* The calling rank: read before looking for work ... */
uint32_t pc_doorbell_seq(const pc_doorbells_t *d);
/* ... then sleep unless rung since; timeout_us < 0: no timeout. */
void pc_doorbell_sleep(pc_doorbells_t *d, uint32_t seq, long timeout_us, pc_sleep_mode_t mode, pc_sleeper_t who);

/* Who answers this rank's rings from now on. */
void pc_doorbell_set_holder(pc_doorbells_t *d, pc_sleeper_t who);
/* Wake whoever answers this rank's rings (application posts). */
void pc_doorbell_ring_self(pc_doorbells_t *d);
/* Wake this rank's progress thread whoever answers (a token handed back). */
void pc_doorbell_wake_thread(pc_doorbells_t *d);
/* A control message was sent to `peer` (call exactly once per message):
 * counts it in peer's bell and wakes peer's answering thread if it sleeps. */
void pc_doorbell_ring(pc_doorbells_t *d, int peer);
/* Wake `peer` if it sleeps, without counting a message. */
void pc_doorbell_nudge(pc_doorbells_t *d, int peer);
/* Control messages sent to the calling rank so far (by local ranks).  While
 * it exceeds the number its listeners received, a message is on its way or
 * being matched, possibly by another thread inside MPI: no long sleep. */
uint32_t pc_doorbell_ctrl_sent(const pc_doorbells_t *d);
/* Data for `peer`: wake it only if it sleeps with an operation in flight (a
 * rank not yet taking part would find nothing to do).  This check and the
 * sleeper's may cross; the sleeper's timeout covers that rare case. */
void pc_doorbell_ring_data(pc_doorbells_t *d, int peer);

/*
 * Kicks: a bell also holds one bit per key (0 <= key < PC_KICK_KEYS), so
 * that a ringer can say what to look at: the rank then polls only what was
 * kicked, however many things it has (progress.h, keyed pollers).  Kicking
 * sets the key's bit, then a summary bit for its word, then rings.
 */
#define PC_KICK_KEYS 4096
/* Sets `key` at `peer` (this rank or a rank on its node; 0 if it cannot be
 * reached) and wakes it if it sleeps (ring = 0: sets it only); returns 1 if
 * set. */
int pc_doorbell_kick(pc_doorbells_t *d, int peer, int key, int ring);
/* 1 if keys are set at this rank. */
int pc_doorbell_kicked(const pc_doorbells_t *d);
/* Calls fn(arg, key) for every key set at this rank since the last call,
 * clearing them; returns how many. */
int pc_doorbell_take_kicks(pc_doorbells_t *d, void (*fn)(void *arg, int key), void *arg);

#endif
