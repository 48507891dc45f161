/* pcoll._pcoll.PReduce: partial reduce among dynamic groups (Partial Reduce,
 * Ripples).  Create and free are collective; a bad argument at one rank
 * fails every rank through the library's create (see partial.c). */
#include <string.h>

#include "pcoll_py.h"

typedef struct preduce {
    PyObject_HEAD
    pcpy_context_t *owner;
    pcoll_preduce_t *o; /* NULL once freed */
    size_t count;
    pcoll_dtype_t dtype;
    pcoll_preduce_config_t cfg;
    pcpy_child_t child;
} preduce_t;

static PyStructSequence_Field info_fields[] = {
    {"group_id", "the controller's number of the group (static: the step)"},
    {"group_size", "members; 1: nobody to average with this time"},
    {"members", "the members' ranks (a tuple, increasing)"},
    {"weight", "this rank's weight in the average"},
    {"iteration", "the group's iteration after the reduce"},
    {"wait_s", "from ready to the group's start"},
    {"reduce_s", "the group's allreduce"},
    {NULL, NULL},
};
static PyStructSequence_Desc info_desc = {"pcoll.PReduceInfo", "What one PReduce.reduce call did", info_fields, 7};
static PyTypeObject *InfoType;

static int preduce_close(PyObject *self, int force)
{
    (void)force; /* a failed free leaves the object to the library\'s finalize */
    preduce_t *o = (preduce_t *)self;
    pcpy_child_unlink(o->owner, &o->child);
    if (!o->o) return 0;
    int rc;
    PCPY_BLOCKING(o->owner, rc = pcoll_preduce_free(&o->o));
    o->o = NULL;
    return rc == PCOLL_SUCCESS ? 0 : pcpy_raise_int(rc);
}

/* preduce(count, dtype='float32', spec='fifo') */
PyObject *pcpy_preduce_create(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"count", "dtype", "spec", NULL};
    Py_ssize_t count = 0;
    PyObject *dtype = NULL, *spec = NULL;
    pcoll_t *ctx = pcpy_ctx(c, "preduce");
    if (!ctx) return NULL;
    pcoll_preduce_config_t cfg;
    pcoll_preduce_config_default(&cfg);
    pcoll_dtype_t dt = PCOLL_FLOAT32;
    /* a local failure makes the library's create fail here too (partial.c) */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n|OO:preduce", kwlist, &count, &dtype, &spec)) {
        count = 0;
    } else if (count < 0) {
        PyErr_Format(PyExc_ValueError, "count is %zd; it must be >= 1", count);
        count = 0;
    } else if (dtype && pcpy_dtype_from(dtype, "dtype", &dt) < 0) {
        dt = (pcoll_dtype_t)-1;
    } else if (spec && !PyUnicode_Check(spec)) {
        PyErr_Format(PyExc_TypeError, "spec must be a str such as 'fifo:3:dyn' or 'ripples:smart:3', not %R", spec);
        cfg.policy = (pcoll_preduce_policy_t)-1;
    } else if (spec && pcoll_preduce_config_parse(PyUnicode_AsUTF8(spec), &cfg) != PCOLL_SUCCESS) {
        PyErr_Format(PyExc_ValueError, "spec %R: %s", spec, pcoll_last_error());
        cfg.policy = (pcoll_preduce_policy_t)-1;
    }
    pcpy_pending_t bad;
    int local = pcpy_pending_take(&bad);
    pcoll_preduce_t *obj = NULL;
    int rc;
    PCPY_BLOCKING(c, rc = pcoll_preduce_create(ctx, (size_t)count, dt, &cfg, &obj));
    if (local) return pcpy_pending_raise(&bad);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    preduce_t *o = PyObject_New(preduce_t, &pcpy_PReduceType);
    if (!o) return NULL; /* the library frees obj at finalize */
    o->owner = (pcpy_context_t *)Py_NewRef((PyObject *)c);
    o->o = obj;
    o->count = (size_t)count;
    o->dtype = dt;
    o->cfg = cfg;
    pcpy_child_link(c, &o->child, (PyObject *)o, preduce_close);
    return (PyObject *)o;
}

