"""The best checkpoint and early stopping, in transformers' names: ``--load_best_model_at_end``,
``--metric_for_best_model``, ``--greater_is_better``, ``--early_stopping_patience``/``--early_stopping_threshold``.

A tiny NNLM trained with a high learning rate on a tiny repetitive text, evaluated and checkpointed every 5 updates
for 3 epochs (75 updates), overfits: its validation loss reaches its lowest well before the end and then rises, so
the last checkpoint is not the best one.
"""

from __future__ import annotations

import json
import logging

import pytest
import test_training_lm as lm_tests
import torch
from test_training_lm import CORPUS, engine_args, tiny_nnlm, weights

from hf_seqmodels.models.config_utils import ConfigValidationError
from hf_seqmodels.training import LMTrainingArguments, train_causal_lm
from hf_seqmodels.training.core.checkpoint_folders import rotate_checkpoints
from hf_seqmodels.training.core.cli import run_command
from hf_seqmodels.training.lm.cli import main as lm_main

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OVERFITTING = dict(num_train_epochs=3, learning_rate=0.05, eval_strategy="steps", eval_steps=5, save_strategy="steps",
                   save_steps=5, load_best_model_at_end=True)
LAST_STEP = 75


#: the language-model tests' fixtures: the character tokenizer of CORPUS and its train/validation ids
tokenizer, corpus_ids = lm_tests.tokenizer, lm_tests.corpus_ids


def train(tokenizer, corpus_ids, output_dir, **overrides):
    train_ids, eval_ids = corpus_ids
    return train_causal_lm(tiny_nnlm(len(tokenizer)), tokenizer, train_ids, eval_ids,
                           engine_args(output_dir, **{**OVERFITTING, **overrides}))


def eval_losses(output_dir) -> dict[int, float]:
    history = json.loads((output_dir / "training_history.json").read_text())
    return {record["step"]: record["eval_loss"] for record in history if "eval_loss" in record}


@pytest.fixture(scope="module")
def full_run(tokenizer, corpus_ids, tmp_path_factory):
    """The whole overfitting run with ``--load_best_model_at_end``: its results and its folder."""
    output_dir = tmp_path_factory.mktemp("full")
    return train(tokenizer, corpus_ids, output_dir), output_dir


def test_the_saved_model_is_the_best_checkpoint_and_states_its_step(full_run):
    results, output_dir = full_run
    losses = eval_losses(output_dir)
    best_step = min(losses, key=losses.get)
    assert 10 < best_step < LAST_STEP and losses[LAST_STEP] > losses[best_step]  # the run overfits
    assert results["best_global_step"] == best_step and results["best_metric"] == losses[best_step]
    assert results["best_model_checkpoint"] == str(output_dir / f"checkpoint-{best_step}")
    assert results["eval_loss"] == losses[best_step] and results["steps"] == LAST_STEP  # the results are the best's
    final = weights(output_dir)
    assert all(torch.equal(value, weights(output_dir / f"checkpoint-{best_step}")[name])
               for name, value in final.items())
    assert not all(torch.equal(value, weights(output_dir / f"checkpoint-{LAST_STEP}")[name])
                   for name, value in final.items())
    assert json.loads((output_dir / "train_results.json").read_text())["best_global_step"] == best_step
    assert f"| best_global_step | {best_step} |" in (output_dir / "README.md").read_text()
    assert json.loads((output_dir / "trainer_state.json").read_text())["best_global_step"] == best_step
    state = json.loads((output_dir / f"checkpoint-{LAST_STEP}" / "trainer_state.json").read_text())
    assert (state["best_global_step"], state["best_metric"]) == (best_step, losses[best_step])


def test_save_total_limit_never_deletes_the_best_checkpoint(full_run, tokenizer, corpus_ids, tmp_path):
    _, full_dir = full_run
    losses = eval_losses(full_dir)
    best_step = min(losses, key=losses.get)
    results = train(tokenizer, corpus_ids, tmp_path, save_total_limit=1)
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == sorted(
        [f"checkpoint-{best_step}", f"checkpoint-{LAST_STEP}"])
    assert results["best_global_step"] == best_step
    assert all(torch.equal(value, weights(full_dir)[name]) for name, value in weights(tmp_path).items())


