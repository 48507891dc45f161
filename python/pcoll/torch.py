"""pcoll.torch: PyTorch training over pcoll, one wrapper per algorithm.

    import pcoll.torch as pt
    pt.init()                                    # the default context (mpi4py COMM_WORLD)
    pt.broadcast_parameters(model)               # rank 0's parameters and buffers everywhere
    opt = pt.SyncOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model)
    for x, y in data:
        opt.zero_grad()
        loss_fn(model(x), y).backward()          # buckets start from the gradient hooks
        opt.step()                               # waits for the buckets, then the inner step
    opt.close()

Each wrapper takes the user's optimizer and model and is collective to make
(every rank, the same model: the layouts are agreed on, and a rank whose
model differs fails every rank, naming the difference) and to close():

  SyncOptimizer(opt, model, fusion="optimal")   synchronous SGD; gradients in
      one flat buffer in backprop order; MG-WFBP buckets started from the
      gradient hooks, planned from the backward times measured in the first
      steps and a cost model calibrated on the job
  EagerOptimizer(opt, model, "solo"|"majority"|"quorum:Q", sync_every=0)
      eager-SGD: a partial allreduce of the gradients; fast ranks never wait
  WagmaOptimizer(opt, model, group=S, sync_every=10)
      WAGMA-SGD: a local step, then group model averaging
  PReduceOptimizer(opt, model, "fifo:3:dyn" | "ripples:smart:3" | ...)
      Partial Reduce / Ripples: a local step, then the model is averaged with
      a group of ready ranks

The exchanged tensors live in one flat buffer per wrapper: gradients (p.grad
becomes a view into it) or the model (p.data and the floating-point buffers,
BatchNorm's running statistics included, become views into it), so the
library works on them with no copy.  Integer buffers (BatchNorm's
num_batches_tracked) stay local.  Every tensor exchanged must be float32, or
every one float64, on the CPU.

Rules, as for buffers in MPI: a tensor the library works on (a wrapper's
views; any tensor of an iallreduce, a plan or a fusion executor in flight)
must keep its memory: no resize_(), set_() or new .data meanwhile.  Between
the steps and close(), a rank must not block in a collective outside pcoll
(an MPI barrier): the others may need it for a synchronous round or a group,
which it gives only from inside pcoll.
"""
import statistics
import time
import zlib

import numpy as np
import torch

import pcoll

__all__ = ["init", "context", "rank", "size", "broadcast_parameters", "SyncOptimizer", "EagerOptimizer",
           "WagmaOptimizer", "PReduceOptimizer"]

_default = None


def init(comm=None):
    """The default context (created on the first call; collective then)."""
    global _default
    if _default is None or _default.finalized:
        _default = pcoll.Context(comm)
    return _default


def context(ctx=None):
    """ctx, or the default context (made by init() if needed)."""
    return ctx if ctx is not None else init()


def rank(ctx=None):
    return context(ctx).rank


def size(ctx=None):
    return context(ctx).size


_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.int32: "int32", torch.int64: "int64"}
_DTYPE_CODES = {None: -1, torch.float32: 0, torch.float64: 1, torch.int32: 2, torch.int64: 3}


def _np(t):
    """The numpy view of a CPU tensor (the same memory)."""
    return t.detach().numpy()


# ---- layouts: what a wrapper exchanges, agreed on by every rank ----

def _agree_layout(ctx, what, entries, status=0, why=None):
    """Collective: every rank has the same (name, shape, dtype) entries, in
    the same order, or every rank raises naming the first difference.  A
    local failure (status != 0) is agreed on too, so no rank waits."""
    n = len(entries) if status == 0 else 0
    ctx.agree(what, ["the number of tensors exchanged"], [n], status, why)
    names, values = [], []
    for i, (name, shape, dtype) in enumerate(entries):
        numel = 1
        for d in shape:
            numel *= d
        label = "tensor %d (%s)" % (i, name)
        names += [label + " name (crc32)", label + " elements", label + " dimensions",
                  label + " shape (crc32)", label + " dtype (0 float32, 1 float64, 2 int32, 3 int64, -1 other)"]
        values += [zlib.crc32(name.encode()), numel, len(shape), zlib.crc32(repr(tuple(shape)).encode()),
                   _DTYPE_CODES.get(dtype, -1)]
    ctx.agree(what, names, values)


