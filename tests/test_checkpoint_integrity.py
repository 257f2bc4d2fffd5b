"""Checkpoints verify themselves, and a write error while saving ends a run with one clear line.

A base run (tiny LSTM, 6 updates, a checkpoint every 3) leaves ``checkpoint-3`` and ``checkpoint-6``. Each test
works on a copy and damages ``checkpoint-6`` in one of the 11 ways a checkpoint's files can be damaged:

 1. ``model.safetensors`` truncated           2. ``model.safetensors`` missing
 3. ``model.safetensors`` with a flipped bit in the weights (same size, loads without an error)
 4. ``optimizer.pt`` truncated                5. ``optimizer.pt`` missing
 6. ``rank-0.pt`` (RNG and carried state) truncated                7. ``rank-0.pt`` missing
 8. ``scheduler.pt`` truncated                9. ``trainer_state.json`` bad JSON (same size)
10. ``trainer_state.json`` missing           11. ``manifest.json`` missing

Each is detected: ``--resume_from_checkpoint latest`` warns naming the damaged file and the problem and resumes
from ``checkpoint-3`` (ending with the weights of the uninterrupted run); an explicit path to the damaged
checkpoint raises :class:`CheckpointCorruptError` naming the file and the problem. Checkpoints written before
manifests existed load with a warning, and a damaged file of one is reported the same way.

Write errors: ``ENOSPC`` raised at each stage of a save (weights, optimizer, RNG state, scheduler, trainer
state, manifest, rename; the writers leave a partial file first), ``EDQUOT`` and ``EROFS``: one line naming the
folder, the checkpoint, the file, the space needed and the intact checkpoint; no ``tmp-`` folder is left; the
CLI exits with status 1 and the line ``error: ...``. Low free space is warned about before training.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest
import safetensors.torch
import torch
from tokenizer_test_utils import char_tokenizer
from transformers import PreTrainedTokenizerFast

from hf_seqmodels import RNNConfig, RNNForCausalLM
from hf_seqmodels.training import LMTrainingArguments, train_causal_lm
from hf_seqmodels.training.core import checkpointing
from hf_seqmodels.training.core.checkpointing import CheckpointCorruptError, CheckpointWriteError
from hf_seqmodels.training.core.text import tokenize_texts

REPO = Path(__file__).resolve().parents[1]
CORPUS = "the cat sat on the mat. the dog sat on the log.\n" * 20


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    return char_tokenizer(CORPUS)


@pytest.fixture(scope="module")
def data(tokenizer):
    ids = tokenize_texts([CORPUS], tokenizer)
    return ids[:800], ids[800:]


def tiny_lstm(vocab_size: int, seed: int = 0) -> RNNForCausalLM:
    torch.manual_seed(seed)
    config = RNNConfig.from_preset("tiny", vocab_size=vocab_size, cell_type="lstm", hidden_size=16,
                                   embedding_size=8, num_hidden_layers=1, hidden_dropout_prob=0.1)
    return RNNForCausalLM(config)


def train(tokenizer, data, output_dir: Path, seed: int = 0, **overrides) -> dict:
    args = dict(output_dir=str(output_dir), num_train_epochs=1, max_steps=6, save_steps=3,
                per_device_train_batch_size=4, block_size=8, learning_rate=0.02, optim="adamw_torch", per_device_eval_batch_size=2,
                logging_steps=3, plot=False, disable_tqdm=True, save_total_limit=None, lr_scheduler_type="constant")
    return train_causal_lm(tiny_lstm(len(tokenizer), seed), tokenizer, *data,
                           LMTrainingArguments(**{**args, **overrides}))


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(folder / "model.safetensors"))


@pytest.fixture(scope="module")
def base_run(tokenizer, data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("base") / "run"
    train(tokenizer, data, out)
    assert [p.name for p in checkpointing.list_checkpoints(out)] == ["checkpoint-3", "checkpoint-6"]
    return out


@pytest.fixture
def run_copy(base_run, tmp_path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(base_run, out)
    return out


# --------------------------------------------------------------------------- damage


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-len(data) // 4] ^= 0x10  # in the tensor data, after the safetensors header
    path.write_bytes(bytes(data))


def break_json(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text("[" + text[1:], encoding="utf-8")  # same size: only the checksum tells


DAMAGE = {  # kind: (file, damage, the problem the message names)
    "weights truncated": ("model.safetensors", truncate, "is truncated"),
    "weights missing": ("model.safetensors", Path.unlink, "is missing"),
    "weights flipped bit": ("model.safetensors", flip_bit, "does not match its SHA-256"),
    "optimizer truncated": ("optimizer.pt", truncate, "is truncated"),
    "optimizer missing": ("optimizer.pt", Path.unlink, "is missing"),
    "rng truncated": ("rank-0.pt", truncate, "is truncated"),
    "rng missing": ("rank-0.pt", Path.unlink, "is missing"),
    "scheduler truncated": ("scheduler.pt", truncate, "is truncated"),
    "trainer state bad json": ("trainer_state.json", break_json, "does not match its SHA-256"),
    "trainer state missing": ("trainer_state.json", Path.unlink, "is missing"),
    "manifest missing": ("manifest.json", Path.unlink, "is missing (this checkpoint was written with one)"),
}


def test_a_checkpoint_carries_a_manifest_of_every_file(base_run):
    checkpoint = base_run / "checkpoint-6"
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    files = {p.name for p in checkpoint.iterdir()} - {"manifest.json"}
    assert set(manifest["files"]) == files == {"model.safetensors", "optimizer.pt", "scheduler.pt",
                                               "trainer_state.json", "rank-0.pt"}
    for name, entry in manifest["files"].items():
        assert entry["size"] == (checkpoint / name).stat().st_size
        assert len(entry["sha256"]) == 64
    assert json.loads((checkpoint / "trainer_state.json").read_text())["checkpoint_format"] == 2
    assert checkpointing.verify_checkpoint(checkpoint) is True


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_is_detected_and_latest_resumes_from_the_previous_checkpoint(kind, tokenizer, data, base_run,
                                                                            run_copy, caplog):
    name, damage, problem = DAMAGE[kind]
    damage(run_copy / "checkpoint-6" / name)
    with pytest.raises(CheckpointCorruptError, match=f"{name} {problem}".replace("(", r"\(").replace(")", r"\)")):
        checkpointing.verify_checkpoint(run_copy / "checkpoint-6")

    caplog.set_level(logging.INFO)
    results = train(tokenizer, data, run_copy, seed=1, resume_from_checkpoint="latest")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "damaged" in r.getMessage()]
    assert len(warnings) == 1 and "checkpoint-6" in warnings[0] and f"{name} {problem}" in warnings[0], warnings
    assert any("Resumed from" in r.getMessage() and r.getMessage().split(":")[0].endswith("checkpoint-3")
               for r in caplog.records)
    assert results["steps"] == 6
    expected, got = weights(base_run), weights(run_copy)
    for key in expected:
        assert torch.equal(expected[key], got[key]), key  # the uninterrupted run's weights, exactly
    assert checkpointing.verify_checkpoint(run_copy / "checkpoint-6")  # written anew, intact


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_an_explicit_damaged_checkpoint_names_the_file_and_the_problem(kind, run_copy):
    name, damage, problem = DAMAGE[kind]
    damage(run_copy / "checkpoint-6" / name)
    with pytest.raises(CheckpointCorruptError) as caught:
        checkpointing.resolve_checkpoint(str(run_copy / "checkpoint-6"), run_copy)
    assert isinstance(caught.value, ValueError) and caught.value.file == name
    assert str(caught.value).startswith(f"Checkpoint {str(run_copy / 'checkpoint-6')!r} is damaged: {name} {problem}")


def test_the_engine_refuses_an_explicit_damaged_checkpoint_before_training(tokenizer, data, run_copy):
    flip_bit(run_copy / "checkpoint-6" / "model.safetensors")
    with pytest.raises(CheckpointCorruptError, match="model.safetensors does not match its SHA-256"):
        train(tokenizer, data, run_copy, resume_from_checkpoint=str(run_copy / "checkpoint-6"))


def test_a_damaged_manifest_and_an_altered_optimizer_are_detected(run_copy):
    (run_copy / "checkpoint-6" / "manifest.json").write_text("{", encoding="utf-8")
    with pytest.raises(CheckpointCorruptError, match="manifest.json is not valid JSON"):
        checkpointing.verify_checkpoint(run_copy / "checkpoint-6")
    flip_bit(run_copy / "checkpoint-3" / "optimizer.pt")
    with pytest.raises(CheckpointCorruptError, match="optimizer.pt does not match its SHA-256"):
        checkpointing.verify_checkpoint(run_copy / "checkpoint-3")


def test_every_checkpoint_damaged_is_an_error_not_a_fresh_start(run_copy):
    for step in (3, 6):
        truncate(run_copy / f"checkpoint-{step}" / "model.safetensors")
    with pytest.raises(ValueError, match=r"Every checkpoint of .* is damaged \(checkpoint-3, checkpoint-6"):
        checkpointing.resolve_checkpoint("latest", run_copy)


def make_legacy(checkpoint: Path) -> None:
    """What checkpoints looked like before manifests: no manifest.json, no checkpoint_format."""
    (checkpoint / "manifest.json").unlink()
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    del state["checkpoint_format"]
    (checkpoint / "trainer_state.json").write_text(json.dumps(state, indent=2))


def test_a_checkpoint_without_manifest_from_before_loads_with_a_warning(tokenizer, data, run_copy, caplog):
    for step in (3, 6):
        make_legacy(run_copy / f"checkpoint-{step}")
    assert checkpointing.verify_checkpoint(run_copy / "checkpoint-6") is False
    caplog.set_level(logging.INFO)
    results = train(tokenizer, data, run_copy, resume_from_checkpoint="latest")
    assert results["steps"] == 6
    assert any("checkpoint-6" in r.getMessage() and "cannot be verified" in r.getMessage() for r in caplog.records)
    assert any("Resumed from" in r.getMessage() and "checkpoint-6" in r.getMessage() for r in caplog.records)


def test_an_unreadable_file_of_an_older_checkpoint_is_reported_by_name(tokenizer, data, run_copy):
    make_legacy(run_copy / "checkpoint-6")
    truncate(run_copy / "checkpoint-6" / "optimizer.pt")
    with pytest.raises(CheckpointCorruptError, match=r"optimizer.pt cannot be read \("):
        train(tokenizer, data, run_copy, resume_from_checkpoint=str(run_copy / "checkpoint-6"))
    make_legacy(run_copy / "checkpoint-3")
    truncate(run_copy / "checkpoint-3" / "model.safetensors")
    with pytest.raises(CheckpointCorruptError, match=r"model.safetensors cannot be read \(SafetensorError"):
        train(tokenizer, data, run_copy, resume_from_checkpoint=str(run_copy / "checkpoint-3"))


# --------------------------------------------------------------------------- write errors


def failing(real, code: int, target: str, path_at: int = 1):
    """``real`` (a writer whose argument ``path_at`` is the file) raising OSError(code) for ``target`` in
    tmp-checkpoint-6, after writing part of the file as a full disk does."""

    def write(*args, **kwargs):
        path = Path(args[path_at])
        if path.parent.name == "tmp-checkpoint-6" and path.name == target:
            path.write_bytes(b"\0" * 100)
            raise OSError(code, os.strerror(code), str(path))
        return real(*args, **kwargs)

    return write


def patch_stage(monkeypatch, stage: str, code: int) -> None:
    if stage == "model.safetensors":
        monkeypatch.setattr(checkpointing.safetensors.torch, "save_model",
                            failing(safetensors.torch.save_model, code, stage))
    elif stage in ("optimizer.pt", "rank-0.pt", "scheduler.pt"):
        monkeypatch.setattr(checkpointing, "_torch_save", failing(checkpointing._torch_save, code, stage))
    elif stage in ("trainer_state.json", "manifest.json"):
        monkeypatch.setattr(checkpointing, "_write_text", failing(checkpointing._write_text, code, stage, path_at=0))
    else:  # the rename of the finished folder
        real_replace = os.replace

        def replace(src, dst):
            if Path(src).name == "tmp-checkpoint-6":
                raise OSError(code, os.strerror(code))
            return real_replace(src, dst)

        monkeypatch.setattr(checkpointing.os, "replace", replace)


STAGES = ["model.safetensors", "optimizer.pt", "rank-0.pt", "scheduler.pt", "trainer_state.json", "manifest.json",
          "rename"]


@pytest.mark.parametrize("stage", STAGES)
def test_disk_full_at_each_stage_is_one_clear_message_and_leaves_nothing(stage, tokenizer, data, tmp_path,
                                                                         monkeypatch):
    out = tmp_path / "run"
    patch_stage(monkeypatch, stage, errno.ENOSPC)
    with pytest.raises(SystemExit) as caught:
        train(tokenizer, data, out)
    message = caught.value.code
    assert isinstance(message, str) and "\n" not in message
    assert isinstance(caught.value.__cause__, CheckpointWriteError) and caught.value.__cause__.errno == errno.ENOSPC
    needed = checkpointing._format_bytes(checkpointing.folder_size(out / "checkpoint-3"))
    doing = "renaming tmp-checkpoint-6 to checkpoint-6" if stage == "rename" else f"writing {stage}"
    assert message.startswith(f"error: Could not write checkpoint checkpoint-6 in {out}: No space left on device "
                              f"(ENOSPC) while {doing}"), message
    assert f"A checkpoint needs about {needed} and " in message and " are free." in message
    assert f"tmp-checkpoint-6 was removed; the newest intact checkpoint is {out / 'checkpoint-3'}." in message
    assert "free some space and continue with --resume_from_checkpoint latest" in message
    assert not list(out.glob("tmp-*")) and not (out / "checkpoint-6").exists()
    assert checkpointing.verify_checkpoint(out / "checkpoint-3")


@pytest.mark.parametrize(("code", "hint"), [(errno.EDQUOT, "raise the quota"), (errno.EROFS, "read-only file system"),
                                            (errno.EACCES, "not writable")])
def test_quota_and_read_only_folders_say_so(code, hint, tokenizer, data, tmp_path, monkeypatch):
    out = tmp_path / "run"
    patch_stage(monkeypatch, "optimizer.pt", code)
    with pytest.raises(SystemExit, match=f"{errno.errorcode[code]}.*{hint}"):
        train(tokenizer, data, out)
    assert not list(out.glob("tmp-*"))


def test_without_a_previous_checkpoint_the_space_is_estimated(tokenizer, data, tmp_path, monkeypatch):
    out = tmp_path / "run"
    patch_stage(monkeypatch, "model.safetensors", errno.ENOSPC)
    with pytest.raises(SystemExit, match="needs about .*there is no intact checkpoint to resume from"):
        train(tokenizer, data, out, save_strategy="no")
    assert not list(out.glob("*checkpoint*"))


def test_the_estimate_is_close_to_a_real_checkpoint(tokenizer, base_run):
    model = tiny_lstm(len(tokenizer))
    optimizer = torch.optim.AdamW(model.parameters())
    fresh = checkpointing.estimate_checkpoint_bytes(model, optimizer)  # no optimizer state yet: 2 slots per weight
    model(torch.ones(2, 4, dtype=torch.long), labels=torch.ones(2, 4, dtype=torch.long)).loss.backward()
    optimizer.step()
    assert checkpointing.estimate_checkpoint_bytes(model, optimizer) == pytest.approx(fresh, rel=0.01)
    real = checkpointing.folder_size(base_run / "checkpoint-6")
    assert 0.5 * real < fresh < 2 * real


def test_low_free_space_is_warned_about_before_training(tokenizer, data, tmp_path, monkeypatch, caplog):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(checkpointing.shutil, "disk_usage", lambda path: usage(10**6, 10**6 - 1000, 1000))
    train(tokenizer, data, tmp_path / "small", max_steps=1, save_strategy="no")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"Only 1000 bytes free in {tmp_path / 'small'}, and two checkpoints need about" in w for w in warnings)
    monkeypatch.undo()
    caplog.clear()
    train(tokenizer, data, tmp_path / "roomy", max_steps=1, save_strategy="no")
    assert not any("free in" in r.getMessage() for r in caplog.records)


CLI_SCRIPT = """
import errno, os, sys
from pathlib import Path
from hf_seqmodels.training.core import checkpointing
real = checkpointing._torch_save
def full_disk(obj, path):
    if path.parent.name == "tmp-checkpoint-2" and path.name == "optimizer.pt":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    real(obj, path)