def test_rotation_keeps_the_newest_and_the_best_within_the_limit(tmp_path):
    for step in (5, 10, 15, 20, 25):
        (tmp_path / f"checkpoint-{step}").mkdir()
    deleted = rotate_checkpoints(tmp_path, 3, keep=str(tmp_path / "checkpoint-10"))
    assert sorted(p.name for p in deleted) == ["checkpoint-15", "checkpoint-5"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-10", "checkpoint-20", "checkpoint-25"]


@pytest.mark.parametrize("patience", [1, 3])
def test_early_stopping_stops_at_the_expected_evaluation(patience, full_run, tokenizer, corpus_ids, tmp_path, caplog):
    """The stop comes at the ``patience``-th evaluation in a row that does not beat the best so far, as the full
    run's evaluations (the same ones, up to there) show; the run then ends as a normal one."""
    caplog.set_level(logging.WARNING, logger="hf_seqmodels")
    _, full_dir = full_run
    best, misses, expected = None, 0, None
    for step, loss in sorted(eval_losses(full_dir).items()):
        misses = 0 if best is None or loss < best else misses + 1
        best = loss if best is None else min(best, loss)
        if misses == patience:
            expected = step
            break
    assert expected is not None and expected < LAST_STEP
    results = train(tokenizer, corpus_ids, tmp_path, early_stopping_patience=patience)
    assert results["steps"] == expected and max(eval_losses(tmp_path)) == expected
    assert (tmp_path / f"checkpoint-{expected}").is_dir()
    assert f"Early stopping after step {expected}" in caplog.text
    best_dir = tmp_path / f"checkpoint-{results['best_global_step']}"
    assert all(torch.equal(value, weights(best_dir)[name]) for name, value in weights(tmp_path).items())


def test_a_large_threshold_counts_small_improvements_as_none(full_run, tokenizer, corpus_ids, tmp_path):
    """With ``--early_stopping_threshold`` above every gain after the first evaluations, the patience runs out
    although the loss still falls a little; the best checkpoint is still tracked without the threshold."""
    results = train(tokenizer, corpus_ids, tmp_path, early_stopping_patience=2, early_stopping_threshold=1.0)
    assert results["steps"] == 15  # evaluations at 5 (the first best), 10 and 15: two without a gain above 1.0
    losses = eval_losses(tmp_path)
    assert results["best_global_step"] == min(losses, key=losses.get)


def test_resuming_keeps_the_best_so_far(full_run, tokenizer, corpus_ids, tmp_path):
    full, full_dir = full_run
    best_step = full["best_global_step"]
    cut = train(tokenizer, corpus_ids, tmp_path, max_steps=best_step + 15)
    assert cut["best_global_step"] == best_step
    resumed = train(tokenizer, corpus_ids, tmp_path, resume_from_checkpoint="latest")
    assert resumed["steps"] == LAST_STEP
    assert (resumed["best_global_step"], resumed["best_metric"]) == (best_step, full["best_metric"])
    assert all(torch.equal(value, weights(full_dir)[name]) for name, value in weights(tmp_path).items())


def test_an_unknown_metric_is_refused_at_the_first_evaluation_with_the_tasks_metrics(tokenizer, corpus_ids,
                                                                                       tmp_path):
    with pytest.raises(ValueError, match=r"`metric_for_best_model`='bleu'.*eval_loss, eval_perplexity"):
        train(tokenizer, corpus_ids, tmp_path, metric_for_best_model="bleu", max_steps=5)


def test_the_metric_takes_either_name_and_its_direction_follows_transformers(tmp_path):
    def args(**kwargs):
        return LMTrainingArguments(output_dir=str(tmp_path), save_strategy="epoch", **kwargs)

    assert args(load_best_model_at_end=True).best_metric_name == "eval_loss"
    assert args(load_best_model_at_end=True).best_is_greater is False
    assert args(metric_for_best_model="perplexity").best_metric_name == "eval_perplexity"
    assert args(metric_for_best_model="eval_perplexity").best_metric_name == "eval_perplexity"
    assert args(metric_for_best_model="accuracy").best_is_greater is True
    assert args(metric_for_best_model="accuracy", greater_is_better=False).best_is_greater is False
    assert args().best_metric_name is None  # nothing tracked unless asked


@pytest.mark.parametrize(("overrides", "message"), [
    (dict(load_best_model_at_end=True, eval_strategy="no"), "--eval_strategy no and --save_strategy steps"),
    (dict(load_best_model_at_end=True, eval_strategy="steps", save_strategy="epoch"),
     "--eval_strategy steps and --save_strategy epoch"),
    (dict(load_best_model_at_end=True, eval_strategy="steps", eval_steps=4, save_steps=6),
     r"--save_steps \(6\) is a round multiple of --eval_steps \(4\)"),
    (dict(early_stopping_patience=2), "--metric_for_best_model"),
    (dict(early_stopping_patience=2, metric_for_best_model="loss", eval_strategy="no"), "--eval_strategy"),
    (dict(early_stopping_patience=0, metric_for_best_model="loss"), "an integer >= 1"),
    (dict(early_stopping_patience=1, metric_for_best_model="loss", early_stopping_threshold=-0.1), "a number >= 0"),
])
def test_the_argument_errors_name_the_flags(overrides, message, tmp_path):
    with pytest.raises(ConfigValidationError, match=message):
        LMTrainingArguments(output_dir=str(tmp_path), **overrides)


def test_the_command_line_says_what_is_wrong_in_one_line(tmp_path, capsys):
    train_file = tmp_path / "train.txt"
    train_file.write_text(CORPUS)
    common = ["--train_file", str(train_file), "--tokenizer_kind", "char", "--min_frequency", "1", "--preset", "tiny",
              "--output_dir", str(tmp_path / "out"), "--disable_tqdm", "--plot", "false", "--max_steps", "2"]
    cases = {
        ("--load_best_model_at_end", "--eval_strategy", "no"): "`load_best_model_at_end`=True: expected False "
                                                               "unless --eval_strategy is steps or epoch",
        ("--early_stopping_patience", "2"): "`early_stopping_patience`=2",
        ("--metric_for_best_model", "bleu", "--eval_strategy", "steps", "--eval_steps", "1"):
            "`metric_for_best_model`='bleu': expected a metric the evaluation reports",
    }
    for flags, named in cases.items():
        assert run_command(lm_main, [*common, *flags]) == 2, flags
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines and lines[-1].startswith("error: ") and named in lines[-1], (flags, lines[-3:])