class _Flat:
    """Tensors of one dtype laid out in one flat CPU tensor, each tensor
    becoming a view into it (grads: p.grad; models: t.data).  `order` lists
    the tensors' indices in the order they are laid out."""

    def __init__(self, tensors, order, dtype):
        self.tensors = tensors
        self.count = [t.numel() for t in tensors]
        self.offset = [0] * len(tensors)
        at = 0
        for i in order:
            self.offset[i] = at
            at += self.count[i]
        self.flat = torch.zeros(at, dtype=dtype)
        self.array = _np(self.flat)  # the buffer pcoll works on

    def view(self, i):
        t = self.tensors[i]
        return self.flat[self.offset[i]:self.offset[i] + self.count[i]].view_as(t)

    def bind_data(self):
        """Model tensors: copy in, then make each tensor's data a view."""
        with torch.no_grad():
            for i, t in enumerate(self.tensors):
                v = self.view(i)
                v.copy_(t.data)
                t.data = v

    def bind_grads(self):
        """Gradients: each p.grad a view (its current value copied in)."""
        with torch.no_grad():
            for i, p in enumerate(self.tensors):
                v = self.view(i)
                if p.grad is not None:
                    v.copy_(p.grad)
                p.grad = v


def _unique_params(model, requires_grad):
    seen, out = set(), []
    for name, p in model.named_parameters():
        if id(p) in seen or (requires_grad and not p.requires_grad):
            continue
        seen.add(id(p))
        out.append((name, p))
    return out


def _float_dtype(what, named):
    """The one floating-point dtype of the tensors; (dtype, None) or (None, why)."""
    dtype = None
    for name, t in named:
        if t.device.type != "cpu":
            return None, "%s: %s is on %s; pcoll works on CPU tensors" % (what, name, t.device)
        if t.dtype not in (torch.float32, torch.float64):
            return None, "%s: %s is %s; the tensors exchanged must be float32 or float64" % (what, name, t.dtype)
        if dtype is None:
            dtype = t.dtype
        elif t.dtype != dtype:
            return None, "%s: %s is %s but the tensors before it are %s; they must all be alike" % (
                what, name, t.dtype, dtype)
    return dtype, None


def _model_tensors(model):
    """The parameters and floating-point buffers (model averaging)."""
    named = _unique_params(model, requires_grad=False)
    seen = {id(p) for _, p in named}
    for name, b in model.named_buffers():
        if id(b) not in seen and b.is_floating_point():
            seen.add(id(b))
            named.append((name, b))
    return named


def _check(ctx, what, named, why=None, settings=()):
    """Agrees on the tensors' layout, and on `why` (this rank's own reason to
    fail, found before anything collective: a bad argument): every rank
    returns, or every rank raises (this rank ValueError or TypeError with
    its reason, the others pcoll.Error naming this rank and the reason).
    Returns the tensors' dtype."""
    dtype, exc, status = None, ValueError, pcoll.ERR_ARG
    if why is None:
        dtype, why = _float_dtype(what, named) if named else (None, "%s: the model has nothing to exchange" % what)
        exc, status = TypeError, pcoll.ERR_DTYPE
    entries = [(name, tuple(t.shape), t.dtype) for name, t in named]
    try:
        _agree_layout(ctx, what, entries, status if why else 0, why)
        if settings:  # the wrapper's own arguments, which every rank must give alike
            ctx.agree(what, [n for n, _ in settings], [v for _, v in settings])
    except pcoll.Error:
        if why:
            raise exc(why) from None
        raise
    return dtype


