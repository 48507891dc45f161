/* pcoll._pcoll.Partial (eager-SGD's solo / majority / quorum, WAGMA's group
 * rounds) and PartialInfo.  Create and free are collective; a bad argument
 * at one rank still goes through the library's create, made to fail there,
 * so every rank fails at once instead of waiting for the one that raised. */
#include <string.h>

#include "pcoll_py.h"

typedef struct partial {
    PyObject_HEAD
    pcpy_context_t *owner;
    pcoll_partial_t *p; /* NULL once freed */
    size_t count;
    pcoll_dtype_t dtype;
    pcoll_partial_config_t cfg;
    pcpy_child_t child;
} partial_t;

typedef struct partial_info {
    PyObject_HEAD
    pcoll_partial_info_t info; /* info.group, info.left_out are not kept: see below */
    PyObject *group;           /* tuple */
    PyObject *left_out;        /* tuple */
} partial_info_t;

static PyTypeObject PartialInfoType;

/* ---- info ---- */

static PyObject *info_new(const pcoll_partial_info_t *in)
{
    partial_info_t *i = PyObject_New(partial_info_t, &PartialInfoType);
    if (!i) return NULL;
    i->info = *in;
    i->info.group = NULL;
    i->info.left_out = NULL;
    i->left_out = NULL;
    i->group = pcpy_int_tuple(in->group, in->group ? in->group_size : 0);
    if (i->group) i->left_out = pcpy_int_tuple(in->left_out, in->left_out ? in->n_left_out : 0);
    if (!i->group || !i->left_out) {
        Py_DECREF(i);
        return NULL;
    }
    return (PyObject *)i;
}

static void info_dealloc(partial_info_t *i)
{
    Py_XDECREF(i->group);
    Py_XDECREF(i->left_out);
    PyObject_Free(i);
}

#define INFO_U64(field)                                                                                                \
    static PyObject *get_##field(partial_info_t *i, void *c)                                                         \
    {                                                                                                                  \
        (void)c;                                                                                                       \
        return PyLong_FromUnsignedLongLong(i->info.field);                                                             \
    }
#define INFO_INT(field)                                                                                                \
    static PyObject *get_##field(partial_info_t *i, void *c)                                                         \
    {                                                                                                                  \
        (void)c;                                                                                                       \
        return PyLong_FromLong(i->info.field);                                                                         \
    }
#define INFO_BOOL(field)                                                                                               \
    static PyObject *get_##field(partial_info_t *i, void *c)                                                         \
    {                                                                                                                  \
        (void)c;                                                                                                       \
        return PyBool_FromLong(i->info.field);                                                                         \
    }
INFO_U64(rounds)
INFO_U64(first_round)
INFO_U64(last_round)
INFO_INT(active)
INFO_INT(active_min)
INFO_U64(active_total)
INFO_U64(contributions)
INFO_BOOL(own_included)
INFO_INT(root)
INFO_BOOL(synchronous)
INFO_U64(parked)
INFO_INT(group_size)
INFO_U64(last_contributions)
INFO_U64(left_out_rounds)
INFO_U64(caught_up)

static PyObject *get_left_out(partial_info_t *i, void *c)
{
    (void)c;
    return Py_NewRef(i->left_out);
}

static PyObject *get_group(partial_info_t *i, void *c)
{
    (void)c;
    return Py_NewRef(i->group);
}

#define G(name, doc) {#name, (getter)get_##name, NULL, doc, NULL}
static PyGetSetDef info_getset[] = {
    G(rounds, "rounds whose results this call delivered"),
    G(first_round, "the first of them (valid when rounds > 0)"),
    G(last_round, "the last of them"),
    G(active, "active ranks in the last round"),
    G(active_min, "the fewest active ranks in any covered round"),
    G(active_total, "active ranks summed over the covered rounds"),
    G(contributions, "contributions summed into the covered rounds"),
    G(own_included, "this call's contribution is in the result"),
    G(root, "the rank that started the last round"),
    G(synchronous, "the last round was synchronous (sync_every or flush)"),
    G(parked, "covered rounds that counted this rank as arrived while it was blocked elsewhere"),
    G(group_size, "the ranks whose data the last round summed here"),
    G(group, "their ranks (a tuple, increasing)"),
    G(last_contributions, "contributions summed into the last round"),
    G(left_out_rounds, "covered rounds that went on without a silent rank (PCOLL_EXCLUDE_MS)"),
    G(caught_up, "covered rounds kept for this rank while it was silent, delivered when it answered again"),
    G(left_out, "the ranks the last covered round went on without (a tuple, increasing)"),
    {NULL, NULL, NULL, NULL, NULL},
};
#undef G

