"""The main job: train a tokenizer and a small language model on the embedded corpus, evaluate it,
generate with greedy search, beam search and seeded sampling, and write a Hub-ready folder.

``hf-seqmodels demo`` runs it; see ``hf-seqmodels demo --help`` for the options.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from .models import NNLMConfig, RNNConfig
from .registry import FAMILIES
from .tokenization import train_tokenizer
from .training.core.cards import write_run_model_card
from .training.core.text import read_text_file, split_for_validation, tokenize_texts
from .training.lm.trainer import LM_DEFAULTS, LMTrainingArguments, card_training_args, train_causal_lm

logger = logging.getLogger(__name__)

EMBEDDED_CORPUS = "tiny_shakespeare.txt"
FAMILY_CONFIGS = {"rnn": RNNConfig, "nnlm": NNLMConfig}
# Model sizes of the demo, per family: keyword arguments of the config.
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "rnn": {
        "tiny": dict(hidden_size=64, embedding_size=32, num_hidden_layers=1),
        "small": dict(hidden_size=256, embedding_size=128, num_hidden_layers=2, hidden_dropout_prob=0.1),
        "medium": dict(hidden_size=512, embedding_size=256, num_hidden_layers=2, hidden_dropout_prob=0.2),
    },
    "nnlm": {
        "tiny": dict(context_size=8, embedding_size=16, hidden_size=64),
        "small": dict(context_size=16, embedding_size=32, hidden_size=256),
        "medium": dict(context_size=32, embedding_size=48, hidden_size=512, hidden_dropout_prob=0.1),
    },
}
PROMPTS = ["ROMEO:\n", "First Citizen:\nWe"]
#: the sampled continuation: a small model's greedy and beam-search text soon repeats one phrase; sampling at a
#: temperature below 1 from the 40 likeliest tokens reads like the corpus (seed: ``DemoOptions.seed`` + the
#: prompt's index, so the prompts do not share their random draws)
SAMPLING = dict(do_sample=True, temperature=0.8, top_k=40)


@dataclass
class DemoOptions:
    """The demo's options: the training ones carry the names of the training scripts' flags
    (:class:`~hf_seqmodels.training.lm.trainer.LMTrainingArguments`), so a demo command reads like a training one."""

    output_dir: str = "outputs/demo"
    model_family: str = "rnn"
    cell_type: str = "lstm"
    size: str = "small"
    corpus_file: str | None = None
    tokenizer_kind: str = "char"
    vocab_size: int = 2000
    num_train_epochs: float = 3.0
    max_time_minutes: float | None = 5.0
    per_device_train_batch_size: int = 32
    block_size: int = 64
    learning_rate: float = 3e-3
    max_new_tokens: int = 120
    num_beams: int = 4
    seed: int = 0

    def __post_init__(self):
        if self.model_family not in SIZES:
            raise ValueError(f"Invalid `model_family`={self.model_family!r}: expected one of {sorted(SIZES)}.")
        if self.size not in SIZES[self.model_family]:
            allowed = sorted(SIZES[self.model_family])
            raise ValueError(f"Invalid `size`={self.size!r}: expected one of {allowed}.")


def corpus_text(corpus_file: str | None) -> tuple[str, str]:
    """The corpus and a one-line description of where it comes from."""
    if corpus_file:
        return read_text_file(corpus_file), f"the text file `{Path(corpus_file).name}`"
    text = resources.files("hf_seqmodels").joinpath("data", EMBEDDED_CORPUS).read_text(encoding="utf-8")
    return text, (
        "the first ~300 kB of Tiny Shakespeare (Karpathy's char-rnn corpus; the plays are in the public domain), "
        "shipped with hf_seqmodels: first 90 % of the characters for training, last 10 % for validation"
    )


def build_model(options: DemoOptions, tokenizer):
    config_class = FAMILY_CONFIGS[options.model_family]
    kwargs = dict(SIZES[options.model_family][options.size])
    if options.model_family == "rnn":
        kwargs["cell_type"] = options.cell_type
    config = config_class(
        vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, **kwargs,
    )
    torch.manual_seed(options.seed)
    return FAMILIES[config_class][AutoModelForCausalLM](config)


def decoding_methods(options: DemoOptions, seed: int) -> dict[str, dict[str, Any]]:
    """``{name shown with the text: generate() keyword arguments}``: greedy, beam search and sampling from ``seed``."""
    sampled = f"sampled (temperature {SAMPLING['temperature']}, top-k {SAMPLING['top_k']}, seed {seed})"
    return {"greedy": dict(do_sample=False),
            f"beam search ({options.num_beams} beams)": dict(num_beams=options.num_beams, do_sample=False),
            sampled: SAMPLING}


def generate_samples(model, tokenizer, options: DemoOptions) -> dict[str, str]:
    """Greedy, beam-search and sampled continuations of each prompt, keyed ``"{method}, prompt {prompt!r}"``.

    The ``i``-th prompt's sample is drawn after ``torch.manual_seed(options.seed + i)`` in a forked random state,
    so it does not depend on what ran before and leaves the global random state as it was."""
    model.eval()
    samples = {}
    for index, prompt in enumerate(PROMPTS):
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]  # (1, prompt length)
        for name, kwargs in decoding_methods(options, options.seed + index).items():
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                torch.manual_seed(options.seed + index)
                out = model.generate(ids, max_new_tokens=options.max_new_tokens, **kwargs)
            text = tokenizer.decode(out[0], skip_special_tokens=True)
            samples[f"{name}, prompt {prompt!r}"] = text
            logger.info("%s continuation of %r:\n%s", name, prompt, text)
    return samples


def run_demo(options: DemoOptions) -> dict[str, Any]:
    """Run the whole job and return the figures (also written to the model card)."""
    started = time.time()
    out = Path(options.output_dir)
    text, source = corpus_text(options.corpus_file)
    train_text, valid_text = split_for_validation([text], 10.0)
    logger.info("Corpus: %s (%d characters)", source, len(text))
    tokenizer = train_tokenizer(
        dataset=_as_dataset(train_text), kind=options.tokenizer_kind, vocab_size=options.vocab_size, min_frequency=1
    )
    logger.info("Trained a %s tokenizer with %d tokens", options.tokenizer_kind, len(tokenizer))
    train_ids, eval_ids = tokenize_texts(train_text, tokenizer), tokenize_texts(valid_text, tokenizer)
    model = build_model(options, tokenizer)
    logger.info("Model: %s with %s parameters", type(model).__name__, f"{model.num_parameters():,}")
    args = LMTrainingArguments(
        output_dir=str(out), num_train_epochs=options.num_train_epochs, max_time_minutes=options.max_time_minutes,
        per_device_train_batch_size=options.per_device_train_batch_size, block_size=options.block_size,
        optim="adamw_torch", learning_rate=options.learning_rate, lr_scheduler_type="cosine", warmup_steps=20,
        max_grad_norm=1.0, seed=options.seed, per_device_eval_batch_size=8, logging_steps=20, save_steps=100,
        generation_max_length=options.max_new_tokens,
    ).with_recipe(task_defaults=LM_DEFAULTS)
    results = train_causal_lm(model, tokenizer, train_ids, eval_ids, args)
    logger.info("Validation loss %.4f nats/token, perplexity %.2f", results["eval_loss"], results["eval_perplexity"])
    model = AutoModelForCausalLM.from_pretrained(out)  # what a user gets back from the folder
    samples = generate_samples(model, tokenizer, options)
    write_run_model_card(
        str(out), model, tokenizer, results, card_training_args(args), training_data=f"Trained on {source}.", samples=samples,
        prompt=PROMPTS[0], tokenizer_description=f"{options.tokenizer_kind}-level, trained on the training split",
        eval_dataset=Path(options.corpus_file).stem if options.corpus_file else "tiny_shakespeare",
    )
    if AutoTokenizer.from_pretrained(out)(PROMPTS[0])["input_ids"] != tokenizer(PROMPTS[0])["input_ids"]:
        raise RuntimeError(f"The tokenizer saved in {out} does not encode like the one trained.")
    results = {**results, "output_dir": str(out), "files": sorted(p.name for p in out.iterdir()),
               "total_seconds": round(time.time() - started, 1), "samples": samples}
    return results


def _as_dataset(texts: list[str]):
    from datasets import Dataset

    return Dataset.from_dict({"text": texts})
