"""``--bf16_weights``: bfloat16 weights in the model, float32 master weights in the optimizer
(``hf_seqmodels.training.core.master_weights``)."""

from __future__ import annotations

import math

import pytest
import safetensors.torch
import torch
from accelerate.state import AcceleratorState
from test_crash_safety import SCRIPTS, script_data
from test_training_lm import CORPUS, engine_args, tiny_transformer_lm, weights
from tokenizer_test_utils import char_tokenizer

from hf_seqmodels.training import train_causal_lm
from hf_seqmodels.training.core.master_weights import MasterWeights
from hf_seqmodels.training.core.text import tokenize_texts

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(autouse=True)
def fresh_accelerator_state():
    """accelerate keeps one mixed precision per process: these runs use bf16, others in the process may not."""
    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def ones_layer() -> torch.nn.Linear:
    layer = torch.nn.Linear(4, 3)
    torch.nn.init.ones_(layer.weight)
    torch.nn.init.zeros_(layer.bias)
    return layer


def train(layer: torch.nn.Linear, optimizer: torch.optim.Optimizer, steps: int = 40) -> None:
    """SGD steps whose every gradient is exactly representable in bfloat16 (ones times the batch size)."""
    for _ in range(steps):
        x = torch.ones(2, 4, dtype=layer.weight.dtype)
        layer(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def test_master_weights_keep_the_updates_that_bfloat16_weights_lose():
    """Each update moves a weight of 1.0 by 2e-4, below half of bfloat16's spacing there (2⁻⁸): bfloat16 weights
    never move, the master weights follow float32 training exactly and the model holds them rounded."""
    lr = 1e-4
    reference = ones_layer()
    train(reference, torch.optim.SGD(reference.parameters(), lr=lr))
    plain = ones_layer().to(torch.bfloat16)
    train(plain, torch.optim.SGD(plain.parameters(), lr=lr))
    assert torch.equal(plain.weight, torch.ones(3, 4, dtype=torch.bfloat16))  # every update lost

    layer = ones_layer()
    master = MasterWeights(layer)
    assert layer.weight.dtype == torch.bfloat16 and master.masters[0].dtype == torch.float32
    optimizer = master.attach(torch.optim.SGD(master.optimizer_groups([{"params": list(layer.parameters())}]), lr=lr))
    train(layer, optimizer)
    assert torch.equal(master.masters[0], reference.weight) and torch.equal(master.masters[1], reference.bias)
    assert torch.equal(layer.weight, reference.weight.to(torch.bfloat16))
    assert layer.weight.grad is None  # spent by the step
    assert reference.weight[0, 0].item() == pytest.approx(1 - 40 * 2 * lr, rel=1e-5)  # it moved
    with master.full_precision():  # what a checkpoint saves and loads: the master weights themselves
        assert layer.weight.dtype == torch.float32 and torch.equal(layer.weight, reference.weight)
        layer.load_state_dict({"weight": torch.full((3, 4), 0.5), "bias": torch.zeros(3)})
    assert torch.equal(master.masters[0], torch.full((3, 4), 0.5)) and layer.weight.dtype == torch.bfloat16
    master.release()
    assert layer.weight.dtype == torch.float32 and torch.equal(layer.weight, master.masters[0])


@pytest.fixture(scope="module")
def data():
    tokenizer = char_tokenizer(CORPUS)
    ids = tokenize_texts([CORPUS], tokenizer)
    return tokenizer, ids[:1600], ids[1600:]


def dtypes_seen_in_forward(model) -> set[torch.dtype]:
    seen: set[torch.dtype] = set()
    model.register_forward_pre_hook(lambda module, _: seen.add(module.lm_head.weight.dtype))
    return seen


def test_a_run_with_bf16_weights_trains_in_bfloat16_checkpoints_and_saves_float32(data, tmp_path):
    tokenizer, train_ids, eval_ids = data
    common = dict(num_train_epochs=1, bf16=True, learning_rate=3e-3)
    model = tiny_transformer_lm(len(tokenizer))
    seen = dtypes_seen_in_forward(model)
    results = train_causal_lm(model, tokenizer, train_ids, eval_ids,
                              engine_args(tmp_path / "w", bf16_weights=True, **common))
    assert seen == {torch.bfloat16}
    assert model.lm_head.weight.dtype == torch.float32  # the master weights, back in the model
    for folder in (tmp_path / "w", *sorted((tmp_path / "w").glob("checkpoint-*"))):
        assert {t.dtype for t in safetensors.torch.load_file(str(folder / "model.safetensors")).values()} \
            == {torch.float32}, folder
    autocast_only = train_causal_lm(tiny_transformer_lm(len(tokenizer)), tokenizer, train_ids, eval_ids,
                                    engine_args(tmp_path / "a", **common))
    assert results["eval_loss"] < 0.7 * math.log(len(tokenizer))  # it learns: well below a uniform guess
    assert results["eval_loss"] == pytest.approx(autocast_only["eval_loss"], rel=0.05)


def test_a_run_with_bf16_weights_resumes_bit_identically(data, tmp_path):
    tokenizer, train_ids, eval_ids = data
    common = dict(max_steps=12, bf16=True, bf16_weights=True, learning_rate=3e-3, eval_strategy="no")
    full_model = tiny_transformer_lm(len(tokenizer))
    full = train_causal_lm(full_model, tokenizer, train_ids, eval_ids, engine_args(tmp_path / "full", **common))
    train_causal_lm(tiny_transformer_lm(len(tokenizer)), tokenizer, train_ids, eval_ids,
                    engine_args(tmp_path / "cut", **{**common, "max_steps": 7}, save_strategy="steps", save_steps=7))
    resumed_model = tiny_transformer_lm(len(tokenizer), seed=123)
    resumed = train_causal_lm(resumed_model, tokenizer, train_ids, eval_ids,
                              engine_args(tmp_path / "cut", resume_from_checkpoint="latest", **common))
    assert resumed["steps"] == full["steps"]
    for name, value in weights(full_model).items():
        assert torch.equal(value, weights(resumed_model)[name]), name


def test_bf16_weights_need_bf16(data, tmp_path):
    tokenizer, train_ids, eval_ids = data
    with pytest.raises(ValueError, match=r"bf16_weights.*True.*--bf16"):
        train_causal_lm(tiny_transformer_lm(len(tokenizer)), tokenizer, train_ids, eval_ids,
                        engine_args(tmp_path, bf16_weights=True, max_steps=1))


@pytest.mark.parametrize("script", ["train_lm", "train_seq2seq", "pretrain_bert"])
def test_the_training_scripts_train_with_bf16_weights(script, tmp_path):
    """Training, evaluation (generation for translation) and the final save run on bfloat16 weights, the recurrent
    models' (an LSTM language model and encoder-decoder) included."""
    folder = script_data(tmp_path)
    spec = SCRIPTS[script]
    results = spec.main([*spec.flags(folder), "--output_dir", str(tmp_path / "out"), "--max_steps", "3",
                         "--bf16", "--bf16_weights"])
    assert math.isfinite(results["eval_loss"])
    saved = safetensors.torch.load_file(str(tmp_path / "out" / "model.safetensors"))
    assert {t.dtype for t in saved.values()} == {torch.float32}
