/* pcoll._pcoll.Context: a pcoll context over an MPI communicator, and the
 * calls that take a context (allreduce in its three forms, agreement,
 * settings).  The objects made from a context (requests, plans, partial,
 * preduce and fusion objects) are its children: finalize closes the open
 * ones, newest first, before pcoll_finalize. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "pcoll_py.h"

pcoll_t *pcpy_ctx(pcpy_context_t *c, const char *fn)
{
    if (c && c->ctx) return c->ctx;
    char msg[200];
    snprintf(msg, sizeof msg, "%s: the context was finalized", fn);
    pcpy_raise_msg(PCOLL_ERR_STATE, msg);
    return NULL;
}

void pcpy_child_link(pcpy_context_t *c, pcpy_child_t *child, PyObject *self, int (*close)(PyObject *, int))
{
    child->self = self;
    child->close = close;
    child->prev = NULL;
    child->next = c->children;
    if (c->children) c->children->prev = child;
    c->children = child;
}

void pcpy_child_unlink(pcpy_context_t *c, pcpy_child_t *child)
{
    if (!child->self) return; /* not linked */
    if (child->prev) child->prev->next = child->next;
    else if (c->children == child) c->children = child->next;
    if (child->next) child->next->prev = child->prev;
    child->prev = child->next = NULL;
    child->self = NULL;
}

int pcpy_keep(pcpy_context_t *c, PyObject *obj) { return PySet_Add(c->inflight, obj); }

void pcpy_unkeep(pcpy_context_t *c, PyObject *obj)
{
    PyObject *type, *value, *tb; /* keep an exception being raised */
    PyErr_Fetch(&type, &value, &tb);
    if (PySet_Discard(c->inflight, obj) < 0) PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

/* ---- life ---- */

static PyObject *context_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args;
    (void)kw;
    pcpy_context_t *c = (pcpy_context_t *)type->tp_alloc(type, 0);
    if (!c) return NULL;
    c->inflight = PySet_New(NULL);
    if (!c->inflight) {
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}

/* Context(handle=None, comm=None): collective over the communicator whose
 * Fortran handle is `handle` (mpi4py: comm.py2f()); None: MPI_COMM_WORLD.
 * `comm` is kept alive with the context. */
static int context_init(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"handle", "comm", NULL};
    PyObject *handle = Py_None, *comm = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:Context", kwlist, &handle, &comm)) return -1;
    if (c->ctx) {
        pcpy_raise_msg(PCOLL_ERR_STATE, "Context: this context is initialized already");
        return -1;
    }
    MPI_Comm mc = MPI_COMM_WORLD;
    if (handle != Py_None) {
        long h = PyLong_Check(handle) ? PyLong_AsLong(handle) : -1;
        if (!PyLong_Check(handle) || (h == -1 && PyErr_Occurred()) || h < 0 || h > INT32_MAX) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "handle must be an MPI communicator's Fortran handle (comm.py2f()), not %R",
                         handle);
            return -1;
        }
        int fin = 0;
        MPI_Finalized(&fin);
        if (fin) {
            pcpy_raise_msg(PCOLL_ERR_STATE, "Context: MPI has been finalized");
            return -1;
        }
        mc = MPI_Comm_f2c((MPI_Fint)h);
    }
    pcoll_t *ctx = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pcoll_init(mc, &ctx);
    Py_END_ALLOW_THREADS
    if (rc != PCOLL_SUCCESS) return pcpy_raise_int(rc);
    c->ctx = ctx;
    Py_XSETREF(c->comm, Py_NewRef(comm));
    return 0;
}

/* The first of several failures is kept, the others dropped. */
static void keep_first(pcpy_pending_t *first)
{
    if (first->type)
        PyErr_Clear();
    else
        pcpy_pending_take(first);
}

/* Closes the context's requests in flight and its children, then
 * finalizes; the first failure is raised after everything was tried. */
