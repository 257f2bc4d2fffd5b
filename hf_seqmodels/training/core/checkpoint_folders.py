"""Which checkpoints an output folder holds, whether they are intact, and whether there is room for another.

The names (``checkpoint-{step}``, the ``tmp-`` prefix of one being written), the manifest every checkpoint
carries (size and SHA-256 of each of its files) and its verification, rotation (``save_total_limit``) and the
disk-space estimate. The format of a checkpoint's files, and writing and loading them, are
:mod:`.checkpointing`'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger(__name__)

CHECKPOINT_PREFIX = "checkpoint-"
TEMP_PREFIX = "tmp-checkpoint-"
_CHECKPOINT_RE = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")
MODEL_FILE, OPTIMIZER_FILE, SCHEDULER_FILE, STATE_FILE = (
    "model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json")
DEEPSPEED_DIR = "deepspeed"  # DeepSpeed's own checkpoint (its tag) inside ours
MANIFEST_FILE = "manifest.json"
# recorded in trainer_state.json; checkpoints without it (format 1) were written before manifests existed
CHECKPOINT_FORMAT = 2


class CheckpointCorruptError(ValueError):
    """A checkpoint file is missing, truncated, altered or unreadable; names the checkpoint, file and problem."""

    def __init__(self, checkpoint: str | Path, file: str, problem: str):
        self.checkpoint, self.file, self.problem = Path(checkpoint), file, problem
        super().__init__(f"Checkpoint {str(checkpoint)!r} is damaged: {file} {problem}.")


# --------------------------------------------------------------------------- finding checkpoints


def checkpoint_step(path: Path) -> int | None:
    """The step of a ``checkpoint-{step}`` folder, None for any other name (``tmp-checkpoint-*`` included)."""
    match = _CHECKPOINT_RE.match(path.name)
    return int(match.group(1)) if match and path.is_dir() else None


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """The ``checkpoint-{step}`` folders of ``output_dir``, oldest (smallest step) first. Only renamed (complete)
    folders are named so; whether their files are intact is :func:`verify_checkpoint`'s question."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = [(checkpoint_step(p), p) for p in output_dir.iterdir()]
    return [p for step, p in sorted((s, p) for s, p in found if s is not None)]


