"""What train.py and bench_step.py share: Fashion-MNIST, the models, the
load-imbalance specs of pcoll-train, and PyTorch DDP's set-up under mpirun."""
import fcntl
import gzip
import math
import os
import socket
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F

DATA_DIR = "/usr/share/datasets/fashion-mnist"  # Debian package dataset-fashion-mnist


# ---- data ----

def _read_idx(path, kind):
    """An IDX file (.gz or not): images as uint8 [n, 28, 28], labels [n]."""
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            opener = gzip.open if p.endswith(".gz") else open
            with opener(p, "rb") as f:
                raw = f.read()
            break
    else:
        raise FileNotFoundError("%s(.gz) not found: install the Debian package dataset-fashion-mnist, or pass "
                                "--data DIR" % path)
    magic = struct.unpack(">I", raw[:4])[0]
    want = 0x803 if kind == "images" else 0x801
    if magic != want:
        raise ValueError("%s: magic 0x%x, expected 0x%x (%s)" % (path, magic, want, kind))
    if kind == "images":
        n, rows, cols = struct.unpack(">III", raw[4:16])
        data = np.frombuffer(raw, np.uint8, n * rows * cols, 16)
        return data.reshape(n, rows, cols)
    n = struct.unpack(">I", raw[4:8])[0]
    return np.frombuffer(raw, np.uint8, n, 8)


def load_fmnist(data_dir=DATA_DIR):
    """(train_x, train_y, test_x, test_y): float32 [n, 1, 28, 28] in [0, 1], int64 labels."""
    out = []
    for split in ("train", "t10k"):
        x = _read_idx(os.path.join(data_dir, "%s-images-idx3-ubyte" % split), "images")
        y = _read_idx(os.path.join(data_dir, "%s-labels-idx1-ubyte" % split), "labels")
        if len(x) != len(y):
            raise ValueError("%s: %d images but %d labels" % (split, len(x), len(y)))
        out += [torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1), torch.from_numpy(y.astype(np.int64))]
    return tuple(out)


# ---- models ----