static PyObject *context_finalize(pcpy_context_t *c, PyObject *noargs)
{
    (void)noargs;
    if (!c->ctx) Py_RETURN_NONE; /* finalized already: nothing to do */
    if (c->active > 0)
        return pcpy_raise_msg(PCOLL_ERR_STATE, "Context.finalize: another thread is in a call on this context");
    pcpy_pending_t first = {0};
    /* in flight: complete them (they hold buffers the library may use) */
    while (PySet_GET_SIZE(c->inflight) > 0) {
        PyObject *obj = PySet_Pop(c->inflight);
        if (!obj) break;
        PyObject *r = PyObject_CallMethod(obj, "wait", NULL);
        if (!r) keep_first(&first);
        Py_XDECREF(r);
        Py_DECREF(obj);
    }
    /* open objects, newest first; a forced close leaves the context even
     * when it fails */
    while (c->children) {
        pcpy_child_t *child = c->children;
        PyObject *self = Py_NewRef(child->self);
        if (child->close(self, 1) < 0) keep_first(&first);
        pcpy_child_unlink(c, child);
        Py_DECREF(self);
    }
    pcoll_t *ctx = c->ctx;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pcoll_finalize(&ctx);
    Py_END_ALLOW_THREADS
    c->ctx = NULL;
    if (first.type) return pcpy_pending_raise(&first);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

/* shrink() -> (handle, Context): pcoll_shrink, collective over the live
 * ranks.  This context is then replaced: its progress thread stops, and its
 * open objects and requests stay as they are (their calls fail; MPI may
 * still hold their buffers, so they are kept, with this object). */
static PyObject *context_shrink(pcpy_context_t *c, PyObject *noargs)
{
    (void)noargs;
    pcoll_t *ctx = pcpy_ctx(c, "shrink");
    if (!ctx) return NULL;
    if (c->active > 0)
        return pcpy_raise_msg(PCOLL_ERR_STATE, "Context.shrink: another thread is in a call on this context");
    MPI_Comm comm = MPI_COMM_NULL;
    pcoll_t *survivors = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pcoll_shrink(ctx, &comm, &survivors);
    Py_END_ALLOW_THREADS
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    pcoll_finalize(&c->ctx); /* replaced: stops its progress thread only */
    PyObject *none = PyTuple_New(0);
    pcpy_context_t *n = none ? (pcpy_context_t *)Py_TYPE(c)->tp_new(Py_TYPE(c), none, NULL) : NULL;
    Py_XDECREF(none);
    if (!n) {
        pcoll_finalize(&survivors);
        MPI_Comm_free(&comm);
        return NULL;
    }
    n->ctx = survivors;
    return Py_BuildValue("(iN)", (int)MPI_Comm_c2f(comm), (PyObject *)n);
}

static void context_dealloc(pcpy_context_t *c)
{
    /* pcoll_finalize is collective: it cannot run from the garbage collector
     * at a moment that differs between ranks.  The pcoll package keeps every
     * context until finalize() or the end of the program. */
    if (c->ctx)
        PySys_WriteStderr("pcoll: a Context was destroyed without finalize(); its resources are leaked\n");
    Py_XDECREF(c->inflight);
    Py_XDECREF(c->comm);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* ---- allreduce ---- */

typedef struct allreduce_args {
    pcpy_buf_t send, recv;
    const void *sendbuf; /* send.ptr or PCOLL_IN_PLACE */
    pcoll_op_t op;
    int *group, group_size;
} allreduce_args_t;

static void allreduce_args_release(allreduce_args_t *a)
{
    pcpy_buf_release(&a->send);
    pcpy_buf_release(&a->recv);
    PyMem_Free(a->group);
    a->group = NULL;
}

/* (send, recv=None, op="sum", group=None): recv None or the same object as
 * send: in place in send; fmt: "O|OOO:<the method's name>" */
static int parse_allreduce(PyObject *args, PyObject *kw, const char *fmt, allreduce_args_t *a)
{
    static char *kwlist[] = {"send", "recv", "op", "group", NULL};
    PyObject *send, *recv = Py_None, *op = NULL, *group = Py_None;
    memset(a, 0, sizeof *a);
    a->op = PCOLL_SUM;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &send, &recv, &op, &group)) return -1;
    if (op && pcpy_op_from(op, "op", &a->op) < 0) return -1;
    int in_place = recv == Py_None || recv == send;
    if (in_place) {
        if (pcpy_buf_get(send, "send", 1, &a->recv) < 0) return -1;
        a->sendbuf = PCOLL_IN_PLACE;
    } else {
        if (pcpy_buf_get(send, "send", 0, &a->send) < 0) return -1;
        if (pcpy_buf_get(recv, "recv", 1, &a->recv) < 0) {
            allreduce_args_release(a);
            return -1;
        }
        if (a->send.dtype != a->recv.dtype) {
            PyErr_Format(PyExc_TypeError, "send holds %s but recv %s: they must be alike",
                         pcoll_dtype_name(a->send.dtype), pcoll_dtype_name(a->recv.dtype));
            allreduce_args_release(a);
            return -1;
        }
        if (a->send.count != a->recv.count) {
            PyErr_Format(PyExc_ValueError, "send has %zu elements but recv %zu: they must be alike", a->send.count,
                         a->recv.count);
            allreduce_args_release(a);
            return -1;
        }
        a->sendbuf = a->send.ptr;
    }
    if (pcpy_group_from(group, "group", &a->group, &a->group_size) < 0) {
        allreduce_args_release(a);
        return -1;
    }
    return 0;
}

