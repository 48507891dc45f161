/* pcoll._pcoll.CostModel, FusionPlan and Fusion (MG-WFBP's merged-gradient
 * buckets), and Context.calibrate.  Models and plans are pure (no MPI);
 * calibrate and Fusion's create are collective. */
#include <string.h>

#include "pcoll_py.h"

typedef struct cost_model {
    PyObject_HEAD
    pcoll_cost_model_t m;
} cost_model_t;

typedef struct fusion_plan {
    PyObject_HEAD
    pcoll_fusion_plan_t *plan;
} fusion_plan_t;

typedef struct fusion {
    PyObject_HEAD
    pcpy_context_t *owner;
    pcoll_fusion_t *f;  /* NULL once freed */
    pcpy_buf_t grad;
    int nlayers, nbuckets;
    int in_step;        /* a layer was marked ready since the last wait */
    int abandoned;      /* a bucket timed out: MPI may still read grad */
    pcpy_child_t child;
} fusion_t;

/* ---- sequences ---- */

static double *doubles_from(PyObject *obj, const char *arg, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(obj, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of numbers", arg);
        return NULL;
    }
    *n = PySequence_Fast_GET_SIZE(seq);
    double *v = PyMem_Malloc(sizeof(double) * (size_t)(*n > 0 ? *n : 1));
    if (!v) PyErr_NoMemory();
    for (Py_ssize_t i = 0; v && i < *n; i++) {
        v[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (v[i] == -1.0 && PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "%s[%zd] is not a number", arg, i);
            PyMem_Free(v);
            v = NULL;
        }
    }
    Py_DECREF(seq);
    return v;
}

static size_t *sizes_from(PyObject *obj, const char *arg, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(obj, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of whole numbers >= 0", arg);
        return NULL;
    }
    *n = PySequence_Fast_GET_SIZE(seq);
    size_t *v = PyMem_Malloc(sizeof(size_t) * (size_t)(*n > 0 ? *n : 1));
    if (!v) PyErr_NoMemory();
    for (Py_ssize_t i = 0; v && i < *n; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, i);
        v[i] = PyLong_Check(x) ? PyLong_AsSize_t(x) : (size_t)-1;
        if (v[i] == (size_t)-1) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s[%zd] is %R; it must be a whole number >= 0", arg, i, x);
            PyMem_Free(v);
            v = NULL;
        }
    }
    Py_DECREF(seq);
    return v;
}

static PyObject *double_tuple(const double *v, int n)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) PyTuple_SET_ITEM(t, i, PyFloat_FromDouble(v[i]));
    return t;
}

/* ---- CostModel ---- */

PyObject *pcpy_cost_model_new(const pcoll_cost_model_t *m)
{
    cost_model_t *o = PyObject_New(cost_model_t, &pcpy_CostModelType);
    if (o) o->m = *m;
    return (PyObject *)o;
}

static int cost_model_init(cost_model_t *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"a_us", "b_us", NULL};
    double a = 0, b = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|dd:CostModel", kwlist, &a, &b)) return -1;
    int rc = pcoll_cost_model_linear(a, b, &o->m);
    return rc == PCOLL_SUCCESS ? 0 : pcpy_raise_int(rc);
}

static PyObject *cost_model_parse(PyObject *cls, PyObject *arg)
{
    (void)cls;
    const char *s = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!s) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "text must be a str \"A,B\", not %R", arg);
        return NULL;
    }
    pcoll_cost_model_t m;
    int rc = pcoll_cost_model_parse(s, &m);
    return rc == PCOLL_SUCCESS ? pcpy_cost_model_new(&m) : pcpy_raise(rc);
}

static PyObject *cost_model_fit(PyObject *cls, PyObject *args)
{
    (void)cls;
    PyObject *bo, *uo;
    if (!PyArg_ParseTuple(args, "OO:fit", &bo, &uo)) return NULL;
    Py_ssize_t nb, nu;
    double *b = doubles_from(bo, "bytes", &nb);
    double *u = b ? doubles_from(uo, "us", &nu) : NULL;
    PyObject *r = NULL;
    if (u && nb != nu) {
        PyErr_Format(PyExc_ValueError, "bytes has %zd samples but us %zd", nb, nu);
    } else if (u) {
        pcoll_cost_model_t m;
        int rc = pcoll_cost_model_fit(b, u, (int)nb, &m);
        r = rc == PCOLL_SUCCESS ? pcpy_cost_model_new(&m) : pcpy_raise(rc);
    }
    PyMem_Free(b);
    PyMem_Free(u);
    return r;
}

