"""Shared test settings: token files go to a temporary cache, never the user's."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def token_file_cache(tmp_path_factory):
    """``HF_SEQMODELS_CACHE`` in a temporary folder for the whole session (subprocesses inherit it)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("HF_SEQMODELS_CACHE", str(tmp_path_factory.mktemp("token_files")))
    yield
    patch.undo()