static PyObject *context_allreduce(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    pcoll_t *ctx = pcpy_ctx(c, "allreduce");
    allreduce_args_t a;
    if (!ctx || parse_allreduce(args, kw, "O|OOO:allreduce", &a) < 0) return NULL;
    int rc;
    PCPY_BLOCKING(c, rc = pcoll_allreduce(ctx, a.sendbuf, a.recv.ptr, a.recv.count, a.recv.dtype, a.op, a.group,
                                          a.group_size));
    allreduce_args_release(&a);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *context_iallreduce(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    pcoll_t *ctx = pcpy_ctx(c, "iallreduce");
    allreduce_args_t a;
    if (!ctx || parse_allreduce(args, kw, "O|OOO:iallreduce", &a) < 0) return NULL;
    pcoll_request_t *req = NULL;
    int rc = pcoll_iallreduce(ctx, a.sendbuf, a.recv.ptr, a.recv.count, a.recv.dtype, a.op, a.group, a.group_size,
                              &req);
    PyMem_Free(a.group);
    a.group = NULL;
    if (rc != PCOLL_SUCCESS) {
        allreduce_args_release(&a);
        return pcpy_raise(rc);
    }
    return pcpy_request_new(c, req, NULL, &a.send, &a.recv); /* the request owns the views now */
}

static PyObject *context_allreduce_init(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    pcoll_t *ctx = pcpy_ctx(c, "allreduce_init");
    allreduce_args_t a;
    if (!ctx || parse_allreduce(args, kw, "O|OOO:allreduce_init", &a) < 0) return NULL;
    pcoll_plan_t *plan = NULL;
    int rc;
    PCPY_BLOCKING(c, rc = pcoll_allreduce_init(ctx, a.sendbuf, a.recv.ptr, a.recv.count, a.recv.dtype, a.op, a.group,
                                               a.group_size, &plan));
    PyMem_Free(a.group);
    a.group = NULL;
    if (rc != PCOLL_SUCCESS) {
        allreduce_args_release(&a);
        return pcpy_raise(rc);
    }
    return pcpy_plan_new(c, plan, &a.send, &a.recv);
}

/* _c_allreduce_loop(buf, iters) -> seconds: `iters` in-place allreduces of
 * buf called from C, back to back: the peer against which the binding's own
 * cost per call is measured (examples/bench_binding.py) */
static int timed_loop(pcoll_t *ctx, const pcpy_buf_t *b, int iters, double *seconds)
{
    int rc = PCOLL_SUCCESS;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < iters && rc == PCOLL_SUCCESS; i++)
        rc = pcoll_allreduce(ctx, PCOLL_IN_PLACE, b->ptr, b->count, b->dtype, PCOLL_SUM, NULL, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}

static PyObject *context_c_allreduce_loop(pcpy_context_t *c, PyObject *args)
{
    PyObject *obj;
    int iters;
    if (!PyArg_ParseTuple(args, "Oi:_c_allreduce_loop", &obj, &iters)) return NULL;
    pcoll_t *ctx = pcpy_ctx(c, "_c_allreduce_loop");
    pcpy_buf_t b;
    if (!ctx || pcpy_buf_get(obj, "buf", 1, &b) < 0) return NULL;
    int rc;
    double seconds = 0;
    PCPY_BLOCKING(c, rc = timed_loop(ctx, &b, iters, &seconds));
    pcpy_buf_release(&b);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    return PyFloat_FromDouble(seconds);
}

/* ---- agreement ---- */

/* agree(what, names, values, status=0, why=None); a bad argument here is
 * agreed on too (as a failure of this rank), so that no rank waits */
static PyObject *context_agree(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"what", "names", "values", "status", "why", NULL};
    const char *what = NULL, *why = NULL;
    PyObject *names = NULL, *values = NULL, *ns = NULL, *vs = NULL;
    int status = 0;
    pcoll_t *ctx = pcpy_ctx(c, "agree");
    if (!ctx) return NULL;
    Py_ssize_t n = 0;
    const char **cn = NULL;
    int64_t *cv = NULL;
    if (PyArg_ParseTupleAndKeywords(args, kw, "zOO|iz:agree", kwlist, &what, &names, &values, &status, &why) &&
        (ns = PySequence_Fast(names, "names must be a sequence of str")) &&
        (vs = PySequence_Fast(values, "values must be a sequence of int"))) {
        n = PySequence_Fast_GET_SIZE(ns);
        if (PySequence_Fast_GET_SIZE(vs) != n)
            PyErr_Format(PyExc_ValueError, "names has %zd items but values %zd", n, PySequence_Fast_GET_SIZE(vs));
        else if (n > INT32_MAX)
            PyErr_SetString(PyExc_ValueError, "too many values");
        else if (!(cn = PyMem_Malloc(sizeof(char *) * (size_t)(n + 1))) ||
                 !(cv = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1))))
            PyErr_NoMemory();
        for (Py_ssize_t i = 0; cv && i < n && !PyErr_Occurred(); i++) {
            PyObject *nm = PySequence_Fast_GET_ITEM(ns, i), *v = PySequence_Fast_GET_ITEM(vs, i);
            cn[i] = PyUnicode_Check(nm) ? PyUnicode_AsUTF8(nm) : NULL;
            if (!cn[i] && !PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "names[%zd] is not a str", i);
            if (!PyLong_Check(v) && !PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "values[%zd] is not an int", i);
            cv[i] = PyLong_Check(v) ? (int64_t)PyLong_AsLongLong(v) : 0;
        }
    }
    pcpy_pending_t bad;
    if (pcpy_pending_take(&bad)) {
        if (status == 0) status = PCOLL_ERR_ARG;
        if (!why) why = bad.why;
        n = 0;
    }
    int rc;
    PCPY_BLOCKING(c, rc = pcoll_agree(ctx, what, status, why, (int)n, cn, cv));
    PyMem_Free(cn);
    PyMem_Free(cv);
    Py_XDECREF(ns);
    Py_XDECREF(vs);
    if (bad.type) return pcpy_pending_raise(&bad); /* this rank's own mistake, as it was */
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

