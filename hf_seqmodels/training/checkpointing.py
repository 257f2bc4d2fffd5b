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
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch

from ..models import RecurrentState

CHECKPOINT_PREFIX = "checkpoint-"
TEMP_PREFIX = "tmp-checkpoint-"
_CHECKPOINT_RE = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")
MODEL_FILE, OPTIMIZER_FILE, SCHEDULER_FILE, STATE_FILE = (
    "model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json")
DEEPSPEED_DIR = "deepspeed"  # DeepSpeed's own checkpoint (its tag) inside ours


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
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> TrainerState:
        return cls(**json.loads(text))


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


# --------------------------------------------------------------------------- finding checkpoints


def checkpoint_step(path: Path) -> int | None:
    """The step of a ``checkpoint-{step}`` folder, None for any other name (``tmp-checkpoint-*`` included)."""
    match = _CHECKPOINT_RE.match(path.name)
    return int(match.group(1)) if match and path.is_dir() else None


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """The complete checkpoints of ``output_dir``, oldest (smallest step) first."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = [(checkpoint_step(p), p) for p in output_dir.iterdir()]
    return [p for step, p in sorted((s, p) for s, p in found if s is not None) if (p / STATE_FILE).is_file()]


def find_latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The checkpoint with the largest step, or None."""
    checkpoints = list_checkpoints(output_dir)
    return checkpoints[-1] if checkpoints else None


def rotate_checkpoints(output_dir: str | Path, save_total_limit: int | None) -> list[Path]:
    """Delete the oldest checkpoints so that at most ``save_total_limit`` remain; returns the deleted ones."""
    if save_total_limit is None:
        return []
    checkpoints = list_checkpoints(output_dir)
    doomed = checkpoints[: max(0, len(checkpoints) - save_total_limit)]
    for path in doomed:
        shutil.rmtree(path)
    return doomed


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


def _publish(temp_dir: Path, final_dir: Path) -> None:
    """Atomically rename ``temp_dir`` to ``final_dir`` (an older ``final_dir`` is moved away first)."""
    _fsync(temp_dir)
    stale = None
    if final_dir.exists():
        stale = final_dir.with_name(f"{TEMP_PREFIX}stale-{final_dir.name}")
        shutil.rmtree(stale, ignore_errors=True)
        os.replace(final_dir, stale)
    os.replace(temp_dir, final_dir)
    _fsync(final_dir.parent)
    if stale is not None:
        shutil.rmtree(stale, ignore_errors=True)


def save_checkpoint(output_dir: str | Path, *, accelerator, model: torch.nn.Module, optimizer, scheduler,
                    trainer_state: TrainerState, recurrent_state: RecurrentState | None,
                    save_total_limit: int | None = None, optimizer_state: dict[str, Any] | None = None,
                    deepspeed_engine=None) -> Path:
    """Write ``checkpoint-{global_step}`` atomically (all processes must call this); returns its path.

    The main process writes ``model``'s weights and ``optimizer_state`` (default: ``optimizer.state_dict()``);
    for a sharded model, pass an unsharded copy and the gathered state (:func:`gather_full_state`). Under
    DeepSpeed pass a plain copy of the model and DeepSpeed's engine: every process writes its optimizer
    partition with it."""
    output_dir = Path(output_dir)
    final_dir = output_dir / f"{CHECKPOINT_PREFIX}{trainer_state.global_step}"
    temp_dir = output_dir / f"{TEMP_PREFIX}{trainer_state.global_step}"
    if accelerator.is_main_process:
        shutil.rmtree(temp_dir, ignore_errors=True)
        temp_dir.mkdir(parents=True)
    accelerator.wait_for_everyone()
    rank_state = {"rng": capture_rng_state(), "recurrent_state": None}
    if recurrent_state is not None:
        rank_state["recurrent_state"] = {"tensors": [t.detach().cpu() for t in recurrent_state.tensors],
                                         "seq_length": recurrent_state.seq_length}
    _torch_save(rank_state, temp_dir / f"rank-{accelerator.process_index}.pt")
    if deepspeed_engine is not None:
        deepspeed_engine.save_checkpoint(str(temp_dir), tag=DEEPSPEED_DIR, save_latest=False)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        safetensors.torch.save_model(accelerator.unwrap_model(model), str(temp_dir / MODEL_FILE))
        _fsync(temp_dir / MODEL_FILE)
        if deepspeed_engine is not None:
            for path in sorted((temp_dir / DEEPSPEED_DIR).rglob("*")):
                _fsync(path)
        else:
            _torch_save(optimizer.state_dict() if optimizer_state is None else optimizer_state,
                        temp_dir / OPTIMIZER_FILE)
        _torch_save(scheduler.state_dict(), temp_dir / SCHEDULER_FILE)
        with open(temp_dir / STATE_FILE, "w", encoding="utf-8") as f:
            f.write(trainer_state.to_json())
            f.flush()
            os.fsync(f.fileno())
        _publish(temp_dir, final_dir)
        rotate_checkpoints(output_dir, save_total_limit)
    accelerator.wait_for_everyone()
    return final_dir


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
    """``None`` → None; ``"latest"`` → the newest checkpoint of ``output_dir`` (None if there is none);
    a path → that folder, which must be a checkpoint."""
    if resume_from_checkpoint is None:
        return None
    if resume_from_checkpoint == "latest":
        return find_latest_checkpoint(output_dir)
    path = Path(resume_from_checkpoint)
    if not (path / STATE_FILE).is_file():
        raise ValueError(f"Invalid `resume_from_checkpoint`={resume_from_checkpoint!r}: expected 'latest' or a "
                         f"checkpoint folder containing {STATE_FILE}.")
    return path


def _run_kind(sharded: bool, deepspeed: bool) -> str:
    if deepspeed:
        return "DeepSpeed (ZeRO)"
    return "sharded (FSDP)" if sharded else "unsharded (one process or DDP)"


def _load_tensors(path: Path) -> Any:
    return torch.load(path, map_location="cpu", weights_only=True)


def load_checkpoint(path: str | Path, *, accelerator, model: torch.nn.Module, optimizer, scheduler,
                    unsharded_model: torch.nn.Module | None = None,
                    deepspeed_engine=None) -> tuple[TrainerState, RecurrentState | None]:
    """Load everything :func:`save_checkpoint` wrote into ``model``/``optimizer``/``scheduler`` and the RNGs.

    For a sharded ``model`` pass ``unsharded_model``, a plain model of the same class and config: the
    weights are read into it, then every process keeps its shards of them and of the optimizer state.
    Under DeepSpeed pass its engine: it reads the weights and its optimizer partitions from its folder.
    Returns the trainer state and this process's carried recurrent state (on the model's device).
    """
    path = Path(path)
    state = TrainerState.from_json((path / STATE_FILE).read_text(encoding="utf-8"))
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
        safetensors.torch.load_model(unsharded_model, str(path / MODEL_FILE), strict=True)
        scatter_full_state(model, optimizer, unsharded_model.state_dict(), _load_tensors(path / OPTIMIZER_FILE))
    else:
        safetensors.torch.load_model(accelerator.unwrap_model(model), str(path / MODEL_FILE), strict=True)
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
    "CHECKPOINT_PREFIX",
    "DEEPSPEED_DIR",
    "TEMP_PREFIX",
    "TrainerState",
    "capture_rng_state",
    "find_latest_checkpoint",
    "gather_full_state",
    "list_checkpoints",
    "load_checkpoint",
    "resolve_checkpoint",
    "restore_rng_state",
    "rotate_checkpoints",
    "save_checkpoint",
    "scatter_full_state",
]