/* model as a buffer of this object's count and dtype, writable */
static int model_buffer(preduce_t *o, PyObject *model, pcpy_buf_t *mb)
{
    if (pcpy_buf_get(model, "model", 1, mb) < 0) return -1;
    if (mb->dtype == o->dtype && mb->count == o->count) return 0;
    if (mb->dtype != o->dtype)
        PyErr_Format(PyExc_TypeError, "model holds %s; this object averages %s", pcoll_dtype_name(mb->dtype),
                     pcoll_dtype_name(o->dtype));
    else
        PyErr_Format(PyExc_ValueError, "model has %zu elements; this object has %zu", mb->count, o->count);
    pcpy_buf_release(mb);
    return -1;
}

/* reduce(model, iteration) -> PReduceInfo: model (in place) becomes the
 * group's weighted average */
static PyObject *preduce_reduce(preduce_t *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"model", "iteration", NULL};
    PyObject *model;
    unsigned long long it;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OK:reduce", kwlist, &model, &it)) return NULL;
    if (!o->o) return pcpy_raise_msg(PCOLL_ERR_STATE, "PReduce.reduce: the object was freed");
    pcpy_buf_t mb;
    if (model_buffer(o, model, &mb) < 0) return NULL;
    pcoll_preduce_info_t info;
    int rc;
    PCPY_BLOCKING(o->owner, rc = pcoll_preduce(o->o, mb.ptr, (uint64_t)it, &info));
    pcpy_buf_release(&mb);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    PyObject *r = PyStructSequence_New(InfoType);
    PyObject *members = pcpy_int_tuple(info.members, info.members ? info.group_size : 0);
    if (!r || !members) {
        Py_XDECREF(r);
        Py_XDECREF(members);
        return NULL;
    }
    PyStructSequence_SET_ITEM(r, 0, PyLong_FromUnsignedLongLong(info.group_id));
    PyStructSequence_SET_ITEM(r, 1, PyLong_FromLong(info.group_size));
    PyStructSequence_SET_ITEM(r, 2, members);
    PyStructSequence_SET_ITEM(r, 3, PyFloat_FromDouble(info.weight));
    PyStructSequence_SET_ITEM(r, 4, PyLong_FromUnsignedLongLong(info.iteration));
    PyStructSequence_SET_ITEM(r, 5, PyFloat_FromDouble(info.wait_s));
    PyStructSequence_SET_ITEM(r, 6, PyFloat_FromDouble(info.reduce_s));
    if (PyErr_Occurred()) {
        Py_DECREF(r);
        return NULL;
    }
    return r;
}

/* drain(model): collective, at the end: the groups already planned with
 * this rank run with model (in place), which ends as the last one's
 * average; afterwards only free() */
static PyObject *preduce_drain(preduce_t *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"model", NULL};
    PyObject *model;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:drain", kwlist, &model)) return NULL;
    if (!o->o) return pcpy_raise_msg(PCOLL_ERR_STATE, "PReduce.drain: the object was freed");
    pcpy_buf_t mb;
    if (model_buffer(o, model, &mb) < 0) return NULL;
    int rc;
    PCPY_BLOCKING(o->owner, rc = pcoll_preduce_drain(o->o, mb.ptr));
    pcpy_buf_release(&mb);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *preduce_stats(preduce_t *o, PyObject *noargs)
{
    (void)noargs;
    if (!o->o) return pcpy_raise_msg(PCOLL_ERR_STATE, "PReduce.stats: the object was freed");
    pcoll_preduce_stats_t s;
    int rc = pcoll_preduce_get_stats(o->o, &s);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    return Py_BuildValue("{sKsKsKsKsKsKsdsd}", "requests", (unsigned long long)s.requests, "groups",
                         (unsigned long long)s.groups, "bridges", (unsigned long long)s.bridges, "holds",
                         (unsigned long long)s.holds, "conflicts", (unsigned long long)s.conflicts, "divisions",
                         (unsigned long long)s.divisions, "busy_s", s.busy_s, "open_s", s.open_s);
}