/* ---- timelines (docs/timeline.md) ---- */

static PyObject *context_timeline_start(pcpy_context_t *c, PyObject *arg)
{
    const char *prefix = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!prefix) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "timeline_start: prefix must be a str");
        return NULL;
    }
    pcoll_t *ctx = pcpy_ctx(c, "timeline_start");
    if (!ctx) return NULL;
    int rc;
    PCPY_BLOCKING(c, rc = pcoll_timeline_start(ctx, prefix));
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *context_timeline_stop(pcpy_context_t *c, PyObject *noargs)
{
    (void)noargs;
    pcoll_t *ctx = pcpy_ctx(c, "timeline_stop");
    if (!ctx) return NULL;
    int rc;
    PCPY_BLOCKING(c, rc = pcoll_timeline_stop(ctx));
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

/* mark(name, begin): a phase of the application begins (True) or ends */
static PyObject *context_mark(pcpy_context_t *c, PyObject *args)
{
    const char *name;
    int begin;
    if (!PyArg_ParseTuple(args, "sp:mark", &name, &begin)) return NULL;
    pcoll_t *ctx = pcpy_ctx(c, "mark");
    if (!ctx) return NULL;
    int rc = pcoll_timeline_mark(ctx, name, begin ? PCOLL_MARK_BEGIN : PCOLL_MARK_END);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *context_get_recording(pcpy_context_t *c, void *closure)
{
    (void)closure;
    pcoll_t *ctx = pcpy_ctx(c, "recording");
    if (!ctx) return NULL;
    return PyBool_FromLong(pcoll_timeline_recording(ctx));
}

/* ---- settings and counters ---- */

static PyObject *context_set_timeouts(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stall_warn_s", "timeout_s", NULL};
    double warn, tmo;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "dd:set_timeouts", kwlist, &warn, &tmo)) return NULL;
    pcoll_t *ctx = pcpy_ctx(c, "set_timeouts");
    if (!ctx) return NULL;
    int rc = pcoll_set_timeouts(ctx, warn, tmo);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *context_get_timeouts(pcpy_context_t *c, void *closure)
{
    (void)closure;
    pcoll_t *ctx = pcpy_ctx(c, "timeouts");
    double warn, tmo;
    if (!ctx) return NULL;
    int rc = pcoll_get_timeouts(ctx, &warn, &tmo);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    return Py_BuildValue("(dd)", warn, tmo);
}

static PyObject *context_stats(pcpy_context_t *c, PyObject *noargs)
{
    (void)noargs;
    pcoll_t *ctx = pcpy_ctx(c, "stats");
    pcoll_stats_t s;
    if (!ctx) return NULL;
    int rc = pcoll_get_stats(ctx, &s);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    return Py_BuildValue("{sKsKsKsKsKsK}", "data_bytes_sent", (unsigned long long)s.data_bytes_sent,
                         "data_messages_sent", (unsigned long long)s.data_messages_sent, "control_bytes_sent",
                         (unsigned long long)s.control_bytes_sent, "control_messages_sent",
                         (unsigned long long)s.control_messages_sent, "given_up_messages",
                         (unsigned long long)s.given_up_messages, "stale_messages_dropped",
                         (unsigned long long)s.stale_messages_dropped);
}

static PyObject *context_set_allreduce_algo(pcpy_context_t *c, PyObject *arg)
{
    pcoll_t *ctx = pcpy_ctx(c, "set_allreduce_algo");
    if (!ctx) return NULL;
    const char *s = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    /* the algorithms that can be forced: auto .. direct (shm is chosen only) */
    for (int i = PCOLL_ALGO_AUTO; s && i <= PCOLL_ALGO_DIRECT; i++)
        if (strcmp(s, pcoll_allreduce_algo_name((pcoll_allreduce_algo_t)i)) == 0) {
            int rc = pcoll_set_allreduce_algo(ctx, (pcoll_allreduce_algo_t)i);
            if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
            Py_RETURN_NONE;
        }
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "algo %R is not auto, recdbl, rabenseifner, ring or direct", arg);
    return NULL;
}