checkpointing._torch_save = full_disk
from hf_seqmodels.training.lm.cli import main
main(sys.argv[1:])
"""


def test_the_cli_ends_with_one_error_line_and_status_1(tmp_path):
    train_file = tmp_path / "corpus.txt"
    train_file.write_text(CORPUS, encoding="utf-8")
    out = tmp_path / "run"
    args = ["--train_file", str(train_file), "--tokenizer_kind", "char", "--min_frequency", "1",
            "--model_family", "rnn", "--preset", "tiny", "--config_overrides", "hidden_size=8",
            "--per_device_train_batch_size", "4", "--block_size", "8", "--max_steps", "2", "--save_steps", "1",
            "--no_plot", "--disable_tqdm", "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    process = subprocess.run([sys.executable, "-c", CLI_SCRIPT, *args], capture_output=True, text=True, env=env,
                             timeout=300)
    assert process.returncode == 1, process.stderr[-3000:]
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: Could not write checkpoint checkpoint-2 in {out}: No space left on device "
                           f"(ENOSPC) while writing optimizer.pt"), process.stderr[-3000:]
    assert f"the newest intact checkpoint is {out / 'checkpoint-1'}" in last
    assert "Traceback" not in process.stderr
    assert not list(out.glob("tmp-*")) and checkpointing.verify_checkpoint(out / "checkpoint-1")