def broadcast_parameters(model, root=0, ctx=None):
    """Collective: every rank's parameters and buffers become root's (an
    allreduce in which the other ranks add zeros: exact)."""
    ctx = context(ctx)
    named = list(model.state_dict(keep_vars=True).items())
    bad = next((n for n, t in named if t.dtype not in _DTYPES or t.device.type != "cpu"), None)
    why = None
    if bad is not None:
        t = dict(named)[bad]
        why = "broadcast_parameters: %s is a %s tensor of %s; pcoll moves CPU float32, float64, int32, int64" % (
            bad, t.device, t.dtype)
    if not 0 <= root < ctx.size and why is None:
        why = "broadcast_parameters: root %d is not a rank (0..%d)" % (root, ctx.size - 1)
    _agree_layout(ctx, "broadcast_parameters", [(n, tuple(t.shape), t.dtype) for n, t in named],
                  pcoll.ERR_ARG if why else 0, why)
    with torch.no_grad():
        for dtype in _DTYPES:
            group = [t for _, t in named if t.dtype == dtype]
            if not group:
                continue
            flat = torch.cat([t.reshape(-1) for t in group]) if ctx.rank == root else \
                torch.zeros(sum(t.numel() for t in group), dtype=dtype)
            ctx.allreduce(_np(flat))
            at = 0
            for t in group:
                t.copy_(flat[at:at + t.numel()].view_as(t))
                at += t.numel()


class _Wrapper:
    """What every wrapper shares: the inner optimizer's interface, close()
    and the context manager."""

    def __init__(self, optimizer, ctx):
        self.optimizer = optimizer
        self.ctx = context(ctx)
        self.closed = False

    def __getattr__(self, name):  # param_groups, state, state_dict, ...
        if name == "optimizer":
            raise AttributeError(name)
        return getattr(self.optimizer, name)

    def zero_grad(self, set_to_none=False):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def flush(self):
        """Collective, between steps: everything still pending is exchanged
        and applied (a synchronous round; WAGMA: every rank's model
        averaged), and the optimizer goes on.  Until the next step no rank
        needs another's pcoll calls, so other collectives (a checkpoint's
        averaging) are safe there."""
        self._live()
        self._flush()

    def _flush(self):
        pass  # synchronous exchanges leave nothing pending after step()

    def close(self):
        """Collective: the final exchange and the library object's free."""
        if not self.closed:
            try:
                self._close()
            finally:
                self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, etype, value, tb):
        # a rank that raises must not wait in a collective close: the others
        # fail by their timeout (or the job is aborted at exit)
        if etype is None:
            self.close()

    def _live(self):
        if self.closed:
            raise pcoll.Error("%s: closed" % type(self).__name__)


class _FlatGrads(_Wrapper):
    """Wrappers that exchange gradients: p.grad of every trainable parameter
    is a view into one flat buffer laid out in `order`."""

    def __init__(self, optimizer, model, ctx, what, order=None, why=None, settings=()):
        super().__init__(optimizer, ctx)
        named = _unique_params(model, requires_grad=True)
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        self.dtype = _check(self.ctx, what, named, why, settings)
        self.grads = _Flat(self.params, order if order is not None else range(len(self.params)), self.dtype)
        self.grads.bind_grads()

    def zero_grad(self, set_to_none=False):
        """Zeroes the gradients (the flat buffer) and makes every p.grad its
        view again (set_to_none is ignored: the views stay)."""
        del set_to_none
        self.grads.flat.zero_()
        for i, p in enumerate(self.params):
            v = self.grads.view(i)
            if p.grad is None or p.grad.data_ptr() != v.data_ptr():
                p.grad = v

    def _rebind(self):
        """p.grad may have been replaced (set to None, assigned): point it
        at its view again, keeping its value."""
        with torch.no_grad():
            for i, p in enumerate(self.params):
                g = p.grad
                v = self.grads.view(i)
                if g is None:
                    v.zero_()
                    p.grad = v
                elif g.data_ptr() != v.data_ptr():
                    v.copy_(g)
                    p.grad = v