static PyObject *info_repr(partial_info_t *i)
{
    return PyUnicode_FromFormat("PartialInfo(rounds=%llu, active=%d, own_included=%s, synchronous=%s, group=%R)",
                                (unsigned long long)i->info.rounds, i->info.active,
                                i->info.own_included ? "True" : "False", i->info.synchronous ? "True" : "False",
                                i->group);
}

static PyTypeObject PartialInfoType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcoll._pcoll.PartialInfo",
    .tp_basicsize = sizeof(partial_info_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "What one Partial call delivered (pcoll_partial_info_t)",
    .tp_dealloc = (destructor)info_dealloc,
    .tp_getset = info_getset,
    .tp_repr = (reprfunc)info_repr,
};

/* ---- create ---- */

static int mode_from(PyObject *obj, pcoll_contrib_mode_t *out)
{
    const char *s = PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL;
    if (s && strcmp(s, "accumulate") == 0) *out = PCOLL_ACCUMULATE;
    else if (s && strcmp(s, "replace") == 0) *out = PCOLL_REPLACE;
    else if (s && strcmp(s, "average") == 0) *out = PCOLL_AVERAGE;
    else {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "mode %R is not 'accumulate', 'replace' or 'average'", obj);
        return -1;
    }
    return 0;
}

static int partial_close(PyObject *self, int force)
{
    (void)force; /* a failed free leaves the object to the library\'s finalize */
    partial_t *o = (partial_t *)self;
    pcpy_child_unlink(o->owner, &o->child);
    if (!o->p) return 0;
    int rc;
    PCPY_BLOCKING(o->owner, rc = pcoll_partial_free(&o->p));
    o->p = NULL; /* on failure the library frees it at finalize */
    return rc == PCOLL_SUCCESS ? 0 : pcpy_raise_int(rc);
}

PyObject *pcpy_partial_create(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"count", "dtype", "kind", "mode", "sync_every", "seed", "group_size", "quorum", NULL};
    Py_ssize_t count = 0;
    PyObject *dtype = NULL, *kind = NULL, *mode = NULL, *group_size = Py_None, *quorum = Py_None;
    int sync_every = 0;
    unsigned long long seed = 1;
    pcoll_t *ctx = pcpy_ctx(c, "partial");
    if (!ctx) return NULL;
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    pcoll_dtype_t dt = PCOLL_FLOAT32;
    /* what fails here fails this rank inside the library's create too (the
     * field made invalid there is the one at fault), so that every rank
     * fails at once */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n|OOOiKOO:partial", kwlist, &count, &dtype, &kind, &mode,
                                     &sync_every, &seed, &group_size, &quorum)) {
        count = 0;
    } else if ((cfg.sync_every = sync_every, cfg.seed = seed, count < 0)) {
        PyErr_Format(PyExc_ValueError, "count is %zd; it must be >= 1", count);
        count = 0;
    } else if (dtype && pcpy_dtype_from(dtype, "dtype", &dt) < 0) {
        dt = (pcoll_dtype_t)-1;
    } else if (kind && !PyUnicode_Check(kind)) {
        PyErr_Format(PyExc_TypeError, "kind must be a str such as 'solo', 'majority', 'quorum:3', 'group:4', not %R",
                     kind);
        cfg.kind = (pcoll_partial_kind_t)-1;
    } else if (kind && pcoll_partial_config_parse(PyUnicode_AsUTF8(kind), &cfg) != PCOLL_SUCCESS) {
        PyErr_Format(PyExc_ValueError, "kind %R: %s", kind, pcoll_last_error());
        cfg.kind = (pcoll_partial_kind_t)-1;
    } else if (mode && mode_from(mode, &cfg.mode) < 0) {
        cfg.mode = (pcoll_contrib_mode_t)-1;
    } else if (group_size != Py_None && (cfg.group_size = (int)PyLong_AsLong(group_size)) == -1 && PyErr_Occurred()) {
        cfg.kind = PCOLL_PARTIAL_GROUP;
        cfg.group_size = -1;
    } else if (quorum != Py_None && (cfg.quorum = (int)PyLong_AsLong(quorum)) == -1 && PyErr_Occurred()) {
        cfg.kind = PCOLL_PARTIAL_QUORUM;
        cfg.quorum = -1;
    }
    pcpy_pending_t bad;
    int local = pcpy_pending_take(&bad);
    pcoll_partial_t *p = NULL;
    int rc;
    PCPY_BLOCKING(c, rc = pcoll_partial_create(ctx, (size_t)count, dt, &cfg, &p));
    if (local) return pcpy_pending_raise(&bad);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    partial_t *o = PyObject_New(partial_t, &pcpy_PartialType);
    if (!o) return NULL; /* the library frees p at finalize */
    o->owner = (pcpy_context_t *)Py_NewRef((PyObject *)c);
    o->p = p;
    o->count = (size_t)count;
    o->dtype = dt;
    o->cfg = cfg;
    pcpy_child_link(c, &o->child, (PyObject *)o, partial_close);
    return (PyObject *)o;
}

