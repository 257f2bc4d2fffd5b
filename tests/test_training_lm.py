"""Tests of the causal-LM training engine (``hf_seqmodels.training``) and ``training/train_lm.py``."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
import torch
from accelerate.state import AcceleratorState
from distributed_utils import launch_two_cpu_processes
from tokenizer_test_utils import char_tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_seqmodels import (
    NNLMConfig,
    NNLMForCausalLM,
    RNNConfig,
    RNNForCausalLM,
    TransformerForCausalLM,
    TransformerLMConfig,
)
from hf_seqmodels.training import LMTrainingArguments, evaluate_causal_lm, train_causal_lm
from hf_seqmodels.training.core import checkpointing
from hf_seqmodels.training.core.cli import parse_config_overrides
from hf_seqmodels.training.core.launch import make_accelerator
from hf_seqmodels.training.core.schedules import lr_factor
from hf_seqmodels.training.core.text import split_for_validation, tokenize_texts
from hf_seqmodels.training.lm.cli import main, parse_arguments
from hf_seqmodels.training.lm.data import ShuffledContextWindows, StreamWindows, batchify, shard_rows
from hf_seqmodels.training.lm.trainer import build_train_windows, is_stateful

REPO = Path(__file__).resolve().parents[1]
CORPUS = "the cat sat on the mat. the dog sat on the log.\n" * 40

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tokenizer():
    return char_tokenizer(CORPUS)


@pytest.fixture(scope="module")
def corpus_ids(tokenizer):
    ids = tokenize_texts([CORPUS], tokenizer)
    return ids[:1600], ids[1600:]


def tiny_lstm(vocab_size: int, dropout: float = 0.0, seed: int = 0) -> RNNForCausalLM:
    torch.manual_seed(seed)
    config = RNNConfig.from_preset("tiny", vocab_size=vocab_size, cell_type="lstm", hidden_size=24,
                                   embedding_size=16, num_hidden_layers=2, hidden_dropout_prob=dropout)
    return RNNForCausalLM(config)


def tiny_nnlm(vocab_size: int, dropout: float = 0.0, seed: int = 0) -> NNLMForCausalLM:
    torch.manual_seed(seed)
    config = NNLMConfig.from_preset("tiny", vocab_size=vocab_size, context_size=4, embedding_size=12,
                                    hidden_size=32, hidden_dropout_prob=dropout)
    return NNLMForCausalLM(config)


def tiny_transformer_lm(vocab_size: int, seed: int = 0) -> TransformerForCausalLM:
    torch.manual_seed(seed)
    return TransformerForCausalLM(TransformerLMConfig.from_preset("tiny", vocab_size=vocab_size, dropout=0.0))


TINY_MODELS = {"lstm": tiny_lstm, "nnlm": tiny_nnlm, "transformer_lm": tiny_transformer_lm}


def engine_args(output_dir: Path, **overrides) -> LMTrainingArguments:
    defaults = dict(output_dir=str(output_dir), num_train_epochs=2, per_device_train_batch_size=4, block_size=16,
                    learning_rate=0.02, optim="adamw_torch", per_device_eval_batch_size=2, logging_steps=5, plot=False,
                    disable_tqdm=True, save_total_limit=None, save_strategy="epoch", lr_scheduler_type="constant")
    return LMTrainingArguments(**{**defaults, **overrides})


def weights(model_or_dir) -> dict[str, torch.Tensor]:
    if isinstance(model_or_dir, (str, Path)):
        return safetensors.torch.load_file(str(Path(model_or_dir) / "model.safetensors"))
    return {k: v.detach().clone() for k, v in model_or_dir.state_dict().items()}


# --------------------------------------------------------------------------- data


def test_batchify_and_windows_follow_the_ptb_layout():
    streams = batchify(torch.arange(23), 2)  # 23 tokens -> 2 rows of 11, the last token dropped
    assert streams.tolist() == [list(range(0, 11)), list(range(11, 22))]
    windows = StreamWindows(streams, bptt=4)
    assert len(windows) == 3  # ceil((11 - 1) / 4)
    first, last = windows.batch(0), windows.batch(2)
    assert first.input_ids.tolist() == [[0, 1, 2, 3], [11, 12, 13, 14]]
    assert first.labels.tolist() == [[1, 2, 3, 4], [12, 13, 14, 15]]
    assert first.context is None and windows.carries_state
    assert last.input_ids.shape == (2, 2) and last.labels.tolist() == [[9, 10], [20, 21]]
    inputs = torch.cat([windows.batch(i).input_ids for i in range(len(windows))], dim=1)
    labels = torch.cat([windows.batch(i).labels for i in range(len(windows))], dim=1)
    assert torch.equal(inputs, streams[:, :-1]) and torch.equal(labels, streams[:, 1:])


def test_shard_rows_gives_each_process_a_contiguous_block():
    rows = batchify(torch.arange(40), 4)  # (4, 10)
    shards = [shard_rows(rows, rank, 2) for rank in range(2)]
    assert [s.shape for s in shards] == [(2, 10), (2, 10)]
    assert torch.equal(shards[0], rows[:2]) and torch.equal(shards[1], rows[2:])
    assert [shard_rows(rows[:3], r, 2).shape[0] for r in range(2)] == [2, 1]  # uneven (evaluation only)


def test_validation_split_is_by_characters_and_reproducible():
    text = "".join(chr(ord("a") + i % 26) for i in range(1003))
    train, validation = split_for_validation([text], 10)
    assert train == [text[:902]] and validation == [text[902:]]  # floor(1003 * 0.9) = 902
    train, validation = split_for_validation(["abcdef", "ghij"], 30)  # cut at 7 of 10 characters
    assert train == ["abcdef", "g"] and validation == ["hij"]
    with pytest.raises(ValueError, match="validation_split_percentage"):
        split_for_validation([text], 100)


def test_tokenize_texts_is_one_stream_without_bos(tokenizer):
    text = "".join(f"line {i}: the cat\n" for i in range(30))
    ids = tokenize_texts([text], tokenizer, lines_per_chunk=7)  # 5 chunks tokenised by Dataset.map
    assert ids.dtype == torch.long and ids.dim() == 1
    assert ids.tolist() == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.bos_token_id not in ids.tolist() and len(ids) == len(text)


def test_shuffled_nnlm_windows_carry_their_context():
    ids = torch.arange(100, 146)  # 46 tokens: 8 blocks of 5 on a grid shifted by 0..4 every epoch
    source = ShuffledContextWindows(ids, context_size=3, block_size=5, global_batch_size=4, seed=1, fill_id=0)
    assert len(source) == 2 and not source.carries_state
    starts_of = {}
    for epoch in range(6):
        seen = []
        for index in range(len(source)):
            window = source.batch(index, epoch=epoch)
            assert window.input_ids.shape == (4, 5) and window.context.shape == (4, 3)
            assert torch.equal(window.labels[:, :-1], window.input_ids[:, 1:])
            assert torch.equal(window.labels[:, -1], window.input_ids[:, -1] + 1)  # the next token, in range
            for inputs, context in zip(window.input_ids.tolist(), window.context.tolist(), strict=True):
                assert inputs == list(range(inputs[0], inputs[0] + 5))
                start = inputs[0] - 100
                expected = [0] * max(0, 3 - start) + list(range(100 + max(0, start - 3), 100 + start))
                assert context == expected
            seen += window.input_ids[:, 0].tolist()
        offset = source.layout(epoch)[0]
        assert sorted(seen) == list(range(100 + offset, 140 + offset, 5))  # every block of the grid once
        starts_of[epoch] = seen
    assert len({source.layout(e)[0] for e in range(6)}) > 1  # the grid moves from epoch to epoch
    assert starts_of[0] != starts_of[1]  # a new order each epoch ...
    assert source.batch(1, epoch=0).input_ids[:, 0].tolist() == starts_of[0][4:]  # ... reproducible
    halves = [ShuffledContextWindows(ids, context_size=3, block_size=5, global_batch_size=4, seed=1,
                                     process_index=r, num_processes=2).batch(0).input_ids for r in (0, 1)]
    assert torch.equal(torch.cat(halves), source.batch(0).input_ids)


# --------------------------------------------------------------------------- schedules


def test_zaremba_schedule_decays_after_the_start_epoch():
    factor = lr_factor("zaremba", total_steps=100, steps_per_epoch=10, decay_start_epoch=4, decay_factor=0.5)
    assert [factor(s) for s in (0, 39)] == [1.0, 1.0]  # epochs 0..3 constant
    assert [factor(s) for s in (40, 49, 50, 60)] == [0.5, 0.5, 0.25, 0.125]


def test_cosine_schedule_endpoints_and_errors():
    factor = lr_factor("cosine", total_steps=110, steps_per_epoch=10, warmup_steps=10, min_lr_ratio=0.1)
    assert factor(0) == 0.0 and factor(5) == pytest.approx(0.5) and factor(10) == pytest.approx(1.0)
    assert factor(60) == pytest.approx(0.55) and factor(110) == pytest.approx(0.1) and factor(500) == pytest.approx(0.1)
    assert lr_factor("constant", total_steps=5, steps_per_epoch=5)(3) == 1.0
    linear = lr_factor("linear", total_steps=10, steps_per_epoch=10, warmup_steps=2)  # transformers' default schedule
    assert [linear(s) for s in (0, 1, 2, 6, 10, 12)] == pytest.approx([0.0, 0.5, 1.0, 0.5, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"`lr_scheduler_type`='bogus'.*'zaremba'"):
        lr_factor("bogus", total_steps=5, steps_per_epoch=5)
    with pytest.raises(ValueError, match="decay_factor"):
        lr_factor("zaremba", total_steps=5, steps_per_epoch=5, decay_factor=1.5)
    with pytest.raises(ValueError, match="optim"):
        LMTrainingArguments(output_dir="x", optim="adam")


def test_noam_schedule_is_the_papers_formula():
    d_model, warmup = 512, 4000
    factor = lr_factor("noam", total_steps=10, steps_per_epoch=5, warmup_steps=warmup, d_model=d_model)
    for step in (0, 99, 3998, 3999, 4000, 99999):
        s = step + 1  # the paper counts updates from 1
        assert factor(step) == pytest.approx(d_model**-0.5 * min(s**-0.5, s * warmup**-1.5), rel=1e-12)
    peak = max(range(8000), key=factor)
    assert peak == warmup - 1 and factor(peak) == pytest.approx((d_model * warmup) ** -0.5)
    with pytest.raises(ValueError, match=r"`warmup_steps`=0.*noam"):
        lr_factor("noam", total_steps=10, steps_per_epoch=5, warmup_steps=0, d_model=d_model)
    with pytest.raises(ValueError, match=r"`d_model`=None"):
        lr_factor("noam", total_steps=10, steps_per_epoch=5, warmup_steps=10)


# --------------------------------------------------------------------------- the engine


@pytest.mark.parametrize("family", sorted(TINY_MODELS))
def test_training_lowers_validation_loss(family, tokenizer, corpus_ids, tmp_path):
    train_ids, eval_ids = corpus_ids
    model = TINY_MODELS[family](len(tokenizer))
    before = evaluate_causal_lm(model, eval_ids, batch_size=2, block_size=16)["eval_loss"]
    results = train_causal_lm(model, tokenizer, train_ids, eval_ids, engine_args(tmp_path, num_train_epochs=3,
                                                                                 plot=True))
    assert results["steps"] == 3 * math.ceil((1600 // 4 - 1) / 16)
    assert (tmp_path / "loss_curve.png").is_file() and (tmp_path / "learning_rate.png").is_file()
    # a picture of the self-attention for the model that has some, on its card
    has_attention = family == "transformer_lm"
    assert (tmp_path / "self_attention.png").is_file() == has_attention
    assert ("](self_attention.png)" in (tmp_path / "README.md").read_text()) == has_attention
    assert results["eval_loss"] < before - 1.0 and results["eval_perplexity"] < 5.0
    assert results["eval_perplexity"] == pytest.approx(math.exp(results["eval_loss"]))
    history = json.loads((tmp_path / "training_history.json").read_text())
    evals = [r["eval_loss"] for r in history if "eval_loss" in r]
    assert len(evals) == 3 and evals[-1] < evals[0]
    assert {p.name for p in tmp_path.glob("checkpoint-*")} == {"checkpoint-25", "checkpoint-50", "checkpoint-75"}


def test_the_state_is_carried_for_recurrent_models_only(tokenizer):
    """RNNs and the NNLM carry their state between windows; the Transformer LM reads each window alone."""
    assert [is_stateful(TINY_MODELS[f](len(tokenizer))) for f in ("lstm", "nnlm", "transformer_lm")] == [
        True, True, False]


def test_shuffled_windows_train_a_transformer_lm_and_are_refused_for_a_recurrent_model(tokenizer, corpus_ids,
                                                                                        tmp_path):
    """A Transformer LM attends within its window, so it can read the fixed windows in a new order every epoch
    (as run_clm's grouped texts); a recurrent model carries its state along the stream and cannot."""
    train_ids, eval_ids = corpus_ids
    args = engine_args(tmp_path / "transformer", num_train_epochs=2, shuffle_windows=True, block_size=8)
    model = tiny_transformer_lm(len(tokenizer))
    windows = build_train_windows(train_ids, args, model)
    assert isinstance(windows, ShuffledContextWindows) and windows.context_size == 0
    firsts = [windows.batch(i, epoch=e).input_ids[:, 0].tolist() for e in (0, 1) for i in range(len(windows))]
    assert firsts[: len(windows)] != firsts[len(windows):]  # a new order each epoch
    before = evaluate_causal_lm(model, eval_ids, block_size=8)["eval_loss"]
    results = train_causal_lm(model, tokenizer, train_ids, eval_ids, args)
    assert results["eval_loss"] < before
    with pytest.raises(ValueError, match="`shuffle_windows`=True: expected False for a model whose state"):
        build_train_windows(train_ids, args, tiny_lstm(len(tokenizer)))


def test_evaluation_is_exact_token_weighted_nll(tokenizer, corpus_ids):
    _, eval_ids = corpus_ids
    model = tiny_lstm(len(tokenizer)).eval()
    stream = eval_ids[:200]
    with torch.no_grad():
        logits = model(stream[None, :-1]).logits[0]
    expected = torch.nn.functional.cross_entropy(logits, stream[1:]).item()
    result = evaluate_causal_lm(model, stream, batch_size=1, block_size=7)  # 29 windows, state carried
    assert result["eval_tokens"] == 199 and result["eval_loss"] == pytest.approx(expected, rel=1e-5)


def test_checkpoint_is_atomic_and_loads_with_weights_only(tokenizer, corpus_ids, tmp_path, monkeypatch):
    train_ids, eval_ids = corpus_ids
    args = engine_args(tmp_path, num_train_epochs=1, max_steps=6, save_strategy="steps", save_steps=3)
    real_save = safetensors.torch.save_model

    class SimulatedCrash(Exception):
        pass

    def crash_at_step_6(model, filename, *a, **kw):
        if "checkpoint-6" in filename:
            real_save(model, filename, *a, **kw)
            raise SimulatedCrash("while writing checkpoint-6")
        return real_save(model, filename, *a, **kw)

    monkeypatch.setattr(checkpointing.safetensors.torch, "save_model", crash_at_step_6)
    with pytest.raises(SimulatedCrash):
        train_causal_lm(tiny_lstm(len(tokenizer)), tokenizer, train_ids, eval_ids, args)
    assert (tmp_path / "tmp-checkpoint-6" / "model.safetensors").is_file()  # the half-written folder
    assert not (tmp_path / "checkpoint-6").exists()
    assert checkpointing.find_latest_checkpoint(tmp_path).name == "checkpoint-3"
    for name in ("optimizer.pt", "scheduler.pt", "rank-0.pt"):
        torch.load(tmp_path / "checkpoint-3" / name, weights_only=True)  # no pickled objects
    rank_state = torch.load(tmp_path / "checkpoint-3" / "rank-0.pt", weights_only=True)
    assert [t.shape for t in rank_state["recurrent_state"]["tensors"]] == [(4, 2, 24), (4, 2, 24)]  # LSTM (h, c)
    monkeypatch.setattr(checkpointing.safetensors.torch, "save_model", real_save)
    resumed = train_causal_lm(tiny_lstm(len(tokenizer)), tokenizer, train_ids, eval_ids,
                              engine_args(tmp_path, num_train_epochs=1, max_steps=6, resume_from_checkpoint="latest"))
    assert resumed["steps"] == 6 and (tmp_path / "checkpoint-6").is_dir()


def test_save_total_limit_keeps_the_newest(tokenizer, corpus_ids, tmp_path):
    train_ids, eval_ids = corpus_ids
    train_causal_lm(tiny_nnlm(len(tokenizer)), tokenizer, train_ids, eval_ids,
                    engine_args(tmp_path, num_train_epochs=1, max_steps=8, save_strategy="steps", save_steps=2,
                                    save_total_limit=2))
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-6", "checkpoint-8"]


@pytest.mark.parametrize("family", ["lstm", "nnlm-shuffled"])
def test_resume_mid_epoch_equals_uninterrupted_run(family, tokenizer, corpus_ids, tmp_path):
    """A run stopped after 30 updates (mid epoch 2 of 25 windows) and resumed ends with the same weights."""
    train_ids, eval_ids = corpus_ids
    build = tiny_lstm if family == "lstm" else tiny_nnlm
    common = dict(num_train_epochs=3, lr_scheduler_type="zaremba",
                  lr_scheduler_kwargs='{"decay_start_epoch": 1, "decay_factor": 0.5}', warmup_steps=4,
                  shuffle_windows=family != "lstm", save_strategy="epoch")
    full_model = build(len(tokenizer), dropout=0.3)
    full = train_causal_lm(full_model, tokenizer, train_ids, eval_ids, engine_args(tmp_path / "full", **common))
    train_causal_lm(build(len(tokenizer), dropout=0.3), tokenizer, train_ids, eval_ids,
                    engine_args(tmp_path / "cut", max_steps=30, **common))
    resumed_model = build(len(tokenizer), dropout=0.3, seed=123)  # different init: everything comes from the checkpoint
    resumed = train_causal_lm(resumed_model, tokenizer, train_ids, eval_ids,
                              engine_args(tmp_path / "cut", resume_from_checkpoint="latest", **common))
    assert resumed["steps"] == full["steps"]
    for name, value in weights(full_model).items():
        assert torch.equal(value, weights(resumed_model)[name]), name
    assert resumed["eval_loss"] == full["eval_loss"]


def test_time_limit_stops_cleanly_and_resume_checks_the_layout(tokenizer, corpus_ids, tmp_path):
    train_ids, eval_ids = corpus_ids
    results = train_causal_lm(tiny_nnlm(len(tokenizer)), tokenizer, train_ids, eval_ids,
                              engine_args(tmp_path, max_time_minutes=1e-9))
    assert results["steps"] == 1 and math.isfinite(results["eval_loss"])  # stopped after the first update
    assert (tmp_path / "checkpoint-1").is_dir() and (tmp_path / "model.safetensors").is_file()
    with pytest.raises(ValueError, match="batches per epoch"):
        train_causal_lm(tiny_nnlm(len(tokenizer)), tokenizer, train_ids, eval_ids,
                        engine_args(tmp_path, block_size=8, resume_from_checkpoint="latest"))


def test_a_time_cap_on_one_process_adds_no_collective_per_update(tokenizer, corpus_ids, tmp_path, monkeypatch):
    """Alone, a process checks its clock without a tensor to reduce (a device sync per update on a GPU)."""
    from accelerate import Accelerator

    train_ids, eval_ids = corpus_ids
    reduce, calls = Accelerator.reduce, []
    monkeypatch.setattr(Accelerator, "reduce", lambda self, tensor, reduction="sum", scale=1.0: (
        calls.append(reduction), reduce(self, tensor, reduction, scale))[1])
    counts = []
    for cap in (None, 60.0):
        calls.clear()
        results = train_causal_lm(tiny_nnlm(len(tokenizer)), tokenizer, train_ids, eval_ids,
                                  engine_args(tmp_path / str(cap), max_steps=3, max_time_minutes=cap))
        assert results["steps"] == 3
        counts.append(len(calls))
    assert counts[0] == counts[1] > 0


# --------------------------------------------------------------------------- the command line


def test_the_lm_command_line_leaves_the_fine_tuning_code_unimported():
    """Every rank of a launch imports the LM command line: the fine-tuning helpers (and the ``evaluate`` they
    pull in) load only when used, while ``hf_seqmodels.training`` still exports them."""
    code = ("import sys, hf_seqmodels.training.lm.cli, hf_seqmodels.training as training; "
            "print(sorted(m for m in ('evaluate', 'hf_seqmodels.training.finetune') if m in sys.modules)); "
            "print(training.read_conll.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["[]", "hf_seqmodels.training.finetune.token_classification_data"]


def test_config_overrides_are_typed_and_checked(tmp_path):
    overrides = parse_config_overrides("hidden_size=32, cell_type=gru,hidden_dropout_prob=0.5,tie_word_embeddings=true,"
                                       "embedding_size=none", RNNConfig)
    assert overrides == {"hidden_size": 32, "cell_type": "gru", "hidden_dropout_prob": 0.5,
                         "tie_word_embeddings": True, "embedding_size": None}
    with pytest.raises(ValueError, match="'hidden_sise'.*RNNConfig"):
        parse_config_overrides("hidden_sise=3", RNNConfig)
    with pytest.raises(ValueError, match="'abc' for `hidden_size`"):
        parse_config_overrides("hidden_size=abc", RNNConfig)
    with pytest.raises(ValueError, match="'vocab_size'.*tokenizer"):
        parse_config_overrides("vocab_size=3", NNLMConfig)
    with pytest.raises(ValueError, match="'big' for --model_family nnlm.*bengio-2003"):
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("to be or not to be\n")
        main(["--output_dir", str(tmp_path / "o"), "--model_family", "nnlm", "--preset", "big", "--train_file",
              str(corpus)])
    _, _, args = parse_arguments(["--output_dir", "o", "--train_file", str(corpus), "--preset", "tiny", "--no_plot",
                                  "--block_size", "7", "--optim", "sgd"])
    assert (args.max_steps, args.plot, args.block_size) == (-1, False, 7)
    assert args.learning_rate == 1.0, "the tiny recipe's AdamW learning rate must not reach SGD"


def test_cli_end_to_end_char_lstm_reloads_and_generates(tmp_path):
    train_file = tmp_path / "corpus.txt"
    train_file.write_text(CORPUS, encoding="utf-8")
    out = tmp_path / "run"
    results = main(["--train_file", str(train_file), "--tokenizer_kind", "char", "--min_frequency", "1",
                    "--model_family", "rnn", "--preset", "tiny", "--config_overrides", "cell_type=lstm,hidden_size=16",
                    "--output_dir", str(out), "--max_steps", "12", "--per_device_train_batch_size", "4",
                    "--block_size", "16", "--learning_rate", "0.02", "--optim", "adamw_torch", "--logging_steps", "4",
                    "--disable_tqdm"])
    assert results["steps"] == 12 and math.isfinite(results["eval_loss"])
    assert (out / "loss_curve.png").stat().st_size > 0 and (out / "checkpoint-12").is_dir()
    history = json.loads((out / "training_history.json").read_text())
    assert [r["step"] for r in history if "train_loss" in r] == [4, 8, 12]
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert type(model).__name__ == "RNNForCausalLM" and model.config.cell_type == "lstm"
    assert model.config.vocab_size == len(tokenizer) and model.config.pad_token_id == tokenizer.pad_token_id
    assert model.generation_config.max_new_tokens == 200
    prompt = tokenizer("the cat", return_tensors="pt")
    generated = model.generate(**prompt, max_new_tokens=5, do_sample=False)
    assert generated.shape == (1, prompt["input_ids"].shape[1] + 5)


@pytest.mark.parametrize("sharding", ["ddp", "fsdp", "deepspeed"])
@pytest.mark.slow
def test_two_cpu_processes_match_one_process(sharding, tokenizer, tmp_path):
    """2 gloo processes with 2 rows each compute the same updates as 1 process with 4 rows."""
    if sharding == "deepspeed":
        pytest.importorskip("deepspeed")
    train_file = tmp_path / "corpus.txt"
    train_file.write_text(CORPUS, encoding="utf-8")
    tokenizer.save_pretrained(tmp_path / "tok")
    common = ["--train_file", str(train_file), "--tokenizer_name", str(tmp_path / "tok"),
              "--model_family", "rnn", "--preset", "tiny", "--config_overrides", "cell_type=gru,hidden_size=16",
              "--block_size", "16", "--max_steps", "8", "--learning_rate", "0.05", "--optim", "adamw_torch",
              "--max_grad_norm", "0.5", "--per_device_eval_batch_size", "3", "--no_plot", "--disable_tqdm"]
    done = launch_two_cpu_processes("train_lm.py", [*common, "--output_dir", str(tmp_path / "two"),
                                                    "--per_device_train_batch_size", "2"],
                                    fsdp=sharding == "fsdp", deepspeed=sharding == "deepspeed")
    assert "global_train_batch_size': 4" in done.stderr
    # FSDP2 wraps each recurrent stack and warns on any output of one that is a view of another tensor
    assert "(FSDPRecurrentStack) returned a view tensor" not in done.stderr
    one = main([*common, "--output_dir", str(tmp_path / "one"), "--per_device_train_batch_size", "4"])
    two, single = weights(tmp_path / "two"), weights(tmp_path / "one")
    assert one["steps"] == 8 and two.keys() == single.keys()
    for name in single:
        torch.testing.assert_close(two[name], single[name], atol=1e-5, rtol=1e-5)
    # the biases start at zero: training moved them far beyond the tolerance
    assert single["lm_head.bias"].abs().max() > 1e-2


# --------------------------------------------------------------------------- engine options


@pytest.fixture
def fresh_accelerator_state():
    """accelerate keeps one state per Python process and refuses to change its mixed precision: start this
    test from none and leave none behind."""
    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def test_bf16_autocast_on_cpu_trains_close_to_fp32_but_not_identically(tokenizer, corpus_ids, tmp_path,
                                                                       fresh_accelerator_state):
    train, held_out = corpus_ids
    fp32 = train_causal_lm(tiny_transformer_lm(len(tokenizer)), tokenizer, train, held_out,
                           engine_args(tmp_path / "fp32", max_steps=6, use_cpu=True))
    AcceleratorState._reset_state(reset_partial_state=True)
    bf16 = train_causal_lm(tiny_transformer_lm(len(tokenizer)), tokenizer, train, held_out,
                           engine_args(tmp_path / "bf16", max_steps=6, use_cpu=True, bf16=True))
    assert math.isfinite(bf16["eval_loss"]) and bf16["eval_loss"] != fp32["eval_loss"]  # autocast was on
    assert bf16["eval_loss"] == pytest.approx(fp32["eval_loss"], rel=0.05)
    assert {t.dtype for t in weights(tmp_path / "bf16").values()} == {torch.float32}  # fp32 master weights


def test_bf16_on_a_cpu_whose_bf16_products_are_slower_says_so_with_the_figures(
        tmp_path, fresh_accelerator_state, monkeypatch, caplog):
    """Where bf16 matrix products run slower than float32 ones (a CPU without fast bf16 kernels), --bf16 trains
    but warns with both measured speeds; where they run faster, it says nothing."""
    from hf_seqmodels.training.core import launch

    for speeds, warned in (({"float32": 300.0, "bfloat16": 160.0}, True),
                           ({"float32": 180.0, "bfloat16": 420.0}, False)):
        AcceleratorState._reset_state(reset_partial_state=True)
        monkeypatch.setattr(launch, "cpu_matmul_speeds", lambda speeds=speeds: speeds)
        caplog.clear()
        with caplog.at_level("WARNING"):
            accelerator = make_accelerator(engine_args(tmp_path, use_cpu=True, bf16=True))
        assert accelerator.mixed_precision == "bf16"
        messages = [r.getMessage() for r in caplog.records if "--bf16" in r.getMessage()]
        if warned:
            assert len(messages) == 1 and "160 GFLOP/s" in messages[0] and "300 GFLOP/s" in messages[0]
            assert "--bf16 False" in messages[0]
        else:
            assert messages == []


def test_the_cpu_matmul_speeds_are_measured():
    from hf_seqmodels.training.core.launch import cpu_matmul_speeds

    speeds = cpu_matmul_speeds(size=128, repeats=2)
    assert set(speeds) == {"float32", "bfloat16"} and all(0 < v < 1e6 for v in speeds.values())


def test_fp16_on_cpu_and_unknown_options_are_refused_by_name(tmp_path, fresh_accelerator_state):
    with pytest.raises(ValueError, match=r"`fp16`=True.*on a CPU"):
        make_accelerator(engine_args(tmp_path, use_cpu=True, fp16=True))
    with pytest.raises(ValueError, match=r"`fp16`=True.*--bf16"):
        engine_args(tmp_path, bf16=True, fp16=True)
    with pytest.raises(ValueError, match=r"`optim`='adam'.*adamw_torch"):
        engine_args(tmp_path, optim="adam")
    with pytest.raises(ValueError, match=r"`lr_scheduler_kwargs`.*options of the cosine schedule: min_lr_ratio"):
        engine_args(tmp_path, lr_scheduler_type="cosine", lr_scheduler_kwargs='{"decay_factor": 0.5}')
    with pytest.raises(ValueError, match=r"`report_to`.*'tensorbord'.*'tensorboard'"):
        engine_args(tmp_path, report_to="tensorbord")
    assert engine_args(tmp_path, report_to=" none ").trackers == []
    assert engine_args(tmp_path, report_to="tensorboard, wandb").trackers == ["tensorboard", "wandb"]


def test_tensorboard_receives_the_logged_history(tokenizer, corpus_ids, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train, held_out = corpus_ids
    args = engine_args(tmp_path, max_steps=10, logging_steps=2, use_cpu=True, report_to="tensorboard")
    train_causal_lm(tiny_lstm(len(tokenizer)), tokenizer, train, held_out, args)
    history = json.loads((tmp_path / "training_history.json").read_text())
    events = EventAccumulator(str(next((tmp_path / "runs").rglob("events.out.tfevents.*")).parent))
    events.Reload()
    logged = [(e.step, e.value) for e in events.Scalars("train_loss")]
    expected = [(r["step"], r["train_loss"]) for r in history if "train_loss" in r]
    assert [s for s, _ in logged] == [s for s, _ in expected] == [2, 4, 6, 8, 10]
    assert [v for _, v in logged] == pytest.approx([v for _, v in expected], rel=1e-6)
    assert [e.step for e in events.Scalars("eval_loss")] == [10]


@pytest.mark.parametrize("family", ["transformer_lm", "lstm"])
def test_gradient_checkpointing_trains_the_same_weights(family, tokenizer, corpus_ids, tmp_path):
    train, held_out = corpus_ids
    build = (lambda: tiny_lstm(len(tokenizer), dropout=0.2)) if family == "lstm" else \
        (lambda: tiny_transformer_lm(len(tokenizer)))
    for name, recompute in (("plain", False), ("recomputed", True)):
        train_causal_lm(build(), tokenizer, train, held_out,
                        engine_args(tmp_path / name, max_steps=4, use_cpu=True, gradient_checkpointing=recompute))
    plain, recomputed = weights(tmp_path / "plain"), weights(tmp_path / "recomputed")
    assert not all(torch.equal(plain[key], weights(build())[key]) for key in plain)  # it trained
    for key in plain:
        torch.testing.assert_close(recomputed[key], plain[key])


def test_gradient_checkpointing_is_refused_without_layers(tokenizer, corpus_ids, tmp_path):
    train, held_out = corpus_ids
    with pytest.raises(ValueError, match=r"`gradient_checkpointing`.*False for NNLMForCausalLM"):
        train_causal_lm(tiny_nnlm(len(tokenizer)), tokenizer, train, held_out,
                        engine_args(tmp_path / "nnlm", max_steps=1, use_cpu=True, gradient_checkpointing=True))


@pytest.mark.slow
def test_torch_compile_trains_like_eager(tokenizer, corpus_ids, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="hf_seqmodels")
    train, held_out = corpus_ids
    eager = train_causal_lm(tiny_transformer_lm(len(tokenizer)), tokenizer, train, held_out,
                            engine_args(tmp_path / "eager", max_steps=3, use_cpu=True))
    compiled = train_causal_lm(tiny_transformer_lm(len(tokenizer)), tokenizer, train, held_out,
                               engine_args(tmp_path / "compiled", max_steps=3, use_cpu=True, torch_compile=True))
    assert compiled["eval_loss"] == pytest.approx(eager["eval_loss"], rel=1e-4)
    assert "compiled" in caplog.text  # the engine says so (a silently ignored option would pass the lines above)
    assert "one graph" in caplog.text  # the Transformer compiles with fullgraph=True: a graph break would raise
    assert set(weights(tmp_path / "compiled")) == set(weights(tmp_path / "eager"))  # no "_orig_mod." prefixes
    AutoModelForCausalLM.from_pretrained(tmp_path / "compiled")


def test_a_compiled_lstm_step_trains_like_eager_around_the_fused_recurrence(tokenizer, corpus_ids, tmp_path,
                                                                             caplog):
    """The recurrent families compile around the nn.LSTM call (graph breaks allowed), carrying the TBPTT state
    from one compiled step to the next; aot_eager captures the same graphs as inductor without its codegen."""
    caplog.set_level(logging.INFO, logger="hf_seqmodels")
    train, held_out = corpus_ids
    eager = train_causal_lm(tiny_lstm(len(tokenizer)), tokenizer, train, held_out,
                            engine_args(tmp_path / "eager", max_steps=4, use_cpu=True))
    compiled = train_causal_lm(tiny_lstm(len(tokenizer)), tokenizer, train, held_out,
                               engine_args(tmp_path / "compiled", max_steps=4, use_cpu=True, torch_compile=True,
                                           torch_compile_backend="aot_eager"))
    assert compiled["train_loss"] == pytest.approx(eager["train_loss"], rel=1e-5)
    assert compiled["eval_loss"] == pytest.approx(eager["eval_loss"], rel=1e-5)
    assert "aot_eager, graph breaks allowed" in caplog.text
