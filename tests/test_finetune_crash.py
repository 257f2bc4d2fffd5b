"""training/finetune.py survives crashes as the other training scripts do: SIGTERM checkpoints and exits with
143, and a run killed (SIGKILL) at a random point, resumed with ``--resume_from_checkpoint latest``, ends with
exactly the weights of an uninterrupted run (data order, dropout RNG, optimizer and schedule restored)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import safetensors.torch
import torch

from hf_seqmodels.tokenization import CleaningConfig, train_tokenizer
from hf_seqmodels.training.finetune.classification_data import read_classification_file
from hf_seqmodels.training.finetune.cli import main

REPO = Path(__file__).resolve().parents[1]
SST2_TINY = REPO / "tests" / "data" / "finetune" / "sst2_tiny.tsv"
EPOCHS, STEPS_PER_EPOCH, SAVE_STEPS = 4, 10, 3  # 40 sentences in batches of 4


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    text = folder / "sentences.txt"
    text.write_text("\n".join(read_classification_file(SST2_TINY)["text"]) + "\n", encoding="utf-8")
    train_tokenizer([text], kind="word", vocab_size=500, min_frequency=1,
                    cleaning=CleaningConfig(lowercase=True)).save_pretrained(folder)
    return folder


def finetune_args(tokenizer_folder: Path, output_dir: Path) -> list[str]:
    """A TextCNN (dropout 0.5) from a preset on 40 sentences: 40 updates, a checkpoint every 3."""
    return ["--task", "sequence-classification", "--model_family", "textcnn", "--preset", "tiny",
            "--tokenizer_name", str(tokenizer_folder), "--train_file", str(SST2_TINY), "--max_seq_length", "32",
            "--num_train_epochs", str(EPOCHS), "--per_device_train_batch_size", "4", "--learning_rate", "1e-2",
            "--save_steps", str(SAVE_STEPS), "--logging_steps", "1", "--seed", "3", "--use_cpu", "--no_plot",
            "--disable_tqdm", "--output_dir", str(output_dir)]


def start(tokenizer_folder: Path, output_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, str(REPO / "training" / "finetune.py"),
                             *finetune_args(tokenizer_folder, output_dir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def stop_at_step(process: subprocess.Popen, step: int, signum: int, delay: float = 0.0) -> str:
    """Send ``signum`` once the process has logged update ``step`` (after ``delay`` seconds); returns its log."""
    log = []
    try:
        for line in process.stderr:
            log.append(line)
            if f"step {step}: train_loss" in line:
                time.sleep(delay)
                process.send_signal(signum)
                break
        log.append(process.communicate(timeout=120)[1])
    finally:
        if process.poll() is None:
            process.kill()
    return "".join(log)


def checkpoint_steps(folder: Path) -> list[int]:
    return sorted(int(path.name.split("-")[1]) for path in folder.glob("checkpoint-*"))


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(folder / "model.safetensors"))


def test_sigterm_saves_a_checkpoint_and_exits_143(tokenizer_folder, tmp_path):
    out = tmp_path / "cut"
    process = start(tokenizer_folder, out)
    log = stop_at_step(process, 2, signal.SIGTERM)
    assert process.returncode == 128 + signal.SIGTERM, log[-3000:]
    assert "Stopped by SIGTERM after step" in log and "--resume_from_checkpoint latest" in log
    steps = checkpoint_steps(out)
    assert steps and 2 <= steps[-1] < EPOCHS * STEPS_PER_EPOCH, (steps, log[-3000:])
    assert not (out / "model.safetensors").exists()  # an interrupted run writes no final model
    assert not list(out.glob("tmp-checkpoint-*"))


def test_sigkill_at_a_random_point_then_resume_latest_matches_an_uninterrupted_run(tokenizer_folder, tmp_path):
    seed = random.SystemRandom().randrange(2**32)
    chance = random.Random(seed)
    kill_step, delay = chance.randint(SAVE_STEPS + 2, EPOCHS * STEPS_PER_EPOCH - 2), chance.uniform(0.0, 0.05)
    where = f"killed after step {kill_step} + {delay:.3f} s (seed {seed})"
    out = tmp_path / "cut"
    process = start(tokenizer_folder, out)
    log = stop_at_step(process, kill_step, signal.SIGKILL, delay)
    assert process.returncode == -signal.SIGKILL, f"{where}\n{log[-3000:]}"
    assert checkpoint_steps(out), where  # checkpoint-3 was complete before step 4 began

    resumed = main([*finetune_args(tokenizer_folder, out), "--resume_from_checkpoint", "latest"])
    full = main(finetune_args(tokenizer_folder, tmp_path / "full"))
    assert resumed["steps"] == full["steps"] == EPOCHS * STEPS_PER_EPOCH, where
    expected, got = weights(tmp_path / "full"), weights(out)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), f"{name}: {where}"
    assert not list(out.glob("tmp-checkpoint-*")), where


@pytest.mark.slow
def test_two_processes_make_the_updates_and_metrics_of_one(tokenizer_folder, tmp_path):
    """DDP on 2 CPU processes, 4 rows each, against 1 process with batches of 8: the same weights (up to the
    order of the gradient sums) and the same gathered evaluation and predictions."""
    from distributed_utils import launch_two_cpu_processes

    common = [*finetune_args(tokenizer_folder, tmp_path), "--num_train_epochs", "2", "--validation_file",
              str(SST2_TINY), "--test_file", str(SST2_TINY), "--config_overrides", "classifier_dropout=0.0",
              "--max_grad_norm", "0", "--save_strategy", "no"]
    one = main([*common, "--per_device_train_batch_size", "8", "--output_dir", str(tmp_path / "one")])
    launch_two_cpu_processes("finetune.py", [*common, "--output_dir", str(tmp_path / "two")])
    two = json.loads((tmp_path / "two" / "all_results.json").read_text())
    expected, got = weights(tmp_path / "one"), weights(tmp_path / "two")
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-5)
    for key in ("eval_loss", "eval_accuracy", "predict_loss", "predict_accuracy", "train_loss"):
        assert two[key] == pytest.approx(one[key], abs=1e-5), key
    assert two["steps"] == one["steps"] == 10 and two["num_processes"] == 2
    assert (tmp_path / "one" / "test_predictions.jsonl").read_text() == (tmp_path / "two" / "test_predictions.jsonl").read_text()


def test_length_sorted_batches_resume_mid_epoch_to_the_weights_of_an_uninterrupted_run(tokenizer_folder, tmp_path):
    """Batches of a token budget, sorted by length (--max_tokens_per_batch) and visited in a new order every epoch:
    a run resumed from a checkpoint in the middle of an epoch reads what an uninterrupted one reads, and ends with
    its weights."""
    def args(output_dir: Path, *extra: str) -> list[str]:
        return [*finetune_args(tokenizer_folder, output_dir), "--max_tokens_per_batch", "48", *extra]

    full = main(args(tmp_path / "full"))
    per_epoch = full["steps"] // EPOCHS
    assert per_epoch not in (STEPS_PER_EPOCH, 0), full  # batches of the budget, not of 4 features
    step = next(s for s in checkpoint_steps(tmp_path / "full") if s > per_epoch and s % per_epoch)
    shutil.copytree(tmp_path / "full" / f"checkpoint-{step}", tmp_path / "cut" / f"checkpoint-{step}")
    resumed = main(args(tmp_path / "cut", "--resume_from_checkpoint", "latest"))
    assert resumed["steps"] == full["steps"]
    expected, got = weights(tmp_path / "full"), weights(tmp_path / "cut")
    for name in expected:
        assert torch.equal(expected[name], got[name]), f"{name}: resumed at step {step} of {full['steps']}"
