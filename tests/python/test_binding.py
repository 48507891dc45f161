"""The pcoll Python package over the C library (run at several rank counts):
allreduce in its three forms on numpy arrays and torch tensors, groups,
partial and dynamic-group objects, cost models, fusion plans and executors,
agreement, timeouts, and the errors for bad arguments."""
import gc
import threading
import time

import numpy as np
import pytest
import torch

import pcoll

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def ramp(ctx, n, dtype, salt=0):
    return ((np.arange(n) * 7 + ctx.rank * 13 + salt) % 101).astype(dtype)


def expected_sum(ctx, n, dtype, ranks=None, salt=0):
    ranks = range(ctx.size) if ranks is None else ranks
    return sum(((np.arange(n) * 7 + r * 13 + salt) % 101).astype(np.int64) for r in ranks).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 5, 1000, 70001])
def test_allreduce_numpy(ctx, dtype, n):
    a = ramp(ctx, n, dtype)
    ctx.allreduce(a)
    assert np.array_equal(a, expected_sum(ctx, n, dtype))
    src, out = ramp(ctx, n, dtype, 1), np.empty(n, dtype)
    ctx.allreduce(src, out)
    assert np.array_equal(out, expected_sum(ctx, n, dtype, salt=1))
    assert np.array_equal(src, ramp(ctx, n, dtype, 1))  # the input is left alone


def test_allreduce_avg_and_torch(ctx):
    t = torch.full((10,), float(ctx.rank))
    ctx.allreduce(t, op="avg")
    assert torch.all(t == (ctx.size - 1) / 2)
    p = torch.nn.Parameter(torch.ones(3))  # a tensor that requires grad: its memory is used all the same
    ctx.allreduce(p)
    assert torch.all(p.detach() == ctx.size)
    w = torch.ones(4, 6)[:, 1:3].contiguous()
    ctx.allreduce(w, op=pcoll.SUM)
    assert torch.all(w == ctx.size)


def test_groups(ctx):
    members = list(range(0, ctx.size, 2))
    if ctx.rank in members:
        a = ramp(ctx, 300, np.float64)
        ctx.allreduce(a, group=members)
        assert np.array_equal(a, expected_sum(ctx, 300, np.float64, members))
    rev = list(reversed(range(ctx.size)))
    a = ramp(ctx, 10, np.int32)
    ctx.allreduce(a, group=rev)
    assert np.array_equal(a, expected_sum(ctx, 10, np.int32))


def test_iallreduce_and_plans(ctx):
    reqs = []
    for k in range(5):
        a = ramp(ctx, 2000, np.float32, k)
        reqs.append((k, a, ctx.iallreduce(a)))
    for k, a, r in reqs[::-1]:
        r.wait()
        assert r.done and np.array_equal(a, expected_sum(ctx, 2000, np.float32, salt=k))
    # a request dropped in flight still completes into its buffer (the
    # context keeps it)
    a = ramp(ctx, 500, np.float32)
    r = ctx.iallreduce(a)
    del r
    gc.collect()
    deadline = time.monotonic() + 10
    while not np.array_equal(a, expected_sum(ctx, 500, np.float32)) and time.monotonic() < deadline:
        time.sleep(0.001)
    assert np.array_equal(a, expected_sum(ctx, 500, np.float32))
    # a plan: the same buffers again and again
    src, dst = np.zeros(64, np.float64), np.zeros(64, np.float64)
    plan = ctx.allreduce_init(src, dst, op="avg")
    for k in range(20):
        src[:] = ctx.rank + k
        req = plan.start()
        while not req.test():
            pass
        assert np.all(dst == (ctx.size - 1) / 2 + k)
    with pytest.raises(pcoll.Error) as e:
        r1 = plan.start()
        plan.start()  # the last start is not complete
    assert e.value.status == pcoll.ERR_STATE
    with pytest.raises(pcoll.Error) as e:
        plan.free()  # nor can the plan be freed: it stays, with its buffers
    assert e.value.status == pcoll.ERR_STATE
    src[:] = 1
    r1.wait()
    plan.start().wait()
    assert np.all(dst == 1)
    plan.free()
    with pytest.raises(pcoll.Error):
        plan.start()


