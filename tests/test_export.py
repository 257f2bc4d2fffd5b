"""Export of every family and head with torch.export, and of each family's task head to ONNX (see ONNX_HEADS),
parity with eager mode at another batch size and length, and the ``hf-seqmodels export`` command on saved LMs
(forward pass and decoding graph; the generation of every generative head is checked in test_export_generation.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from hf_seqmodels.cli import main  # noqa: E402
from hf_seqmodels.export import OnnxGenerator, export_model  # noqa: E402
from hf_seqmodels.models import NNLMConfig, NNLMForCausalLM, RNNConfig, RNNForCausalLM  # noqa: E402
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


#: What export_model adds to torch's ONNX export (its program, input and output names, the parity check at another
#: batch size and length, the README) is the same for every head: it is checked here on each family's last head,
#: its task head (the RNN encoder-decoder's, the slowest ONNX export, aside). Every head's own ONNX graph is run in
#: onnxruntime at another batch size and length by test_plain_export.py, the decoding graphs of the generative
#: heads by test_export_generation.py, and every head goes through export_model to torch.export just above.
ONNX_HEADS = [param for param in HEADS if param.values[0].name != "rnn_seq2seq"
              and param.values[1] is list(param.values[0].heads.values())[-1]]


@pytest.mark.parametrize("family, head", ONNX_HEADS)
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


def test_onnx_generator_refuses_bad_input(tmp_path):
    with pytest.raises(ValueError, match="generation.json"):
        OnnxGenerator(tmp_path)


SAVED_LMS = {  # the LMs whose generation graphs came last: the NNLM's window of ids, the looped cell, characters
    "nnlm": lambda: NNLMForCausalLM(NNLMConfig.from_preset("tiny")),
    "peephole_lstm": lambda: RNNForCausalLM(RNNConfig.from_preset("tiny", cell_type="peephole_lstm")),
    "char_encoder": lambda: RNNForCausalLM(RNNConfig.from_preset("tiny", char_encoder="lstm")),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow if n == "char_encoder" else ())
                                  for n in SAVED_LMS])
def test_cli_exports_a_saved_folder(name, tmp_path, capsys):
    """``hf-seqmodels export`` writes the forward pass and the decoding graph of a saved LM, and checks that
    greedy decoding through it gives eager ``generate()``'s tokens."""
    torch.manual_seed(0)
    model = SAVED_LMS[name]()
    model.save_pretrained(tmp_path / "saved")
    assert main(["export", "--model", str(tmp_path / "saved"), "--format", "onnx", "--output",
                 str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "model.onnx").is_file() and (tmp_path / "out" / "decoder_with_past.onnx").is_file()
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "parity" in readme.lower() and "eager `generate()`'s tokens: **yes**" in readme
    spec = json.loads((tmp_path / "out" / "generation.json").read_text())
    assert spec["kind"] == "decoder-only" and spec["graphs"] == {"step": "decoder_with_past.onnx"}
    printed = capsys.readouterr().out
    assert f"Exported {type(model).__name__}" in printed
    assert "decoder_with_past.onnx; greedy decoding in onnxruntime gave the same tokens as eager" in printed
    prompt = torch.tensor([[7, 30, 12, 55], [0, 0, 9, 41]])  # the second row left-padded
    mask = (torch.arange(4) >= torch.tensor([[0], [2]])).long()
    want = model.generate(prompt, attention_mask=mask, max_new_tokens=8, do_sample=False)
    got = OnnxGenerator(tmp_path / "out").greedy(prompt.numpy(), mask.numpy(), max_new_tokens=8)
    assert got.tolist() == want.tolist()


def test_cli_reports_a_folder_without_model(tmp_path, capsys):
    assert main(["export", "--model", str(tmp_path), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "config.json" in err and len(err.strip().splitlines()) == 1


def test_export_refuses_an_unknown_format(tmp_path):
    with pytest.raises(ValueError, match="format"):
        export_model(RNNForCausalLM(RNNConfig.from_preset("tiny")), tmp_path, format="tflite")
