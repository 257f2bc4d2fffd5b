"""The ``hf-seqmodels`` command: ``demo``, ``train-lm``, ``train-seq2seq``, ``pretrain-bert``, ``finetune`` and
``train-tokenizer``."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import sys
from collections.abc import Sequence

COMMANDS = {"train-lm": ".training.lm_cli", "train-seq2seq": ".training.seq2seq_cli",
            "pretrain-bert": ".training.bert_cli", "finetune": ".training.finetune",
            "train-tokenizer": ".tokenization.cli"}


def _demo_parser(subparsers) -> None:
    from .demo import SIZES, DemoOptions

    defaults = DemoOptions()
    p = subparsers.add_parser(
        "demo", help="train a tokenizer and a small LM on the embedded corpus, generate, export",
        description="Train a tokenizer and a small language model on a small corpus (by default the "
        "embedded Tiny Shakespeare slice), report validation perplexity, generate with greedy and beam "
        "search, and write a Hub-ready folder.",
    )
    p.add_argument("--output_dir", default=defaults.output_dir)
    p.add_argument("--model_family", choices=sorted(SIZES), default=defaults.model_family)
    p.add_argument("--cell_type", choices=["rnn_tanh", "rnn_relu", "lstm", "gru"], default=defaults.cell_type,
                   help="recurrent cell (model_family rnn)")
    p.add_argument("--size", choices=["tiny", "small", "medium"], default=defaults.size)
    p.add_argument("--corpus_file", default=None, help="a UTF-8 text file instead of the embedded corpus")
    p.add_argument("--tokenizer_kind", choices=["char", "word", "bpe", "wordpiece", "unigram"],
                   default=defaults.tokenizer_kind)
    p.add_argument("--vocab_size", type=int, default=defaults.vocab_size, help="cap for word/subword tokenizers")
    p.add_argument("--epochs", type=int, default=defaults.epochs)
    p.add_argument("--minutes", type=float, default=defaults.minutes, help="wall-clock cap on training")
    p.add_argument("--batch_size", type=int, default=defaults.batch_size)
    p.add_argument("--bptt", type=int, default=defaults.bptt)
    p.add_argument("--learning_rate", type=float, default=defaults.learning_rate)
    p.add_argument("--max_new_tokens", type=int, default=defaults.max_new_tokens)
    p.add_argument("--num_beams", type=int, default=defaults.num_beams)
    p.add_argument("--seed", type=int, default=defaults.seed)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="hf-seqmodels", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    _demo_parser(subparsers)
    subparsers.add_parser("train-lm", help="train a causal LM (same options as training/train_lm.py)",
                          add_help=False)
    subparsers.add_parser("train-seq2seq", help="train a translation model (same options as "
                          "training/train_seq2seq.py)", add_help=False)
    subparsers.add_parser("pretrain-bert", help="pretrain BERT with MLM + NSP (same options as "
                          "training/pretrain_bert.py)", add_help=False)
    subparsers.add_parser("finetune", help="fine-tune on classification, tagging or extractive QA with Trainer "
                          "(same options as training/finetune.py)", add_help=False)
    subparsers.add_parser("train-tokenizer", help="train a tokenizer (same options as "
                          "tokenizer_scripts/train_tokenizer.py)", add_help=False)
    if argv and argv[0] in COMMANDS:
        module = importlib.import_module(COMMANDS[argv[0]], __package__)
        module.main(argv[1:])
        return 0
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from .demo import DemoOptions, run_demo

    options = DemoOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(DemoOptions)})
    results = run_demo(options)
    summary = {k: v for k, v in results.items() if k != "samples"}
    print(json.dumps(summary, indent=2, default=str))
    print(f"\nValidation perplexity: {results['eval_perplexity']:.2f} "
          f"({results['eval_loss']:.4f} nats/token). Hub-ready folder: {results['output_dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
