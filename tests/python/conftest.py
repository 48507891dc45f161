"""Shared by the Python tests, which run under mpirun: every rank runs every
test in the same order (the collective ones are collective), with a pcoll
timeout so that a test that goes wrong at one rank fails the others instead
of hanging them."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "torch"))  # common.py

import pcoll  # noqa: E402


@pytest.fixture(scope="session")
def ctx():
    c = pcoll.Context()
    c.set_timeouts(20, 60)
    yield c
    c.finalize()


@pytest.fixture(scope="session")
def comm():
    from mpi4py import MPI
    return MPI.COMM_WORLD