static PyObject *context_allreduce_algo_for(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"nbytes", "group_size", NULL};
    Py_ssize_t nbytes;
    int gs = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n|i:allreduce_algo_for", kwlist, &nbytes, &gs)) return NULL;
    pcoll_t *ctx = pcpy_ctx(c, "allreduce_algo_for");
    if (!ctx) return NULL;
    if (nbytes < 0) {
        PyErr_SetString(PyExc_ValueError, "nbytes must be >= 0");
        return NULL;
    }
    pcoll_allreduce_algo_t a = pcoll_allreduce_algo_for(ctx, (size_t)nbytes, gs < 0 ? pcoll_size(ctx) : gs);
    return PyUnicode_FromString(pcoll_allreduce_algo_name(a));
}

static PyObject *context_set_allreduce_thresholds(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"direct_bytes", "small_bytes", NULL};
    Py_ssize_t direct, small;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "nn:set_allreduce_thresholds", kwlist, &direct, &small)) return NULL;
    pcoll_t *ctx = pcpy_ctx(c, "set_allreduce_thresholds");
    if (!ctx) return NULL;
    if (direct < 0 || small < 0) {
        PyErr_SetString(PyExc_ValueError, "direct_bytes and small_bytes must be >= 0");
        return NULL;
    }
    int rc = pcoll_set_allreduce_thresholds(ctx, (size_t)direct, (size_t)small);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *context_get_progress_policy(pcpy_context_t *c, void *closure)
{
    (void)closure;
    pcoll_t *ctx = pcpy_ctx(c, "progress_policy");
    pcoll_progress_policy_t p;
    if (!ctx) return NULL;
    int rc = pcoll_get_progress_policy(ctx, &p);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    return Py_BuildValue("{sisisisi}", "idle_spin_us", p.idle_spin_us, "active_spin_us", p.active_spin_us,
                         "wait_spin_us", p.wait_spin_us, "max_sleep_us", p.max_sleep_us);
}

