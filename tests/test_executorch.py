"""``hf-seqmodels export --format executorch``: ``.pte`` programs (XNNPACK delegate) of the LSTM and GRU LMs' and
the Transformer LM's decoding graphs (state and key/value cache as plain inputs and outputs) and of the TextCNN's
forward, run here with ``executorch.runtime`` against the eager model: logits within tolerance, greedy tokens
equal. Without an importable ``executorch`` the command fails with one line naming torch and the requirement.
ExecuTorch's lowering takes tens of seconds per graph, hence the ``slow`` marks."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import torch

from hf_seqmodels.cli import main
from hf_seqmodels.export.executorch_export import (
    EXECUTORCH_REQUIREMENT,
    ExecuTorchUnavailable,
    require_executorch,
)
from hf_seqmodels.models import RNNForCausalLM, TextCNNForSequenceClassification, TransformerForCausalLM
from hf_seqmodels.registry import FAMILY_DESCRIPTIONS

FAMILIES = {f.name: f for f in FAMILY_DESCRIPTIONS}
VOCAB = 12
MODELS = {"lstm_lm": lambda: RNNForCausalLM(FAMILIES["rnn"].tiny_config(vocab_size=VOCAB, cell_type="lstm")),
          "gru_lm": lambda: RNNForCausalLM(FAMILIES["rnn"].tiny_config(vocab_size=VOCAB, cell_type="gru")),
          "transformer_lm": lambda: TransformerForCausalLM(FAMILIES["transformer_lm"].tiny_config(vocab_size=VOCAB)),
          "textcnn": lambda: TextCNNForSequenceClassification(FAMILIES["textcnn"].tiny_config())}


def _executorch_importable() -> bool:
    if importlib.util.find_spec("executorch") is None:
        return False
    try:
        require_executorch()
    except ExecuTorchUnavailable:
        return False
    return True


needs_executorch = pytest.mark.skipif(not _executorch_importable(),
                                      reason=f"executorch is not importable here ({EXECUTORCH_REQUIREMENT} needed)")


def _export(name: str, tmp_path, capsys) -> torch.nn.Module:
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    model.save_pretrained(tmp_path / "saved")
    code = main(["export", "--model", str(tmp_path / "saved"), "--format", "executorch", "--output",
                 str(tmp_path / "out")])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert f"Exported {type(model).__name__}" in printed.out
    return model


def _method(path):
    from executorch.runtime import Runtime

    return Runtime.get().load_program(path).load_method("forward")


@needs_executorch
@pytest.mark.slow
@pytest.mark.parametrize("name", ["lstm_lm", "gru_lm", "transformer_lm"])
def test_decoding_graphs_give_eager_logits_and_tokens(name, tmp_path, capsys):
    """The graph that reads the prompt returns the eager logits of every prompt position and the state; the
    step graph continues from that state with the eager logits of the next token; greedy decoding over the
    ``.pte`` files gives eager ``generate()``'s tokens."""
    from hf_seqmodels.export.executorch_export import ExecuTorchGenerator

    model = _export(name, tmp_path, capsys)
    out = tmp_path / "out"
    spec = json.loads((out / "generation.json").read_text())
    assert spec["runtime"] == "executorch" and spec["batch_size"] == 1
    prompt = torch.tensor([[5, 9, 1, 6, 11]])
    with torch.no_grad():
        eager = model(prompt, use_cache=True)
        following = model(torch.tensor([[7]]), past_key_values=eager.past_key_values).logits
    first_role = "prefill" if "prefill" in spec["graphs"] else "step"
    state = [torch.full((1, *s["shape"]), s["fill"], dtype=getattr(torch, s["dtype"]))
             for s in spec.get("initial_state", {}).values()]
    first = _method(out / spec["graphs"][first_role]).execute([prompt, torch.ones_like(prompt), *state])
    assert spec["outputs"][first_role][0] == "logits"
    torch.testing.assert_close(first[0], eager.logits, atol=1e-4, rtol=1e-4)
    step_inputs = [torch.tensor([[7]]), torch.ones(1, 6, dtype=torch.long), *first[1:]]
    second = _method(out / spec["graphs"]["step"]).execute(step_inputs)
    torch.testing.assert_close(second[0], following, atol=1e-4, rtol=1e-4)
    want = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=10, do_sample=False)
    got = ExecuTorchGenerator(out).greedy(prompt.numpy(), max_new_tokens=10)
    assert got.tolist() == want.tolist()
    with pytest.raises(ValueError, match="batch_size=1"):
        ExecuTorchGenerator(out).greedy(prompt.repeat(2, 1).numpy(), max_new_tokens=2)


@needs_executorch
@pytest.mark.slow
def test_textcnn_program_gives_eager_logits(tmp_path, capsys):
    """A head that does not generate gets its forward as ``model.pte``, with a dynamic sequence length."""
    model = _export("textcnn", tmp_path, capsys)
    method = _method(tmp_path / "out" / "model.pte")
    for length in (9, 20):
        ids = torch.randint(4, model.config.vocab_size, (1, length), generator=torch.Generator().manual_seed(length))
        mask = torch.ones_like(ids)
        with torch.no_grad():
            want = model(input_ids=ids, attention_mask=mask).logits
        torch.testing.assert_close(method.execute([ids, mask])[0], want, atol=1e-4, rtol=1e-4)
    assert "ExecuTorch (XNNPACK)" in (tmp_path / "out" / "README.md").read_text()


def test_without_executorch_the_command_fails_in_one_line(tmp_path, capsys, monkeypatch):
    """With ``executorch`` not importable, one line names the installed torch and the requirement."""
    for module in [m for m in sys.modules if m == "executorch" or m.startswith("executorch.")] + ["executorch"]:
        monkeypatch.setitem(sys.modules, module, None)
    RNNForCausalLM(FAMILIES["rnn"].tiny_config(vocab_size=VOCAB)).save_pretrained(tmp_path / "saved")
    capsys.readouterr()
    code = main(["export", "--model", str(tmp_path / "saved"), "--format", "executorch", "--output",
                 str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert f"torch {torch.__version__}" in err and EXECUTORCH_REQUIREMENT in err
    assert not (tmp_path / "out").exists()


def test_the_executorch_extra_installs_what_the_command_requires():
    """``pip install hf_seqmodels[executorch]`` (what CI installs to run this file) asks for the same releases as the
    command's requirement."""
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["executorch"] == [EXECUTORCH_REQUIREMENT]