static PyObject *cost_model_predict(cost_model_t *o, PyObject *arg)
{
    double bytes = PyFloat_AsDouble(arg);
    if (bytes == -1.0 && PyErr_Occurred()) return NULL;
    return PyFloat_FromDouble(pcoll_cost_predict(&o->m, bytes));
}

static PyObject *cost_model_segments(cost_model_t *o, void *c)
{
    (void)c;
    int n = o->m.piecewise ? o->m.nsegments : 0;
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        PyObject *t = Py_BuildValue("(ddd)", o->m.segment[i].from_bytes, o->m.segment[i].a_us, o->m.segment[i].b_us);
        if (!t) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, t);
    }
    return l;
}

#define CM_D(field)                                                                                                    \
    static PyObject *cm_##field(cost_model_t *o, void *c)                                                            \
    {                                                                                                                  \
        (void)c;                                                                                                       \
        return PyFloat_FromDouble(o->m.field);                                                                         \
    }
CM_D(a_us)
CM_D(b_us)
CM_D(linear_rms_us)
CM_D(linear_max_rel)
CM_D(piecewise_rms_us)
CM_D(piecewise_max_rel)

static PyObject *cm_piecewise(cost_model_t *o, void *c)
{
    (void)c;
    return PyBool_FromLong(o->m.piecewise);
}

static PyObject *cm_nsamples(cost_model_t *o, void *c)
{
    (void)c;
    return PyLong_FromLong(o->m.nsamples);
}

static PyObject *cost_model_repr(cost_model_t *o)
{
    char buf[160];
    snprintf(buf, sizeof buf, "CostModel(a_us=%.4g, b_us=%.6g%s)", o->m.a_us, o->m.b_us,
             o->m.piecewise ? ", piecewise" : "");
    return PyUnicode_FromString(buf);
}

static PyMethodDef cost_model_methods[] = {
    {"parse", (PyCFunction)cost_model_parse, METH_O | METH_CLASS, "CostModel.parse('A,B') -> CostModel"},
    {"fit", (PyCFunction)cost_model_fit, METH_VARARGS | METH_CLASS,
     "CostModel.fit(bytes, us) -> CostModel: least squares, linear and piecewise"},
    {"predict", (PyCFunction)cost_model_predict, METH_O, "predict(nbytes) -> microseconds"},
    {NULL, NULL, 0, NULL},
};

