"""examples/torch/common.py without MPI: pcoll-train's imbalance specs and
their choices, the IDX reader, the models."""
import gzip
import os
import struct

import numpy as np
import pytest
import torch

import common


def test_imbalance_specs():
    for bad, words in [("random:0:5", "K"), ("random:9:5", "more than the 4 ranks"), ("slow:7:2", "does not exist"),
                       ("slow:1,1:2", "distinct"), ("slow:1:0.5", "FACTOR"), ("skew:5:1", "MAX must be"),
                       ("dist:0:1", "lognormal"), ("later", "expected none"), ("random:1:-3", "MS")]:
        with pytest.raises(ValueError, match=words):
            common.Imbalance(bad, 1, 4)


def test_imbalance_choices():
    imb = common.Imbalance("random:2:7.5", 3, 8)
    for step in range(200):
        slow = [r for r in range(8) if imb.delay_ms(r, step, 1.0) > 0]
        assert len(slow) == 2 and all(imb.delay_ms(r, step, 1.0) == 7.5 for r in slow)
    assert len({tuple(r for r in range(8) if imb.delay_ms(r, s, 0) > 0) for s in range(50)}) > 10  # it varies
    # the same (seed, step, rank) always gives the same choice: ranks agree without talking
    again = common.Imbalance("random:2:7.5", 3, 8)
    assert all(imb.delay_ms(r, s, 0) == again.delay_ms(r, s, 0) for r in range(8) for s in range(30))
    slow = common.Imbalance("slow:1,3:3:10", 1, 4)
    assert [slow.delay_ms(r, 5, 2.0) for r in range(4)] == [0, 20.0, 0, 20.0]
    assert common.Imbalance("slow:2:3", 1, 4).delay_ms(2, 0, 4.0) == 8.0
    skew = common.Imbalance("skew:0:30", 1, 4)
    assert sorted(skew.delay_ms(r, 7, 0) for r in range(4)) == [0, 10, 20, 30]
    dist = common.Imbalance("dist:10:5", 1, 2)
    d = [dist.delay_ms(0, s, 0) for s in range(4000)]
    assert abs(np.mean(d) - 10) < 0.6 and abs(np.std(d) - 5) < 0.8
    assert common.Imbalance("none", 1, 4).delay_ms(0, 0, 5.0) == 0


def test_rng_key_matches_pcoll_train():
    """The same keys as tools/train/prng.h's rng_key (values printed by the C
    function), so a Python run and a pcoll-train run with one seed slow down
    the same ranks at the same steps."""
    assert common.rng_key(1, 2, 3, 4) == 7666456076955906526
    assert common.rng_key(7, common.Imbalance.TAG_RANDOM, 100, 5) == 10024136402101629996


def write_idx(path, magic, dims, data, compress):
    raw = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)
    with (gzip.open(path + ".gz", "wb") if compress else open(path, "wb")) as f:
        f.write(raw)


def test_idx_reader(tmp_path):
    d = str(tmp_path)
    write_idx(os.path.join(d, "train-images-idx3-ubyte"), 0x803, [2, 28, 28], [7] * (2 * 784), True)
    write_idx(os.path.join(d, "train-labels-idx1-ubyte"), 0x801, [2], [3, 4], True)
    write_idx(os.path.join(d, "t10k-images-idx3-ubyte"), 0x803, [1, 28, 28], [255] * 784, False)
    write_idx(os.path.join(d, "t10k-labels-idx1-ubyte"), 0x801, [1], [9], False)
    tx, ty, vx, vy = common.load_fmnist(d)
    assert tx.shape == (2, 1, 28, 28) and ty.tolist() == [3, 4] and float(vx.max()) == 1.0 and vy.tolist() == [9]
    write_idx(os.path.join(d, "t10k-labels-idx1-ubyte"), 0x803, [1], [9], False)
    with pytest.raises(ValueError, match="magic"):
        common.load_fmnist(d)
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        common.load_fmnist(os.path.join(d, "nowhere"))


def test_models():
    cnn = common.make_model("cnn", 1)
    assert sum(p.numel() for p in cnn.parameters()) == 383498
    assert cnn(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert torch.equal(next(common.make_model("cnn", 1).parameters()), next(cnn.parameters()))
    with pytest.raises(ValueError):
        common.make_model("vgg", 1)