def test_bad_arguments(ctx):
    with pytest.raises(TypeError, match="send must support the buffer protocol"):
        ctx.allreduce([1.0, 2.0])
    with pytest.raises(TypeError, match="send has elements of format"):
        ctx.allreduce(np.zeros(3, np.float16))
    with pytest.raises(TypeError, match="send is a tensor of torch.float16"):
        ctx.allreduce(torch.zeros(3, dtype=torch.float16))
    with pytest.raises(ValueError, match="send must be C-contiguous"):
        ctx.allreduce(np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(ValueError, match="send must be C-contiguous"):
        ctx.allreduce(torch.zeros(4, 4).t())
    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="send is read-only"):
        ctx.allreduce(ro)
    with pytest.raises(ValueError, match="recv is read-only"):
        ctx.allreduce(np.zeros(3, np.float32), ro)
    with pytest.raises(TypeError, match="send holds float64 but recv float32"):
        ctx.allreduce(np.zeros(3), np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="send has 3 elements but recv 4"):
        ctx.allreduce(np.zeros(3, np.float32), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="not an op"):
        ctx.allreduce(np.zeros(3, np.float32), op="max")
    with pytest.raises(ValueError, match=r"group\[0\]"):
        ctx.allreduce(np.zeros(3, np.float32), group=[-1])
    with pytest.raises(pcoll.Error) as e:
        ctx.allreduce(np.zeros(3, np.float32), group=[ctx.rank, ctx.rank])
    assert e.value.status == pcoll.ERR_GROUP and "pcoll_allreduce" in str(e.value)
    with pytest.raises(TypeError):
        ctx.partial(4, dtype="complex64")


