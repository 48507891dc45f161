"""pcoll.torch's optimizer wrappers (run under mpirun at 2 and 3 ranks):
SyncOptimizer gives every rank the same model at every step, equal to
PyTorch DDP's (gloo) within float tolerance from the same seed and data, and
bit for bit the same whatever the fusion plan; eager-SGD delivers everything
contributed; WAGMA and P-Reduce end with the mean model (BatchNorm buffers
included); a model that differs between ranks, or a bad argument at one
rank, fails every rank with an error naming it."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import common
import pcoll
import pcoll.torch as pt

torch.set_num_threads(1)


class Small(torch.nn.Module):
    """A convolution with BatchNorm, a shared-nothing dense head."""

    def __init__(self, width=8):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, width, 3)
        self.bn = torch.nn.BatchNorm2d(width)
        self.fc = torch.nn.Linear(width * 6 * 6, 10)

    def forward(self, x):
        return self.fc(F.relu(self.bn(self.conv(x))).flatten(1))


def model(seed=1, width=8, dtype=torch.float32):
    torch.manual_seed(seed)
    return Small(width).to(dtype)


def batches(rank, steps, seed=5):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return [(torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 10, (8,), generator=g)) for _ in range(steps)]


def params(m):
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()]).numpy().copy()


def same_everywhere(comm, a):
    return all(np.array_equal(a, b) for b in comm.allgather(a))


@pytest.fixture(scope="module")
def ctx():
    c = pt.init()
    c.set_timeouts(20, 60)
    return c


@pytest.fixture(scope="module")
def ddp(comm):
    dist = common.init_ddp(comm)
    yield dist
    dist.destroy_process_group()


def train_sync(comm, data, fusion="optimal", steps=None, **kw):
    m = model()
    opt = pt.SyncOptimizer(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), m, fusion=fusion,
                           profile_steps=3, **kw)
    for k, (x, y) in enumerate(data):
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
        assert same_everywhere(comm, params(m)), "step %d" % k
    opt.close()
    return m, opt


def test_sync_same_model_and_equal_to_ddp(ctx, comm, ddp):
    data = batches(ctx.rank, 8)
    m, opt = train_sync(comm, data)
    assert opt.plan is not None and opt.plan.nlayers == 6 and opt.cost_model is not None
    ref = model()
    net = torch.nn.parallel.DistributedDataParallel(ref)
    sgd = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for x, y in data:
        sgd.zero_grad()
        F.cross_entropy(net(x), y).backward()
        sgd.step()
    np.testing.assert_allclose(params(m), params(ref), rtol=1e-4, atol=1e-5)


def test_sync_bits_alike_across_fusion_plans(ctx, comm):
    data = batches(ctx.rank, 6, seed=9)
    first = None
    for fusion in ["optimal", "mgwfbp", "wfbp", "single", "fixed:2K"]:
        m, opt = train_sync(comm, data, fusion=fusion, cost_model=pcoll.CostModel(30.0, 0.001))
        if first is None:
            first = params(m)
        assert np.array_equal(params(m), first), fusion
        assert opt.plan.strategy.startswith(fusion.split(":")[0])


def test_sync_backward_passes_per_step(ctx, comm):
    """Two backward passes per step add up, as one pass over both halves."""
    data = batches(ctx.rank, 4, seed=3)
    a = model()
    oa = pt.SyncOptimizer(torch.optim.SGD(a.parameters(), lr=0.1), a, backward_passes_per_step=2,
                          profile_steps=2, cost_model=pcoll.CostModel(30.0, 0.001))
    b = model()
    ob = pt.SyncOptimizer(torch.optim.SGD(b.parameters(), lr=0.1), b, profile_steps=2,
                          cost_model=pcoll.CostModel(30.0, 0.001))
    a.eval()  # BatchNorm: the same statistics for a half batch as for the whole
    b.eval()
    for x, y in data:
        oa.zero_grad()
        F.cross_entropy(a(x[:4]), y[:4], reduction="sum").backward()
        F.cross_entropy(a(x[4:]), y[4:], reduction="sum").backward()
        oa.step()
        ob.zero_grad()
        F.cross_entropy(b(x), y, reduction="sum").backward()
        ob.step()
    oa.close()
    ob.close()
    np.testing.assert_allclose(params(a), params(b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["solo", "majority", "quorum:2"])
def test_eager_delivers_everything(ctx, comm, kind):
    """loss = <w, c> gives the gradient c: with SGD (lr 1) every rank's w
    moves by minus the mean of everything contributed, flush included."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 1, bias=False).double()
    w0 = params(lin)
    opt = pt.EagerOptimizer(torch.optim.SGD(lin.parameters(), lr=1.0), lin, kind, sync_every=4)
    rng = np.random.default_rng(ctx.rank)
    total = np.zeros(16)
    for k in range(30):
        c = torch.from_numpy(rng.integers(-5, 6, 16).astype(np.float64))
        total += c.numpy()
        opt.zero_grad()
        (lin.weight.reshape(-1) * c).sum().backward()
        if rng.random() < 0.3:
            import time
            time.sleep(0.003)
        opt.step()
    opt.close()
    everyone = sum(comm.allgather(total))
    np.testing.assert_allclose(params(lin), w0 - everyone / ctx.size, rtol=0, atol=1e-9)


