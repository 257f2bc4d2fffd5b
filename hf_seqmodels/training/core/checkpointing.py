"""Atomic, unpickling-free training checkpoints for exact resumption.

A checkpoint is a folder ``checkpoint-{step}`` in the output folder:

* ``model.safetensors`` – the weights (``safetensors.torch.save_model``: tied weights are handled);
* ``optimizer.pt``, ``scheduler.pt`` – their ``state_dict()`` (tensors and plain Python values);
* ``trainer_state.json`` – step/epoch/window counters, the loss history, the number of processes;
* ``rank-{i}.pt`` – for each process: its RNG states (python, numpy, torch, cuda) as tensors and
  lists, and the recurrent state it carries between TBPTT windows.

A model sharded with FSDP2 is checkpointed in the same layout: its whole (gathered) weights in
``model.safetensors`` and its optimizer's whole state, keyed by parameter name
(``torch.distributed.checkpoint.state_dict``), in ``optimizer.pt``; on resume every process loads
both files and keeps its own shards. ``trainer_state.json`` records which layout ``optimizer.pt``
has (``sharded``), so a checkpoint resumes only under the same kind of run.

Under DeepSpeed (ZeRO stages 0-2) the weights are whole on every process and go to ``model.safetensors``
as above; the optimizer state is partitioned, and DeepSpeed writes and reads its partitions itself in a
``deepspeed/`` folder of the checkpoint (instead of ``optimizer.pt``). ``trainer_state.json`` records the
layout (``deepspeed``).

Every ``.pt`` file of ours is read with ``torch.load(..., weights_only=True)``: nothing is unpickled.
DeepSpeed reads its own folder with pickle, so resume a DeepSpeed run only from checkpoints you wrote.

The folder is written as ``tmp-checkpoint-{step}``, every file and the folder are fsynced, then the
folder is renamed with ``os.replace``. A crash while writing leaves only a ``tmp-`` folder, which
:func:`find_latest_checkpoint` never picks.

Checkpoints verify themselves. The last file written (before the rename) is ``manifest.json``: the size and
SHA-256 of every other file of the folder (``deepspeed/`` included). :func:`resolve_checkpoint` checks it:
``"latest"`` skips a damaged checkpoint with a warning naming the damaged file and the problem and takes the
newest intact one; an explicit path to a damaged checkpoint raises :class:`CheckpointCorruptError` (a
``ValueError``) naming the file and the problem. ``trainer_state.json`` records ``checkpoint_format`` 2, so a
checkpoint whose manifest was lost is told apart from one written before manifests existed: such an older
checkpoint (no manifest, no ``checkpoint_format``) still loads, with a warning that its files cannot be
verified, and a file of it that cannot be read is reported the same way.

A write error while saving (``ENOSPC`` disk full, ``EDQUOT`` quota, ``EROFS``/``EACCES`` read-only folder, at
any stage: weights, optimizer, RNG states, manifest, rename) removes the ``tmp-`` folder and raises
:class:`CheckpointWriteError` (an ``OSError`` with the original ``errno``) whose one-line message names the
folder, the checkpoint being written, the file it was writing, the space a checkpoint needs (the size of the
newest checkpoint, or an estimate from the model and optimizer) and the newest intact checkpoint that remains.
:func:`warn_if_low_disk_space` warns before training when the free space is below two checkpoints.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import pickle
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch

from ...models import RecurrentState
from .checkpoint_folders import (  # noqa: F401  (part of this module's interface)
    CHECKPOINT_FORMAT,
    CHECKPOINT_PREFIX,
    DEEPSPEED_DIR,
    MANIFEST_FILE,
    MODEL_FILE,
    OPTIMIZER_FILE,
    SCHEDULER_FILE,
    STATE_FILE,
    TEMP_PREFIX,
    CheckpointCorruptError,
    _format_bytes,
    _free_bytes,
    _manifest_entries,
    _read_json,
    _warn_unverified,
    checkpoint_bytes_needed,
    checkpoint_step,
    estimate_checkpoint_bytes,
    find_latest_checkpoint,
    folder_size,
    list_checkpoints,
    newest_intact_checkpoint,
    rotate_checkpoints,
    verify_checkpoint,
    warn_if_low_disk_space,
)

logger = logging.getLogger(__name__)

@dataclass
class TrainerState:
    """Where training stands: the next update is ``global_step + 1``, reading window ``window`` of ``epoch``."""

    global_step: int = 0
    epoch: int = 0
    window: int = 0
    num_processes: int = 1
    windows_per_epoch: int = 0
    gradient_accumulation_steps: int = 1  # batches per update
    sharded: bool = False  # FSDP: optimizer.pt holds the whole optimizer state keyed by parameter name
    deepspeed: bool = False  # DeepSpeed: its optimizer partitions are in deepspeed/, there is no optimizer.pt
    train_loss_sum: float = 0.0
    train_loss_count: int = 0
    pending_losses: list[float] = field(default_factory=list)  # since the last logged record
    best_metric: float | None = None  # the best value of --metric_for_best_model so far
    best_global_step: int | None = None  # the step of that evaluation
    best_model_checkpoint: str | None = None  # its checkpoint (rotation keeps it)
    early_stopping_patience_counter: int = 0  # evaluations in a row without improvement
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> TrainerState:
        data = json.loads(text)
        data.pop("checkpoint_format", None)  # a property of the checkpoint folder, not of the training state
        return cls(**data)


class CheckpointWriteError(OSError):
    """Writing a checkpoint failed (disk full, quota, read-only folder...): ``errno`` is the original one, the
    message is one line for the user (folder, checkpoint, space needed, intact checkpoint that remains)."""

    def __str__(self) -> str:
        return self.strerror


# --------------------------------------------------------------------------- RNG states


def capture_rng_state() -> dict[str, Any]:
    """The python, numpy, torch (and cuda) generator states as tensors and plain lists."""
    version, py_state, gauss = random.getstate()
    _, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    state = {
        "python": {"version": version, "state": torch.tensor(py_state, dtype=torch.int64), "gauss": gauss},
        "numpy": {"keys": torch.from_numpy(np_keys.astype(np.int64)), "pos": int(np_pos),
                  "has_gauss": int(np_has_gauss), "gauss": float(np_gauss)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`."""
    python = state["python"]
    random.setstate((python["version"], tuple(python["state"].tolist()), python["gauss"]))
    numpy = state["numpy"]
    np.random.set_state(("MT19937", numpy["keys"].numpy().astype(np.uint32), numpy["pos"],
                         numpy["has_gauss"], numpy["gauss"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])




# --------------------------------------------------------------------------- writing


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _torch_save(obj: Any, path: Path) -> None:
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def _write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())




