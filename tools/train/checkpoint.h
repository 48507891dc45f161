/* pcoll-train's checkpoint file: one file DIR/checkpoint, replaced
 * atomically (written to DIR/checkpoint.tmp, flushed to disk, renamed), so
 * that a crash at any moment leaves the previous checkpoint or the new one,
 * never a torn one.  The layout:
 *
 *   pcoll-train checkpoint 1\n          the magic and the format version
 *   key value\n ...                     the header below, as text
 *   end\n
 *   nparams floats: the parameters      native float32 (byte order checked
 *   nparams floats: the momentum        by the header's "endian" key)
 *
 * Only file I/O here: when and how the ranks agree on the state is
 * train.c's business (every rank's model the same, rank 0 writes). */
#ifndef PCOLL_TRAIN_CHECKPOINT_H
#define PCOLL_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

typedef struct ckpt_header {
    char task[16];          /* fmnist | hyperplane */
    char model[256];        /* the model's widths, "784-512-256-128-10" */
    uint64_t nparams;
    char algo[64];          /* the exchange that wrote it (information only) */
    uint64_t seed;
    int ranks;              /* the ranks that wrote it */
    uint64_t step;          /* steps done */
    long epoch;             /* the epoch the next step belongs to (0-based) */
    long epoch_step;        /* ... and the steps of it done */
    long steps_per_epoch;   /* at the ranks that wrote it */
    uint64_t total_steps;   /* the run's planned steps */
} ckpt_header_t;

/* Creates DIR (and its parents) if needed and checks that it can be
 * written; 0, or -1 with a message naming it. */
int ckpt_prepare(const char *dir);

/* Writes DIR/checkpoint (DIR prepared); 0, or -1 with tr_fail's
 * message naming the file. */
int ckpt_write(const char *dir, const ckpt_header_t *h, const float *params, const float *velocity);

/* Reads DIR/checkpoint's header; 0, or -1 with a message (no file, not a
 * checkpoint, another version or byte order). */
int ckpt_read_header(const char *dir, ckpt_header_t *h);

/* Reads the parameters and momentum (nparams each) after checking that the
 * file's header matches h->nparams; 0 or -1 with a message. */
int ckpt_read_state(const char *dir, const ckpt_header_t *h, float *params, float *velocity);

#endif
