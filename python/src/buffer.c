/* Python objects as (pointer, count, dtype): the buffer protocol (numpy
 * arrays, array.array, bytearray views...), or a CPU torch tensor through
 * tensor.detach().numpy(), which shares the tensor's memory.  Nothing is
 * copied: the library works on the object's own memory, so the view is
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

/* torch.Tensor if torch has been imported (pcoll never imports it) */
static int is_torch_tensor(PyObject *obj)
{
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL;
    if (!torch) return 0;
    PyObject *tensor = PyObject_GetAttrString(torch, "Tensor");
    if (!tensor) {
        PyErr_Clear();
        return 0;
    }
    int is = PyObject_IsInstance(obj, tensor);
    Py_DECREF(tensor);
    if (is < 0) PyErr_Clear();
    return is > 0;
}

/* tensor.detach().numpy(), a new reference, or NULL with a TypeError
 * naming the argument */
static PyObject *tensor_as_array(PyObject *obj, const char *arg)
{
    PyObject *device = PyObject_GetAttrString(obj, "device");
    PyObject *type = device ? PyObject_GetAttrString(device, "type") : NULL;
    const char *t = type && PyUnicode_Check(type) ? PyUnicode_AsUTF8(type) : NULL;
    int cpu = t && strcmp(t, "cpu") == 0;
    if (!cpu && t) PyErr_Format(PyExc_TypeError, "%s is a tensor on %S; pcoll works on CPU tensors", arg, device);
    Py_XDECREF(type);
    Py_XDECREF(device);
    if (!cpu) return NULL;
    PyObject *detached = PyObject_CallMethod(obj, "detach", NULL);
    PyObject *arr = detached ? PyObject_CallMethod(detached, "numpy", NULL) : NULL;
    Py_XDECREF(detached);
    if (!arr) {
        PyObject *dtype = PyObject_GetAttrString(obj, "dtype");
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s is a tensor of %S; pcoll takes float32, float64, int32 or int64", arg,
                     dtype ? dtype : Py_None);
        Py_XDECREF(dtype);
    }
    return arr;
}

int pcpy_buf_get(PyObject *obj, const char *arg, int writable, pcpy_buf_t *out)
{
    memset(out, 0, sizeof *out);
    if (!obj || obj == Py_None) {
        PyErr_Format(PyExc_TypeError, "%s is None; it must be a buffer (a numpy array, a CPU tensor...)", arg);
        return -1;
    }
    PyObject *src = obj, *arr = NULL;
    if (!PyObject_CheckBuffer(obj)) {
        if (!is_torch_tensor(obj)) {
            PyErr_Format(PyExc_TypeError,
                         "%s must support the buffer protocol (a numpy array, a CPU torch tensor...), not %.100s", arg,
                         Py_TYPE(obj)->tp_name);
            return -1;
        }
        if (!(arr = tensor_as_array(obj, arg))) return -1;
        src = arr;
    }
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    int rc = PyObject_GetBuffer(src, &out->view, flags);
    if (rc < 0) {
        /* say what is wrong: read-only, or not contiguous */
        Py_buffer probe;
        int readable = PyObject_GetBuffer(src, &probe, PyBUF_FORMAT | PyBUF_STRIDES) == 0;
        int ro = readable && probe.readonly;
        if (readable) PyBuffer_Release(&probe);
        PyErr_Clear();
        if (writable && ro)
            PyErr_Format(PyExc_ValueError, "%s is read-only; pcoll writes the result into it", arg);
        else
            PyErr_Format(PyExc_ValueError, "%s must be C-contiguous (e.g. numpy.ascontiguousarray, tensor.contiguous())",
                         arg);
        Py_XDECREF(arr);
        return -1;
    }
    int d = dtype_of_format(out->view.format, out->view.itemsize);
    if (d < 0 && src != obj) { /* a tensor: name its dtype */
        PyObject *dtype = PyObject_GetAttrString(obj, "dtype");
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s is a tensor of %S; pcoll takes float32, float64, int32 or int64", arg,
                     dtype ? dtype : Py_None);
        Py_XDECREF(dtype);
        PyBuffer_Release(&out->view);
        Py_DECREF(arr);
        return -1;
    }
    if (d < 0) {
        PyErr_Format(PyExc_TypeError, "%s has elements of format '%s' (%zd bytes); pcoll takes float32, float64, int32 "
                                      "or int64",
                     arg, out->view.format ? out->view.format : "B", out->view.itemsize);
        PyBuffer_Release(&out->view);
        Py_XDECREF(arr);
        return -1;
    }
    Py_XDECREF(arr); /* the view holds what it needs */
    out->held = 1;
    out->ptr = out->view.buf;
    out->dtype = (pcoll_dtype_t)d;
    out->count = (size_t)(out->view.len / out->view.itemsize);
    return 0;
}

void pcpy_buf_release(pcpy_buf_t *b)
{
    if (b && b->held) {
        PyBuffer_Release(&b->view);
        b->held = 0;
    }
}