def write_manifest(folder: str | Path) -> Path:
    """Write ``manifest.json`` (size and SHA-256 of every other file of ``folder``), fsynced; returns its path."""
    folder = Path(folder)
    manifest = {"algorithm": "sha256", "files": _manifest_entries(folder)}
    _write_text(folder / MANIFEST_FILE, json.dumps(manifest, indent=2))
    return folder / MANIFEST_FILE


def _save_weights(model: torch.nn.Module, path: Path) -> None:
    safetensors.torch.save_model(model, str(path))
    _fsync(path)


def _publish(temp_dir: Path, final_dir: Path) -> None:
    """Atomically rename ``temp_dir`` to ``final_dir`` (an older ``final_dir`` is moved away first, and back
    if the rename fails)."""
    _fsync(temp_dir)
    stale = None
    if final_dir.exists():
        stale = final_dir.with_name(f"{TEMP_PREFIX}stale-{final_dir.name}")
        shutil.rmtree(stale, ignore_errors=True)
        os.replace(final_dir, stale)
    try:
        os.replace(temp_dir, final_dir)
    except OSError:
        if stale is not None:
            os.replace(stale, final_dir)
        raise
    _fsync(final_dir.parent)
    if stale is not None:
        shutil.rmtree(stale, ignore_errors=True)