static int context_set_progress_policy(pcpy_context_t *c, PyObject *value, void *closure)
{
    (void)closure;
    pcoll_t *ctx = pcpy_ctx(c, "progress_policy");
    pcoll_progress_policy_t p;
    if (!ctx) return -1;
    if (!value || !PyDict_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "progress_policy must be set to a dict");
        return -1;
    }
    int rc = pcoll_get_progress_policy(ctx, &p);
    if (rc != PCOLL_SUCCESS) return pcpy_raise_int(rc);
    struct {
        const char *key;
        int *field;
    } f[] = {{"idle_spin_us", &p.idle_spin_us},
             {"active_spin_us", &p.active_spin_us},
             {"wait_spin_us", &p.wait_spin_us},
             {"max_sleep_us", &p.max_sleep_us}};
    Py_ssize_t used = 0;
    for (int i = 0; i < 4; i++) {
        PyObject *v = PyDict_GetItemString(value, f[i].key);
        if (!v) continue;
        used++;
        long x = PyLong_AsLong(v);
        if (x == -1 && PyErr_Occurred()) return -1;
        if (x < INT32_MIN || x > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "progress_policy[%s] is out of range", f[i].key);
            return -1;
        }
        *f[i].field = (int)x;
    }
    if (used != PyDict_Size(value)) {
        PyErr_SetString(PyExc_KeyError, "progress_policy takes idle_spin_us, active_spin_us, wait_spin_us, "
                                        "max_sleep_us");
        return -1;
    }
    rc = pcoll_set_progress_policy(ctx, &p);
    return rc == PCOLL_SUCCESS ? 0 : pcpy_raise_int(rc);
}

static PyObject *context_get_rank(pcpy_context_t *c, void *closure)
{
    (void)closure;
    pcoll_t *ctx = pcpy_ctx(c, "rank");
    return ctx ? PyLong_FromLong(pcoll_rank(ctx)) : NULL;
}

static PyObject *context_get_size(pcpy_context_t *c, void *closure)
{
    (void)closure;
    pcoll_t *ctx = pcpy_ctx(c, "size");
    return ctx ? PyLong_FromLong(pcoll_size(ctx)) : NULL;
}

static PyObject *context_get_finalized(pcpy_context_t *c, void *closure)
{
    (void)closure;
    return PyBool_FromLong(c->ctx == NULL);
}

