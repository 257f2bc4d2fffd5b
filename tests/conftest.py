"""Shared test settings: the order pytest-xdist hands the files out in, and each worker's share of the cores; token
files go to a temporary cache, never the user's; one torch thread on request."""

from __future__ import annotations

import os
from collections import Counter

import pytest
import torch


def pytest_configure(config):
    """Under ``--dist loadfile`` (CI's), pytest-xdist hands the workers the files in the order of
    :func:`pytest_collection_modifyitems` instead of its own, the files with the most tests first, which leaves the
    few long tests of the end-to-end files (the README's commands, the sharded runs) for last, one worker alone
    on them while the other has nothing left."""
    if getattr(config.option, "dist", "no") == "loadfile":
        config.option.loadscopereorder = False
    share_the_cores(config)


def share_the_cores(config) -> None:
    """In a pytest-xdist worker, torch's threads (and, through ``OMP_NUM_THREADS``, those of the scripts the tests
    start) are the worker's share of the cores. Each worker would otherwise start one thread per core: on a 2-core
    machine with 2 workers, OpenMP's spinning threads then make tiny models 3 to 30 times slower (a Trainer client
    test: 4 s alone, 16 s beside another, 133 s in a loaded CI run)."""
    if not hasattr(config, "workerinput"):
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    share = max(1, cores // int(config.workerinput.get("workercount", 1)))
    torch.set_num_threads(share)
    os.environ["OMP_NUM_THREADS"] = str(share)


def pytest_collection_modifyitems(config, items):
    """In a pytest-xdist worker: files with more slow tests first (the longest first, so that the last files the
    workers get are short), then, as pytest-xdist orders them, files with more tests; a file's own tests keep their
    order."""
    if not hasattr(config, "workerinput"):
        return
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    count = Counter(item.path for item in items)
    items.sort(key=lambda item: (-slow[item.path], -count[item.path]))


@pytest.fixture(autouse=True, scope="session")
def token_file_cache(tmp_path_factory):
    """``HF_SEQMODELS_CACHE`` in a temporary folder for the whole session (subprocesses inherit it)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("HF_SEQMODELS_CACHE", str(tmp_path_factory.mktemp("token_files")))
    yield
    patch.undo()


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models on a shared 2-core machine: one thread avoids OpenMP oversubscription, which makes them several
    times slower. A module asks for it with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``; being
    module-scoped, it is set up before the module's other fixtures, so models trained there run on one thread too."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
