"""Training recipes in the family registry and the ``hf-seqmodels presets`` listing."""

from __future__ import annotations

import dataclasses
import json

import pytest

from hf_seqmodels.recipes import (
    OPTIMIZERS,
    SCHEDULE_KWARGS,
    TASK_KEYS,
    TRAINING_KEYS,
    merge_recipes,
    peak_learning_rate,
    recipe_problems,
)
from hf_seqmodels.registry import FAMILY_DESCRIPTIONS, family_named, training_recipe
from hf_seqmodels.training.bert.trainer import BERT_DEFAULTS, BertPretrainingArguments
from hf_seqmodels.training.core.arguments import EngineArguments
from hf_seqmodels.training.finetune.trainer import BATCH_DEFAULTS
from hf_seqmodels.training.lm.trainer import LM_DEFAULTS, LMTrainingArguments, LMTrainingLoop
from hf_seqmodels.training.seq2seq.trainer import SEQ2SEQ_DEFAULTS, Seq2SeqTrainingArguments

PRESETS = [(family, preset) for family in FAMILY_DESCRIPTIONS for preset in [None, *family.config_class.PRESETS]]


@pytest.mark.parametrize("family, preset", PRESETS, ids=[f"{f.name}-{p}" for f, p in PRESETS])
def test_every_preset_has_a_sane_recipe(family, preset):
    """Every key a recipe key, a known optimizer and schedule, and a peak learning rate that fits the optimizer
    (no SGD-sized rate with Adam)."""
    recipe = training_recipe(family.name, preset)
    config = family.config_class.from_preset(preset) if preset else family.config_class()
    assert recipe_problems(recipe, d_model=getattr(config, "d_model", None)) == []
    for key in ("optim", "learning_rate", "lr_scheduler_type", "per_device_train_batch_size", "max_grad_norm"):
        assert key in recipe, key
    if family.main_head.__name__.endswith("ForCausalLM"):
        assert recipe["bptt"] >= 1


@pytest.mark.parametrize("family", FAMILY_DESCRIPTIONS, ids=lambda f: f.name)
def test_every_task_recipe_is_sane(family):
    for task in family.task_recipes:
        assert recipe_problems(training_recipe(family.name, None, task)) == []


def test_papers_values():
    small, medium, large = (training_recipe("rnn", f"zaremba-{size}") for size in ("small", "medium", "large"))
    # lr 1 and clipping at 5 on the loss summed over the bptt steps = lr bptt and 5 / bptt on the token mean
    assert (small["optim"], small["learning_rate"], small["max_grad_norm"] * small["bptt"]) == ("sgd", 20.0, 5.0)
    assert (small["decay_start_epoch"], small["decay_factor"], small["num_train_epochs"]) == (4, 0.5, 13)
    assert (medium["bptt"], medium["decay_start_epoch"], medium["num_train_epochs"]) == (35, 6, 39)
    assert medium["decay_factor"] == pytest.approx(1 / 1.2)
    assert (large["decay_start_epoch"], large["num_train_epochs"]) == (14, 55)
    assert large["max_grad_norm"] * large["bptt"] == pytest.approx(10.0)
    assert {small["per_device_train_batch_size"], medium["per_device_train_batch_size"]} == {20}

    base = training_recipe("transformer", "transformer-base")
    assert (base["adam_beta2"], base["adam_epsilon"], base["lr_scheduler_type"], base["warmup_steps"]) == (
        0.98, 1e-9, "noam", 4000)
    assert peak_learning_rate(base, d_model=512) == pytest.approx(512**-0.5 * 4000**-0.5)
    assert training_recipe("transformer", "transformer-big")["max_steps"] == 300_000

    bert = training_recipe("bert", "bert-base")
    assert (bert["optim"], bert["learning_rate"], bert["lr_scheduler_type"], bert["warmup_steps"],
            bert["weight_decay"]) == ("adamw_torch", 1e-4, "linear", 10_000, 0.01)
    gpt = training_recipe("transformer_lm", "gpt-1")
    assert (gpt["learning_rate"], gpt["lr_scheduler_type"], gpt["warmup_steps"]) == (2.5e-4, "cosine", 2000)
    lample = training_recipe("bilstm_crf", "lample2016")
    assert (lample["optim"], lample["learning_rate"], lample["max_grad_norm"]) == ("sgd", 0.01, 5.0)
    luong = training_recipe("rnn_seq2seq", "luong-general")
    assert (luong["optim"], luong["learning_rate"], luong["decay_factor"]) == ("sgd", 1.0, 0.5)
    # Adadelta in the paper: Adam at 1e-3 here
    assert training_recipe("textcnn", "kim2014")["optim"] == "adamw_torch"


