/* pcoll._pcoll.Request and Plan.  A request holds the views of its buffers
 * (or its plan, which holds them) until the operation is complete, and the
 * context keeps it alive while it is in flight, so dropping it early loses
 * nothing: finalize completes it.  A timed-out operation may still be read
 * by MPI, so its buffers are never released. */
#include "pcoll_py.h"

typedef struct request {
    PyObject_HEAD
    pcpy_context_t *owner;
    pcoll_request_t *req; /* NULL once complete */
    PyObject *plan;       /* the plan this request is a start of, or NULL */
    pcpy_buf_t send, recv;
    int waiting;          /* a thread waits for it (without the GIL) */
} request_t;

typedef struct plan {
    PyObject_HEAD
    pcpy_context_t *owner;
    pcoll_plan_t *plan; /* NULL once freed */
    pcpy_buf_t send, recv;
    int abandoned;      /* a start timed out: keep the buffers */
    pcpy_child_t child;
} plan_t;

PyObject *pcpy_request_new(pcpy_context_t *c, pcoll_request_t *req, PyObject *plan, pcpy_buf_t *send,
                           pcpy_buf_t *recv)
{
    request_t *r = PyObject_New(request_t, &pcpy_RequestType);
    if (!r) {
        /* cannot be tracked: complete it here rather than lose the buffers */
        PCPY_BLOCKING(c, pcoll_wait(&req));
        if (send) pcpy_buf_release(send);
        if (recv) pcpy_buf_release(recv);
        return NULL;
    }
    r->owner = (pcpy_context_t *)Py_NewRef((PyObject *)c);
    r->req = req;
    r->plan = Py_XNewRef(plan);
    r->waiting = 0;
    r->send = send ? *send : (pcpy_buf_t){0};
    r->recv = recv ? *recv : (pcpy_buf_t){0};
    if (pcpy_keep(c, (PyObject *)r) < 0) {
        /* the context could not keep it: do not return a request that
           could be dropped in flight */
        pcpy_pending_t err;
        pcpy_pending_take(&err);
        PCPY_BLOCKING(c, pcoll_wait(&r->req));
        Py_DECREF(r);
        return pcpy_pending_raise(&err);
    }
    return (PyObject *)r;
}

/* after pcoll_wait / a successful pcoll_test: rc is the operation's status;
 * 0, or -1 with pcoll.Error set */
static int request_complete(request_t *r, int rc)
{
    if (rc == PCOLL_ERR_TIMEOUT) {
        if (r->plan) ((plan_t *)r->plan)->abandoned = 1;
        r->send.held = r->recv.held = 0; /* MPI may still read them: never released */
    }
    pcpy_buf_release(&r->send);
    pcpy_buf_release(&r->recv);
    Py_CLEAR(r->plan);
    pcpy_unkeep(r->owner, (PyObject *)r); /* may drop the last reference but the caller's */
    return rc == PCOLL_SUCCESS ? 0 : pcpy_raise_int(rc);
}

