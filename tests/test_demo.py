"""The main job (`hf-seqmodels demo`) end to end on a tiny corpus, and its Hub-ready folder."""

from __future__ import annotations

import json

import pytest
import torch
from model_test_utils import run_without_package
from transformers import AutoModelForCausalLM

from hf_seqmodels.cli import main
from hf_seqmodels.demo import DemoOptions, corpus_text

EXPECTED_FILES = {
    "README.md", "config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
    "tokenizer_config.json", "loss_curve.png", "modeling_rnn.py", "configuration_rnn.py", "recurrent_stack.py",
}


def test_embedded_corpus_is_shipped_and_small():
    text, source = corpus_text(None)
    assert 100_000 < len(text.encode("utf-8")) < 2_000_000
    assert text.startswith("First Citizen:") and "public domain" in source


def test_bad_demo_options_name_the_field():
    with pytest.raises(ValueError, match="`size`='huge'"):
        DemoOptions(size="huge")


@pytest.mark.slow
def test_demo_runs_end_to_end_and_writes_a_hub_ready_folder(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("ROMEO:\nWhat light through yonder window breaks?\n\n" * 60, encoding="utf-8")
    out = tmp_path / "demo"
    main(["demo", "--corpus_file", str(corpus), "--size", "tiny", "--epochs", "2", "--batch_size", "4",
          "--block_size", "32", "--max_new_tokens", "20", "--output_dir", str(out), "--learning_rate", "1e-2"])
    printed = capsys.readouterr().out
    # the summary is the JSON object printed first (a library may log a line before it, e.g. DeepSpeed's
    # "Setting accelerator to CPU" the first time it is imported in a process)
    summary = json.loads(printed[printed.index("{\n"): printed.index("\nValidation perplexity")])
    assert EXPECTED_FILES <= set(summary["files"])
    assert summary["eval_perplexity"] < 10  # the repetitive text is easy; an untrained model is near 30
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "eval_perplexity" in card and "beam search" in card and "trust_remote_code=True" in card
    ids = torch.tensor([[2, 5, 6, 7]])
    report = run_without_package(out, "AutoModelForCausalLM", ids, tmp_path / "logits.safetensors")
    assert report["class"] == "RNNForCausalLM"
    local = AutoModelForCausalLM.from_pretrained(out).eval()
    with torch.no_grad():
        assert torch.allclose(report["logits"], local(ids).logits, atol=1e-6)