def test_preset_entries_merge_over_the_family_default():
    default = training_recipe("transformer_lm")
    gpt = training_recipe("transformer_lm", "gpt-1")
    assert default["lr_scheduler_type"] == "noam" and gpt["lr_scheduler_type"] == "cosine"
    assert gpt["bptt"] == 512 and gpt["gradient_accumulation_steps"] == 1
    assert training_recipe("transformer", "transformer-big")["adam_beta2"] == 0.98  # kept from the default
    # switching to another optimizer or schedule drops the keys that only meant something for the old one
    merged = merge_recipes(training_recipe("rnn", "zaremba-small"), {"lr_scheduler_type": "cosine"})
    assert "decay_start_epoch" not in merged and "decay_factor" not in merged
    merged = merge_recipes(training_recipe("transformer_lm", "nanogpt-cpu"), {"lr_scheduler_type": "linear"})
    assert "lr_scheduler_kwargs" not in merged  # the cosine schedule's floor
    merged = merge_recipes(training_recipe("transformer"), {"optim": "sgd", "learning_rate": 0.1})
    assert not {"adam_beta1", "adam_beta2", "adam_epsilon"} & set(merged)
    assert training_recipe("rnn", "tiny")["optim"] in OPTIMIZERS and "decay_factor" not in training_recipe(
        "rnn", "tiny")


def test_task_recipes_replace_the_pretraining_recipe():
    finetune = training_recipe("bert", "bert-base", "AutoModelForSequenceClassification")
    assert (finetune["learning_rate"], finetune["num_train_epochs"], finetune["per_device_train_batch_size"]) == (
        2e-5, 3, 32)
    assert "max_steps" not in finetune
    assert training_recipe("bert", None, "AutoModelForQuestionAnswering")["learning_rate"] == 5e-5
    # a head without a recipe of its own trains with the preset's
    assert training_recipe("rnn", "zaremba-small", "AutoModelForCausalLM") == training_recipe("rnn", "zaremba-small")
    assert training_recipe("rnn", "zaremba-small", "AutoModelForSequenceClassification")["optim"] == "adamw_torch"


def test_recipes_are_copies():
    training_recipe("rnn", "zaremba-small")["learning_rate"] = 123.0
    assert training_recipe("rnn", "zaremba-small")["learning_rate"] == 20.0


@pytest.mark.parametrize("args, words", [
    (("lstm", None), ["'lstm'", "families", "rnn", "bert"]),
    (("rnn", "zaremba-huge"), ["'zaremba-huge'", "rnn", "zaremba-small", "char-rnn"]),
    (("bert", "bert-base", "AutoModelForCausalLM"), ["'AutoModelForCausalLM'", "bert",
                                                     "AutoModelForSequenceClassification"]),
])
def test_bad_names_are_refused_with_the_known_ones(args, words):
    with pytest.raises(ValueError) as error:
        training_recipe(*args)
    for word in words:
        assert word in str(error.value)


def test_recipe_problems_catch_mistakes():
    assert any("peak learning rate" in p for p in recipe_problems(
        {"optim": "adamw_torch", "learning_rate": 1.0, "lr_scheduler_type": "constant"}))
    assert any("'learning_rate_decay'" in p for p in recipe_problems(
        {"optim": "sgd", "learning_rate": 1.0, "lr_scheduler_type": "constant", "learning_rate_decay": 0.5}))
    assert any("needs 'decay_factor'" in p for p in recipe_problems(
        {"optim": "sgd", "learning_rate": 1.0, "lr_scheduler_type": "zaremba", "decay_start_epoch": 4}))
    assert any("Adam setting" in p for p in recipe_problems(
        {"optim": "sgd", "learning_rate": 1.0, "lr_scheduler_type": "constant", "adam_beta2": 0.98}))
    assert any("optim='adagrad'" in p for p in recipe_problems(
        {"optim": "adagrad", "learning_rate": 1e-2, "lr_scheduler_type": "constant"}))
    assert any("'min_lr_ratio' belongs to the 'cosine' schedule, not 'linear'" in p for p in recipe_problems(
        {"optim": "sgd", "learning_rate": 1.0, "lr_scheduler_type": "linear",
         "lr_scheduler_kwargs": {"min_lr_ratio": 0.1}}))