class _Stage:
    """What a save is writing now, for the message of a write error."""

    now = "creating the folder"


_HINTS = {
    errno.ENOSPC: "free some space and continue with --resume_from_checkpoint latest",
    errno.EDQUOT: "free some space (or raise the quota) and continue with --resume_from_checkpoint latest",
    errno.EROFS: "the folder is on a read-only file system: choose another --output_dir",
    errno.EACCES: "the folder is not writable: fix its permissions or choose another --output_dir",
    errno.EPERM: "the folder is not writable: fix its permissions or choose another --output_dir",
}


def _write_error(error: OSError, stage: str, final_dir: Path, model: torch.nn.Module,
                 optimizer) -> CheckpointWriteError:
    """The one-line :class:`CheckpointWriteError` for ``error``, raised while writing ``stage``."""
    output_dir = final_dir.parent
    code = error.errno
    reason = f"{os.strerror(code)} ({errno.errorcode.get(code, code)})" if code else str(error)
    needed, free = checkpoint_bytes_needed(output_dir, model, optimizer), _free_bytes(output_dir)
    space = f"a checkpoint needs about {_format_bytes(needed)}"
    if free is not None:
        space += f" and {_format_bytes(free)} are free"
    intact = newest_intact_checkpoint(output_dir)
    remains = (f"the newest intact checkpoint is {intact}" if intact is not None
               else "there is no intact checkpoint to resume from")
    hint = _HINTS.get(code, "fix the cause and continue with --resume_from_checkpoint latest")
    return CheckpointWriteError(code, (
        f"Could not write checkpoint {final_dir.name} in {output_dir}: {reason} while {stage}. "
        f"{space[0].upper()}{space[1:]}. The unfinished {TEMP_PREFIX}{final_dir.name[len(CHECKPOINT_PREFIX):]} "
        f"was removed; {remains}. To go on, {hint}."))


def save_checkpoint(output_dir: str | Path, *, accelerator, model: torch.nn.Module, optimizer, scheduler,
                    trainer_state: TrainerState, recurrent_state: RecurrentState | None,
                    save_total_limit: int | None = None, optimizer_state: dict[str, Any] | None = None,
                    deepspeed_engine=None, rank_files: dict[str, str] | None = None) -> Path:
    """Write ``checkpoint-{global_step}`` atomically (all processes must call this); returns its path.

    The main process writes ``model``'s weights and ``optimizer_state`` (default: ``optimizer.state_dict()``);
    for a sharded model, pass an unsharded copy and the gathered state (:func:`gather_full_state`). Under
    DeepSpeed pass a plain copy of the model and DeepSpeed's engine: every process writes its optimizer
    partition with it. ``rank_files`` (``{file name: text}``, this process's own, e.g. its stream position)
    are written by each process into the folder with its RNG state, so the manifest covers them and a resumed
    run verifies them like every other file. The manifest is written last. An ``OSError`` while writing (disk
    full, read-only...) removes the temporary folder and raises :class:`CheckpointWriteError`."""
    for name in rank_files or {}:
        if Path(name).name != name or name == MANIFEST_FILE or name.startswith("rank-"):
            raise ValueError(f"Invalid `rank_files` name {name!r}: a plain file name (no folder), not "
                             f"{MANIFEST_FILE!r} nor a 'rank-*' name of the RNG states.")
    output_dir = Path(output_dir)
    final_dir = output_dir / f"{CHECKPOINT_PREFIX}{trainer_state.global_step}"
    temp_dir = output_dir / f"{TEMP_PREFIX}{trainer_state.global_step}"
    stage = _Stage()
    try:
        _write_files(temp_dir, final_dir, stage, accelerator=accelerator, model=model, optimizer=optimizer,
                     scheduler=scheduler, trainer_state=trainer_state, recurrent_state=recurrent_state,
                     optimizer_state=optimizer_state, deepspeed_engine=deepspeed_engine, rank_files=rank_files)
    except OSError as error:
        shutil.rmtree(temp_dir, ignore_errors=True)
        unwrapped = accelerator.unwrap_model(model) if model is not None else torch.nn.Module()
        raise _write_error(error, stage.now, final_dir, unwrapped, optimizer) from error
    if accelerator.is_main_process:
        rotate_checkpoints(output_dir, save_total_limit, keep=trainer_state.best_model_checkpoint)
    accelerator.wait_for_everyone()
    return final_dir


