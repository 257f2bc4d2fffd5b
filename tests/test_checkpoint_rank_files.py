"""A process's own checkpoint files (``rank_files``, e.g. a streamed run's position) are written inside the checkpoint
before its manifest, so they are verified on load like every other file."""

from __future__ import annotations

import json

import pytest
import torch
from accelerate import Accelerator

from hf_seqmodels.training.core.checkpointing import (
    MANIFEST_FILE,
    CheckpointCorruptError,
    TrainerState,
    resolve_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)
from hf_seqmodels.training.lm.streaming import StreamPosition

POSITION = StreamPosition(windows=4, pass_index=0, examples=17, rows=[[5, 6], []])


def save(output_dir, **kwargs):
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    state = TrainerState(global_step=2, window=4, windows_per_epoch=8)
    return save_checkpoint(output_dir, accelerator=accelerator, model=model, optimizer=optimizer, scheduler=scheduler,
                           trainer_state=state, recurrent_state=None, **kwargs)


def test_rank_files_are_in_the_manifest_and_verified(tmp_path):
    text = json.dumps(POSITION.to_dict())
    path = save(tmp_path, rank_files={"stream-rank-0.json": text})
    manifest = json.loads((path / MANIFEST_FILE).read_text())
    assert "stream-rank-0.json" in manifest["files"]
    assert StreamPosition.from_dict(json.loads((path / "stream-rank-0.json").read_text())) == POSITION
    assert verify_checkpoint(path)
    (path / "stream-rank-0.json").write_text(text.replace('"examples": 17', '"examples": 71'))  # same size
    with pytest.raises(CheckpointCorruptError, match="stream-rank-0.json"):
        verify_checkpoint(path)


def test_a_damaged_rank_file_makes_latest_resume_from_the_older_checkpoint(tmp_path):
    older = save(tmp_path, rank_files={"stream-rank-0.json": "{}"})
    newer = older.with_name("checkpoint-9")
    older.rename(newer)
    older = save(tmp_path, rank_files={"stream-rank-0.json": "{}"})  # checkpoint-2 again
    (newer / "stream-rank-0.json").unlink()
    assert resolve_checkpoint("latest", tmp_path) == older


@pytest.mark.parametrize("name", ["sub/stream.json", MANIFEST_FILE, "rank-0.pt"])
def test_rank_file_names_must_be_plain_and_new(tmp_path, name):
    with pytest.raises(ValueError, match="rank_files"):
        save(tmp_path, rank_files={name: "{}"})
    assert not list(tmp_path.iterdir())
