"""A complete data-parallel training script with pcoll.torch: the CNN on
Fashion-MNIST, synchronous SGD with merged-gradient buckets.

    mpirun -np 4 python3 examples/torch/minimal.py [STEPS]
"""
import sys

import torch
import torch.nn.functional as F

import common  # examples/torch/common.py: Fashion-MNIST and the CNN
import pcoll.torch as pt

ctx = pt.init()  # collective: a pcoll context over mpi4py's COMM_WORLD
torch.set_num_threads(1)
train_x, train_y, test_x, test_y = common.load_fmnist()
x, y = train_x[ctx.rank::ctx.size], train_y[ctx.rank::ctx.size]  # this rank's share
steps = int(sys.argv[1]) if len(sys.argv) > 1 else len(x) // 32  # default: one epoch

model = common.make_model("cnn", seed=1)
pt.broadcast_parameters(model)  # every rank starts from rank 0's model
sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
opt = pt.SyncOptimizer(sgd, model, fusion="optimal")
# or: pt.EagerOptimizer(sgd, model, "majority"), pt.WagmaOptimizer(sgd, model, group=2),
#     pt.PReduceOptimizer(sgd, model, "fifo:3:dyn")
for step in range(steps):
    i = step * 32 % (len(x) - 31)
    opt.zero_grad()
    F.cross_entropy(model(x[i:i + 32]), y[i:i + 32]).backward()  # buckets start from the hooks
    opt.step()  # waits for the buckets, then the SGD step
opt.close()  # collective

if ctx.rank == 0:
    model.eval()
    with torch.no_grad():
        accuracy = (model(test_x[:2000]).argmax(1) == test_y[:2000]).float().mean().item()
    print("minimal.py: %d ranks, %d steps, %d buckets, test accuracy %.3f" % (
        ctx.size, steps, opt.plan.nbuckets, accuracy))
