"""training/train_lm.py, train_seq2seq.py and pretrain_bert.py survive crashes: SIGTERM and SIGINT write a
checkpoint and exit with 143 and 130, and a run killed with SIGKILL — at a random moment, and while a checkpoint
is being written — leaves only complete checkpoints; ``--resume_from_checkpoint latest`` then ends with exactly
the weights and the log history of an uninterrupted run.

Each script trains a tiny preset (dropout on, so the RNG state must be restored too) on tiny data written here,
as a subprocess that the test signals; the uninterrupted reference and the last resume run in this process.
train_lm and train_seq2seq train their (deterministic) character and word tokenizers, which a resumed run reuses
from the output folder; pretrain_bert gets one WordPiece tokenizer made here.
SIGTERM on train_lm.py is tests/test_engine_signals.py's; finetune.py is tests/test_finetune_crash.py's.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import safetensors.torch
import torch

from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.bert.cli import main as bert_main
from hf_seqmodels.training.core.checkpointing import (
    TEMP_PREFIX,
    list_checkpoints,
    resolve_checkpoint,
    verify_checkpoint,
)
from hf_seqmodels.training.lm.cli import main as lm_main
from hf_seqmodels.training.seq2seq.cli import main as seq2seq_main

# 8 training subprocesses and 6 in-process runs: about 90 s of CPU time
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

REPO = Path(__file__).resolve().parents[1]
WORDS = "the cat dog sat on mat log a big small red blue ran saw".split()
STEP_LOGGED = re.compile(r"step (\d+): train_loss=")
TIMEOUT = 240  # seconds a subprocess may take to reach a step (a loaded CI machine starts python slowly)


@dataclass(frozen=True)
class Script:
    """A training script, its in-process entry point, its flags (data folder -> flags without --output_dir) and
    the number of updates of a whole run."""

    file: str
    main: Callable[[list[str]], dict]
    flags: Callable[[Path], list[str]]
    total_steps: int


COMMON = ["--lr_scheduler_type", "constant", "--logging_steps", "1", "--seed", "5", "--no_plot", "--disable_tqdm"]

SCRIPTS = {
    "train_lm": Script("train_lm.py", lm_main, lambda data: [
        "--train_file", str(data / "lm.txt"), "--tokenizer_kind", "char", "--min_frequency", "1",
        "--model_family", "rnn", "--preset", "tiny", "--config_overrides", "hidden_dropout_prob=0.1",
        "--per_device_train_batch_size", "4", "--block_size", "16", "--num_train_epochs", "2", *COMMON],
        total_steps=56),  # 28 windows of 4 x 16 characters per epoch
    "train_seq2seq": Script("train_seq2seq.py", seq2seq_main, lambda data: [
        "--train_file", str(data / "train.tsv"), "--validation_file", str(data / "valid.tsv"),
        "--tokenizer_kind", "word", "--min_frequency", "1", "--model_family", "rnn_seq2seq", "--preset", "tiny",
        "--config_overrides", "hidden_dropout_prob=0.1", "--per_device_train_batch_size", "4",
        "--num_train_epochs", "3", "--num_beams", "1", "--generation_max_length", "10", *COMMON],
        total_steps=30),  # 40 pairs in batches of 4
    "pretrain_bert": Script("pretrain_bert.py", bert_main, lambda data: [
        "--train_file", str(data / "documents.txt"), "--tokenizer_name", str(data / "wordpiece"), "--preset", "tiny",
        "--max_seq_length", "32", "--per_device_train_batch_size", "4", "--num_train_epochs", "4", *COMMON],
        total_steps=28),  # 18 documents (2 held out): 7 batches of 4 sentence pairs per epoch
}


@pytest.fixture(autouse=True)
def no_process_left():
    """A failed test leaves no training process behind (running, or frozen by SIGSTOP)."""
    yield
    while Training.started:
        process = Training.started.pop()
        if process.poll() is None:
            process.kill()
            process.wait()


def sentence(chance: random.Random, length: int) -> str:
    return " ".join(chance.choice(WORDS) for _ in range(length))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return script_data(tmp_path_factory.mktemp("data"))


def script_data(folder: Path) -> Path:
    """Writes into ``folder`` (returned): lm.txt (60 lines), train.tsv (40 pairs: a sentence and its words
    reversed), valid.tsv (4 pairs), documents.txt (20 documents of 5 sentences, separated by blank lines) and a
    WordPiece tokenizer of them."""
    chance = random.Random(0)
    (folder / "lm.txt").write_text("".join(sentence(chance, 8) + "\n" for _ in range(60)), encoding="utf-8")
    for name, count in (("train.tsv", 40), ("valid.tsv", 4)):
        lines = [sentence(chance, 6) for _ in range(count)]
        pairs = "".join(f"{line}\t{' '.join(reversed(line.split()))}\n" for line in lines)
        (folder / name).write_text("source\ttarget\n" + pairs, encoding="utf-8")
    documents = ["\n".join(sentence(chance, 6).capitalize() + "." for _ in range(5)) for _ in range(20)]
    (folder / "documents.txt").write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    # one WordPiece tokenizer for every BERT run: the tokenizers library's WordPiece trainer numbers the same
    # vocabulary differently from one training to the next, so runs that each trained one would not compare
    train_tokenizer([folder / "documents.txt"], kind="wordpiece", min_frequency=1,
                    add_bert_special_tokens=True).save_pretrained(folder / "wordpiece")
    return folder


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(folder / "model.safetensors"))


def log_history(folder: Path) -> list[dict]:
    return json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))["log_history"]


@dataclass
class Reference:
    results: dict
    weights: dict[str, torch.Tensor]
    log_history: list[dict]


@pytest.fixture(scope="module")
def references(data, tmp_path_factory) -> Callable[[str], Reference]:
    """The uninterrupted run of a script with the flags of the killed runs (a checkpoint every update), made once
    per script, in this process."""
    made: dict[str, Reference] = {}

    def reference(name: str) -> Reference:
        if name not in made:
            out = tmp_path_factory.mktemp(f"reference-{name}") / "run"
            results = SCRIPTS[name].main([*kill_flags(name, data), "--output_dir", str(out)])
            made[name] = Reference(results, weights(out), log_history(out))
        return made[name]

    return reference


def kill_flags(name: str, data: Path) -> list[str]:
    return [*SCRIPTS[name].flags(data), "--save_strategy", "steps", "--save_steps", "1"]


class Training:
    """A training script running as a subprocess; a thread reads its log and notes the last update logged."""

    started: list[subprocess.Popen] = []  # killed after each test if still running (see ``no_process_left``)

    def __init__(self, name: str, args: list[str]):
        self.name = name
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen([sys.executable, str(REPO / "training" / SCRIPTS[name].file), *args],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.started.append(self.process)
        self.lines: list[str] = []
        self.last_step = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.append(line)
            if match := STEP_LOGGED.search(line):
                self.last_step = int(match.group(1))

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        """Poll ``condition`` every millisecond; fail if the process ends or times out first."""
        deadline = time.monotonic() + TIMEOUT
        while not condition():
            if self.process.poll() is not None:
                pytest.fail(f"{self.name} ended with status {self.process.returncode} before {what}:\n{self.log[-3000:]}")
            if time.monotonic() > deadline:
                self.process.kill()
                pytest.fail(f"{self.name} did not reach {what} in {TIMEOUT} s:\n{self.log[-3000:]}")
            time.sleep(0.001)

    def wait_for_step(self, step: int) -> None:
        self.wait_until(lambda: self.last_step >= step, f"update {step}")

    def finish(self) -> int:
        """Wait for the process to end; returns its status (minus the signal number if a signal ended it)."""
        try:
            self.process.wait(timeout=TIMEOUT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        self.reader.join(timeout=10)
        return self.process.returncode


def temp_steps(out: Path) -> set[int]:
    """The steps of the ``tmp-checkpoint-{step}`` folders of ``out`` (checkpoints being written or left by a kill)."""
    names = os.listdir(out) if out.is_dir() else []
    steps = [name[len(TEMP_PREFIX):] for name in names if name.startswith(TEMP_PREFIX)]
    return {int(step) for step in steps if step.isdigit()}


def kill_at_random_moment(run: Training, out: Path, step: int, delay: float) -> str:
    """SIGKILL ``delay`` seconds after update ``step`` was logged (once a first checkpoint exists)."""
    run.wait_until(lambda: bool(list_checkpoints(out)), "its first checkpoint")
    run.wait_for_step(step)
    time.sleep(delay)
    run.process.kill()
    return f"killed {delay:.3f} s after update {step} was logged"


def kill_during_a_save(run: Training, out: Path, step: int) -> str:
    """SIGKILL while ``tmp-checkpoint-{n}`` is being written, for the first save with ``n >= step`` that a look
    catches: the process is frozen (SIGSTOP) for each look at its output folder, killed if such a folder is there,
    else let go (SIGCONT) for half a millisecond. A frozen process cannot finish a save behind the test's back,
    however slowly the test is scheduled."""
    run.wait_for_step(step - 1)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        run.process.send_signal(signal.SIGSTOP)
        writing = sorted(n for n in temp_steps(out) if n >= step)
        if writing:
            folder = out / f"{TEMP_PREFIX}{writing[0]}"
            files = sorted(path.name for path in folder.iterdir())
            run.process.kill()
            return f"killed while writing {folder.name} (holding {files})"
        run.process.send_signal(signal.SIGCONT)
        if run.process.poll() is not None:
            pytest.fail(f"{run.name} ended with status {run.process.returncode} before a save from step {step} on "
                        f"was caught:\n{run.log[-3000:]}")
        time.sleep(0.0005)
    run.process.kill()
    pytest.fail(f"{run.name}: no save from step {step} on was caught in {TIMEOUT} s:\n{run.log[-3000:]}")


def check_only_complete_checkpoints(out: Path, where: str) -> int:
    """Every ``checkpoint-*`` folder verifies against its manifest and ``latest`` resolves to the newest one;
    returns its step."""
    checkpoints = list_checkpoints(out)
    assert checkpoints, where
    for path in checkpoints:
        assert verify_checkpoint(path) is True, f"{path.name}: {where}"
    assert resolve_checkpoint("latest", out) == checkpoints[-1], where
    assert not (out / "model.safetensors").exists(), where  # a killed run writes no final model
    return int(checkpoints[-1].name.split("-")[1])


def stop_with(name: str, data: Path, out: Path, signum: int) -> None:
    """Send ``signum`` after update 2 of a run that saves no checkpoint of its own: the run must write one at the
    step it stopped, exit with ``128 + signum`` and write no final model."""
    run = Training(name, [*SCRIPTS[name].flags(data), "--save_strategy", "no", "--output_dir", str(out)])
    run.wait_for_step(2)
    run.process.send_signal(signum)
    status = run.finish()
    log = run.log[-3000:]
    signame = signal.Signals(signum).name
    assert status == 128 + signum, f"{name}: {signame} gave exit status {status}\n{log}"
    stopped = re.search(rf"Stopped by {signame} after step (\d+): checkpoint (\S+)\. Continue with "
                        r"--resume_from_checkpoint latest", run.log)
    assert stopped, log
    step = int(stopped.group(1))
    assert 2 <= step < SCRIPTS[name].total_steps, log
    assert [p.name for p in list_checkpoints(out)] == [f"checkpoint-{step}"], log
    assert verify_checkpoint(out / f"checkpoint-{step}") is True
    assert not (out / "model.safetensors").exists()  # an interrupted run writes no final model
    assert not temp_steps(out)


@pytest.mark.parametrize("name", ["train_seq2seq", "pretrain_bert"])  # train_lm: tests/test_engine_signals.py
def test_sigterm_writes_a_checkpoint_and_exits_143(name, data, tmp_path):
    stop_with(name, data, tmp_path / "run", signal.SIGTERM)


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_sigint_writes_a_checkpoint_and_exits_130(name, data, tmp_path):
    stop_with(name, data, tmp_path / "run", signal.SIGINT)


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_sigkill_anywhere_then_resume_latest_ends_as_an_uninterrupted_run(name, data, references, tmp_path):
    """A run is killed at a random moment; its resumption is killed while writing a checkpoint; the second
    resumption (in this process) ends with the reference's weights and log history, bit for bit."""
    seed = int(os.environ.get("CRASH_TEST_SEED", random.SystemRandom().randrange(2**32)))
    chance = random.Random(seed)
    total = SCRIPTS[name].total_steps
    out = tmp_path / "run"
    flags = [*kill_flags(name, data), "--output_dir", str(out)]

    first = Training(name, flags)
    where = kill_at_random_moment(first, out, chance.randint(2, total // 3), chance.uniform(0.0, 0.03))
    where = f"{name}: {where} (CRASH_TEST_SEED={seed})"
    assert first.finish() == -signal.SIGKILL, f"{where}\n{first.log[-3000:]}"
    resumed_from = check_only_complete_checkpoints(out, where)
    assert resumed_from < total, where

    resuming = [*flags, "--resume_from_checkpoint", "latest"]
    second = Training(name, resuming)
    second_step = chance.randint(min(resumed_from + 2, total - 6), total - 6)
    where += f"; resumed from checkpoint-{resumed_from}, {kill_during_a_save(second, out, second_step)}"
    assert second.finish() == -signal.SIGKILL, f"{where}\n{second.log[-3000:]}"
    left = max(temp_steps(out))
    assert not (out / f"checkpoint-{left}").exists(), where  # the save was cut before its rename
    assert check_only_complete_checkpoints(out, where) < left, where  # `latest` skips the unfinished folder

    results = SCRIPTS[name].main(resuming)
    reference = references(name)
    assert results["steps"] == reference.results["steps"] == total, where
    history = log_history(out)  # the same losses and metrics, no record twice
    differ = [(a, b) for a, b in zip(history, reference.log_history, strict=False) if a != b]
    assert len(history) == len(reference.log_history) and not differ, f"{where}; first difference: {differ[:1]}"
    got = weights(out)
    assert got.keys() == reference.weights.keys(), where
    for key, expected in reference.weights.items():
        assert torch.equal(got[key], expected), f"{key}: {where}"
    assert not temp_steps(out), where  # the unfinished save was written anew