static PyObject *request_wait(request_t *r, PyObject *noargs)
{
    (void)noargs;
    if (!r->req) Py_RETURN_NONE;
    if (r->waiting) return pcpy_raise_msg(PCOLL_ERR_STATE, "Request.wait: another thread waits for this request");
    Py_INCREF(r); /* the context's reference may go in request_complete */
    int rc;
    r->waiting = 1;
    PCPY_BLOCKING(r->owner, rc = pcoll_wait(&r->req));
    r->waiting = 0;
    r->req = NULL;
    int failed = request_complete(r, rc) < 0;
    Py_DECREF(r);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

static PyObject *request_test(request_t *r, PyObject *noargs)
{
    (void)noargs;
    if (!r->req) Py_RETURN_TRUE;
    if (r->waiting) return pcpy_raise_msg(PCOLL_ERR_STATE, "Request.test: another thread waits for this request");
    int flag = 0;
    int rc = pcoll_test(&r->req, &flag);
    if (!flag) {
        if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
        Py_RETURN_FALSE;
    }
    r->req = NULL;
    Py_INCREF(r);
    int failed = request_complete(r, rc) < 0;
    Py_DECREF(r);
    if (failed) return NULL;
    Py_RETURN_TRUE;
}

static PyObject *request_get_done(request_t *r, void *closure)
{
    (void)closure;
    return PyBool_FromLong(r->req == NULL);
}

static void request_dealloc(request_t *r)
{
    /* only complete requests get here: the context keeps the others */
    pcpy_buf_release(&r->send);
    pcpy_buf_release(&r->recv);
    Py_XDECREF(r->plan);
    Py_XDECREF((PyObject *)r->owner);
    PyObject_Free(r);
}

static PyMethodDef request_methods[] = {
    {"wait", (PyCFunction)request_wait, METH_NOARGS, "wait(): until complete; raises the operation's error"},
    {"test", (PyCFunction)request_test, METH_NOARGS, "test() -> True once complete (then as wait())"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef request_getset[] = {
    {"done", (getter)request_get_done, NULL, "completed by wait() or test()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject pcpy_RequestType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcoll._pcoll.Request",
    .tp_basicsize = sizeof(request_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An allreduce in flight (Context.iallreduce, Plan.start): wait() or test()",
    .tp_dealloc = (destructor)request_dealloc,
    .tp_methods = request_methods,
    .tp_getset = request_getset,
};

/* ---- plans ---- */

/* frees the plan: on success it leaves the context and lets its buffers
 * go; on failure (a start not completed) it stays as it was, unless forced */
static int plan_close(PyObject *self, int force)
{
    plan_t *p = (plan_t *)self;
    if (p->plan) {
        int rc = pcoll_plan_free(&p->plan);
        if (rc != PCOLL_SUCCESS && !force) return pcpy_raise_int(rc);
        if (rc != PCOLL_SUCCESS) { /* forgotten: MPI may still use the buffers */
            p->plan = NULL;
            p->abandoned = 1;
            pcpy_child_unlink(p->owner, &p->child);
            return pcpy_raise_int(rc);
        }
        if (!p->abandoned) {
            pcpy_buf_release(&p->send);
            pcpy_buf_release(&p->recv);
        }
    }
    pcpy_child_unlink(p->owner, &p->child);
    return 0;
}

PyObject *pcpy_plan_new(pcpy_context_t *c, pcoll_plan_t *plan, pcpy_buf_t *send, pcpy_buf_t *recv)
{
    plan_t *p = PyObject_New(plan_t, &pcpy_PlanType);
    if (!p) {
        pcoll_plan_free(&plan);
        pcpy_buf_release(send);
        pcpy_buf_release(recv);
        return NULL;
    }
    p->owner = (pcpy_context_t *)Py_NewRef((PyObject *)c);
    p->plan = plan;
    p->send = *send;
    p->recv = *recv;
    p->abandoned = 0;
    pcpy_child_link(c, &p->child, (PyObject *)p, plan_close);
    return (PyObject *)p;
}

static PyObject *plan_start(plan_t *p, PyObject *noargs)
{
    (void)noargs;
    if (!p->plan) return pcpy_raise_msg(PCOLL_ERR_STATE, "Plan.start: the plan was freed");
    if (!pcpy_ctx(p->owner, "Plan.start")) return NULL;
    pcoll_request_t *req = NULL;
    int rc = pcoll_start(p->plan, &req);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    return pcpy_request_new(p->owner, req, (PyObject *)p, NULL, NULL);
}

static PyObject *plan_free(plan_t *p, PyObject *noargs)
{
    (void)noargs;
    if (plan_close((PyObject *)p, 0) < 0) return NULL;
    Py_RETURN_NONE;
}

static void plan_dealloc(plan_t *p)
{
    /* no start is in flight (a request holds its plan) */
    if (plan_close((PyObject *)p, 1) < 0) PyErr_WriteUnraisable((PyObject *)p);
    Py_XDECREF((PyObject *)p->owner);
    PyObject_Free(p);
}

static PyMethodDef plan_methods[] = {
    {"start", (PyCFunction)plan_start, METH_NOARGS, "start() -> Request: runs the allreduce once more"},
    {"free", (PyCFunction)plan_free, METH_NOARGS, "free(): local; the last start must be complete"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pcpy_PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcoll._pcoll.Plan",
    .tp_basicsize = sizeof(plan_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A persistent allreduce of fixed buffers (Context.allreduce_init): start() as often as needed",
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_methods = plan_methods,
};

int pcpy_add_types_request(PyObject *m)
{
    if (PyType_Ready(&pcpy_RequestType) < 0 || PyType_Ready(&pcpy_PlanType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "Request", (PyObject *)&pcpy_RequestType) < 0) return -1;
    return PyModule_AddObjectRef(m, "Plan", (PyObject *)&pcpy_PlanType);
}
