/*
 * The pcoll Python extension (pcoll._pcoll): the C API over CPython objects.
 *
 *   module.c    the module: pcoll.Error, status codes, names <-> enums,
 *               the registry of live contexts
 *   buffer.c    Python objects -> (pointer, count, dtype): the buffer
 *               protocol (numpy arrays, ...) or a CPU torch tensor, checked
 *   context.c   Context: init from an MPI communicator handle, allreduce
 *               (blocking, nonblocking, plans), agreement, calibration,
 *               settings; finalize closes what is still open
 *   request.c   Request and Plan: buffers held until the operation is done
 *   partial.c   Partial (eager-SGD, WAGMA) and its info
 *   preduce.c   PReduce (dynamic groups) and its info
 *   fusion.c    CostModel, FusionPlan, Fusion (MG-WFBP)
 *
 * Rules every file follows: the GIL is released around every call that may
 * block (anything that waits for other ranks); the progress thread never
 * runs Python; an object that still uses a buffer holds a reference to it
 * (a Py_buffer view) until the library is done with it; errors are
 * pcoll.Error(status, message) with the library's pcoll_last_error().
 */
#ifndef PCOLL_PY_H
#define PCOLL_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "pcoll.h"

/* ---- errors (module.c) ---- */
extern PyObject *pcpy_Error;
/* Raises pcoll.Error(status, pcoll_last_error()); returns NULL. */
PyObject *pcpy_raise(int status);
/* pcoll.Error(status, msg), for errors the binding finds itself. */
PyObject *pcpy_raise_msg(int status, const char *msg);
/* The same as -1, for functions that return int. */
int pcpy_raise_int(int status);

/* An exception held while a collective call still runs (module.c): a rank
 * whose own argument is bad still makes the collective call, made to fail
 * there, so that every rank fails at once instead of the others waiting
 * for the one that raised; then the exception is raised as it was. */
typedef struct pcpy_pending {
    PyObject *type, *value, *tb;
    char why[400]; /* str() of the exception */
} pcpy_pending_t;
/* Takes the current exception (if any): 1 if there was one. */
int pcpy_pending_take(pcpy_pending_t *p);
/* Raises it again; returns NULL. */
PyObject *pcpy_pending_raise(pcpy_pending_t *p);

/* ---- names <-> enums (module.c) ---- */
/* "float32" / "float64" / "int32" / "int64", a pcoll dtype number, or an
 * object with a `name`/str() among those (numpy and torch dtypes) */
int pcpy_dtype_from(PyObject *obj, const char *arg, pcoll_dtype_t *out);
/* "sum" / "avg" ("average", "mean") or a pcoll op number */
int pcpy_op_from(PyObject *obj, const char *arg, pcoll_op_t *out);
/* None -> *ranks = NULL (every rank); a sequence of ints -> a new array
 * (PyMem_Free it) */
int pcpy_group_from(PyObject *obj, const char *arg, int **ranks, int *n);
/* A tuple of n ints (NULL with an exception on failure) */
PyObject *pcpy_int_tuple(const int *v, int n);

/* ---- buffers (buffer.c) ---- */
typedef struct pcpy_buf {
    Py_buffer view;       /* held while `held` (the buffer protocol) */
    PyObject *tensor;     /* or a reference to a torch tensor */
    int held;
    void *ptr;
    size_t count;         /* elements */
    pcoll_dtype_t dtype;
} pcpy_buf_t;

/* Takes a view of a C-contiguous buffer of float32/float64/int32/int64
 * elements (writable if asked).  `arg` names the argument in the
 * TypeError / ValueError.  A CPU torch tensor's own memory is taken
 * (data_ptr, numel, dtype; the tensor is held), with no copy. */
int pcpy_buf_get(PyObject *obj, const char *arg, int writable, pcpy_buf_t *out);
void pcpy_buf_release(pcpy_buf_t *b);

/* ---- contexts and their children (context.c) ---- */
typedef struct pcpy_child pcpy_child_t;
typedef struct pcpy_context {
    PyObject_HEAD
    pcoll_t *ctx;         /* NULL once finalized */
    int active;           /* threads in a call without the GIL (finalize waits for none) */
    pcpy_child_t *children; /* open objects, newest first */
    PyObject *inflight;   /* set: requests and fusion steps in flight (kept alive) */
    PyObject *comm;       /* the mpi4py communicator it was made from (kept alive) */
} pcpy_context_t;

/* Every object that belongs to a context: closed (collectively where its
 * free is) before the context is finalized.  close(self, force): 0, or -1
 * with an exception set; it leaves the context on success, or when forced
 * (finalize), then forgetting what it could not free (buffers stay held). */
struct pcpy_child {
    PyObject *self;
    int (*close)(PyObject *self, int force);
    pcpy_child_t *prev, *next;
};

extern PyTypeObject pcpy_ContextType;

/* Runs `stmt` without the GIL, counted as a call on context c (finalize
 * refuses while another thread is in one). */
#define PCPY_BLOCKING(c, stmt)                                                                                         \
    do {                                                                                                               \
        (c)->active++;                                                                                                 \
        Py_BEGIN_ALLOW_THREADS                                                                                         \
        stmt;                                                                                                          \
        Py_END_ALLOW_THREADS                                                                                           \
        (c)->active--;                                                                                                 \
    } while (0)

/* The context's pcoll_t, or NULL with pcoll.Error (STATE) if finalized. */
pcoll_t *pcpy_ctx(pcpy_context_t *c, const char *fn);
void pcpy_child_link(pcpy_context_t *c, pcpy_child_t *child, PyObject *self, int (*close)(PyObject *, int));
void pcpy_child_unlink(pcpy_context_t *c, pcpy_child_t *child);
/* Keeps obj alive while it is in flight (a request, a fusion step). */
int pcpy_keep(pcpy_context_t *c, PyObject *obj);
void pcpy_unkeep(pcpy_context_t *c, PyObject *obj);

/* ---- types made by other files ---- */
extern PyTypeObject pcpy_RequestType, pcpy_PlanType;
extern PyTypeObject pcpy_PartialType, pcpy_PReduceType;
extern PyTypeObject pcpy_CostModelType, pcpy_FusionPlanType, pcpy_FusionType;

/* request.c: a started request (of a plan, or of its own buffers) */
PyObject *pcpy_request_new(pcpy_context_t *c, pcoll_request_t *req, PyObject *plan, pcpy_buf_t *send,
                           pcpy_buf_t *recv);
PyObject *pcpy_plan_new(pcpy_context_t *c, pcoll_plan_t *plan, pcpy_buf_t *send, pcpy_buf_t *recv);

/* partial.c, preduce.c, fusion.c: the Context methods that make them */
PyObject *pcpy_partial_create(pcpy_context_t *c, PyObject *args, PyObject *kw);
PyObject *pcpy_preduce_create(pcpy_context_t *c, PyObject *args, PyObject *kw);
PyObject *pcpy_fusion_create(pcpy_context_t *c, PyObject *args, PyObject *kw);
PyObject *pcpy_calibrate(pcpy_context_t *c, PyObject *args, PyObject *kw);
/* fusion.c: a CostModel object holding a copy of m */
PyObject *pcpy_cost_model_new(const pcoll_cost_model_t *m);

/* module init helpers: each file adds its types */
int pcpy_add_types_request(PyObject *m);
int pcpy_add_types_partial(PyObject *m);
int pcpy_add_types_preduce(PyObject *m);
int pcpy_add_types_fusion(PyObject *m);

#endif