# ------------------------------------------------------------------------- recipes and the training arguments ----
#: the training arguments and task defaults of the script that trains each head (None: no script trains it)
TASK_ARGUMENTS = {"AutoModelForCausalLM": (LMTrainingArguments, LM_DEFAULTS),
                  "AutoModelForSeq2SeqLM": (Seq2SeqTrainingArguments, SEQ2SEQ_DEFAULTS),
                  "AutoModelForPreTraining": (BertPretrainingArguments, BERT_DEFAULTS),
                  **{f"AutoModelFor{task}": (EngineArguments, BATCH_DEFAULTS)
                     for task in ("SequenceClassification", "TokenClassification", "QuestionAnswering")}}
HEAD_PRESETS = [(family, preset, auto_class.__name__) for family, preset in PRESETS for auto_class in family.heads
                if auto_class.__name__ in TASK_ARGUMENTS]


@pytest.mark.parametrize("family, preset, task", HEAD_PRESETS,
                         ids=[f"{f.name}-{p}-{t}" for f, p, t in HEAD_PRESETS])
def test_every_recipe_fills_the_arguments_of_every_task_it_reaches(family, preset, task):
    """The recipe a script takes for a head fills that task's arguments: ``bptt`` the LM's ``block_size``, and a
    task key of another task (the recurrent family's LM recipe reaching a classifier without one of its own)
    is left out, never an error."""
    recipe = training_recipe(family.name, preset, task)
    arguments_class, defaults = TASK_ARGUMENTS[task]
    args = arguments_class(output_dir="unused").with_recipe(recipe, defaults)
    assert args.unfilled(defaults) == []
    assert args.filled(defaults) is args  # filled once: a train_* function takes them as they are
    assert (args.optim, args.learning_rate, args.per_device_train_batch_size) == (
        recipe["optim"], recipe["learning_rate"], recipe["per_device_train_batch_size"])
    for key, name in TASK_KEYS.items():
        if key in recipe and arguments_class is LMTrainingArguments:
            assert getattr(args, name) == recipe[key]
    for key in ("decay_start_epoch", "decay_factor"):
        if key in recipe:
            assert args.scheduler_kwargs[key] == recipe[key]


def test_a_recipe_key_unknown_to_every_task_is_an_error_naming_it():
    recipe = {**training_recipe("rnn", "zaremba-small"), "learning_rate_decay": 0.5}
    for arguments_class in (LMTrainingArguments, Seq2SeqTrainingArguments, EngineArguments):
        with pytest.raises(ValueError, match=r"'learning_rate_decay' is neither a recipe key \(optim, learning_rate"):
            arguments_class(output_dir="unused").with_recipe(recipe)
    # a task key of the LM reaching another task is left out; a field of the LM's arguments alone is not a recipe key
    args = Seq2SeqTrainingArguments(output_dir="unused").with_recipe({"bptt": 35, "shuffle_windows": True})
    assert not hasattr(args, "block_size")
    with pytest.raises(ValueError, match="'eval_stride'.*Seq2SeqTrainingArguments"):
        Seq2SeqTrainingArguments(output_dir="unused").with_recipe({"eval_stride": 8})
    assert LMTrainingArguments(output_dir="unused").with_recipe({"eval_stride": 8}, LM_DEFAULTS).eval_stride == 8
    with pytest.raises(ValueError, match="task_defaults: 'block_size' is not a field of EngineArguments"):
        EngineArguments(output_dir="unused").with_recipe(task_defaults=LM_DEFAULTS)


def test_the_recipe_vocabulary_is_the_training_engines():
    """Every name of :mod:`hf_seqmodels.recipes` means something to the engine: a training key is a field of every
    task's arguments, a task key fills a field of the LM's, every schedule takes exactly its options, and every
    optimizer builds."""
    import torch

    from hf_seqmodels.training.core.optimizers import build_optimizer
    from hf_seqmodels.training.core.schedules import lr_factor

    fields = {f.name for f in dataclasses.fields(EngineArguments)}
    assert set(TRAINING_KEYS) <= fields
    assert set(TASK_KEYS.values()) <= {f.name for f in dataclasses.fields(LMTrainingArguments)}
    options = {"min_lr_ratio": 0.1, "decay_start_epoch": 1, "decay_factor": 0.5}
    for name, keys in SCHEDULE_KWARGS.items():
        factor = lr_factor(name, total_steps=10, steps_per_epoch=5, warmup_steps=1, d_model=8,
                           **{key: options[key] for key in keys})
        assert factor(0) >= 0
        kwargs = json.dumps({key: options[key] for key in keys})
        args = EngineArguments(output_dir="unused", lr_scheduler_type=name, lr_scheduler_kwargs=kwargs)
        assert args.scheduler_kwargs == json.loads(kwargs)
    model = torch.nn.Linear(2, 2)
    for optim in OPTIMIZERS:
        args = EngineArguments(output_dir="unused", optim=optim).with_recipe()
        assert build_optimizer(model, args).param_groups[0]["lr"] == args.learning_rate