class CNN(torch.nn.Module):
    """Two convolutions with BatchNorm, two dense layers: 383,498 parameters."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 5)
        self.bn1 = torch.nn.BatchNorm2d(32)
        self.conv2 = torch.nn.Conv2d(32, 64, 5)
        self.bn2 = torch.nn.BatchNorm2d(64)
        self.fc1 = torch.nn.Linear(64 * 4 * 4, 320)
        self.fc2 = torch.nn.Linear(320, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def make_model(name, seed):
    """cnn, or resnet18 (torchvision's, one input channel, 10 classes)."""
    torch.manual_seed(seed)
    if name == "cnn":
        return CNN()
    if name == "resnet18":
        import torchvision
        m = torchvision.models.resnet18(num_classes=10)
        m.conv1 = torch.nn.Conv2d(1, 64, 7, 2, 3, bias=False)
        return m
    raise ValueError("--model %r: cnn or resnet18" % name)


# ---- load imbalance: pcoll-train's specs and choices ----

M64 = (1 << 64) - 1


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def rng_key(a, b, c, d):
    """pcoll-train's key of (seed, purpose, step, rank): the same choices."""
    h = _mix((a + 0x9E3779B97F4A7C15) & M64)
    h = _mix(h ^ ((b + 0x632BE59BD9B4E019) & M64))
    h = _mix(h ^ ((c + 0x8CB92BA72F3D8DD7) & M64))
    return _mix(h ^ ((d + 0xD6E8FEB86659FD93) & M64))


class Imbalance:
    """none | random:K:MS | skew:MIN:MAX | slow:R[,R...]:FACTOR[:MS] | dist:MEAN:SD,
    as pcoll-train --imbalance: every choice a function of (seed, step, rank)."""
    TAG_RANDOM, TAG_DIST = 0x52414e44, 0x44495354

    def __init__(self, spec, seed, nranks):
        self.spec, self.seed, self.n = spec, seed, nranks
        f = spec.split(":")
        self.kind = f[0]

        def num(what, s):
            try:
                v = float(s)
            except ValueError:
                v = -1.0
            if not (v >= 0 and math.isfinite(v)):
                raise ValueError("--imbalance %s: %s %r is not a number >= 0" % (spec, what, s))
            return v
        if spec == "none":
            return
        if self.kind == "random" and len(f) == 3:
            if not f[1].isdigit() or int(f[1]) < 1:
                raise ValueError("--imbalance %s: K %r is not a whole number >= 1" % (spec, f[1]))
            self.k, self.ms = int(f[1]), num("MS", f[2])
            if self.k > nranks:
                raise ValueError("--imbalance %s: K = %d is more than the %d ranks" % (spec, self.k, nranks))
        elif self.kind == "slow" and len(f) in (3, 4):
            ranks = f[1].split(",")
            if not all(r.isdigit() for r in ranks) or len(set(ranks)) != len(ranks):
                raise ValueError("--imbalance %s: RANK list %r: distinct whole numbers" % (spec, f[1]))
            self.slow = sorted(int(r) for r in ranks)
            if self.slow[-1] >= nranks:
                raise ValueError("--imbalance %s: rank %d does not exist (%d ranks)" % (spec, self.slow[-1], nranks))
            self.factor = num("FACTOR", f[2])
            if not 1 <= self.factor <= 1000:
                raise ValueError("--imbalance %s: FACTOR must be in 1..1000" % spec)
            self.ms = num("MS", f[3]) if len(f) == 4 else None
        elif self.kind in ("skew", "dist") and len(f) == 3:
            self.a, self.b = num("MIN" if self.kind == "skew" else "MEAN", f[1]), num(
                "MAX" if self.kind == "skew" else "SD", f[2])
            if self.kind == "skew" and self.b < self.a:
                raise ValueError("--imbalance %s: MAX must be >= MIN" % spec)
            if self.kind == "dist" and self.b > 0 and self.a <= 0:
                raise ValueError("--imbalance %s: a lognormal needs MEAN > 0" % spec)
        else:
            raise ValueError("--imbalance %r: expected none, random:K:MS, skew:MIN:MAX, slow:R[,R...]:FACTOR[:MS] "
                             "or dist:MEAN:SD" % spec)

    def _chosen(self, rank, step):
        mine = rng_key(self.seed, self.TAG_RANDOM, step, rank)
        smaller = 0
        for r in range(self.n):
            if r != rank:
                k = rng_key(self.seed, self.TAG_RANDOM, step, r)
                smaller += k < mine or (k == mine and r < rank)
        return smaller < self.k

    def delay_ms(self, rank, step, compute_ms):
        """How long `rank` sleeps in `step` (after its gradient, before the exchange)."""
        if self.spec == "none":
            return 0.0
        if self.kind == "random":
            return self.ms if self._chosen(rank, step) else 0.0
        if self.kind == "skew":
            if self.n < 2:
                return self.a
            return self.a + (self.b - self.a) * ((rank + step) % self.n) / (self.n - 1)
        if self.kind == "slow":
            if rank not in self.slow:
                return 0.0
            return (self.factor - 1.0) * (self.ms if self.ms is not None else compute_ms)
        if self.b <= 0:  # dist
            return self.a
        s2 = math.log(1.0 + self.b * self.b / (self.a * self.a))
        mu = math.log(self.a) - 0.5 * s2
        state = rng_key(self.seed, self.TAG_DIST, step, rank)

        def uniform():
            nonlocal state
            state = (state + 0x9E3779B97F4A7C15) & M64
            return (_mix(state) >> 11) * 2.0 ** -53
        u1, u2 = max(uniform(), 1e-300), uniform()
        return math.exp(mu + math.sqrt(s2) * math.sqrt(-2.0 * math.log(u1)) * math.cos(2 * math.pi * u2))


def sleep_ms(ms):
    if ms > 0:
        time.sleep(ms / 1000.0)


# ---- PyTorch DDP (gloo) under mpirun ----

def _ipv4_interfaces():
    """[(interface, address)] of this network namespace, loopback last."""
    out = []
    for _, name in socket.if_nameindex():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            req = struct.pack("256s", name.encode()[:15])
            addr = socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, req)[20:24])  # SIOCGIFADDR
            out.append((name, addr))
        except OSError:
            pass
        finally:
            s.close()
    return sorted(out, key=lambda ia: ia[1].startswith("127."))


def init_ddp(comm):
    """torch.distributed over gloo for the ranks of an mpi4py communicator:
    rank 0's address and a free port reach everyone through MPI, and each
    rank talks on its interface that reaches rank 0 (GLOO_SOCKET_IFNAME),
    loopback when every rank runs on one host."""
    import torch.distributed as dist
    me, n = comm.Get_rank(), comm.Get_size()
    ifaces = _ipv4_interfaces()
    hosts = comm.allgather((socket.gethostname(), ifaces))
    one_host = all(h == hosts[0] for h in hosts)
    if one_host or not any(not a.startswith("127.") for _, a in hosts[0][1]):
        addr, iface = "127.0.0.1", "lo"
    else:
        addr = next(a for _, a in hosts[0][1] if not a.startswith("127."))
        prefix = addr.rsplit(".", 1)[0] + "."
        iface = next((i for i, a in ifaces if a.startswith(prefix)),
                     next((i for i, a in ifaces if not a.startswith("127.")), "lo"))
    port = None
    if me == 0:
        s = socket.socket()
        s.bind((addr, 0))
        port = s.getsockname()[1]
        s.close()
    port = comm.bcast(port, root=0)
    os.environ["GLOO_SOCKET_IFNAME"] = iface
    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (addr, port), rank=me, world_size=n)
    return dist