#define G(name, doc) {#name, (getter)cm_##name, NULL, doc, NULL}
static PyGetSetDef cost_model_getset[] = {
    G(a_us, "startup time of the linear model (us)"),
    G(b_us, "time per byte of the linear model (us/B)"),
    G(piecewise, "predictions use the piecewise segments"),
    G(nsamples, "samples fitted (0: given)"),
    G(linear_rms_us, "rms error of the linear fit"),
    G(linear_max_rel, "largest relative error of the linear fit"),
    G(piecewise_rms_us, "rms error of the piecewise fit"),
    G(piecewise_max_rel, "largest relative error of the piecewise fit"),
    {"segments", (getter)cost_model_segments, NULL, "[(from_bytes, a_us, b_us)] when piecewise", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
#undef G

PyTypeObject pcpy_CostModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcoll._pcoll.CostModel",
    .tp_basicsize = sizeof(cost_model_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "CostModel(a_us=0, b_us=0): T(M) = a + bM microseconds, or piecewise (fit, Context.calibrate)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)cost_model_init,
    .tp_methods = cost_model_methods,
    .tp_getset = cost_model_getset,
    .tp_repr = (reprfunc)cost_model_repr,
};

/* ---- Context.calibrate ---- */

PyObject *pcpy_calibrate(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"group", "min_bytes", "max_bytes", "reps", NULL};
    PyObject *group = Py_None;
    pcoll_calibrate_config_t cfg;
    pcoll_calibrate_config_default(&cfg);
    Py_ssize_t lo = (Py_ssize_t)cfg.min_bytes, hi = (Py_ssize_t)cfg.max_bytes;
    int reps = cfg.reps;
    pcoll_t *ctx = pcpy_ctx(c, "calibrate");
    if (!ctx) return NULL;
    int *g = NULL, gs = 0;
    /* a local failure fails this rank in the library's calibration too */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Onni:calibrate", kwlist, &group, &lo, &hi, &reps)) {
        lo = 0;
    } else if (lo < 0 || hi < 0) {
        PyErr_SetString(PyExc_ValueError, "min_bytes and max_bytes must be >= 0");
        lo = 0;
    } else if (pcpy_group_from(group, "group", &g, &gs) < 0) {
        lo = 0;
    }
    pcpy_pending_t bad;
    int local = pcpy_pending_take(&bad);
    cfg.min_bytes = (size_t)lo;
    cfg.max_bytes = (size_t)hi;
    cfg.reps = reps;
    pcoll_cost_model_t m;
    int rc;
    PCPY_BLOCKING(c, rc = pcoll_calibrate(ctx, g, gs, &cfg, &m));
    PyMem_Free(g);
    if (local) return pcpy_pending_raise(&bad);
    return rc == PCOLL_SUCCESS ? pcpy_cost_model_new(&m) : pcpy_raise(rc);
}

/* ---- FusionPlan ---- */

typedef struct profile_args {
    size_t *bytes;
    double *backward;
    pcoll_fusion_profile_t profile;
} profile_args_t;

static int profile_from(PyObject *bo, PyObject *to, double forward_us, profile_args_t *p)
{
    Py_ssize_t nb = 0, nt = 0;
    memset(p, 0, sizeof *p);
    p->bytes = sizes_from(bo, "bytes", &nb);
    p->backward = p->bytes ? doubles_from(to, "backward_us", &nt) : NULL;
    if (!p->backward) {
        PyMem_Free(p->bytes);
        return -1;
    }
    if (nb != nt || nb > 0x7fffffff) {
        PyErr_Format(PyExc_ValueError, "bytes has %zd layers but backward_us %zd", nb, nt);
        PyMem_Free(p->bytes);
        PyMem_Free(p->backward);
        return -1;
    }
    p->profile = (pcoll_fusion_profile_t){
        .nlayers = (int)nb, .bytes = p->bytes, .backward_us = p->backward, .forward_us = forward_us};
    return 0;
}

static void profile_free(profile_args_t *p)
{
    PyMem_Free(p->bytes);
    PyMem_Free(p->backward);
}

static int fusion_plan_init(fusion_plan_t *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"bytes", "backward_us", "forward_us", "model", "strategy", NULL};
    PyObject *bo, *to, *model;
    double fwd;
    const char *strategy = "optimal";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOdO!|s:FusionPlan", kwlist, &bo, &to, &fwd, &pcpy_CostModelType,
                                     &model, &strategy))
        return -1;
    pcoll_fusion_spec_t spec;
    int rc = pcoll_fusion_spec_parse(strategy, &spec);
    if (rc != PCOLL_SUCCESS) return pcpy_raise_int(rc);
    profile_args_t p;
    if (profile_from(bo, to, fwd, &p) < 0) return -1;
    pcoll_fusion_plan_t *plan = NULL;
    rc = pcoll_fusion_plan_create(&p.profile, &((cost_model_t *)model)->m, &spec, &plan);
    profile_free(&p);
    if (rc != PCOLL_SUCCESS) return pcpy_raise_int(rc);
    pcoll_fusion_plan_free(&o->plan);
    o->plan = plan;
    return 0;
}

static pcoll_fusion_plan_t *plan_of(fusion_plan_t *o)
{
    if (!o->plan) pcpy_raise_msg(PCOLL_ERR_STATE, "FusionPlan: not initialized");
    return o->plan;
}

/* predict(bytes, backward_us, forward_us, model): the plan's times under
 * another profile or model */
