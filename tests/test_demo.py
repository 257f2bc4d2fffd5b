"""The main job (`hf-seqmodels demo`) end to end on a tiny corpus, and its Hub-ready folder."""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest
import torch
from model_test_utils import run_without_package
from transformers import AutoModelForCausalLM

from hf_seqmodels.cli import DEMO_RENAMED, main
from hf_seqmodels.demo import PROMPTS, DemoOptions, build_model, corpus_text, generate_samples
from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.lm.trainer import LMTrainingArguments

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


def test_the_demo_takes_the_training_scripts_flag_names(capsys):
    """The demo's training options are named as the training scripts' (``LMTrainingArguments``); the old names
    are one error line naming the new flag."""
    training_fields = {f.name for f in dataclasses.fields(LMTrainingArguments)}
    for new in DEMO_RENAMED.values():
        assert new.removeprefix("--") in training_fields and new.removeprefix("--") in DemoOptions.__dataclass_fields__
    for old, new in DEMO_RENAMED.items():
        with pytest.raises(SystemExit) as exit_status:
            main(["demo", old, "2"])
        assert exit_status.value.code == 2 and f"{old} is now {new}" in capsys.readouterr().err


def _tiny_model_and_tokenizer(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("First Citizen:\nWe are accounted poor citizens.\nROMEO:\nBut soft!\n" * 5, encoding="utf-8")
    tokenizer = train_tokenizer([str(corpus)], kind="char", vocab_size=100, min_frequency=1)
    options = DemoOptions(size="tiny", max_new_tokens=24, num_beams=2, seed=3)
    return build_model(options, tokenizer), tokenizer, options


def test_demo_shows_a_seeded_sample_besides_greedy_and_beam_search(tmp_path, caplog):
    model, tokenizer, options = _tiny_model_and_tokenizer(tmp_path)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    with caplog.at_level(logging.INFO, logger="hf_seqmodels.demo"):
        samples = generate_samples(model, tokenizer, options)
    assert torch.equal(torch.rand(1), before)  # the global random state is left as it was
    sampled = {prompt: f"sampled (temperature 0.8, top-k 40, seed {3 + i}), prompt {prompt!r}"
               for i, prompt in enumerate(PROMPTS)}  # one seed per prompt, from --seed 3
    for prompt in PROMPTS:
        methods = {f"greedy, prompt {prompt!r}", f"beam search (2 beams), prompt {prompt!r}", sampled[prompt]}
        assert methods <= set(samples)
        text = samples[sampled[prompt]]
        assert text.startswith(prompt) and len(text) > len(prompt)
        assert text != samples[f"greedy, prompt {prompt!r}"]
    assert len(samples) == 3 * len(PROMPTS)
    assert "sampled (temperature 0.8" in caplog.text  # shown to the user, with the other continuations
    # the same seed draws the same text whatever ran before; another seed draws another
    torch.rand(10)
    assert generate_samples(model, tokenizer, options) == samples
    other = generate_samples(model, tokenizer, DemoOptions(size="tiny", max_new_tokens=24, num_beams=2, seed=4))
    assert other[f"sampled (temperature 0.8, top-k 40, seed 4), prompt {PROMPTS[0]!r}"] != samples[sampled[PROMPTS[0]]]


@pytest.mark.slow
def test_demo_runs_end_to_end_and_writes_a_hub_ready_folder(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("ROMEO:\nWhat light through yonder window breaks?\n\n" * 60, encoding="utf-8")
    out = tmp_path / "demo"
    main(["demo", "--corpus_file", str(corpus), "--size", "tiny", "--num_train_epochs", "2",
          "--per_device_train_batch_size", "4", "--block_size", "32", "--max_new_tokens", "20",
          "--output_dir", str(out), "--learning_rate", "1e-2"])
    printed = capsys.readouterr().out
    # the summary is the JSON object printed first (a library may log a line before it, e.g. DeepSpeed's
    # "Setting accelerator to CPU" the first time it is imported in a process)
    summary = json.loads(printed[printed.index("{\n"): printed.index("\nValidation perplexity")])
    assert EXPECTED_FILES <= set(summary["files"])
    assert summary["eval_perplexity"] < 10  # the repetitive text is easy; an untrained model is near 30
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "eval_perplexity" in card and "beam search" in card and "trust_remote_code=True" in card
    assert "sampled (temperature 0.8, top-k 40, seed 0)" in card
    ids = torch.tensor([[2, 5, 6, 7]])
    report = run_without_package(out, "AutoModelForCausalLM", ids, tmp_path / "logits.safetensors")
    assert report["class"] == "RNNForCausalLM"
    local = AutoModelForCausalLM.from_pretrained(out).eval()
    with torch.no_grad():
        assert torch.allclose(report["logits"], local(ids).logits, atol=1e-6)
