"""Export of every family and head with torch.export and to ONNX, parity with eager mode at another batch
size and length, greedy generation from the exported step graph, and the ``hf-seqmodels export`` command."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from hf_seqmodels.cli import main  # noqa: E402
from hf_seqmodels.export import OnnxGenerator, export_generation, export_model  # noqa: E402
from hf_seqmodels.models import RNNConfig, RNNForCausalLM  # noqa: E402
from hf_seqmodels.registry import FAMILY_DESCRIPTIONS  # noqa: E402

HEADS = [pytest.param(family, head, id=f"{family.name}-{head.__name__}")
         for family in FAMILY_DESCRIPTIONS for head in family.heads.values()]


def _model(family, head):
    torch.manual_seed(0)
    return head(family.tiny_config()).eval()


@pytest.mark.parametrize("family, head", HEADS)
def test_torch_export_parity(family, head, tmp_path):
    result = export_model(_model(family, head), tmp_path, format="torch")
    assert result.path.is_file() and (tmp_path / "README.md").is_file()
    assert result.parity <= 1e-4
    assert result.parity_shapes["input_ids"][0] == 3  # another batch size than the example's 2
    assert result.inputs["input_ids"][0] == "batch" and result.inputs["input_ids"][-1] == "sequence"


@pytest.mark.parametrize("family, head", HEADS)
def test_onnx_export_parity(family, head, tmp_path):
    result = export_model(_model(family, head), tmp_path, format="onnx", generation=False)
    assert result.parity <= 1e-4
    assert result.parity_shapes["input_ids"][-1] == 11  # another length than the example's 7
    readme = (tmp_path / "README.md").read_text()
    assert f"{result.parity:.2e}" in readme and "onnxruntime" in readme


def test_recurrent_scan_matches_packed_padding(tmp_path):
    """Rows padded on the right and on the left give eager mode's (packed) outputs in onnxruntime."""
    model = RNNForCausalLM(RNNConfig.from_preset("tiny", cell_type="gru")).eval()
    result = export_model(model, tmp_path, generation=False)
    import onnxruntime

    ids = torch.randint(4, 99, (2, 6))
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1]])
    session = onnxruntime.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask).logits
    real = mask.bool().numpy()
    np.testing.assert_allclose(got[real], want.numpy()[real], atol=1e-5)


@pytest.mark.parametrize("cell_type", ["lstm", "gru", "rnn_tanh"])
def test_onnx_greedy_generation_equals_eager(cell_type, tmp_path):
    """The recurrent LM's step graph reads the whole prompt in one call (a Scan) and then one token per call."""
    torch.manual_seed(0)
    model = RNNForCausalLM(RNNConfig.from_preset("tiny", cell_type=cell_type)).eval()
    paths, equal = export_generation(model, tmp_path)
    assert equal is True and set(paths) == {"decoder_with_past"}
    prompt = torch.tensor([[7, 30, 12, 55]])
    want = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=12, do_sample=False)
    generator = OnnxGenerator(tmp_path)
    assert generator.greedy(prompt.numpy(), max_new_tokens=12).tolist() == want.tolist()
    beams = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=6, num_beams=3)
    assert generator.beam_search(prompt.numpy(), num_beams=3, max_new_tokens=6).tolist() == beams.tolist()
    with pytest.raises(ValueError, match="takes no mask"):  # no mask input: left padding would be read as tokens
        generator.greedy(np.array([[0, 7, 30], [5, 6, 7]]), np.array([[0, 1, 1], [1, 1, 1]]))


def test_onnx_generator_refuses_bad_input(tmp_path):
    with pytest.raises(ValueError, match="generation.json"):
        OnnxGenerator(tmp_path)


def test_cli_exports_a_saved_folder(tmp_path, capsys):
    model = RNNForCausalLM(RNNConfig.from_preset("tiny"))
    model.save_pretrained(tmp_path / "saved")
    assert main(["export", "--model", str(tmp_path / "saved"), "--format", "onnx", "--output",
                 str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "model.onnx").is_file() and (tmp_path / "out" / "decoder_with_past.onnx").is_file()
    assert "parity" in (tmp_path / "out" / "README.md").read_text().lower()
    spec = json.loads((tmp_path / "out" / "generation.json").read_text())
    assert spec["kind"] == "decoder-only" and spec["graphs"] == {"step": "decoder_with_past.onnx"}
    assert "Exported RNNForCausalLM" in capsys.readouterr().out


def test_cli_reports_a_folder_without_model(tmp_path, capsys):
    assert main(["export", "--model", str(tmp_path), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "config.json" in err and len(err.strip().splitlines()) == 1


def test_export_refuses_an_unknown_format(tmp_path):
    with pytest.raises(ValueError, match="format"):
        export_model(RNNForCausalLM(RNNConfig.from_preset("tiny")), tmp_path, format="tflite")
