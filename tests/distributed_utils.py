"""Launching a training script on 2 CPU processes (DDP over gloo) from a test."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
import torch

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_logger():
    """In a child script started by :func:`launch_child_script`: a function that writes one line, prefixed with
    ``rank <RANK> ``, to this process's own file ``$RANK_LOG_DIR/rank<RANK>.log``. Lines that processes print
    to one shared stdout can reach the parent merged into one line; one file per process cannot."""
    rank = os.environ["RANK"]
    log = open(Path(os.environ["RANK_LOG_DIR"]) / f"rank{rank}.log", "w", encoding="utf-8", buffering=1)
    return lambda line: log.write(f"rank {rank} {line}\n")


def launch_child_script(script: Path, argv: list[str], log_dir: Path, timeout: int = 120) -> list[str]:
    """``accelerate launch`` of ``script`` on 2 CPU processes, one thread each, with this folder importable
    (for :func:`rank_logger`); fails the test with the end of the log if the run fails. Returns the lines the
    processes logged with :func:`rank_logger` into ``log_dir``, rank by rank."""
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "RANK_LOG_DIR": str(log_dir),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                           "--main_process_port", str(free_port()), str(script), *argv],
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return [line for path in sorted(Path(log_dir).glob("rank*.log")) for line in path.read_text("utf-8").splitlines()]


FSDP_CPU_CONFIG = REPO / "training" / "configs" / "fsdp_cpu_2proc.yaml"
DEEPSPEED_CPU_CONFIG = REPO / "training" / "configs" / "deepspeed_cpu_2proc.yaml"
SHARDING_LOG = "(FSDP2: parameters, gradients and optimizer state sharded)"
DEEPSPEED_LOG = "(DeepSpeed ZeRO stage 2)"


def launch_two_cpu_processes(script: str, argv: list[str], launch_args: list[str] | None = None,
                             env: dict[str, str] | None = None, timeout: int = 600,
                             fsdp: bool = False, deepspeed: bool = False) -> subprocess.CompletedProcess:
    """``accelerate launch`` of ``training/<script>`` on 2 CPU processes, one thread each; fails the test
    with the end of the log if the run fails. ``launch_args`` default to ``--multi_gpu --num_processes 2``
    with ``ACCELERATE_USE_CPU=1``; with other ``launch_args`` (a config file) the variable is unset, so the
    file decides. ``fsdp=True`` launches with ``training/configs/fsdp_cpu_2proc.yaml`` and ``--use_cpu``
    and checks that the engine sharded the model (DDP otherwise); ``deepspeed=True`` launches with
    ``training/configs/deepspeed_cpu_2proc.yaml`` (ZeRO-2) and checks that the engine trains under it."""
    launcher = shutil.which("accelerate") or pytest.fail("the accelerate launcher is not on PATH")
    if fsdp:
        launch_args, argv = ["--config_file", str(FSDP_CPU_CONFIG)], [*argv, "--use_cpu"]
    if deepspeed:
        launch_args = ["--config_file", str(DEEPSPEED_CPU_CONFIG)]
    if launch_args is None:
        launch_args = ["--multi_gpu", "--num_processes", "2"]
        env = {"ACCELERATE_USE_CPU": "1", **(env or {})}
    inherited = {k: v for k, v in os.environ.items() if k != "ACCELERATE_USE_CPU"}
    full_env = {**inherited, "OMP_NUM_THREADS": "1", **(env or {})}
    command = [launcher, "launch", *launch_args, "--main_process_port", str(free_port()),
               str(REPO / "training" / script), *argv]
    done = subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "num_processes': 2" in done.stderr
    assert (SHARDING_LOG in done.stderr) == fsdp
    assert (DEEPSPEED_LOG in done.stderr) == deepspeed
    return done


def run_and_resume_from_step_3(tmp_path: Path, **launch) -> tuple[Path, Path, subprocess.CompletedProcess]:
    """A Transformer LM with dropout (so the RNG states matter) and AdamW, 6 updates on 2 processes
    (``launch``: ``fsdp=True`` or ``deepspeed=True``), checkpointing every 3; then a second run starts from a
    copy of the first one's checkpoint-3 (as after a crash there). Returns the two output folders and the
    second run; the caller compares their weights (:func:`assert_same_weights`)."""
    train_file = tmp_path / "corpus.txt"
    train_file.write_text("the cat sat on the mat. the dog sat on the log.\n" * 40, encoding="utf-8")
    common = ["--train_file", str(train_file), "--tokenizer_kind", "char", "--min_frequency", "1",
              "--model_family", "transformer_lm", "--preset", "tiny", "--per_device_train_batch_size", "2",
              "--block_size", "16", "--max_steps", "6", "--save_steps", "3", "--save_total_limit", "3",
              "--optim", "adamw_torch", "--learning_rate", "1e-3", "--no_plot", "--disable_tqdm"]
    full, crashed = tmp_path / "full", tmp_path / "crashed"
    launch_two_cpu_processes("train_lm.py", [*common, "--output_dir", str(full)], **launch)
    crashed.mkdir()
    shutil.copytree(full / "checkpoint-3", crashed / "checkpoint-3")
    for name in ("tokenizer.json", "tokenizer_config.json"):  # the tokenizer the first run trained, as a killed run leaves
        shutil.copy(full / name, crashed)
    done = launch_two_cpu_processes("train_lm.py", [*common, "--output_dir", str(crashed),
                                                    "--resume_from_checkpoint", "latest"], **launch)
    assert "Resumed from" in done.stderr and "step 3" in done.stderr
    return full, crashed, done


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(folder / "model.safetensors"))


def assert_same_weights(expected_folder: Path, got_folder: Path) -> dict[str, torch.Tensor]:
    """Bit-identical ``model.safetensors`` in the two folders; returns the expected weights."""
    expected, got = weights(expected_folder), weights(got_folder)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name
    return expected