def _write_files(temp_dir: Path, final_dir: Path, stage: _Stage, *, accelerator, model, optimizer, scheduler,
                 trainer_state: TrainerState, recurrent_state: RecurrentState | None,
                 optimizer_state: dict[str, Any] | None, deepspeed_engine,
                 rank_files: dict[str, str] | None = None) -> None:
    """Every process writes its files into ``temp_dir``; the main process then writes the shared files, the
    manifest, and renames the folder to ``final_dir``. ``stage.now`` names what is being written."""
    if accelerator.is_main_process:
        shutil.rmtree(temp_dir, ignore_errors=True)
        temp_dir.mkdir(parents=True)
    accelerator.wait_for_everyone()
    rank_state = {"rng": capture_rng_state(), "recurrent_state": None}
    if recurrent_state is not None:
        rank_state["recurrent_state"] = {"tensors": [t.detach().cpu() for t in recurrent_state.tensors],
                                         "seq_length": recurrent_state.seq_length}
    stage.now = f"writing rank-{accelerator.process_index}.pt (RNG and carried state)"
    _torch_save(rank_state, temp_dir / f"rank-{accelerator.process_index}.pt")
    for name, text in (rank_files or {}).items():
        stage.now = f"writing {name}"
        _write_text(temp_dir / name, text)
    if deepspeed_engine is not None:
        stage.now = f"writing {DEEPSPEED_DIR}/ (DeepSpeed's optimizer partitions)"
        deepspeed_engine.save_checkpoint(str(temp_dir), tag=DEEPSPEED_DIR, save_latest=False)
    accelerator.wait_for_everyone()
    if not accelerator.is_main_process:
        return
    stage.now = f"writing {MODEL_FILE} (weights)"
    _save_weights(accelerator.unwrap_model(model), temp_dir / MODEL_FILE)
    if deepspeed_engine is not None:
        for path in sorted((temp_dir / DEEPSPEED_DIR).rglob("*")):
            _fsync(path)
    else:
        stage.now = f"writing {OPTIMIZER_FILE} (optimizer state)"
        _torch_save(optimizer.state_dict() if optimizer_state is None else optimizer_state, temp_dir / OPTIMIZER_FILE)
    stage.now = f"writing {SCHEDULER_FILE} (scheduler state)"
    _torch_save(scheduler.state_dict(), temp_dir / SCHEDULER_FILE)
    stage.now = f"writing {STATE_FILE} (trainer state)"
    _write_text(temp_dir / STATE_FILE, json.dumps({"checkpoint_format": CHECKPOINT_FORMAT,
                                                   **asdict(trainer_state)}, indent=2))
    stage.now = f"writing {MANIFEST_FILE} (sizes and SHA-256 of the files)"
    write_manifest(temp_dir)
    stage.now = f"renaming {temp_dir.name} to {final_dir.name}"
    _publish(temp_dir, final_dir)


# --------------------------------------------------------------------------- sharded (FSDP) models


def _full_state_options(**kwargs):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, **kwargs)


def _inner_optimizer(optimizer):
    return getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer wraps the torch one