static PyObject *fusion_plan_predict(fusion_plan_t *o, PyObject *args)
{
    PyObject *bo, *to, *model;
    double fwd;
    if (!PyArg_ParseTuple(args, "OOdO!:predict", &bo, &to, &fwd, &pcpy_CostModelType, &model)) return NULL;
    pcoll_fusion_plan_t *plan = plan_of(o);
    profile_args_t p;
    if (!plan || profile_from(bo, to, fwd, &p) < 0) return NULL;
    int rc = pcoll_fusion_plan_predict(plan, &p.profile, &((cost_model_t *)model)->m);
    profile_free(&p);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *fp_get(fusion_plan_t *o, void *which)
{
    pcoll_fusion_plan_t *pl = plan_of(o);
    if (!pl) return NULL;
    const char *w = which;
    if (!strcmp(w, "strategy")) {
        char buf[64];
        pcoll_fusion_spec_name(&pl->spec, buf, sizeof buf);
        return PyUnicode_FromString(buf);
    }
    if (!strcmp(w, "nlayers")) return PyLong_FromLong(pl->nlayers);
    if (!strcmp(w, "nbuckets")) return PyLong_FromLong(pl->nbuckets);
    if (!strcmp(w, "bucket_of")) return pcpy_int_tuple(pl->bucket_of, pl->nlayers);
    if (!strcmp(w, "buckets")) {
        PyObject *l = PyList_New(pl->nbuckets);
        for (int k = 0; l && k < pl->nbuckets; k++)
            PyList_SET_ITEM(l, k, Py_BuildValue("(ii)", pl->first[k], pl->last[k]));
        return l;
    }
    if (!strcmp(w, "bucket_bytes")) {
        PyObject *t = PyTuple_New(pl->nbuckets);
        for (int k = 0; t && k < pl->nbuckets; k++) PyTuple_SET_ITEM(t, k, PyLong_FromSize_t(pl->bytes[k]));
        return t;
    }
    if (!strcmp(w, "start_us")) return double_tuple(pl->start_us, pl->nbuckets);
    if (!strcmp(w, "end_us")) return double_tuple(pl->end_us, pl->nbuckets);
    if (!strcmp(w, "iter_us")) return PyFloat_FromDouble(pl->iter_us);
    if (!strcmp(w, "compute_us")) return PyFloat_FromDouble(pl->compute_us);
    if (!strcmp(w, "comm_us")) return PyFloat_FromDouble(pl->comm_us);
    return PyFloat_FromDouble(pl->exposed_us);
}

static void fusion_plan_dealloc(fusion_plan_t *o)
{
    pcoll_fusion_plan_free(&o->plan);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyMethodDef fusion_plan_methods[] = {
    {"predict", (PyCFunction)fusion_plan_predict, METH_VARARGS,
     "predict(bytes, backward_us, forward_us, model): recompute the times"},
    {NULL, NULL, 0, NULL},
};

#define G(name, doc) {#name, (getter)fp_get, NULL, doc, #name}
static PyGetSetDef fusion_plan_getset[] = {
    G(strategy, "the strategy's name"),
    G(nlayers, "layers (forward order: 0 is the first layer)"),
    G(nbuckets, "buckets (in the order they start: bucket 0 holds the last layers)"),
    G(buckets, "[(first, last)] layers of each bucket"),
    G(bucket_of, "each layer's bucket"),
    G(bucket_bytes, "each bucket's bytes"),
    G(start_us, "each bucket's predicted allreduce start (from the forward pass's start)"),
    G(end_us, "each bucket's predicted allreduce end"),
    G(iter_us, "predicted iteration"),
    G(compute_us, "forward + backward"),
    G(comm_us, "every bucket's allreduce time"),
    G(exposed_us, "communication not hidden behind backprop"),
    {NULL, NULL, NULL, NULL, NULL},
};
#undef G

PyTypeObject pcpy_FusionPlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcoll._pcoll.FusionPlan",
    .tp_basicsize = sizeof(fusion_plan_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "FusionPlan(bytes, backward_us, forward_us, model, strategy='optimal'): which layers share a bucket "
              "(pure; layers in forward order)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)fusion_plan_init,
    .tp_dealloc = (destructor)fusion_plan_dealloc,
    .tp_methods = fusion_plan_methods,
    .tp_getset = fusion_plan_getset,
};

/* ---- Fusion (the executor) ---- */

/* frees the executor: on success it leaves the context; on failure (a
 * step's buckets in flight: wait first) it stays as it was, unless forced */
static int fusion_close(PyObject *self, int force)
{
    fusion_t *o = (fusion_t *)self;
    int rc = PCOLL_SUCCESS;
    if (o->f) {
        rc = pcoll_fusion_free(&o->f);
        if (rc != PCOLL_SUCCESS && !force) return pcpy_raise_int(rc);
        if (rc != PCOLL_SUCCESS) { /* forgotten: MPI may still use grad */
            o->f = NULL;
            o->abandoned = 1;
        }
        if (!o->abandoned) pcpy_buf_release(&o->grad);
    }
    pcpy_child_unlink(o->owner, &o->child);
    if (o->in_step) { /* layers were marked but no bucket had started */
        o->in_step = 0;
        pcpy_unkeep(o->owner, self);
    }
    return rc == PCOLL_SUCCESS ? 0 : pcpy_raise_int(rc);
}

/* fusion(grad, layer_offset, layer_count, plan, op='sum', group=None); a
 * local failure passes no plan: the library fails every member */
PyObject *pcpy_fusion_create(pcpy_context_t *c, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"grad", "layer_offset", "layer_count", "plan", "op", "group", NULL};
    PyObject *grad, *offo, *cnto, *plan, *op = NULL, *group = Py_None;
    pcoll_t *ctx = pcpy_ctx(c, "fusion");
    if (!ctx) return NULL;
    pcoll_fusion_plan_t *pl = NULL;
    pcpy_buf_t gb = {0};
    pcoll_op_t o = PCOLL_SUM;
    size_t *off = NULL, *cnt = NULL;
    int *g = NULL, gs = 0;
    Py_ssize_t noff = 0, ncnt = 0;
    if (PyArg_ParseTupleAndKeywords(args, kw, "OOOO!|OO:fusion", kwlist, &grad, &offo, &cnto, &pcpy_FusionPlanType,
                                    &plan, &op, &group) &&
        pcpy_group_from(group, "group", &g, &gs) == 0 && (pl = plan_of((fusion_plan_t *)plan)) &&
        pcpy_buf_get(grad, "grad", 1, &gb) == 0 && (!op || pcpy_op_from(op, "op", &o) == 0) &&
        (off = sizes_from(offo, "layer_offset", &noff)) && (cnt = sizes_from(cnto, "layer_count", &ncnt))) {
        if (noff != pl->nlayers || ncnt != pl->nlayers)
            PyErr_Format(PyExc_ValueError, "layer_offset has %zd and layer_count %zd entries; the plan has %d layers",
                         noff, ncnt, pl->nlayers);
        for (int l = 0; !PyErr_Occurred() && l < pl->nlayers; l++)
            if (off[l] > gb.count || cnt[l] > gb.count - off[l])
                PyErr_Format(PyExc_ValueError, "layer %d (elements %zu..%zu) lies outside grad (%zu elements)", l,
                             off[l], off[l] + cnt[l], gb.count);
    }
    pcpy_pending_t bad;
    int local = pcpy_pending_take(&bad);
    pcoll_fusion_t *f = NULL;
    int rc;
    if (local)
        PCPY_BLOCKING(c, rc = pcoll_fusion_create(ctx, g, gs, NULL, PCOLL_FLOAT32, o, NULL, NULL, NULL, &f));
    else
        PCPY_BLOCKING(c, rc = pcoll_fusion_create(ctx, g, gs, gb.ptr, gb.dtype, o, off, cnt, pl, &f));
    PyMem_Free(off);
    PyMem_Free(cnt);
    PyMem_Free(g);
    if (local || rc != PCOLL_SUCCESS) {
        pcpy_buf_release(&gb);
        return local ? pcpy_pending_raise(&bad) : pcpy_raise(rc);
    }
    fusion_t *fo = PyObject_New(fusion_t, &pcpy_FusionType);
    if (!fo) {
        pcoll_fusion_free(&f);
        pcpy_buf_release(&gb);
        return NULL;
    }
    fo->owner = (pcpy_context_t *)Py_NewRef((PyObject *)c);
    fo->f = f;
    fo->grad = gb;
    fo->nlayers = pl->nlayers;
    fo->nbuckets = pl->nbuckets;
    fo->in_step = 0;
    fo->abandoned = 0;
    pcpy_child_link(c, &fo->child, (PyObject *)fo, fusion_close);
    return (PyObject *)fo;
}

static PyObject *fusion_ready(fusion_t *o, PyObject *arg)
{
    if (!o->f) return pcpy_raise_msg(PCOLL_ERR_STATE, "Fusion.ready: the object was freed");
    long layer = PyLong_AsLong(arg);
    if (layer == -1 && PyErr_Occurred()) return NULL;
    if (layer < -1 || layer > 0x7fffffff) layer = -1; /* the library names it */
    if (!o->in_step) { /* buckets may start now: keep the object until wait */
        if (pcpy_keep(o->owner, (PyObject *)o) < 0) return NULL;
        o->in_step = 1;
    }
    int rc = pcoll_fusion_ready(o->f, (int)layer);
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *fusion_wait(fusion_t *o, PyObject *noargs)
{
    (void)noargs;
    if (!o->f) return pcpy_raise_msg(PCOLL_ERR_STATE, "Fusion.wait: the object was freed");
    int rc;
    PCPY_BLOCKING(o->owner, rc = pcoll_fusion_wait(o->f));
    if (rc == PCOLL_ERR_TIMEOUT) o->abandoned = 1;
    if (o->in_step) {
        o->in_step = 0;
        Py_INCREF(o);
        pcpy_unkeep(o->owner, (PyObject *)o);
        Py_DECREF(o); /* the caller still holds one */
    }
    if (rc != PCOLL_SUCCESS) return pcpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *fusion_free(fusion_t *o, PyObject *noargs)
{
    (void)noargs;
    if (fusion_close((PyObject *)o, 0) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *fusion_get(fusion_t *o, void *which)
{
    return PyLong_FromLong(!strcmp(which, "nlayers") ? o->nlayers : o->nbuckets);
}

static void fusion_dealloc(fusion_t *o)
{
    /* no step is in flight (the context keeps the object then) */
    if (fusion_close((PyObject *)o, 1) < 0) PyErr_WriteUnraisable((PyObject *)o);
    Py_XDECREF((PyObject *)o->owner);
    PyObject_Free(o);
}

static PyMethodDef fusion_methods[] = {
    {"ready", (PyCFunction)fusion_ready, METH_O, "ready(layer): its gradient is complete; full buckets start"},
    {"wait", (PyCFunction)fusion_wait, METH_NOARGS, "wait(): every bucket of the step is reduced"},
    {"free", (PyCFunction)fusion_free, METH_NOARGS, "free(): local, between steps"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef fusion_getset[] = {
    {"nlayers", (getter)fusion_get, NULL, "layers", "nlayers"},
    {"nbuckets", (getter)fusion_get, NULL, "buckets", "nbuckets"},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject pcpy_FusionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcoll._pcoll.Fusion",
    .tp_basicsize = sizeof(fusion_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The executor of a FusionPlan on a gradient buffer (Context.fusion): ready(layer) ..., wait()",
    .tp_dealloc = (destructor)fusion_dealloc,
    .tp_methods = fusion_methods,
    .tp_getset = fusion_getset,
};

int pcpy_add_types_fusion(PyObject *m)
{
    if (PyType_Ready(&pcpy_CostModelType) < 0 || PyType_Ready(&pcpy_FusionPlanType) < 0 ||
        PyType_Ready(&pcpy_FusionType) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "CostModel", (PyObject *)&pcpy_CostModelType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "FusionPlan", (PyObject *)&pcpy_FusionPlanType) < 0) return -1;
    return PyModule_AddObjectRef(m, "Fusion", (PyObject *)&pcpy_FusionType);
}