static PyObject *preduce_free(preduce_t *o, PyObject *noargs)
{
    (void)noargs;
    if (preduce_close((PyObject *)o, 0) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *preduce_enter(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    return Py_NewRef(self);
}

static PyObject *preduce_exit(preduce_t *o, PyObject *args)
{
    (void)args;
    return preduce_free(o, NULL);
}

static PyObject *get_count(preduce_t *o, void *c)
{
    (void)c;
    return PyLong_FromSize_t(o->count);
}

static PyObject *get_dtype(preduce_t *o, void *c)
{
    (void)c;
    return PyUnicode_FromString(pcoll_dtype_name(o->dtype));
}

static PyObject *get_policy(preduce_t *o, void *c)
{
    (void)c;
    static const char *names[] = {"fifo", "ripples:random", "ripples:smart", "ripples:static"};
    return PyUnicode_FromString(names[o->cfg.policy]);
}

static PyObject *get_group_size(preduce_t *o, void *c)
{
    (void)c;
    return PyLong_FromLong(o->cfg.group_size);
}

static PyObject *get_freed(preduce_t *o, void *c)
{
    (void)c;
    return PyBool_FromLong(o->o == NULL);
}

static void preduce_dealloc(preduce_t *o)
{
    /* free is collective: the library frees an open object at finalize */
    pcpy_child_unlink(o->owner, &o->child);
    Py_XDECREF((PyObject *)o->owner);
    PyObject_Free(o);
}

static PyMethodDef preduce_methods[] = {
    {"reduce", (PyCFunction)(void (*)(void))preduce_reduce, METH_VARARGS | METH_KEYWORDS,
     "reduce(model, iteration) -> PReduceInfo: this rank is ready; model becomes its group's weighted average"},
    {"stats", (PyCFunction)preduce_stats, METH_NOARGS, "stats() -> dict of the controller's counters"},
    {"drain", (PyCFunction)(void (*)(void))preduce_drain, METH_VARARGS | METH_KEYWORDS,
     "drain(model): collective, at the end: the groups already planned with this rank average model (in place)"},
    {"free", (PyCFunction)preduce_free, METH_NOARGS,
     "free(): collective; without drain() the groups still planned with this rank use its last model"},
    {"close", (PyCFunction)preduce_free, METH_NOARGS, "close(): the same as free()"},
    {"__enter__", preduce_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)preduce_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef preduce_getset[] = {
    {"count", (getter)get_count, NULL, "elements", NULL},
    {"dtype", (getter)get_dtype, NULL, "element type", NULL},
    {"policy", (getter)get_policy, NULL, "fifo, ripples:random, ripples:smart or ripples:static", NULL},
    {"group_size", (getter)get_group_size, NULL, "the configured group size (0: the default)", NULL},
    {"freed", (getter)get_freed, NULL, "free() was called", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject pcpy_PReduceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcoll._pcoll.PReduce",
    .tp_basicsize = sizeof(preduce_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Partial reduce among dynamic groups (Context.preduce)",
    .tp_dealloc = (destructor)preduce_dealloc,
    .tp_methods = preduce_methods,
    .tp_getset = preduce_getset,
};

int pcpy_add_types_preduce(PyObject *m)
{
    if (PyType_Ready(&pcpy_PReduceType) < 0) return -1;
    InfoType = PyStructSequence_NewType(&info_desc);
    if (!InfoType) return -1;
    if (PyModule_AddObjectRef(m, "PReduce", (PyObject *)&pcpy_PReduceType) < 0) return -1;
    return PyModule_AddObjectRef(m, "PReduceInfo", (PyObject *)InfoType);
}