static PyObject *call_partial(PyObject *c, PyObject *a, PyObject *k)
{
    return pcpy_partial_create((pcpy_context_t *)c, a, k);
}
static PyObject *call_preduce(PyObject *c, PyObject *a, PyObject *k)
{
    return pcpy_preduce_create((pcpy_context_t *)c, a, k);
}
static PyObject *call_fusion(PyObject *c, PyObject *a, PyObject *k)
{
    return pcpy_fusion_create((pcpy_context_t *)c, a, k);
}
static PyObject *call_calibrate(PyObject *c, PyObject *a, PyObject *k)
{
    return pcpy_calibrate((pcpy_context_t *)c, a, k);
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS
static PyMethodDef context_methods[] = {
    {"finalize", (PyCFunction)context_finalize, METH_NOARGS,
     "finalize(): collective; completes what is in flight, closes the open objects (newest first), finalizes"},
    {"shrink", (PyCFunction)context_shrink, METH_NOARGS,
     "shrink() -> (handle, Context): after ranks died, collective over the live ones (pcoll_shrink); use "
     "pcoll.Context.shrink"},
    {"allreduce", KW(context_allreduce),
     "allreduce(send, recv=None, op='sum', group=None): blocking; recv None: in place in send; group: a list of "
     "ranks (every member calls alike) or None for all"},
    {"iallreduce", KW(context_iallreduce), "iallreduce(send, recv=None, op='sum', group=None) -> Request"},
    {"allreduce_init", KW(context_allreduce_init),
     "allreduce_init(send, recv=None, op='sum', group=None) -> Plan: a persistent allreduce (collective)"},
    {"agree", KW(context_agree),
     "agree(what, names, values, status=0, why=None): collective; every rank fails if one failed (status != 0) or a "
     "value differs, naming it"},
    {"partial", KW(call_partial),
     "partial(count, dtype='float32', kind='solo', mode='accumulate', sync_every=0, seed=1, group_size=0) -> "
     "Partial (collective)"},
    {"preduce", KW(call_preduce), "preduce(count, dtype='float32', spec='fifo') -> PReduce (collective)"},
    {"fusion", KW(call_fusion),
     "fusion(grad, layer_offset, layer_count, plan, op='sum', group=None) -> Fusion (collective)"},
    {"calibrate", KW(call_calibrate),
     "calibrate(group=None, min_bytes=4, max_bytes=64 MiB, reps=0) -> CostModel (collective)"},
    {"set_timeouts", KW(context_set_timeouts), "set_timeouts(stall_warn_s, timeout_s): 0 = never"},
    {"stats", (PyCFunction)context_stats, METH_NOARGS, "stats() -> dict of the bytes and messages sent"},
    {"timeline_start", (PyCFunction)context_timeline_start, METH_O,
     "timeline_start(prefix): collective; rank R records into prefix.R.jsonl (pcoll-trace merges them)"},
    {"timeline_stop", (PyCFunction)context_timeline_stop, METH_NOARGS, "timeline_stop(): collective; writes the files"},
    {"mark", (PyCFunction)context_mark, METH_VARARGS,
     "mark(name, begin): an application phase begins (True) or ends (False) in the timeline; a no-op unless one "
     "records"},
    {"set_allreduce_algo", (PyCFunction)context_set_allreduce_algo, METH_O,
     "set_allreduce_algo('auto'|'recdbl'|'rabenseifner'|'ring'|'direct')"},
    {"allreduce_algo_for", KW(context_allreduce_algo_for),
     "allreduce_algo_for(nbytes, group_size=size) -> the algorithm's name"},
    {"set_allreduce_thresholds", KW(context_set_allreduce_thresholds),
     "set_allreduce_thresholds(direct_bytes, small_bytes)"},
    {"_c_allreduce_loop", (PyCFunction)context_c_allreduce_loop, METH_VARARGS,
     "_c_allreduce_loop(buf, iters) -> seconds of iters in-place allreduces called from C (a measurement aid)"},
    {NULL, NULL, 0, NULL},
};
#undef KW

static PyGetSetDef context_getset[] = {
    {"rank", (getter)context_get_rank, NULL, "this rank in the context's communicator", NULL},
    {"size", (getter)context_get_size, NULL, "the number of ranks", NULL},
    {"finalized", (getter)context_get_finalized, NULL, "finalize() was called", NULL},
    {"timeouts", (getter)context_get_timeouts, NULL, "(stall_warn_s, timeout_s)", NULL},
    {"recording", (getter)context_get_recording, NULL, "a timeline is being recorded", NULL},
    {"progress_policy", (getter)context_get_progress_policy, (setter)context_set_progress_policy,
     "dict: idle_spin_us, active_spin_us, wait_spin_us, max_sleep_us", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject pcpy_ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcoll._pcoll.Context",
    .tp_basicsize = sizeof(pcpy_context_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Context(handle=None, comm=None): a pcoll context (collective); use pcoll.Context(comm)",
    .tp_new = context_new,
    .tp_init = (initproc)context_init,
    .tp_dealloc = (destructor)context_dealloc,
    .tp_methods = context_methods,
    .tp_getset = context_getset,
};
