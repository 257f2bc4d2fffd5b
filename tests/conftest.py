"""Shared test settings: token files go to a temporary cache, never the user's; one torch thread on request."""

from __future__ import annotations

import pytest
import torch


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