/* ---- calls ---- */

static pcoll_partial_t *live(partial_t *o, const char *fn)
{
    if (!o->p) {
        char msg[160];
        snprintf(msg, sizeof msg, "Partial.%s: the object was freed", fn);
        pcpy_raise_msg(PCOLL_ERR_STATE, msg);
        return NULL;
    }
    return o->p;
}

/* a buffer of exactly the object's count and dtype */
static int object_buf(partial_t *o, PyObject *obj, const char *arg, int writable, pcpy_buf_t *b)
{
    if (pcpy_buf_get(obj, arg, writable, b) < 0) return -1;
    if (b->dtype != o->dtype) {
        PyErr_Format(PyExc_TypeError, "%s holds %s; this object reduces %s", arg, pcoll_dtype_name(b->dtype),
                     pcoll_dtype_name(o->dtype));
    } else if (b->count != o->count) {
        PyErr_Format(PyExc_ValueError, "%s has %zu elements; this object has %zu", arg, b->count, o->count);
    } else {
        return 0;
    }
    pcpy_buf_release(b);
    return -1;
}

/* allreduce(contribution, out=None) -> PartialInfo; out None: into
 * contribution (in place); contribution None: contribute nothing */
static PyObject *partial_allreduce(partial_t *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"contribution", "out", NULL};
    PyObject *contrib, *out = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:allreduce", kwlist, &contrib, &out)) return NULL;
    pcoll_partial_t *p = live(o, "allreduce");
    if (!p) return NULL;
    if (out == Py_None) out = contrib;
    pcpy_buf_t cb = {0}, ob = {0};
    if (out == Py_None) {
        PyErr_SetString(PyExc_TypeError, "out is needed when contribution is None");
        return NULL;
    }
    if (contrib != Py_None && contrib != out && object_buf(o, contrib, "contribution", 0, &cb) < 0) return NULL;
    if (object_buf(o, out, "out", 1, &ob) < 0) {
        pcpy_buf_release(&cb);
        return NULL;
    }
    const void *cp = contrib == Py_None ? NULL : contrib == out ? ob.ptr : cb.ptr;
    pcoll_partial_info_t info;
    int rc;
    PCPY_BLOCKING(o->owner, rc = pcoll_partial_allreduce(p, cp, ob.ptr, &info));
    pcpy_buf_release(&cb);
    pcpy_buf_release(&ob);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    return info_new(&info);
}

