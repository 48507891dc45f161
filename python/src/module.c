/* The module pcoll._pcoll: pcoll.Error, the names of dtypes and ops, and the
 * small library-wide calls.  See pcoll_py.h for the map of the files. */
#include <stdio.h>
#include <string.h>

#include "pcoll_py.h"

PyObject *pcpy_Error;

static const char *status_name(int status)
{
    static const char *names[] = {"SUCCESS",  "ERR_NULL",   "ERR_ARG",    "ERR_COUNT",          "ERR_DTYPE",
                                  "ERR_OP",   "ERR_GROUP",  "ERR_THREAD_LEVEL", "ERR_MPI",      "ERR_NOMEM",
                                  "ERR_CONFIG", "ERR_STATE", "ERR_LIMIT", "ERR_INTERNAL",       "ERR_TIMEOUT"};
    int i = -status;
    return i >= 0 && i < (int)(sizeof names / sizeof names[0]) ? names[i] : "ERR_UNKNOWN";
}

PyObject *pcpy_raise_msg(int status, const char *msg)
{
    PyObject *exc = PyObject_CallFunction(pcpy_Error, "s", msg && msg[0] ? msg : pcoll_strerror(status));
    if (!exc) return NULL;
    PyObject *st = PyLong_FromLong(status);
    PyObject *nm = PyUnicode_FromString(status_name(status));
    if (st && nm && PyObject_SetAttrString(exc, "status", st) == 0 &&
        PyObject_SetAttrString(exc, "status_name", nm) == 0)
        PyErr_SetObject(pcpy_Error, exc);
    Py_XDECREF(st);
    Py_XDECREF(nm);
    Py_DECREF(exc);
    return NULL;
}

PyObject *pcpy_raise(int status) { return pcpy_raise_msg(status, pcoll_last_error()); }

int pcpy_pending_take(pcpy_pending_t *p)
{
    memset(p, 0, sizeof *p);
    if (!PyErr_Occurred()) return 0;
    PyErr_Fetch(&p->type, &p->value, &p->tb);
    PyErr_NormalizeException(&p->type, &p->value, &p->tb);
    PyObject *s = p->value ? PyObject_Str(p->value) : NULL;
    snprintf(p->why, sizeof p->why, "%s", s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : "a bad argument");
    Py_XDECREF(s);
    PyErr_Clear();
    return 1;
}

PyObject *pcpy_pending_raise(pcpy_pending_t *p)
{
    PyErr_Restore(p->type, p->value, p->tb);
    p->type = p->value = p->tb = NULL;
    return NULL;
}

int pcpy_raise_int(int status)
{
    pcpy_raise(status);
    return -1;
}

/* The text of a name-like object: a str, else its `name` attribute (numpy
 * dtypes), else str() (torch dtypes print as "torch.float32"); a new
 * reference or NULL. */
static PyObject *name_text(PyObject *obj)
{
    if (PyUnicode_Check(obj)) return Py_NewRef(obj);
    PyObject *name = PyObject_HasAttrString(obj, "name") ? PyObject_GetAttrString(obj, "name") : NULL;
    if (name && PyUnicode_Check(name)) return name;
    Py_XDECREF(name);
    PyErr_Clear();
    return PyObject_Str(obj);
}

int pcpy_dtype_from(PyObject *obj, const char *arg, pcoll_dtype_t *out)
{
    static const struct {
        const char *name;
        pcoll_dtype_t dtype;
    } names[] = {{"float32", PCOLL_FLOAT32}, {"float64", PCOLL_FLOAT64}, {"int32", PCOLL_INT32},
                 {"int64", PCOLL_INT64},     {"float", PCOLL_FLOAT32},   {"double", PCOLL_FLOAT64}};
    if (PyLong_Check(obj)) {
        long v = PyLong_AsLong(obj);
        if (v >= PCOLL_FLOAT32 && v <= PCOLL_INT64) {
            *out = (pcoll_dtype_t)v;
            return 0;
        }
        PyErr_Format(PyExc_ValueError, "%s: %ld is not a pcoll dtype (float32, float64, int32, int64)", arg, v);
        return -1;
    }
    PyObject *text = name_text(obj);
    if (!text) return -1;
    const char *s = PyUnicode_AsUTF8(text);
    if (s && strncmp(s, "torch.", 6) == 0) s += 6;
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].dtype;
            Py_DECREF(text);
            return 0;
        }
    if (s) PyErr_Format(PyExc_TypeError, "%s: dtype %R is not one of float32, float64, int32, int64", arg, obj);
    Py_DECREF(text);
    return -1;
}

int pcpy_op_from(PyObject *obj, const char *arg, pcoll_op_t *out)
{
    if (PyLong_Check(obj)) {
        long v = PyLong_AsLong(obj);
        if (v == PCOLL_SUM || v == PCOLL_AVG) {
            *out = (pcoll_op_t)v;
            return 0;
        }
        PyErr_Format(PyExc_ValueError, "%s: %ld is not a pcoll op (sum, avg)", arg, v);
        return -1;
    }
    const char *s = PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL;
    if (s && strcmp(s, "sum") == 0) *out = PCOLL_SUM;
    else if (s && (strcmp(s, "avg") == 0 || strcmp(s, "average") == 0 || strcmp(s, "mean") == 0)) *out = PCOLL_AVG;
    else {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s: %R is not an op (\"sum\" or \"avg\")", arg, obj);
        return -1;
    }
    return 0;
}

