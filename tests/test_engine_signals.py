"""A stop signal (SIGTERM) ends a training run with a checkpoint, and resuming it gives the uninterrupted weights."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
import torch

from hf_seqmodels.training.core.signals import StopSignals, TrainingInterrupted
from hf_seqmodels.training.lm.cli import main

REPO = Path(__file__).resolve().parents[1]
CORPUS = "the cat sat on the mat. the dog sat on the log.\n" * 40
EPOCHS, WINDOWS_PER_EPOCH = 8, 27  # 4 rows x 16 tokens over the 90 % training split


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def lm_args(train_file: Path, output_dir: Path) -> list[str]:
    return ["--train_file", str(train_file), "--tokenizer_kind", "char", "--min_frequency", "1",
            "--model_family", "rnn", "--preset", "tiny",
            "--config_overrides", "cell_type=lstm,hidden_size=16,hidden_dropout_prob=0.1",
            "--per_device_train_batch_size", "4", "--block_size", "16", "--num_train_epochs", str(EPOCHS),
            "--learning_rate", "0.02", "--optim", "adamw_torch", "--logging_steps", "1", "--no_plot",
            "--disable_tqdm", "--output_dir", str(output_dir)]


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(folder / "model.safetensors"))


def test_sigterm_writes_a_checkpoint_and_resume_matches_an_uninterrupted_run(tmp_path):
    train_file = tmp_path / "corpus.txt"
    train_file.write_text(CORPUS, encoding="utf-8")
    cut = tmp_path / "cut"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, str(REPO / "training" / "train_lm.py"), *lm_args(train_file, cut)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    log = []
    try:
        for line in process.stderr:  # the handler is installed before the first update is logged
            log.append(line)
            if "step 1: train_loss" in line:
                process.send_signal(signal.SIGTERM)
                break
        log.append(process.communicate(timeout=120)[1])
    finally:
        if process.poll() is None:
            process.kill()
    log = "".join(log)
    assert process.returncode == 128 + signal.SIGTERM, log[-3000:]
    assert "Stopped by SIGTERM after step" in log and "resume_from_checkpoint latest" in log
    checkpoints = sorted(cut.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert checkpoints, log[-3000:]
    stopped_at = int(checkpoints[-1].name.split("-")[1])
    assert 1 <= stopped_at < EPOCHS * WINDOWS_PER_EPOCH, "the run ended before the signal arrived"
    assert not (cut / "model.safetensors").exists()  # an interrupted run writes no final model
    assert not list(cut.glob("tmp-checkpoint-*"))

    resumed = main([*lm_args(train_file, cut), "--resume_from_checkpoint", "latest"])
    full = main(lm_args(train_file, tmp_path / "full"))
    assert resumed["steps"] == full["steps"] == EPOCHS * WINDOWS_PER_EPOCH
    expected, got = weights(tmp_path / "full"), weights(cut)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name
    assert resumed["eval_loss"] == full["eval_loss"]


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler for the test (a shell that starts the tests in the background ignores
    SIGINT), and accelerate's state, which the handlers' log messages need."""
    from accelerate import PartialState

    PartialState()
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_stop_signals_record_and_restore_the_previous_handlers(python_sigint):
    def previous(signum, frame):
        pass

    old = signal.signal(signal.SIGTERM, previous)
    try:
        with StopSignals() as stop:
            assert signal.getsignal(signal.SIGTERM) == stop._handle
            signal.raise_signal(signal.SIGTERM)
            assert stop.received == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is previous
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, old)


def test_a_second_ctrl_c_raises_keyboard_interrupt(python_sigint):
    with StopSignals() as stop:
        signal.raise_signal(signal.SIGINT)
        assert stop.received == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_training_interrupted_exits_with_128_plus_the_signal():
    error = TrainingInterrupted(signal.SIGTERM, 7, Path("out/checkpoint-7"))
    assert isinstance(error, SystemExit) and error.code == 143
    assert "SIGTERM after step 7" in str(error)
    assert TrainingInterrupted(signal.SIGINT, 1, None).code == 130
