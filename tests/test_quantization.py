"""Dynamic int8 deployment: ``hf-seqmodels export --format onnx --quantize int8`` replaces the exported ONNX
files by smaller int8 versions whose outputs stay within a loose tolerance of eager mode in onnxruntime, and
``quantize_eager`` gives an int8 copy of an eager model."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from hf_seqmodels.cli import main  # noqa: E402
from hf_seqmodels.export import export_model  # noqa: E402
from hf_seqmodels.export.programs import example_inputs, run_onnx  # noqa: E402
from hf_seqmodels.export.quantization import quantize_eager, quantize_onnx_export  # noqa: E402
from hf_seqmodels.models import BertForSequenceClassification, TransformerForCausalLM  # noqa: E402
from hf_seqmodels.registry import FAMILY_DESCRIPTIONS  # noqa: E402

FAMILIES = {f.name: f for f in FAMILY_DESCRIPTIONS}


def _relative_error(got, want: torch.Tensor) -> float:
    return float((torch.as_tensor(got) - want).abs().max() / want.abs().max())


def _bert():
    torch.manual_seed(0)
    return BertForSequenceClassification(FAMILIES["bert"].tiny_config(hidden_size=128, intermediate_size=512)).eval()


def test_cli_writes_a_smaller_int8_onnx_close_to_eager(tmp_path, capsys):
    model = _bert()
    model.save_pretrained(tmp_path / "saved")
    assert main(["export", "--model", str(tmp_path / "saved"), "--format", "onnx", "--quantize", "int8",
                 "--output", str(tmp_path / "int8")]) == 0
    assert "Quantized to int8" in capsys.readouterr().out
    int8, fp32 = tmp_path / "int8" / "model.onnx", export_model(model, tmp_path / "fp32", validate=False).path
    assert int8.stat().st_size < 0.6 * fp32.stat().st_size
    inputs = example_inputs(model, batch_size=3, seq_length=13, seed=5)
    with torch.no_grad():
        want = model(**inputs).logits
    assert 1e-5 < _relative_error(run_onnx(int8, inputs)[0], want) < 0.1  # int8 in use, close to eager
    assert "## int8" in (tmp_path / "int8" / "README.md").read_text()


def test_int8_transformer_lm_stays_close_to_eager(tmp_path):
    """Attention's activation products stay float32 and the weights unsigned, so ``MatMulInteger`` does not
    saturate on x86 CPUs without VNNI (signed weights put this model's logits 30 % off on such a CPU)."""
    torch.manual_seed(0)
    model = TransformerForCausalLM(FAMILIES["transformer_lm"].tiny_config(vocab_size=10)).eval()
    result = export_model(model, tmp_path, generation=False)
    quantized = quantize_onnx_export(model, result, tolerance=1.0)
    assert quantized.relative < 0.05
    assert quantized.sizes["model.onnx"][1] < quantized.sizes["model.onnx"][0]


def test_quantize_applies_to_onnx_only(tmp_path, capsys):
    _bert().save_pretrained(tmp_path / "saved")
    capsys.readouterr()
    assert main(["export", "--model", str(tmp_path / "saved"), "--format", "torch", "--quantize", "int8",
                 "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--quantize int8" in err and "--format torch" in err


def test_quantize_eager_keeps_the_model_and_stays_close():
    model = _bert()
    quantized = quantize_eager(model)
    inputs = example_inputs(model, batch_size=2, seq_length=9, seed=3)
    with torch.no_grad():
        want, got = model(**inputs).logits, quantized(**inputs).logits
    assert 0 < _relative_error(got, want) < 0.1
    assert all(type(m) is not torch.nn.Linear for m in quantized.modules())
    assert any(type(m) is torch.nn.Linear for m in model.modules())