int pcpy_group_from(PyObject *obj, const char *arg, int **ranks, int *n)
{
    *ranks = NULL;
    *n = 0;
    if (!obj || obj == Py_None) return 0;
    PyObject *seq = PySequence_Fast(obj, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s must be None (every rank) or a sequence of ranks, not %.100s", arg,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    int *r = PyMem_Malloc(sizeof(int) * (size_t)(len > 0 ? len : 1));
    if (!r) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        long v = PyLong_Check(item) ? PyLong_AsLong(item) : -1;
        if (!PyLong_Check(item) || v < 0 || v > 0x7fffffff) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s[%zd] is %R; ranks are whole numbers >= 0", arg, i, item);
            PyMem_Free(r);
            Py_DECREF(seq);
            return -1;
        }
        r[i] = (int)v;
    }
    Py_DECREF(seq);
    *ranks = r;
    *n = (int)len;
    return 0;
}

PyObject *pcpy_int_tuple(const int *v, int n)
{
    PyObject *t = PyTuple_New(n > 0 ? n : 0);
    for (int i = 0; t && i < n; i++) {
        PyObject *x = PyLong_FromLong(v[i]);
        if (!x) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* ---- module functions ---- */

static PyObject *m_strerror(PyObject *self, PyObject *arg)
{
    (void)self;
    long s = PyLong_AsLong(arg);
    if (s == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(pcoll_strerror((int)s));
}

static PyObject *m_last_error(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(pcoll_last_error());
}

static PyObject *m_set_log_level(PyObject *self, PyObject *arg)
{
    (void)self;
    static const char *levels[] = {"none", "error", "warn", "info", "debug"};
    long v = -1;
    if (PyUnicode_Check(arg)) {
        const char *s = PyUnicode_AsUTF8(arg);
        for (int i = 0; s && i < 5; i++)
            if (strcmp(s, levels[i]) == 0) v = i;
    } else if (PyLong_Check(arg)) {
        v = PyLong_AsLong(arg);
    }
    if (v < 0 || v > 4) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "level %R is not none, error, warn, info, debug or 0-4", arg);
        return NULL;
    }
    int rc = pcoll_set_log_level((pcoll_log_level_t)v);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *m_get_log_level(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyLong_FromLong(pcoll_get_log_level());
}

static PyObject *m_dtype_size(PyObject *self, PyObject *arg)
{
    (void)self;
    pcoll_dtype_t d;
    if (pcpy_dtype_from(arg, "dtype", &d) < 0) return NULL;
    return PyLong_FromSize_t(pcoll_dtype_size(d));
}

static PyMethodDef module_methods[] = {
    {"strerror", m_strerror, METH_O, "strerror(status) -> the short text of a status code"},
    {"last_error", m_last_error, METH_NOARGS, "last_error() -> the calling thread's last pcoll error message"},
    {"set_log_level", m_set_log_level, METH_O,
     "set_log_level(level): none|error|warn|info|debug or 0-4 (process-wide)"},
    {"get_log_level", m_get_log_level, METH_NOARGS, "get_log_level() -> 0-4"},
    {"dtype_size", m_dtype_size, METH_O, "dtype_size(dtype) -> bytes per element"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_pcoll",
    "The C extension under the pcoll package (import pcoll, not this).", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

static int add_int(PyObject *m, const char *name, long v) { return PyModule_AddIntConstant(m, name, v); }

PyMODINIT_FUNC PyInit__pcoll(void);
PyMODINIT_FUNC PyInit__pcoll(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    pcpy_Error = PyErr_NewExceptionWithDoc("pcoll.Error",
                                           "A pcoll call failed: .status (a negative pcoll status code), "
                                           ".status_name (e.g. 'ERR_TIMEOUT') and the library's message.",
                                           NULL, NULL);
    if (!pcpy_Error || PyModule_AddObjectRef(m, "Error", pcpy_Error) < 0) goto fail;
    if (PyType_Ready(&pcpy_ContextType) < 0 || PyModule_AddObjectRef(m, "Context", (PyObject *)&pcpy_ContextType) < 0)
        goto fail;
    if (pcpy_add_types_request(m) < 0 || pcpy_add_types_partial(m) < 0 || pcpy_add_types_preduce(m) < 0 ||
        pcpy_add_types_fusion(m) < 0)
        goto fail;
    static const struct {
        const char *name;
        long v;
    } ints[] = {
        {"SUCCESS", PCOLL_SUCCESS},         {"ERR_NULL", PCOLL_ERR_NULL},       {"ERR_ARG", PCOLL_ERR_ARG},
        {"ERR_COUNT", PCOLL_ERR_COUNT},     {"ERR_DTYPE", PCOLL_ERR_DTYPE},     {"ERR_OP", PCOLL_ERR_OP},
        {"ERR_GROUP", PCOLL_ERR_GROUP},     {"ERR_THREAD_LEVEL", PCOLL_ERR_THREAD_LEVEL},
        {"ERR_MPI", PCOLL_ERR_MPI},         {"ERR_NOMEM", PCOLL_ERR_NOMEM},     {"ERR_CONFIG", PCOLL_ERR_CONFIG},
        {"ERR_STATE", PCOLL_ERR_STATE},     {"ERR_LIMIT", PCOLL_ERR_LIMIT},     {"ERR_INTERNAL", PCOLL_ERR_INTERNAL},
        {"ERR_TIMEOUT", PCOLL_ERR_TIMEOUT}, {"FLOAT32", PCOLL_FLOAT32},         {"FLOAT64", PCOLL_FLOAT64},
        {"INT32", PCOLL_INT32},             {"INT64", PCOLL_INT64},             {"SUM", PCOLL_SUM},
        {"AVG", PCOLL_AVG},                 {"VERSION_MAJOR", PCOLL_VERSION_MAJOR},
        {"VERSION_MINOR", PCOLL_VERSION_MINOR}, {"VERSION_PATCH", PCOLL_VERSION_PATCH},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (add_int(m, ints[i].name, ints[i].v) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