def test_partial_conservation(ctx):
    """Everything contributed arrives: the sum of every delivered result plus
    the flush equals the sum of all contributions, at every rank."""
    for kind in ["solo", "majority", "quorum:%d" % max(1, ctx.size // 2)]:
        p = ctx.partial(257, "float64", kind=kind, sync_every=3 if kind == "solo" else 0)
        got = np.zeros(257)
        out = np.zeros(257)
        rng = np.random.default_rng(ctx.rank)
        calls = 40
        for k in range(calls):
            time.sleep(rng.random() * 0.002)
            g = np.full(257, float(ctx.rank + 1))
            info = p.allreduce(g, out)
            assert isinstance(info, pcoll.PartialInfo) and info.rounds >= 0
            if info.rounds:
                got += out
        info = p.flush(out)
        got += out
        assert info.synchronous
        p.free()
        total = calls * sum(r + 1 for r in range(ctx.size))
        assert np.all(got == total), kind
    with pytest.raises(pcoll.Error):
        p.allreduce(np.zeros(257))


def test_partial_errors(ctx):
    with ctx.partial(8, "float32") as p:
        assert p.kind == "solo" and p.count == 8 and p.dtype == "float32" and p.data_phase
        with pytest.raises(ValueError, match="out has 7 elements; this object has 8"):
            p.allreduce(np.zeros(8, np.float32), np.zeros(7, np.float32))
        with pytest.raises(TypeError, match="contribution holds float64; this object reduces float32"):
            p.deposit(np.zeros(8))
        with pytest.raises(TypeError, match="out is needed"):
            p.allreduce(None)
        p.flush(np.zeros(8, np.float32))
    assert p.freed
    with pytest.raises(ValueError, match="mode"):
        ctx.partial(8, mode="sometimes")
    with pytest.raises(ValueError, match="kind 'solitary'"):
        ctx.partial(8, kind="solitary")


def test_partial_one_rank_bad_fails_everyone(ctx):
    """A bad argument at one rank fails every rank at once, not by a timeout."""
    t = time.monotonic()
    mode = "sometimes" if ctx.rank == ctx.size - 1 else "accumulate"
    with pytest.raises((pcoll.Error, ValueError)) as e:
        ctx.partial(8, mode=mode)
    if ctx.rank == ctx.size - 1:
        assert isinstance(e.value, ValueError)
    else:
        assert isinstance(e.value, pcoll.Error) and "rank %d" % (ctx.size - 1) in str(e.value)
    assert time.monotonic() - t < 5


def test_group_rounds(ctx):
    if ctx.size < 2:
        return
    p = ctx.partial(4, "float32", kind="group:2", mode="average", sync_every=4)
    for r in range(3):
        g = p.group_of(r)
        assert ctx.rank in g and len(g) >= 1
    m = np.full(4, float(ctx.rank), np.float32)
    for _ in range(6):
        p.allreduce(m)
    p.deposit(m)
    p.flush(m)
    p.free()
    allm = m.copy()
    ctx.allreduce(allm, op="avg")
    assert np.allclose(m, allm)  # after the flush every rank holds the mean


def test_preduce_keeps_the_mean(ctx):
    n = 100
    # start values no average of the others' can reach (0, 11, 24, ...: 11 is not 24 k / 2^m), so a rank that
    # averaged with anyone has moved, whatever the grouping order was
    start = [r * 10 + r * r for r in range(ctx.size)]
    with ctx.preduce(n, "float64", spec="fifo:%d:const" % min(2, ctx.size)) as o:
        model = np.full(n, float(start[ctx.rank]))
        rng = np.random.default_rng(ctx.rank)
        sizes = []
        for k in range(30):
            time.sleep(rng.random() * 0.003)
            info = o.reduce(model, k + 1)
            assert ctx.rank in info.members and 0 < info.weight <= 1
            sizes.append(info.group_size)
        stats = o.stats()
        assert set(stats) >= {"requests", "groups", "busy_s"}
    if ctx.size > 1:  # it averaged with others: the model moved
        assert max(sizes) == 2 and not np.all(model == start[ctx.rank])
    total = model.copy()
    ctx.allreduce(total)
    assert np.allclose(total, float(sum(start)))  # constant weights keep the sum


def test_preduce_drain_keeps_the_sum(ctx):
    # Ripples plans groups ahead: ranks that stop at different calls drain
    # the groups still planned with them, so constant weights keep the sum
    n = 64
    o = ctx.preduce(n, "float64", spec="ripples:random:%d" % min(2, ctx.size))
    model = np.full(n, float(ctx.rank * 10))
    for k in range(20 + 3 * ctx.rank):
        o.reduce(model, k + 1)
    with pytest.raises(ValueError, match="elements"):
        o.drain(np.zeros(n + 1))
    o.drain(model)
    with pytest.raises(pcoll.Error, match="drain"):
        o.reduce(model, 100)
    o.free()
    total = model.copy()
    ctx.allreduce(total)
    assert np.allclose(total, 10.0 * sum(range(ctx.size)))


def test_cost_model_and_plans():
    m = pcoll.CostModel(100.0, 0.01)
    assert m.predict(1000) == pytest.approx(110.0)
    f = pcoll.CostModel.fit([1000, 2000, 4000, 8000], [110, 120, 140, 180])
    assert f.a_us == pytest.approx(100, rel=1e-6) and f.b_us == pytest.approx(0.01, rel=1e-6)
    assert pcoll.CostModel.parse("5,0.5").b_us == 0.5
    with pytest.raises(pcoll.Error):
        pcoll.CostModel.parse("five")
    with pytest.raises(pcoll.Error):
        pcoll.CostModel(-1, 0)
    plans = {}
    for s in ["optimal", "mgwfbp", "wfbp", "single", "fixed:3000"]:
        p = pcoll.FusionPlan([1000] * 6, [50.0] * 6, 100.0, m, s)
        plans[s] = p
        assert p.nlayers == 6 and sum(b - a + 1 for a, b in p.buckets) == 6
        assert p.iter_us >= p.compute_us
    assert plans["wfbp"].nbuckets == 6 and plans["single"].nbuckets == 1
    assert plans["optimal"].iter_us <= min(p.iter_us for p in plans.values()) + 1e-9
    with pytest.raises(pcoll.Error):
        pcoll.FusionPlan([1000], [1.0], 0.0, m, "fastest")
    with pytest.raises(ValueError, match="bytes has 2 layers but backward_us 1"):
        pcoll.FusionPlan([1, 2], [1.0], 0.0, m)


def test_fusion_executor(ctx):
    """Every plan gives each layer the bits of its own allreduce, in place
    in a flat buffer laid out in backprop order (the last layer first)."""
    counts = [300, 5000, 17, 40000, 1]
    L = len(counts)
    offsets, at = [0] * L, 0
    for l in reversed(range(L)):
        offsets[l] = at
        at += counts[l]
    rng = np.random.default_rng(7 + ctx.rank)
    model = pcoll.CostModel(50.0, 0.001)
    for s in ["optimal", "wfbp", "single", "fixed:4096"]:
        plan = pcoll.FusionPlan([c * 4 for c in counts], [100.0] * L, 10.0, model, s)
        grad = np.zeros(at, np.float32)
        f = ctx.fusion(grad, offsets, counts, plan, op="avg")
        for step in range(2):
            grad[:] = rng.standard_normal(at).astype(np.float32)
            want = grad.copy()
            ctx.set_allreduce_algo("recdbl")
            for l in range(L):
                ctx.allreduce(want[offsets[l]:offsets[l] + counts[l]], op="avg")
            ctx.set_allreduce_algo("auto")
            for l in reversed(range(L)):
                f.ready(l)
            f.wait()
            assert np.array_equal(grad, want), s
        f.free()
    with pytest.raises(ValueError, match="lies outside grad"):
        ctx.fusion(np.zeros(10, np.float32), [0] * L, counts, plan)


def test_calibrate(ctx):
    m = ctx.calibrate(min_bytes=64, max_bytes=4096, reps=3)
    assert isinstance(m, pcoll.CostModel) and m.b_us >= 0 and m.nsamples == 7
    mine = np.array([m.a_us, m.b_us])
    ctx.allreduce(mine, op="avg")
    assert mine[0] == pytest.approx(m.a_us) and mine[1] == pytest.approx(m.b_us)  # the same at every rank


def test_agree(ctx):
    ctx.agree("check", ["a", "b"], [1, 2])
    if ctx.size > 1:
        with pytest.raises(pcoll.Error, match="b differs between ranks"):
            ctx.agree("check", ["a", "b"], [1, 2 + (ctx.rank == 1)])
    with pytest.raises(pcoll.Error, match="every rank fails|broken"):
        ctx.agree("check", ["a"], [1], pcoll.ERR_ARG if ctx.rank == 0 else 0, "broken here")


def test_gil_released(ctx):
    """A blocking call lets other Python threads run: rank 0 enters an
    allreduce late, the others count while they wait in it."""
    ticks = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)
    th = threading.Thread(target=count)
    th.start()
    if ctx.rank == 0:
        time.sleep(0.3)
    a = np.ones(4, np.float32)
    before = ticks[0]
    ctx.allreduce(a)
    during = ticks[0] - before
    stop.set()
    th.join()
    if ctx.rank != 0 and ctx.size > 1:
        assert during > 20  # about 0.3 s of 1 ms ticks
    assert a[0] == ctx.size


def test_stats_and_settings(ctx):
    s = ctx.stats()
    assert s["data_bytes_sent"] >= 0
    warn, tmo = ctx.timeouts
    assert tmo == 60
    assert ctx.allreduce_algo_for(8) in ("recdbl", "direct", "shm")
    assert ctx.allreduce_algo_for(8, group_size=1) in ("recdbl", "direct")
    pol = ctx.progress_policy
    ctx.progress_policy = pol
    with pytest.raises(KeyError):
        ctx.progress_policy = {"spin": 1}


def test_timeline(ctx, tmp_path_factory):
    import json
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    base = comm.bcast(str(tmp_path_factory.mktemp("timeline")) if comm.rank == 0 else None, root=0)
    prefix = base + "/t"
    assert not ctx.recording
    with pytest.raises(pcoll.Error):
        ctx.timeline_stop()  # not recording
    ctx.mark("outside", True)  # no timeline: nothing, no error
    ctx.timeline_start(prefix)
    assert ctx.recording
    with ctx.phase("forward"):
        a = ramp(ctx, 100, np.float32)
        ctx.allreduce(a)
    with pytest.raises(pcoll.Error):
        ctx.mark("x" * 100, True)  # longer than 63 bytes
    ctx.timeline_stop()
    assert not ctx.recording
    events = [json.loads(line) for line in open("%s.%d.jsonl" % (prefix, ctx.rank))]
    assert events[0]["ev"] == "header" and events[0]["rank"] == ctx.rank and events[-1]["ev"] == "stop"
    marks = [(e["ph"], e["name"]) for e in events if e["ev"] == "mark"]
    assert marks == [("B", "forward"), ("E", "forward")]
    calls = [e for e in events if e["ev"] == "allreduce"]
    assert len(calls) == 1 and calls[0]["bytes"] == 400 and calls[0]["n"] == ctx.size
    begin, end = [e["t"] for e in events if e["ev"] == "mark"]
    assert begin <= calls[0]["t"] and calls[0]["t"] + calls[0]["dur"] <= end