class SyncOptimizer(_FlatGrads):
    """Synchronous data-parallel SGD with MG-WFBP's merged buckets.

    Gradients live in one flat buffer in backprop order (p.grad is a view).
    Each bucket's allreduce (mean over the ranks) starts from the gradient
    hooks the moment its last tensor is ready, overlapping the rest of
    backprop; step() waits for the buckets, then runs the inner step.  The
    first `profile_steps` steps run one bucket after backprop while they
    measure each tensor's backward time and the forward pass; then the ranks
    agree on the profile (rank 0's backprop order, the mean times), the cost
    model is calibrated on the job (pcoll_calibrate; or `cost_model`), and
    the plan of `fusion` is made: "optimal" (default), "mgwfbp", "wfbp",
    "single" or "fixed:BYTES".  Every plan adds each element up in the same
    order, so the models are bit for bit the same whatever the plan.

    backward_passes_per_step = k: gradients of k backward passes add up
    locally; the exchange starts on the k-th.  Parameters that get no
    gradient in a step are reduced as they are (zero after zero_grad).
    """

    def __init__(self, optimizer, model, fusion="optimal", backward_passes_per_step=1, cost_model=None,
                 profile_steps=5, ctx=None):
        why = None
        if not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
            why = "SyncOptimizer: backward_passes_per_step %r must be an int >= 1" % (backward_passes_per_step,)
        elif not isinstance(profile_steps, int) or profile_steps < 2:
            why = "SyncOptimizer: profile_steps %r must be an int >= 2 (the first step warms up)" % (profile_steps,)
        elif cost_model is not None and not isinstance(cost_model, pcoll.CostModel):
            why = "SyncOptimizer: cost_model must be a pcoll.CostModel or None"
        else:
            try:  # the strategy's name
                pcoll.FusionPlan([1], [0.0], 0.0, pcoll.CostModel(0, 0), fusion)
            except (pcoll.Error, TypeError) as e:
                why = "SyncOptimizer: fusion %r: %s" % (fusion, e)
        nparams = len(_unique_params(model, requires_grad=True))
        settings = [("fusion (crc32)", zlib.crc32(str(fusion).encode())),
                    ("backward_passes_per_step", backward_passes_per_step if why is None else 0),
                    ("profile_steps", profile_steps if why is None else 0),
                    ("cost_model given", cost_model is not None),
                    ("cost_model a_us (ns)", round(cost_model.a_us * 1e3) if cost_model is not None else 0),
                    ("cost_model b_us (fs)", round(cost_model.b_us * 1e9) if cost_model is not None else 0)]
        # first guess of backprop order: the reverse of the parameters'
        super().__init__(optimizer, model, ctx, "SyncOptimizer", order=list(reversed(range(nparams))), why=why,
                         settings=settings)
        self.model = model
        self.strategy = fusion
        self.passes = backward_passes_per_step
        self.cost_model = cost_model
        self.profile_steps = profile_steps
        self.steps = 0
        self.plan = None
        self.backprop_order = list(reversed(range(nparams)))
        self._times = []          # per profiled step: (forward_us, forward end, {param: hook time})
        self._pass = [0] * nparams
        self._forward = [0.0, 0.0]
        self._step_hooks = {}
        self._executor(self._single_plan())
        self._hooks, self._accs = [], []
        for i, p in enumerate(self.params):
            # the parameter's gradient accumulator: autograd keeps it only
            # while a reference does, and a new one would have no hook
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            self._hooks.append(acc.register_hook(self._make_hook(i)))
            self._accs.append(acc)
        self._fwd_hooks = [model.register_forward_pre_hook(self._forward_begins),
                           model.register_forward_hook(self._forward_ends)]

    # -- planning --

    def _layers(self):
        """The planner's layers (forward order: the last ready first) -> params."""
        return list(reversed(self.backprop_order))

    def _single_plan(self):
        n = len(self.params)
        return pcoll.FusionPlan([1] * n, [0.0] * n, 0.0, pcoll.CostModel(0, 0), "single")

    def _executor(self, plan):
        layers = self._layers()
        self.layer_of = [0] * len(self.params)
        for l, i in enumerate(layers):
            self.layer_of[i] = l
        old = getattr(self, "fusion", None)
        if old is not None:
            old.free()
        self.fusion = self.ctx.fusion(self.grads.array, [self.grads.offset[i] for i in layers],
                                      [self.grads.count[i] for i in layers], plan, op="avg")

    def _forward_begins(self, module, inputs):
        self._forward[0] = time.perf_counter()

    def _forward_ends(self, module, inputs, output):
        self._forward[1] = time.perf_counter()

    def _make_hook(self, i):
        def hook(*unused):
            self._grad_ready(i)
        return hook

    def _grad_ready(self, i):
        self._pass[i] += 1
        if self._pass[i] < self.passes:
            return
        p, v = self.params[i], None
        if p.grad is None or p.grad.data_ptr() != self.grads.flat.data_ptr() + self.grads.offset[i] * \
                self.grads.flat.element_size():
            v = self.grads.view(i)
            with torch.no_grad():
                v.copy_(p.grad if p.grad is not None else torch.zeros_like(v))
            p.grad = v
        if self.plan is None:
            self._step_hooks[i] = time.perf_counter()
        self.fusion.ready(self.layer_of[i])

    def _replan(self):
        """Collective, after the profiled steps: the plan every rank runs."""
        n = len(self.params)
        profiled = self._times[1:]  # the first step warms up
        fwd = statistics.median(f for f, _, _ in profiled)
        # backprop order as rank 0 saw it (every rank must lay out alike)
        seen = sorted(range(n), key=lambda i: profiled[-1][2].get(i, float("inf")))
        order = np.array(seen if self.ctx.rank == 0 else [0] * n, dtype=np.int64)
        self.ctx.allreduce(order)
        gaps = np.zeros(n)
        for _, prev, stamps in profiled:  # backprop starts after the forward pass
            for i in order:
                t = stamps.get(int(i))
                if t is None:
                    continue
                gaps[i] += (t - prev) * 1e6
                prev = t
        gaps /= len(profiled)
        times = np.concatenate([[fwd], gaps])
        self.ctx.allreduce(times, op="avg")
        self.backprop_order = [int(i) for i in order]
        layers = self._layers()
        nbytes = [self.grads.count[i] * self.grads.flat.element_size() for i in layers]
        model = self.cost_model
        if model is None:
            top = 256
            while top < sum(nbytes):
                top *= 2
            model = self.ctx.calibrate(min_bytes=256, max_bytes=top, reps=5)
        self.cost_model = model
        self.profile = {"forward_us": float(times[0]), "backward_us": [float(times[1 + i]) for i in layers],
                        "bytes": nbytes, "layers": [self.names[i] for i in layers]}
        self.plan = pcoll.FusionPlan(nbytes, self.profile["backward_us"], self.profile["forward_us"], model,
                                     self.strategy)
        # lay the gradients out in the agreed backprop order, then run the plan
        grads = _Flat(self.params, self.backprop_order, self.dtype)
        grads.flat.copy_(torch.cat([self.grads.view(i).reshape(-1) for i in self.backprop_order]))
        self.grads = grads
        self.grads.bind_grads()
        self._executor(self.plan)

    # -- the step --

    def synchronize(self):
        """Marks the tensors that got no gradient, waits for every bucket."""
        self._live()
        for i, c in enumerate(self._pass):
            if c < self.passes:
                self._pass[i] = self.passes - 1
                self._grad_ready(i)
        self.fusion.wait()
        self._pass = [0] * len(self.params)
        for i, p in enumerate(self.params):  # what was reduced is what the inner step will read
            if p.grad is None or p.grad.data_ptr() != self.grads.view(i).data_ptr():
                raise RuntimeError("SyncOptimizer: %s.grad was replaced after backward; the gradient reduced is "
                                   "its view in the flat buffer (modify p.grad in place)" % self.names[i])

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        with self.ctx.phase("exchange"):
            self.synchronize()
        if self.plan is None:
            self._times.append(((self._forward[1] - self._forward[0]) * 1e6, self._forward[1], self._step_hooks))
            self._step_hooks = {}
        self.optimizer.step()
        self.steps += 1
        if self.plan is None and self.steps >= self.profile_steps:
            self._replan()
        return loss

    def _flush(self):
        if any(self._pass):
            raise pcoll.Error("SyncOptimizer: flush: a backward pass has started buckets: call step() first")

    def _close(self):
        if any(self._pass):  # a backward pass since the last step: finish its exchange
            self.synchronize()
        for h in self._fwd_hooks + self._hooks:
            h.remove()
        self._accs = []
        self.fusion.free()