def test_the_loop_takes_filled_arguments_and_the_train_functions_fill_them(tmp_path):
    """A recipe is applied once, where a run starts: the loop refuses arguments nobody filled, and
    ``LMTrainingArguments.filled`` (what ``train_causal_lm`` calls) fills those a Python caller built."""
    import torch
    from accelerate import Accelerator

    family = family_named("rnn")
    model = family.main_head(family.tiny_config())
    ids = torch.arange(200) % 20 + 4
    raw = LMTrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, block_size=8)
    with pytest.raises(ValueError, match="LMTrainingLoop takes filled arguments, but optim, .* are unset"):
        LMTrainingLoop(model, None, ids, ids, raw, Accelerator(cpu=True))
    filled = raw.filled(LM_DEFAULTS)
    assert filled.unfilled(LM_DEFAULTS) == [] and (filled.block_size, filled.optim) == (8, "adamw_torch")
    assert LMTrainingLoop(model, None, ids, ids, filled, Accelerator(cpu=True)).args is filled


def test_family_named():
    assert family_named("bert").config_class.__name__ == "BertConfig"
    assert family_named("rnn").main_head.__name__ == "RNNForCausalLM"
    with pytest.raises(ValueError, match="'gpt'.*transformer_lm"):
        family_named("gpt")


# ------------------------------------------------------------------------------------ the command ----

def _run(capsys, *argv):
    from hf_seqmodels.cli import main

    code = main(["presets", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_presets_json_lists_every_family_with_counts_and_recipes(capsys):
    code, out, err = _run(capsys, "--format", "json")
    assert code == 0, err
    listing = json.loads(out)
    for family in FAMILY_DESCRIPTIONS:
        presets = listing[family.name]["presets"]
        assert set(presets) == set(family.config_class.PRESETS)
        for name, entry in presets.items():
            assert entry["recipe"] == training_recipe(family.name, name)
            assert isinstance(entry["parameters"], int) and entry["parameters"] > 0
    assert listing["bert"]["model_class"] == "BertForPreTraining"
    assert listing["bert"]["presets"]["bert-base"]["parameters"] == pytest.approx(110e6, rel=0.02)
    assert listing["rnn"]["presets"]["zaremba-medium"]["parameters"] == pytest.approx(19.8e6, rel=0.02)
    # the classic models carry their own settings; the n-gram model has no parameter count
    assert listing["ngram"]["presets"]["5gram-kneser-ney"]["settings"]["order"] == 5
    assert listing["ngram"]["presets"]["5gram-kneser-ney"]["parameters"] is None
    assert listing["glove"]["presets"]["pennington2014"]["settings"]["learning_rate"] == 0.05
    assert set(listing) >= {"word2vec", "svd"}


def test_presets_table_for_one_family(capsys):
    code, out, err = _run(capsys, "--family", "rnn")
    assert code == 0, err
    lines = out.splitlines()
    assert any(line.startswith("rnn") for line in lines)
    zaremba = next(line for line in lines if "zaremba-large" in line)
    assert "66.0M" in zaremba and "sgd" in zaremba and "zaremba" in zaremba
    assert "bert-base" not in out
    code, out, _ = _run(capsys, "--family", "ngram")
    assert code == 0 and "5gram-kneser-ney" in out and "zaremba" not in out


def test_presets_bad_family_is_one_error_line(capsys):
    code, out, err = _run(capsys, "--family", "lstm")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and "'lstm'" in err and "rnn" in err


def test_the_named_transformer_and_bert_presets_train_in_bf16_and_the_rest_in_fp32():
    for family, preset in PRESETS:
        recipe = training_recipe(family.name, preset)
        expected = family.name in ("transformer", "transformer_lm", "bert") and preset not in (None, "tiny")
        assert recipe.get("bf16", False) is expected, (family.name, preset)
    assert "bf16" not in training_recipe("bert", "bert-mini", "AutoModelForSequenceClassification")
