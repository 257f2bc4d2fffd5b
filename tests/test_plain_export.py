"""Every head of every family exports with torch's own functions, no package helper: ``torch.export.export`` and
``torch.onnx.export(..., dynamo=True)`` of the model as it is, on a padded batch with a dynamic batch size and
sequence length (the recurrent LM's other cell types through ``torch.export``). The recurrent stacks and the CRF
choose their traceable path themselves while torch exports them; the results match eager mode at another batch
size and length, in the exported program and in onnxruntime."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch.export import Dim
from transformers import AutoModelForCausalLM

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from model_inputs import model_inputs  # noqa: E402

import hf_seqmodels  # noqa: E402, F401
from hf_seqmodels.registry import FAMILY_DESCRIPTIONS  # noqa: E402

#: heads whose ONNX export takes more than a few seconds on a CPU (each still runs in CI)
SLOW_ONNX = {"RNNSeq2SeqForConditionalGeneration", "RNNSeq2SeqModel", "TransformerForConditionalGeneration",
             "TransformerModel", "BiLSTMCRFForTokenClassification"}


#: other cell types of the recurrent LM than the tiny preset's LSTM
CELL_VARIANTS = ("gru", "rnn_tanh", "peephole_lstm")


def _heads(slow: set[str] = frozenset(), cell_variants: bool = True):
    """Every head of every family, and (with ``cell_variants``) the recurrent LM with its other cell types."""
    cases = [(family, head, {}) for family in FAMILY_DESCRIPTIONS for head in family.heads.values()]
    if cell_variants:
        rnn = next(family for family in FAMILY_DESCRIPTIONS if family.name == "rnn")
        cases += [(rnn, rnn.heads[AutoModelForCausalLM], {"cell_type": cell_type}) for cell_type in CELL_VARIANTS]
    return [pytest.param(family, head, overrides,
                         id="-".join([family.name, head.__name__, *map(str, overrides.values())]),
                         marks=pytest.mark.slow if head.__name__ in slow else ())
            for family, head, overrides in cases]


def _model(family, head, overrides):
    torch.manual_seed(0)
    config = family.tiny_config(**overrides)
    if hasattr(config, "use_cache"):
        config.use_cache = False  # the outputs are tensors only: no cache object
    return head(config).eval()


def _decoder_loops_in_python(config) -> bool:
    """An RNN encoder-decoder whose attention decoder steps through target positions in Python (Bahdanau
    wiring, Luong with input feeding) has a fixed target length once traced."""
    wiring = getattr(config, "attention_wiring", None)
    return wiring == "bahdanau" or (wiring is not None and bool(getattr(config, "input_feeding", False)))


def _inputs(family, head, config, batch: int, length: int, seed: int) -> dict[str, torch.Tensor]:
    """Forward inputs with padding: the last two tokens of row 0 (right padding) and, when there are more rows,
    the first token of the last row (left padding)."""
    inputs = model_inputs(family, config, head, batch_size=batch, seq_length=length, seed=seed, labels=False)
    mask = inputs["attention_mask"].clone()
    mask[0, ..., -2:] = 0
    if batch > 2:
        mask[-1, ..., 0] = 0
    inputs["attention_mask"] = mask
    return inputs


def _dynamic_shapes(config, inputs: dict[str, torch.Tensor]) -> dict[str, dict[int, Dim]]:
    batch, length, target = Dim("batch", min=2, max=64), Dim("length", min=3, max=48), Dim("target", min=2, max=48)
    shapes = {}
    for name, tensor in inputs.items():
        if name == "decoder_input_ids":
            shapes[name] = {0: batch} if _decoder_loops_in_python(config) else {0: batch, 1: target}
        else:  # (B, T), (B, choices, T) or (B, T, characters)
            shapes[name] = {0: batch, (1 if name == "char_input_ids" else tensor.dim() - 1): length}
    return shapes


def _case(family, head, overrides):
    """The model, its example inputs and dynamic shapes, and inputs of another batch size and length."""
    model = _model(family, head, overrides)
    example = _inputs(family, head, model.config, batch=2, length=7, seed=0)
    other = _inputs(family, head, model.config, batch=3, length=11, seed=1)
    if _decoder_loops_in_python(model.config):
        other["decoder_input_ids"] = other["decoder_input_ids"][:, : example["decoder_input_ids"].shape[1]]
    return model, example, _dynamic_shapes(model.config, example), other


def _tensors(output) -> list[torch.Tensor]:
    return [value for value in output.values() if isinstance(value, torch.Tensor)]


def _assert_close(got, want: torch.Tensor, attention_mask: torch.Tensor) -> None:
    """``got`` (a tensor or an array) equals ``want`` within 1e-4 where it is defined: at the real tokens for
    per-token outputs (a fully masked query of a left-padded causal Transformer has no defined output), all of
    it otherwise."""
    got = torch.as_tensor(np.asarray(got)) if not isinstance(got, torch.Tensor) else got
    assert tuple(got.shape) == tuple(want.shape)
    if attention_mask.dim() == 2 and want.shape[:2] == attention_mask.shape:
        got, want = got[attention_mask.bool()], want[attention_mask.bool()]
    torch.testing.assert_close(got, want, rtol=0, atol=1e-4)


@pytest.mark.parametrize("family, head, overrides", _heads())
def test_torch_export_of_the_model_as_it_is(family, head, overrides):
    model, example, shapes, other = _case(family, head, overrides)
    with torch.no_grad():
        program = torch.export.export(model, (), kwargs=example, dynamic_shapes=shapes)
        got, want = _tensors(program.module()(**other)), _tensors(model(**other))
    assert len(got) == len(want) > 0
    for g, w in zip(got, want, strict=True):
        _assert_close(g, w, other["attention_mask"])


@pytest.mark.parametrize("family, head, overrides", _heads(SLOW_ONNX, cell_variants=False))
def test_onnx_export_of_the_model_as_it_is_in_onnxruntime(family, head, overrides, tmp_path):
    import onnxruntime

    model, example, shapes, other = _case(family, head, overrides)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnx_program = torch.onnx.export(model, (), kwargs=example, dynamic_shapes=shapes, dynamo=True,
                                         verbose=False)
        want = _tensors(model(**other))
    onnx_program.save(str(tmp_path / "model.onnx"))
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    feeds = {i.name: other[i.name].numpy() for i in session.get_inputs()}
    got = session.run(None, feeds)
    assert len(got) == len(want) > 0
    for g, w in zip(got, want, strict=True):
        _assert_close(g, w, other["attention_mask"])


def test_a_model_compiled_in_eval_mode_runs_and_then_exports():
    """``torch.compile`` of a recurrent model in eval mode gives the eager outputs (the fused kernels run; the
    scan is for export only: inductor cannot compile its data-dependent reads), and a later ``torch.export`` in
    the same process still keeps the length dynamic (a compiled run at another length must not pin it)."""
    from hf_seqmodels import RNNConfig

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(RNNConfig.from_preset("tiny", cell_type="lstm", use_cache=False)).eval()
    ids = torch.randint(4, 60, (2, 20))
    mask = torch.ones_like(ids)
    mask[0, 15:] = 0
    with torch.no_grad():
        compiled = torch.compile(model)(input_ids=ids, attention_mask=mask).logits
        torch.testing.assert_close(compiled, model(input_ids=ids, attention_mask=mask).logits)
        batch, length = Dim("batch"), Dim("length", min=2, max=48)
        shapes = {"input_ids": {0: batch, 1: length}, "attention_mask": {0: batch, 1: length}}
        program = torch.export.export(model, (), kwargs={"input_ids": ids[:, :11].clone(), "attention_mask": mask[:, :11].clone()},
                                      dynamic_shapes=shapes)
        torch.testing.assert_close(program.module()(input_ids=ids, attention_mask=mask).logits,
                                   model(input_ids=ids, attention_mask=mask).logits)


def test_an_earlier_scan_at_a_static_length_does_not_pin_a_later_export():
    """A character LSTM scans words of a fixed number of characters; exporting it first must leave nothing behind
    that fixes the sequence length of the next export in the same process (torch's scan function caches a
    compiled graph per process, guarded on that fixed length)."""
    from hf_seqmodels import RNNConfig

    rnn = next(family for family in FAMILY_DESCRIPTIONS if family.name == "rnn")
    torch.manual_seed(0)
    char_model = AutoModelForCausalLM.from_config(RNNConfig.from_preset("tiny", char_encoder="lstm", use_cache=False))
    ids = torch.randint(4, 60, (2, 7))
    with torch.no_grad():
        torch.export.export(char_model.eval(), (), kwargs={"input_ids": ids},
                            dynamic_shapes={"input_ids": {0: Dim("batch", min=2, max=64), 1: Dim.AUTO}})
    model, example, shapes, other = _case(rnn, rnn.heads[AutoModelForCausalLM], {})
    with torch.no_grad():
        program = torch.export.export(model, (), kwargs=example, dynamic_shapes=shapes)
        torch.testing.assert_close(program.module()(**other).logits, model(**other).logits)