static PyObject *partial_deposit(partial_t *o, PyObject *contrib)
{
    pcoll_partial_t *p = live(o, "deposit");
    pcpy_buf_t cb;
    if (!p || object_buf(o, contrib, "contribution", 0, &cb) < 0) return NULL;
    int rc = pcoll_partial_deposit(p, cb.ptr);
    pcpy_buf_release(&cb);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *partial_flush(partial_t *o, PyObject *out)
{
    pcoll_partial_t *p = live(o, "flush");
    pcpy_buf_t ob;
    if (!p || object_buf(o, out, "out", 1, &ob) < 0) return NULL;
    pcoll_partial_info_t info;
    int rc;
    PCPY_BLOCKING(o->owner, rc = pcoll_partial_flush(p, ob.ptr, &info));
    pcpy_buf_release(&ob);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    return info_new(&info);
}

static PyObject *partial_free(partial_t *o, PyObject *noargs)
{
    (void)noargs;
    if (partial_close((PyObject *)o, 0) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *partial_initiator(partial_t *o, PyObject *arg)
{
    pcoll_partial_t *p = live(o, "initiator");
    unsigned long long r = PyLong_AsUnsignedLongLong(arg);
    if (!p || PyErr_Occurred()) return NULL;
    int who = pcoll_partial_initiator(p, r);
    if (who < 0) return pcpy_raise(who);
    return PyLong_FromLong(who);
}

static PyObject *partial_group_of(partial_t *o, PyObject *arg)
{
    pcoll_partial_t *p = live(o, "group_of");
    unsigned long long r = PyLong_AsUnsignedLongLong(arg);
    if (!p || PyErr_Occurred()) return NULL;
    int n = pcoll_size(o->owner->ctx);
    int *members = PyMem_Malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!members) return PyErr_NoMemory();
    int rc = pcoll_partial_group_of(p, r, members, &n);
    PyObject *t = rc == PCOLL_SUCCESS ? pcpy_int_tuple(members, n) : pcpy_raise(rc);
    PyMem_Free(members);
    return t;
}

/* average(info, local, model): WAGMA-SGD's rule on a REPLACE object */
static PyObject *partial_average(partial_t *o, PyObject *args)
{
    PyObject *info, *local, *model;
    if (!PyArg_ParseTuple(args, "O!OO:average", &PartialInfoType, &info, &local, &model)) return NULL;
    pcoll_partial_t *p = live(o, "average");
    pcpy_buf_t lb = {0}, mb = {0};
    if (!p || object_buf(o, local, "local", 0, &lb) < 0) return NULL;
    if (object_buf(o, model, "model", 1, &mb) < 0) {
        pcpy_buf_release(&lb);
        return NULL;
    }
    int rc = pcoll_partial_average(p, &((partial_info_t *)info)->info, lb.ptr, mb.ptr);
    pcpy_buf_release(&lb);
    pcpy_buf_release(&mb);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *partial_enter(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    return Py_NewRef(self);
}

static PyObject *partial_exit(partial_t *o, PyObject *args)
{
    (void)args;
    return partial_free(o, NULL);
}

static PyObject *get_data_phase(partial_t *o, void *c)
{
    (void)c;
    const char *s = o->p ? pcoll_partial_data_phase(o->p) : NULL;
    if (!s) Py_RETURN_NONE;
    return PyUnicode_FromString(s);
}

static PyObject *get_count(partial_t *o, void *c)
{
    (void)c;
    return PyLong_FromSize_t(o->count);
}

static PyObject *get_dtype(partial_t *o, void *c)
{
    (void)c;
    return PyUnicode_FromString(pcoll_dtype_name(o->dtype));
}

static PyObject *get_kind(partial_t *o, void *c)
{
    (void)c;
    static const char *kinds[] = {"solo", "majority", "quorum", "group"};
    return PyUnicode_FromString(kinds[o->cfg.kind]);
}

static PyObject *get_freed(partial_t *o, void *c)
{
    (void)c;
    return PyBool_FromLong(o->p == NULL);
}

static void partial_dealloc(partial_t *o)
{
    /* free is collective: not from the garbage collector; the library frees
     * an object left open when the context is finalized */
    pcpy_child_unlink(o->owner, &o->child);
    Py_XDECREF((PyObject *)o->owner);
    PyObject_Free(o);
}

static PyMethodDef partial_methods[] = {
    {"allreduce", (PyCFunction)(void (*)(void))partial_allreduce, METH_VARARGS | METH_KEYWORDS,
     "allreduce(contribution, out=None) -> PartialInfo: contribute and collect (out None: in place)"},
    {"deposit", (PyCFunction)partial_deposit, METH_O, "deposit(contribution): add or copy it into pending, at once"},
    {"flush", (PyCFunction)partial_flush, METH_O, "flush(out) -> PartialInfo: collective synchronous round"},
    {"free", (PyCFunction)partial_free, METH_NOARGS, "free(): collective; drains the rounds in flight"},
    {"close", (PyCFunction)partial_free, METH_NOARGS, "close(): the same as free()"},
    {"initiator", (PyCFunction)partial_initiator, METH_O, "initiator(round) -> rank (majority)"},
    {"group_of", (PyCFunction)partial_group_of, METH_O, "group_of(round) -> tuple of the ranks this rank sums with"},
    {"average", (PyCFunction)partial_average, METH_VARARGS, "average(info, local, model): WAGMA-SGD's rule"},
    {"__enter__", partial_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)partial_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef partial_getset[] = {
    {"data_phase", (getter)get_data_phase, NULL, "'shared-memory', 'hierarchical' or 'messages'", NULL},
    {"count", (getter)get_count, NULL, "elements", NULL},
    {"dtype", (getter)get_dtype, NULL, "element type", NULL},
    {"kind", (getter)get_kind, NULL, "solo, majority, quorum or group", NULL},
    {"freed", (getter)get_freed, NULL, "free() was called", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject pcpy_PartialType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcoll._pcoll.Partial",
    .tp_basicsize = sizeof(partial_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A partial allreduce object (Context.partial): eager-SGD's solo/majority/quorum, WAGMA's group rounds",
    .tp_dealloc = (destructor)partial_dealloc,
    .tp_methods = partial_methods,
    .tp_getset = partial_getset,
};

int pcpy_add_types_partial(PyObject *m)
{
    if (PyType_Ready(&pcpy_PartialType) < 0 || PyType_Ready(&PartialInfoType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "Partial", (PyObject *)&pcpy_PartialType) < 0) return -1;
    return PyModule_AddObjectRef(m, "PartialInfo", (PyObject *)&PartialInfoType);
}
