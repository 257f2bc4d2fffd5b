"""Command line of ``training/train_ngram.py`` (and ``hf-seqmodels ngram``): fit an n-gram language model.

Example (Tiny Shakespeare, character level, the last 10 % of the text held out as in the LM ladder)::

    python training/train_ngram.py --train_file hf_seqmodels/data/tiny_shakespeare.txt \\
        --tokenizer_kind char --order 5 --smoothing kneser_ney --output_dir runs/char-5gram

By default the text is one stream (as ``train_lm.py`` reads it): ``n - 1`` ``<bos>`` tokens before
it and no ``<eos>``. ``--line_by_line`` makes every non-empty line a sequence of its own that ends
with ``<eos>`` (sentence-per-line corpora). The output folder holds the model (``config.json``,
``ngram_counts.safetensors``), the tokenizer and ``eval_results.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

from accelerate import PartialState

from ...ngram import SMOOTHINGS, NGramConfig, NGramLanguageModel
from ..core.cli import HelpFormatter, add_tokenizer_flags, check_data_files, configure_logging, load_tokenizer
from ..core.text import load_text_splits, tokenize_texts

logger = logging.getLogger(__name__)

RESULTS_NAME = "eval_results.json"


def _discount(raw: str) -> float | list[float] | None:
    if raw.strip().lower() == "none":
        return None
    values = [float(v) for v in raw.split(",")]
    return values[0] if len(values) == 1 else values


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``training/train_ngram.py`` (``hf-seqmodels ngram``)."""
    parser = argparse.ArgumentParser(description="Fit an n-gram language model (add-k or interpolated Kneser–Ney) "
                                     "and report validation perplexity.", epilog=__doc__,
                                     formatter_class=HelpFormatter)
    model = parser.add_argument_group("model (a --preset, and/or single fields that override it)")
    model.add_argument("--preset", help=f"one of {', '.join(NGramConfig.available_presets())}")
    model.add_argument("--order", type=int, help="n: the model sees the n - 1 previous tokens (default 3)")
    model.add_argument("--smoothing", choices=SMOOTHINGS, help="default kneser_ney")
    model.add_argument("--k", type=float, help="add-k pseudo-count (1 = Laplace; default 1)")
    model.add_argument("--discount", type=_discount,
                       help="Kneser–Ney discount: one number, one per order (comma-separated, unigram first), "
                            "or none to estimate n1/(n1+2 n2) per order (default)")
    add_tokenizer_flags(parser, default_kind="char")
    data = parser.add_argument_group("data")
    data.add_argument("--train_file", required=True, help="plain .txt file")
    data.add_argument("--validation_file", help="plain .txt file (None: the end of the training text)")
    data.add_argument("--validation_split_percentage", type=float, default=10.0,
                      help="without --validation_file: the last N %% of the training text (by characters)")
    data.add_argument("--line_by_line", action="store_true",
                      help="every non-empty line is one sequence ending with <eos> (default: one stream)")
    parser.add_argument("--output_dir", required=True, help="folder for the model, tokenizer and eval_results.json")
    parser.add_argument("--num_sample_tokens", type=int, default=200, help="tokens of a sample to print (0: none)")
    parser.add_argument("--prompt", default="", help="text the sample continues")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.set_defaults(resume_from_checkpoint=None, model_name_or_path=None)  # read by the shared tokenizer loader
    return parser


def config_from_args(args: argparse.Namespace) -> NGramConfig:
    """The preset's config with the fields given on the command line (checked before any data is read)."""
    overrides = {name: getattr(args, name) for name in ("order", "smoothing", "k", "discount")
                 if getattr(args, name) is not None}
    return NGramConfig.from_preset(args.preset, **overrides) if args.preset else NGramConfig(**overrides)


def encode(texts: list[str], tokenizer, line_by_line: bool) -> list:
    """One stream of ids (default), or one list of ids per non-empty line."""
    if not line_by_line:
        return [tokenize_texts(texts, tokenizer).numpy()]
    lines = [line for text in texts for line in text.splitlines() if line.strip()]
    return tokenizer(lines, add_special_tokens=False)["input_ids"]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, fit the model on the training text, evaluate, save; returns the results dict."""
    args = build_parser().parse_args(argv)
    check_data_files([args])
    configure_logging()
    config = config_from_args(args)
    texts = load_text_splits(args.train_file, args.validation_file,
                             validation_split_percentage=args.validation_split_percentage)
    output_dir = Path(args.output_dir)
    tokenizer = load_tokenizer(args, texts.train, PartialState())
    train, validation = (encode(t, tokenizer, args.line_by_line) for t in (texts.train, texts.validation))

    start = time.perf_counter()
    model = NGramLanguageModel(config.with_tokenizer(tokenizer)).fit(train, add_eos=args.line_by_line)
    fit_seconds = time.perf_counter() - start
    metrics = model.evaluate(validation, add_eos=args.line_by_line)
    eval_seconds = time.perf_counter() - start - fit_seconds

    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    results = {"eval_loss": metrics["loss"], "eval_perplexity": metrics["perplexity"], "eval_tokens": metrics["tokens"],
               "train_tokens": int(sum(len(s) for s in train)), "order": model.config.order,
               "smoothing": model.config.smoothing, "vocab_size": model.config.vocab_size,
               "num_ngrams": model.num_ngrams, "discounts": model.discounts,
               "fit_seconds": round(fit_seconds, 3), "eval_seconds": round(eval_seconds, 3)}
    if args.num_sample_tokens > 0:
        prompt = tokenizer(args.prompt, add_special_tokens=False)["input_ids"] if args.prompt else []
        ids = model.generate(prompt, args.num_sample_tokens, seed=args.seed)
        results["sample"] = tokenizer.decode(ids, skip_special_tokens=True)
        print(f"Sample (seed {args.seed}):\n{results['sample']}\n")
    (output_dir / RESULTS_NAME).write_text(json.dumps(results, indent=2) + "\n")
    print(f"Validation perplexity {metrics['perplexity']:.3f} ({metrics['loss']:.4f} nats/token over "
          f"{metrics['tokens']:,} tokens); fitted in {fit_seconds:.1f} s, evaluated in {eval_seconds:.1f} s. "
          f"Model, tokenizer and {RESULTS_NAME} in {output_dir}")
    return results


__all__ = ["build_parser", "config_from_args", "encode", "main"]