class EagerOptimizer(_FlatGrads):
    """eager-SGD: the gradients go into a partial allreduce (ACCUMULATE
    mode) of kind "solo", "majority" or "quorum:Q"; step() applies the mean
    of what the call delivered (the sum of every round completed since the
    last call, over P), or nothing if no round completed (the gradient waits
    in the library for a later round: nothing is lost).  Every sync_every-th
    round is synchronous.  close() flushes (a synchronous round with every
    pending gradient, applied) and frees the object.  `info` is the last
    call's pcoll.PartialInfo."""

    def __init__(self, optimizer, model, kind="solo", sync_every=0, seed=1, ctx=None):
        why = None
        if not isinstance(kind, str) or kind.split(":")[0] not in ("solo", "majority", "quorum"):
            why = "EagerOptimizer: kind %r is not solo, majority or quorum:Q" % (kind,)
        super().__init__(optimizer, model, ctx, "EagerOptimizer", why=why)
        self.partial = self.ctx.partial(sum(self.grads.count), self.dtype, kind=kind, mode="accumulate",
                                        sync_every=sync_every, seed=seed)
        self.info = None
        self.scale = 1.0 / self.ctx.size

    def _apply(self, info):
        self.info = info
        if info.rounds == 0:
            return False
        self.grads.flat.mul_(self.scale)
        self.optimizer.step()
        return True

    def step(self, closure=None):
        """Contributes the gradients and applies what was delivered; returns
        the closure's loss."""
        self._live()
        loss = closure() if closure is not None else None
        self._rebind()
        with self.ctx.phase("exchange"):
            info = self.partial.allreduce(self.grads.array)
        self._apply(info)
        return loss

    def _flush(self):
        self._rebind()
        self.grads.flat.zero_()
        self._apply(self.partial.flush(self.grads.array))

    def _close(self):
        self._flush()
        self.partial.free()