def find_latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The checkpoint with the largest step, or None."""
    checkpoints = list_checkpoints(output_dir)
    return checkpoints[-1] if checkpoints else None


def rotate_checkpoints(output_dir: str | Path, save_total_limit: int | None, keep: str | Path | None = None) -> list[Path]:
    """Delete the oldest checkpoints so that at most ``save_total_limit`` remain; returns the deleted ones. The
    newest (to resume from) and ``keep`` (the best one) always remain, as in transformers: with a limit of 1 and a
    best checkpoint older than the newest, two do."""
    if save_total_limit is None:
        return []
    checkpoints = list_checkpoints(output_dir)
    best = Path(keep).name if keep else None  # a name: the run may spell its output folder differently
    kept = {path for path in checkpoints if path == checkpoints[-1] or path.name == best}
    for path in reversed(checkpoints):
        if len(kept) >= save_total_limit:
            break
        kept.add(path)
    doomed = [path for path in checkpoints if path not in kept]
    for path in doomed:
        shutil.rmtree(path)
    return doomed


# --------------------------------------------------------------------------- manifest and verification


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _manifest_entries(folder: Path) -> dict[str, dict[str, Any]]:
    """``{relative path: {"size", "sha256"}}`` of every file below ``folder`` except the manifest itself."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p != folder / MANIFEST_FILE)
    return {p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": _sha256(p)} for p in files}


def _read_json(path: Path, checkpoint: Path) -> dict[str, Any]:
    name = path.relative_to(checkpoint).as_posix()
    if not path.is_file():
        raise CheckpointCorruptError(checkpoint, name, "is missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise CheckpointCorruptError(checkpoint, name, f"cannot be read ({error.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointCorruptError(checkpoint, name, f"is not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise CheckpointCorruptError(checkpoint, name, f"holds a JSON {type(data).__name__}, not an object")
    return data


def _check_file(checkpoint: Path, name: str, entry: Any) -> None:
    if (Path(name).is_absolute() or ".." in Path(name).parts or not isinstance(entry, dict)
            or not isinstance(entry.get("size"), int) or not isinstance(entry.get("sha256"), str)):
        raise CheckpointCorruptError(checkpoint, MANIFEST_FILE, f"has an invalid entry for {name}: {entry!r}")
    path = checkpoint / name
    if not path.is_file():
        raise CheckpointCorruptError(checkpoint, name, "is missing")
    size, expected = path.stat().st_size, entry["size"]
    if size < expected:
        raise CheckpointCorruptError(checkpoint, name, f"is truncated: {size} bytes, {MANIFEST_FILE} says {expected}")
    if size > expected:
        raise CheckpointCorruptError(checkpoint, name, f"has {size} bytes, {MANIFEST_FILE} says {expected}")
    try:
        digest = _sha256(path)
    except OSError as error:
        raise CheckpointCorruptError(checkpoint, name, f"cannot be read ({error.strerror})") from None
    if digest != entry["sha256"]:
        raise CheckpointCorruptError(checkpoint, name, f"does not match its SHA-256 in {MANIFEST_FILE}: its content "
                                                       f"changed (flipped bits or an overwrite)")


def verify_checkpoint(path: str | Path) -> bool:
    """Check every file of checkpoint ``path`` against its manifest; True when verified, False for a checkpoint
    written before manifests existed (nothing to verify against). Raises :class:`CheckpointCorruptError`
    naming the first damaged file and the problem."""
    path = Path(path)
    if not (path / MANIFEST_FILE).is_file():
        state = _read_json(path / STATE_FILE, path)
        if state.get("checkpoint_format", 1) >= 2:
            raise CheckpointCorruptError(path, MANIFEST_FILE, "is missing (this checkpoint was written with one)")
        return False
    files = _read_json(path / MANIFEST_FILE, path).get("files")
    if not isinstance(files, dict) or STATE_FILE not in files:
        raise CheckpointCorruptError(path, MANIFEST_FILE, f"has no file list naming {STATE_FILE}")
    for name, entry in files.items():
        _check_file(path, name, entry)
    return True


def newest_intact_checkpoint(output_dir: str | Path, warn: bool = False) -> Path | None:
    """The newest checkpoint of ``output_dir`` that verifies (or predates manifests), None if there is none;
    with ``warn``, each damaged newer one is logged with its damaged file."""
    for path in reversed(list_checkpoints(output_dir)):
        try:
            verified = verify_checkpoint(path)
        except CheckpointCorruptError as error:
            if warn:
                logger.warning(f"{error} Skipping it: resuming from an older checkpoint.")
            continue
        if warn and not verified:
            _warn_unverified(path)
        return path
    return None


def _warn_unverified(path: Path) -> None:
    logger.warning(f"Checkpoint {str(path)!r} has no {MANIFEST_FILE} (it was written before checkpoints carried "
                   f"one): its files cannot be verified.")


# --------------------------------------------------------------------------- space


def _format_bytes(size: int) -> str:
    unit = min(3, max(0, (size.bit_length() - 1) // 10))  # 0: bytes, 1: KiB, 2: MiB, 3: GiB
    return f"{size} bytes" if unit == 0 else f"{size / 1024 ** unit:.1f} {('KiB', 'MiB', 'GiB')[unit - 1]}"


def folder_size(path: str | Path) -> int:
    """The bytes of all files below ``path``."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def _tensor_bytes(values) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def estimate_checkpoint_bytes(model: torch.nn.Module, optimizer=None) -> int:
    """The size of a checkpoint of ``model``: its weights plus the optimizer's state tensors (before the first
    update, when the state is still empty, two tensors per weight as for Adam), plus 64 KiB of small files."""
    weights = _tensor_bytes(model.state_dict().values())
    try:
        states = list(getattr(optimizer, "state", {}).values())
    except (AttributeError, TypeError):  # an optimizer (DeepSpeed's) without a torch-like `state`
        states = []
    slots = sum(_tensor_bytes(s.values()) for s in states if isinstance(s, dict))
    return weights + (slots if slots else 2 * weights) + 64 * 1024


def checkpoint_bytes_needed(output_dir: str | Path, model: torch.nn.Module, optimizer=None) -> int:
    """The size of the newest checkpoint of ``output_dir``, else :func:`estimate_checkpoint_bytes`."""
    checkpoints = list_checkpoints(output_dir)
    if checkpoints:
        return folder_size(checkpoints[-1])
    return estimate_checkpoint_bytes(model, optimizer)


def _free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def warn_if_low_disk_space(output_dir: str | Path, model: torch.nn.Module, optimizer=None) -> bool:
    """Warn (and return True) when ``output_dir`` has less free space than two checkpoints need (a new one is
    written before the previous one may be rotated away)."""
    needed, free = 2 * checkpoint_bytes_needed(output_dir, model, optimizer), _free_bytes(Path(output_dir))
    if free is None or free >= needed:
        return False
    logger.warning(f"Only {_format_bytes(free)} free in {output_dir}, and two checkpoints need about "
                   f"{_format_bytes(needed)}: saving a checkpoint may fail (disk full). Free some space or choose "
                   f"another --output_dir.")
    return True


__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_PREFIX", "CheckpointCorruptError", "DEEPSPEED_DIR", "MANIFEST_FILE",
           "MODEL_FILE", "OPTIMIZER_FILE", "SCHEDULER_FILE", "STATE_FILE", "TEMP_PREFIX", "checkpoint_bytes_needed",
           "checkpoint_step", "estimate_checkpoint_bytes", "find_latest_checkpoint", "folder_size", "list_checkpoints",
           "newest_intact_checkpoint", "rotate_checkpoints", "verify_checkpoint", "warn_if_low_disk_space"]