def test_wagma_mean_after_close(ctx, comm):
    m = model(seed=10 + ctx.rank)  # every rank starts elsewhere
    opt = pt.WagmaOptimizer(torch.optim.SGD(m.parameters(), lr=0.05), m, group=2, sync_every=3)
    for x, y in batches(ctx.rank, 7):
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
    # (no collective outside pcoll before close: a rank may still need the
    # others for a synchronous round, which they give only inside pcoll)
    state = {k: v.detach().clone() for k, v in m.state_dict().items() if v.is_floating_point()}
    opt.close()
    mean = {k: sum(comm.allgather(v.numpy())) / ctx.size for k, v in state.items()}
    for k, v in m.state_dict().items():
        if v.is_floating_point():
            assert same_everywhere(comm, v.numpy()), k
            np.testing.assert_allclose(v.numpy(), mean[k], rtol=1e-5, atol=1e-6)
    assert "bn.running_mean" in mean  # BatchNorm's statistics are averaged too


@pytest.mark.parametrize("spec", ["fifo:%d:const", "ripples:random:%d"])
def test_preduce_keeps_the_mean(ctx, comm, spec):
    # Ripples plans groups ahead: close drains those still planned with a
    # rank that stopped (here the ranks stop after different step counts)
    m = model(seed=20 + ctx.rank)
    start = params(m)
    opt = pt.PReduceOptimizer(torch.optim.SGD(m.parameters(), lr=0.0), m, spec % min(2, ctx.size))
    rng = np.random.default_rng(ctx.rank)
    sizes = []
    for x, y in batches(ctx.rank, 10 + 3 * ctx.rank):
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        if rng.random() < 0.4:
            import time
            time.sleep(0.002)
        opt.step()
        assert opt.iteration >= 1
        sizes.append(opt.info.group_size)
    if ctx.size > 1:  # groups averaged models before close (lr 0: nothing else moves them)
        assert max(sizes) == 2 and not np.array_equal(params(m), start)
    opt.close()
    # lr 0: only averaging; constant weights keep the sum of the models, so
    # the mean after close is the mean of the models the ranks started with
    assert same_everywhere(comm, params(m))
    np.testing.assert_allclose(params(m), sum(comm.allgather(start)) / ctx.size, rtol=1e-5, atol=1e-6)


def test_model_differs_at_one_rank(ctx, comm):
    last = ctx.size - 1
    m = model(width=4 if ctx.rank == last else 8)
    with pytest.raises(pcoll.Error, match="differs between ranks") as e:
        pt.SyncOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m)
    assert "conv.weight" in str(e.value)
    m = model(dtype=torch.float16 if ctx.rank == last else torch.float32)
    with pytest.raises((pcoll.Error, TypeError)) as e:
        pt.EagerOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m)
    if ctx.rank == last:
        assert e.type is TypeError and "float16" in str(e.value)
    else:
        assert e.type is pcoll.Error and "rank %d" % last in str(e.value) and "float16" in str(e.value)


def test_bad_arguments_at_one_rank(ctx):
    last = ctx.size - 1
    m = model()
    with pytest.raises((pcoll.Error, ValueError)) as e:
        pt.SyncOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m, fusion="quickest" if ctx.rank == last else "wfbp")
    if ctx.rank == last:
        assert e.type is ValueError and "quickest" in str(e.value)
    else:
        assert e.type is pcoll.Error and "rank %d" % last in str(e.value)
    with pytest.raises(ValueError, match="kind 'group'"):
        pt.EagerOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m, "group")


def test_broadcast_parameters(ctx, comm):
    m = model(seed=30 + ctx.rank)
    pt.broadcast_parameters(m, root=ctx.size - 1)
    for k, v in m.state_dict().items():
        assert same_everywhere(comm, v.numpy()), k
    ref = model(seed=30 + ctx.size - 1)
    assert np.array_equal(params(m), params(ref))


def test_sync_close_after_backward(ctx, comm):
    """close() right after a backward pass (a loop that breaks before
    step()): the step's buckets are completed, nothing is left in flight."""
    m = model()
    opt = pt.SyncOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m, profile_steps=2,
                           cost_model=pcoll.CostModel(30.0, 0.001))
    for k, (x, y) in enumerate(batches(ctx.rank, 4)):
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        if k == 3:
            break
        opt.step()
    opt.close()
    assert opt.fusion is not None and same_everywhere(comm, params(m))
    # the hooks are gone: backward on the model no longer touches the executor
    F.cross_entropy(m(batches(ctx.rank, 1)[0][0]), batches(ctx.rank, 1)[0][1]).backward()


def test_sync_replaced_grad_is_an_error(ctx):
    m = model()
    opt = pt.SyncOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m, cost_model=pcoll.CostModel(30.0, 0.001))
    x, y = batches(ctx.rank, 1)[0]
    opt.zero_grad()
    F.cross_entropy(m(x), y).backward()
    m.fc.bias.grad = m.fc.bias.grad.clamp(-1, 1)  # not in place: the optimizer would read what was not reduced
    with pytest.raises(RuntimeError, match="fc.bias.grad was replaced"):
        opt.step()
    opt.zero_grad()  # views again
    F.cross_entropy(m(x), y).backward()
    opt.step()
    opt.close()


def test_settings_differ_at_one_rank(ctx):
    last = ctx.size - 1
    m = model()
    with pytest.raises(pcoll.Error, match="profile_steps differs between ranks"):
        pt.SyncOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m, profile_steps=3 if ctx.rank == last else 4)
