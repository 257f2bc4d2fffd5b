"""N-gram rows of the Tiny Shakespeare language-model ladder: character level, orders 1–7, add-k and Kneser–Ney.

The data, split, tokenizer and measure are the ladder's (``training/reproductions/shakespeare_lm_ladder.sh``
and ``hf_seqmodels.training.lm.cli``):

* the first 90 % of the characters of ``tinyshakespeare/input.txt`` train, the last 10 % validate
  (``load_text_splits``; the percentage is read from the ladder script);
* a character tokenizer trained on the training text (``train_tokenizer(kind="char")``, 68 tokens);
* the validation stream is cut into ``eval_batch_size`` rows (read from the ladder script: 32) and every
  token of a row but its first is scored from the tokens before it *in its row* (the recurrent models
  start each row from a zero state; the n-gram pads the row's start with ``<bos>``), so both score the
  same 111,488 characters; the unit is nats per character, perplexity = exp(nats/char).

The training text is one stream: ``n - 1`` ``<bos>`` before it, no ``<eos>``. The neural rows are read
from ``model_cards/shakespeare-char-*/training_history.json`` (their final evaluation), and the script
checks that they scored as many tokens as the n-gram models. It also times fitting + evaluating
(target: well under a minute for n <= 5 on one CPU core).

    python -m benchmarks.bench_ngram_ladder
    python -m benchmarks.bench_ngram_ladder --orders 3 5 --add_k 1 --json ngram_ladder.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from hf_seqmodels.ngram import NGramConfig, NGramLanguageModel
from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.core.text import load_text_splits, tokenize_texts
from hf_seqmodels.training.lm.data import batchify

from .common import print_table, verdict, write_json

REPO = Path(__file__).resolve().parents[1]
LADDER_SCRIPT = REPO / "training" / "reproductions" / "shakespeare_lm_ladder.sh"
CARDS = REPO / "model_cards"
TIME_TARGET_SECONDS = 60.0  # fit + evaluate, n <= 5


def ladder_setting(flag: str) -> str:
    """The value the ladder script passes to ``flag`` (e.g. ``--eval_batch_size``)."""
    match = re.search(rf"{re.escape(flag)}\s+(\S+)", LADDER_SCRIPT.read_text())
    if match is None:
        raise ValueError(f"{LADDER_SCRIPT} sets no {flag}; pass it on the command line.")
    return match.group(1)


def neural_results() -> list[dict]:
    """The final evaluation of every ``shakespeare-char-*`` card (``training_history.json``)."""
    rows = []
    for folder in sorted(CARDS.glob("shakespeare-char-*")):
        history = json.loads((folder / "training_history.json").read_text())
        final = [entry for entry in history if "eval_loss" in entry][-1]
        rows.append({"model": folder.name, "nats_per_char": final["eval_loss"],
                     "perplexity": final["eval_perplexity"], "tokens": final["eval_tokens"]})
    return rows


def char_tokenizer(train_texts: list[str]):
    """The ladder's tokenizer: ``train_tokenizer(kind="char")`` on the training text, default sizes."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.txt"
        path.write_text("".join(train_texts), encoding="utf-8")
        return train_tokenizer([str(path)], kind="char")


def score_rows(model: NGramLanguageModel, rows: np.ndarray) -> np.ndarray:
    """Log-probabilities of ``rows[:, 1:]`` ``(B, N - 1)``, each row read from its own start."""
    log_probs = model.token_log_probs(list(rows), add_eos=False).reshape(rows.shape)  # (B, N)
    return log_probs[:, 1:]


def run(config: NGramConfig, train_ids: np.ndarray, rows: np.ndarray) -> dict:
    start = time.perf_counter()
    model = NGramLanguageModel(config).fit([train_ids], add_eos=False)
    fitted = time.perf_counter()
    log_probs = score_rows(model, rows)
    done = time.perf_counter()
    nats = float(-log_probs.mean())
    return {"order": config.order, "smoothing": config.smoothing, "k": config.k if config.smoothing == "add_k" else None,
            "nats_per_char": nats, "perplexity": float(np.exp(nats)), "tokens": int(log_probs.size),
            "fit_seconds": fitted - start, "eval_seconds": done - fitted, "discounts": model.discounts}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"))
    parser.add_argument("--validation_split_percentage", type=float,
                        default=float(ladder_setting("--validation_split_percentage")))
    parser.add_argument("--eval_batch_size", type=int, default=int(ladder_setting("--eval_batch_size")))
    parser.add_argument("--orders", type=int, nargs="+", default=list(range(1, 8)))
    parser.add_argument("--add_k", type=float, nargs="*", default=[1.0, 0.01],
                        help="add-k pseudo-counts to run (1 = Laplace), fixed in advance, not tuned on validation")
    parser.add_argument("--json", metavar="PATH", help="also write the results to this JSON file")
    args = parser.parse_args(argv)

    texts = load_text_splits(args.data, validation_split_percentage=args.validation_split_percentage)
    tokenizer = char_tokenizer(texts.train)
    train_ids = tokenize_texts(texts.train, tokenizer).numpy()
    rows = batchify(tokenize_texts(texts.validation, tokenizer), args.eval_batch_size).numpy()  # (B, N)
    print(f"{len(tokenizer)} tokens; {len(train_ids):,} training characters; validation cut into "
          f"{rows.shape[0]} rows of {rows.shape[1]:,}.\n")

    base = NGramConfig().with_tokenizer(tokenizer)
    settings = [("kneser_ney", None)] + [("add_k", k) for k in args.add_k]
    results = []
    for order in args.orders:
        for smoothing, k in settings:
            config = dataclasses.replace(base, order=order, smoothing=smoothing, k=k if k is not None else 1.0)
            results.append(run(config, train_ids, rows))

    def label(r):
        return "Kneser–Ney" if r["smoothing"] == "kneser_ney" else ("Laplace" if r["k"] == 1 else f"add-k {r['k']:g}")

    print_table(["order", "smoothing", "nats/char", "perplexity", "fit s", "eval s"],
                [[r["order"], label(r), r["nats_per_char"], r["perplexity"], r["fit_seconds"], r["eval_seconds"]]
                 for r in results])

    neural = neural_results()
    ladder = [{"model": f"{r['order']}-gram {label(r)}", **r} for r in results if r["smoothing"] == "kneser_ney"]
    ladder += neural
    print("\nThe ladder (validation, nats/char; neural rows from model_cards/*/training_history.json):")
    print_table(["model", "nats/char", "perplexity", "scored chars"],
                [[r["model"], r["nats_per_char"], r["perplexity"], f"{r['tokens']:,}"]
                 for r in sorted(ladder, key=lambda r: r["nats_per_char"])])
    mismatched = [r["model"] for r in neural if r["tokens"] != results[0]["tokens"]]
    if mismatched:
        print(f"\nWARNING: {mismatched} scored a different number of characters than the n-gram models "
              f"({results[0]['tokens']:,}): the rows are not comparable.")

    slowest = max((r["fit_seconds"] + r["eval_seconds"] for r in results if r["order"] <= 5), default=None)
    if slowest is not None:
        print(f"\nSlowest fit + evaluate for n <= 5: {slowest:.1f} s (target <= {TIME_TARGET_SECONDS:.0f} s) "
              f"{verdict(slowest, TIME_TARGET_SECONDS, higher_is_better=False)}")
    output = {"arguments": vars(args), "ngram": results, "neural": neural}
    write_json(args.json, output)
    return output


if __name__ == "__main__":
    main()