def gather_full_state(model: torch.nn.Module, optimizer=None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The whole weights and (with ``optimizer``) optimizer state of a sharded ``model``, gathered on the CPU
    of the main process (every process must call this; the others get empty dicts). The optimizer state is
    keyed by parameter name."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    options = _full_state_options(cpu_offload=True)
    weights = get_model_state_dict(model, options=options)
    if optimizer is None:
        return weights, None
    return weights, get_optimizer_state_dict(model, _inner_optimizer(optimizer), options=options)


def scatter_full_state(model: torch.nn.Module, optimizer, weights: dict[str, Any],
                       optimizer_state: dict[str, Any]) -> None:
    """Inverse of :func:`gather_full_state`: every process passes the whole state and keeps its shards."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    set_model_state_dict(model, weights, options=_full_state_options())
    set_optimizer_state_dict(model, _inner_optimizer(optimizer), optimizer_state, options=_full_state_options())


# --------------------------------------------------------------------------- reading


def resolve_checkpoint(resume_from_checkpoint: str | None, output_dir: str | Path) -> Path | None:
    """``None`` → None; ``"latest"`` → the newest intact checkpoint of ``output_dir`` (damaged newer ones are
    skipped with a warning; None if there is no checkpoint); a path → that folder, which must be an intact
    checkpoint. Raises :class:`CheckpointCorruptError` for a damaged explicit checkpoint, ``ValueError`` when
    every checkpoint of ``output_dir`` is damaged."""
    if resume_from_checkpoint is None:
        return None
    if resume_from_checkpoint == "latest":
        path = newest_intact_checkpoint(output_dir, warn=True)
        damaged = list_checkpoints(output_dir) if path is None else []
        if damaged:
            raise ValueError(f"Every checkpoint of {str(output_dir)!r} is damaged ({', '.join(p.name for p in damaged)}; "
                             f"see the warnings): resume from none of them, or delete them to train from scratch.")
        return path
    path = Path(resume_from_checkpoint)
    if not path.is_dir() or not ((path / STATE_FILE).is_file() or (path / MANIFEST_FILE).is_file()):
        raise ValueError(f"Invalid `resume_from_checkpoint`={resume_from_checkpoint!r}: expected 'latest' or a "
                         f"checkpoint folder containing {STATE_FILE}.")
    if not verify_checkpoint(path):
        _warn_unverified(path)
    return path


def _run_kind(sharded: bool, deepspeed: bool) -> str:
    if deepspeed:
        return "DeepSpeed (ZeRO)"
    return "sharded (FSDP)" if sharded else "unsharded (one process or DDP)"


def _load_tensors(path: Path) -> Any:
    with _reading(path):
        return torch.load(path, map_location="cpu", weights_only=True)


def _load_weights(model: torch.nn.Module, path: Path) -> None:
    with _reading(path):
        safetensors.torch.load_file(str(path))  # a damaged file fails here, before the model is touched
    safetensors.torch.load_model(model, str(path), strict=True)


@contextlib.contextmanager
def _reading(path: Path):
    """Report a file that cannot be read (an unverifiable older checkpoint) as :class:`CheckpointCorruptError`."""
    try:
        yield
    except CheckpointCorruptError:
        raise
    except (OSError, EOFError, RuntimeError, ValueError, pickle.UnpicklingError, safetensors.SafetensorError) as error:
        first_line = (str(error).splitlines() or [""])[0]
        raise CheckpointCorruptError(path.parent, path.name,
                                     f"cannot be read ({type(error).__name__}: {first_line})") from error


def load_weights(path: str | Path, model: torch.nn.Module, unsharded_model: torch.nn.Module | None = None) -> None:
    """Load only the weights of the checkpoint ``path`` into the unwrapped ``model`` (the best checkpoint at the end
    of a run); for a sharded model pass ``unsharded_model`` as to :func:`load_checkpoint`: every process keeps its
    shards."""
    if unsharded_model is None:
        _load_weights(model, Path(path) / MODEL_FILE)
        return
    from torch.distributed.checkpoint.state_dict import set_model_state_dict

    _load_weights(unsharded_model, Path(path) / MODEL_FILE)
    set_model_state_dict(model, unsharded_model.state_dict(), options=_full_state_options())


def _read_state(path: Path) -> TrainerState:
    data = _read_json(path / STATE_FILE, path)
    data.pop("checkpoint_format", None)
    try:
        return TrainerState(**data)
    except TypeError as error:  # unknown or missing fields
        raise CheckpointCorruptError(path, STATE_FILE, f"is not a trainer state ({error})") from None


def load_checkpoint(path: str | Path, *, accelerator, model: torch.nn.Module, optimizer, scheduler,
                    unsharded_model: torch.nn.Module | None = None, deepspeed_engine=None,
                    verify: bool = True) -> tuple[TrainerState, RecurrentState | None]:
    """Load everything :func:`save_checkpoint` wrote into ``model``/``optimizer``/``scheduler`` and the RNGs.

    For a sharded ``model`` pass ``unsharded_model``, a plain model of the same class and config: the
    weights are read into it, then every process keeps its shards of them and of the optimizer state.
    Under DeepSpeed pass its engine: it reads the weights and its optimizer partitions from its folder.
    Returns the trainer state and this process's carried recurrent state (on the model's device).
    With ``verify`` the files are first checked against the manifest (:func:`verify_checkpoint`; pass False
    for a path :func:`resolve_checkpoint` returned, which checked it).
    """
    path = Path(path)
    if verify:
        verify_checkpoint(path)
    state = _read_state(path)
    if state.num_processes != accelerator.num_processes:
        raise ValueError(f"Checkpoint {str(path)!r} was written by {state.num_processes} processes; resume it with "
                         f"the same number (got {accelerator.num_processes}) so each process gets its own streams.")
    sharded = unsharded_model is not None
    written, this = _run_kind(state.sharded, state.deepspeed), _run_kind(sharded, deepspeed_engine is not None)
    if written != this:
        raise ValueError(f"Checkpoint {str(path)!r} was written by a {written} run and this run is {this}: resume it "
                         f"with the same kind of run (the optimizer state is saved differently).")
    if deepspeed_engine is not None:  # its checkpoint has the weights too (model.safetensors is their copy)
        loaded, _ = deepspeed_engine.load_checkpoint(str(path), tag=DEEPSPEED_DIR, load_module_strict=True,
                                                     load_optimizer_states=True, load_lr_scheduler_states=False)
        if loaded is None:
            raise ValueError(f"Checkpoint {str(path)!r} has no readable DeepSpeed state in {DEEPSPEED_DIR}/.")
    elif sharded:
        _load_weights(unsharded_model, path / MODEL_FILE)
        scatter_full_state(model, optimizer, unsharded_model.state_dict(), _load_tensors(path / OPTIMIZER_FILE))
    else:
        _load_weights(accelerator.unwrap_model(model), path / MODEL_FILE)
        optimizer.load_state_dict(_load_tensors(path / OPTIMIZER_FILE))
    scheduler.load_state_dict(_load_tensors(path / SCHEDULER_FILE))
    rank_state = _load_tensors(path / f"rank-{accelerator.process_index}.pt")
    restore_rng_state(rank_state["rng"])
    carried = rank_state["recurrent_state"]
    if carried is None:
        return state, None
    tensors = tuple(t.to(accelerator.device) for t in carried["tensors"])
    return state, RecurrentState(tensors, carried["seq_length"])


__all__ = [
    "CHECKPOINT_FORMAT", "CHECKPOINT_PREFIX", "DEEPSPEED_DIR", "MANIFEST_FILE", "TEMP_PREFIX",
    "CheckpointCorruptError", "CheckpointWriteError", "TrainerState", "capture_rng_state",
    "checkpoint_bytes_needed", "estimate_checkpoint_bytes", "find_latest_checkpoint", "folder_size",
    "gather_full_state", "list_checkpoints", "load_checkpoint", "load_weights", "newest_intact_checkpoint", "resolve_checkpoint",
    "restore_rng_state", "rotate_checkpoints", "save_checkpoint", "scatter_full_state", "verify_checkpoint",
    "warn_if_low_disk_space", "write_manifest",
]