class _FlatModel(_Wrapper):
    """Wrappers that average models: the parameters and floating-point
    buffers are views into one flat buffer."""

    def __init__(self, optimizer, model, ctx, what):
        super().__init__(optimizer, ctx)
        named = _model_tensors(model)
        self.dtype = _check(self.ctx, what, named)
        self.model_flat = _Flat([t for _, t in named], range(len(named)), self.dtype)
        self.model_flat.bind_data()


class WagmaOptimizer(_FlatModel):
    """WAGMA-SGD: step() runs the inner (local) step, then averages the model
    inside this round's group of `group` ranks (S; 0: about sqrt(P)) by a
    group round that nobody waits for; every sync_every-th round averages
    over every rank.  close() averages every rank's current model (a flush):
    afterwards every rank holds the mean model."""

    def __init__(self, optimizer, model, group=0, sync_every=10, ctx=None):
        super().__init__(optimizer, model, ctx, "WagmaOptimizer")
        self.partial = self.ctx.partial(self.model_flat.flat.numel(), self.dtype, kind="group", mode="average",
                                        sync_every=sync_every, group_size=group)
        self.info = None

    def step(self, closure=None):
        self._live()
        loss = closure() if closure is not None else None
        self.optimizer.step()
        with self.ctx.phase("exchange"):
            self.info = self.partial.allreduce(self.model_flat.array)
        return loss

    def _flush(self):
        self.partial.deposit(self.model_flat.array)
        self.info = self.partial.flush(self.model_flat.array)

    def _close(self):
        self._flush()
        self.partial.free()


class PReduceOptimizer(_FlatModel):
    """Partial Reduce / Ripples: step() runs the inner (local) step, then the
    model becomes the weighted average of a group of ready ranks that the
    controller forms (spec: "fifo:3:dyn", "ripples:random:3",
    "ripples:smart:3", "ripples:static", ...).  `iteration` is where this
    rank stands: after a group with ranks ahead of it, their largest
    iteration (a training loop may skip to it).  close() drains the groups
    still planned with this rank (Ripples plans ahead: each then averages
    with this model, and every member keeps its group's average), frees the
    object and averages every rank's model: afterwards every rank holds the
    mean."""

    def __init__(self, optimizer, model, spec="fifo", ctx=None):
        super().__init__(optimizer, model, ctx, "PReduceOptimizer")
        self.preduce = self.ctx.preduce(self.model_flat.flat.numel(), self.dtype, spec=spec)
        self.iteration = 0
        self.info = None

    def step(self, closure=None):
        self._live()
        loss = closure() if closure is not None else None
        self.optimizer.step()
        self.iteration += 1
        with self.ctx.phase("exchange"):
            self.info = self.preduce.reduce(self.model_flat.array, self.iteration)
        self.iteration = max(self.iteration, self.info.iteration)
        return loss

    def _flush(self):
        raise pcoll.Error("PReduceOptimizer: flush: its groups span steps (ranks skip steps): there is no point "
                          "every rank reaches but close()")

    def _close(self):
        self.preduce.drain(self.model_flat.array)
        self.preduce.free()
        self.ctx.allreduce(self.model_flat.array, op="avg")
