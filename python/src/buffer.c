/* Python objects as (pointer, count, dtype): the buffer protocol (numpy
 * arrays, array.array, memoryviews...), or a CPU torch tensor, whose memory
 * is taken through its own accessors (data_ptr, numel, dtype).  Nothing is
 * copied: the library works on the object's own memory, so the object is
 * held for as long as the library may touch it. */
#include <string.h>

#include "pcoll_py.h"

/* float32 / float64 / int32 / int64 from a struct-module format and item
 * size; -1 for anything else */
static int dtype_of_format(const char *fmt, Py_ssize_t itemsize)
{
    if (!fmt) fmt = "B";
    if (*fmt == '@' || *fmt == '=' || *fmt == '<') fmt++; /* native order (x86: little endian) */
    if (strlen(fmt) != 1) return -1;
    switch (*fmt) {
    case 'f':
        return itemsize == 4 ? PCOLL_FLOAT32 : -1;
    case 'd':
        return itemsize == 8 ? PCOLL_FLOAT64 : -1;
    case 'i':
    case 'l':
    case 'q':
        return itemsize == 4 ? PCOLL_INT32 : itemsize == 8 ? PCOLL_INT64 : -1;
    default:
        return -1;
    }
}

/* torch's Tensor type and dtypes, looked up once torch has been imported
 * (pcoll never imports it) */
static struct {
    PyObject *tensor_type;
    PyObject *dtypes[4]; /* torch.float32, float64, int32, int64: pcoll's order */
    PyObject *is_cpu, *dtype, *is_contiguous, *numel, *data_ptr; /* interned names */
} torch_types;

static int torch_ready(void)
{
    if (torch_types.tensor_type) return 1;
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL;
    if (!torch) return 0;
    static const char *names[4] = {"float32", "float64", "int32", "int64"};
    PyObject *t = PyObject_GetAttrString(torch, "Tensor");
    for (int i = 0; t && i < 4; i++)
        if (!(torch_types.dtypes[i] = PyObject_GetAttrString(torch, names[i]))) Py_CLEAR(t);
    static const char *attrs[5] = {"is_cpu", "dtype", "is_contiguous", "numel", "data_ptr"};
    PyObject **slot[5] = {&torch_types.is_cpu, &torch_types.dtype, &torch_types.is_contiguous, &torch_types.numel,
                          &torch_types.data_ptr};
    for (int i = 0; t && i < 5; i++)
        if (!(*slot[i] = PyUnicode_InternFromString(attrs[i]))) Py_CLEAR(t);
    if (!t) { /* a torch module without them: not one we know */
        PyErr_Clear();
        for (int i = 0; i < 4; i++) Py_CLEAR(torch_types.dtypes[i]);
        return 0;
    }
    torch_types.tensor_type = t; /* kept for the life of the process */
    return 1;
}

static int is_torch_tensor(PyObject *obj)
{
    return torch_ready() && PyType_IsSubtype(Py_TYPE(obj), (PyTypeObject *)torch_types.tensor_type);
}

/* a bool attribute or method result of a tensor; -1 with an exception */
static int tensor_flag(PyObject *obj, PyObject *name, int call)
{
    PyObject *v = call ? PyObject_CallMethodNoArgs(obj, name) : PyObject_GetAttr(obj, name);
    int r = v ? PyObject_IsTrue(v) : -1;
    Py_XDECREF(v);
    return r;
}

static long long tensor_int(PyObject *obj, PyObject *method)
{
    PyObject *v = PyObject_CallMethodNoArgs(obj, method);
    long long r = v ? PyLong_AsLongLong(v) : -1;
    Py_XDECREF(v);
    return r;
}

/* A CPU tensor's memory, checked like a buffer */
static int tensor_get(PyObject *obj, const char *arg, pcpy_buf_t *out)
{
    int cpu = tensor_flag(obj, torch_types.is_cpu, 0);
    if (cpu <= 0) {
        if (cpu == 0) {
            PyObject *dev = PyObject_GetAttrString(obj, "device");
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s is a tensor on %S; pcoll works on CPU tensors", arg, dev ? dev : Py_None);
            Py_XDECREF(dev);
        }
        return -1;
    }
    PyObject *dtype = PyObject_GetAttr(obj, torch_types.dtype);
    if (!dtype) return -1;
    int d = -1;
    for (int i = 0; i < 4; i++)
        if (dtype == torch_types.dtypes[i]) d = i;
    if (d < 0) {
        PyErr_Format(PyExc_TypeError, "%s is a tensor of %S; pcoll takes float32, float64, int32 or int64", arg, dtype);
        Py_DECREF(dtype);
        return -1;
    }
    Py_DECREF(dtype);
    int contiguous = tensor_flag(obj, torch_types.is_contiguous, 1);
    if (contiguous <= 0) {
        if (contiguous == 0)
            PyErr_Format(PyExc_ValueError, "%s must be C-contiguous (e.g. tensor.contiguous())", arg);
        return -1;
    }
    long long n = tensor_int(obj, torch_types.numel), at = n > 0 ? tensor_int(obj, torch_types.data_ptr) : 0;
    if (n < 0 || at < 0) return -1;
    out->tensor = Py_NewRef(obj);
    out->held = 1;
    out->ptr = (void *)(uintptr_t)at;
    out->count = (size_t)n;
    out->dtype = (pcoll_dtype_t)d;
    return 0;
}

int pcpy_buf_get(PyObject *obj, const char *arg, int writable, pcpy_buf_t *out)
{
    memset(out, 0, sizeof *out);
    if (!obj || obj == Py_None) {
        PyErr_Format(PyExc_TypeError, "%s is None; it must be a buffer (a numpy array, a CPU tensor...)", arg);
        return -1;
    }
    if (!PyObject_CheckBuffer(obj)) {
        if (is_torch_tensor(obj)) return tensor_get(obj, arg, out);
        PyErr_Format(PyExc_TypeError,
                     "%s must support the buffer protocol (a numpy array, a CPU torch tensor...), not %.100s", arg,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &out->view, flags) < 0) {
        /* say what is wrong: read-only, or not contiguous */
        Py_buffer probe;
        int readable = PyObject_GetBuffer(obj, &probe, PyBUF_FORMAT | PyBUF_STRIDES) == 0;
        int ro = readable && probe.readonly;
        if (readable) PyBuffer_Release(&probe);
        PyErr_Clear();
        if (writable && ro)
            PyErr_Format(PyExc_ValueError, "%s is read-only; pcoll writes the result into it", arg);
        else
            PyErr_Format(PyExc_ValueError, "%s must be C-contiguous (e.g. numpy.ascontiguousarray)", arg);
        return -1;
    }
    int d = dtype_of_format(out->view.format, out->view.itemsize);
    if (d < 0) {
        PyErr_Format(PyExc_TypeError, "%s has elements of format '%s' (%zd bytes); pcoll takes float32, float64, int32 "
                                      "or int64",
                     arg, out->view.format ? out->view.format : "B", out->view.itemsize);
        PyBuffer_Release(&out->view);
        return -1;
    }
    out->held = 1;
    out->ptr = out->view.buf;
    out->dtype = (pcoll_dtype_t)d;
    out->count = (size_t)(out->view.len / out->view.itemsize);
    return 0;
}

void pcpy_buf_release(pcpy_buf_t *b)
{
    if (!b || !b->held) return;
    if (b->tensor)
        Py_CLEAR(b->tensor);
    else
        PyBuffer_Release(&b->view);
    b->held = 0;
}
