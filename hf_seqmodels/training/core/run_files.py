"""The files a run keeps beside its checkpoints, as transformers' example scripts write them.

* ``training_args.json`` – the run's arguments (written when it starts; a resumed run compares its own with
  them and warns, field by field, about what changed);
* ``train_results.json``, ``eval_results.json``, ``predict_results.json`` and ``all_results.json`` – the
  metrics of each stage and all of them together (``Trainer.save_metrics``' layout);
* ``trainer_state.json`` – the step, the epoch and the log history (records with transformers' keys:
  ``loss``, ``learning_rate``, ``eval_loss``...) for tools that read a Trainer's output folder.

The **output-folder rule** (:func:`claim_output_dir`): a new run never mixes with another one. A folder that
holds checkpoints is refused unless the run resumes (``--resume_from_checkpoint``) or asks to start afresh
(``--overwrite_output_dir``, which deletes them first).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from accelerate.logging import get_logger

from .checkpoint_folders import CHECKPOINT_PREFIX, TEMP_PREFIX, list_checkpoints
from .plotting import HISTORY_FILE

logger = get_logger(__name__)

ARGS_FILE = "training_args.json"
STATE_FILE = "trainer_state.json"
#: fields that may differ between a run and its resumption without changing what is trained
RESUME_NEUTRAL = ("resume_from_checkpoint", "overwrite_output_dir", "disable_tqdm", "debug", "report_to",
                  "dataloader_num_workers", "do_predict", "max_time_minutes", "plot")


def write_json(path: str | Path, data: Any) -> Path:
    """Write ``data`` as indented JSON through a temporary file and a rename (never a half-written file)."""
    path = Path(path)
    temp = path.with_name(f".{path.name}.tmp")
    with open(temp, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data, indent=2, default=str) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    return path


def claim_output_dir(output_dir: str | Path, resume_from_checkpoint: str | None, overwrite: bool) -> None:
    """Apply the output-folder rule (main process, before anything is written there)."""
    folder = Path(output_dir)
    checkpoints = list_checkpoints(folder) if folder.is_dir() else []
    if not checkpoints or resume_from_checkpoint is not None:
        return
    if not overwrite:
        names = ", ".join(p.name for p in checkpoints[-3:])
        raise ValueError(f"Invalid `--output_dir`={str(folder)!r}: it holds the checkpoints of another run ({names}). "
                         "Continue that run with --resume_from_checkpoint latest, choose another --output_dir, or "
                         "start afresh with --overwrite_output_dir (deletes them).")
    for path in folder.iterdir():
        if path.name.startswith((CHECKPOINT_PREFIX, TEMP_PREFIX)) and path.is_dir():
            shutil.rmtree(path)
        elif path.name in (HISTORY_FILE, ARGS_FILE, STATE_FILE) or path.name.endswith("_results.json"):
            path.unlink()
    logger.warning(f"--overwrite_output_dir: deleted the checkpoints and results of the previous run in {folder}.")


def record_arguments(output_dir: str | Path, arguments: dict[str, Any], resuming: bool) -> list[str]:
    """Write ``training_args.json``; when ``resuming``, first compare with the saved one and warn about every
    changed field. Returns the warnings."""
    path = Path(output_dir) / ARGS_FILE
    warnings = []
    if resuming and path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        for name, value in arguments.items():
            if name in RESUME_NEUTRAL or name not in saved or saved[name] == value:
                continue
            warnings.append(f"Resuming with {name}={value!r}; the run was started with {name}={saved[name]!r}.")
        for message in warnings:
            logger.warning(message)
    write_json(path, arguments)
    return warnings


def transformers_log_history(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Our history records with transformers' keys: ``train_loss`` → ``loss`` (``learning_rate``, ``eval_*``,
    ``epoch`` and ``step`` keep their names)."""
    return [{("loss" if key == "train_loss" else key): value for key, value in record.items()} for record in history]


def write_trainer_state(output_dir: str | Path, *, global_step: int, epoch: float, max_steps: int,
                        num_train_epochs: float, history: list[dict[str, Any]], **settings: Any) -> Path:
    """``trainer_state.json`` in the layout of transformers' ``TrainerState``."""
    state = {"global_step": global_step, "epoch": epoch, "max_steps": max_steps, "num_train_epochs": num_train_epochs,
             **settings, "log_history": transformers_log_history(history)}
    return write_json(Path(output_dir) / STATE_FILE, state)


def save_metrics(output_dir: str | Path, split: str, metrics: dict[str, Any]) -> Path:
    """``{split}_results.json`` and the merged ``all_results.json`` (as ``Trainer.save_metrics`` writes them)."""
    folder = Path(output_dir)
    write_json(folder / f"{split}_results.json", metrics)
    all_path = folder / "all_results.json"
    merged = json.loads(all_path.read_text(encoding="utf-8")) if all_path.is_file() else {}
    merged.update(metrics)
    return write_json(all_path, merged)


__all__ = ["ARGS_FILE", "STATE_FILE", "claim_output_dir", "record_arguments", "save_metrics",
           "transformers_log_history", "write_json", "write_trainer_state"]
