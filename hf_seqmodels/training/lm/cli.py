"""Command line of ``training/train_lm.py``: train an NNLM or RNN language model on a text.

Examples (the same command runs on one process, under ``accelerate launch`` or ``torchrun``)::

    python training/train_lm.py --train_file hf_seqmodels/data/tiny_shakespeare.txt \\
        --tokenizer_kind char --model_family rnn --preset char-rnn \\
        --config_overrides "hidden_size=256,cell_type=gru" --output_dir runs/char-gru

    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 training/train_lm.py ...

The engine's options are generated from the fields of :class:`LMTrainingArguments`, so every field
is a flag of the same name (``--no-plot`` turns a boolean off; ``none`` unsets an optional value).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from accelerate.logging import get_logger
from accelerate.utils import set_seed
from transformers import AutoModelForCausalLM

from ...models import NNLMConfig, RNNConfig, TransformerLMConfig
from ..core.cli import (
    add_dataset_label_argument,
    add_engine_arguments,
    add_model_arguments,
    add_tokenizer_arguments,
    build_model,
    check_model_arguments,
    configure_logging,
    continued_from,
    dataset_label,
    engine_arguments,
    finish_processes,
    load_tokenizer,
)
from ..core.launch import make_accelerator
from ..core.text import load_text_splits, tokenize_texts
from .trainer import LMTrainingArguments, train_causal_lm

logger = get_logger(__name__)

MODEL_FAMILIES = {"nnlm": NNLMConfig, "rnn": RNNConfig, "transformer_lm": TransformerLMConfig}

LM_HELP = {
    "num_train_epochs": "passes over the training streams",
    "per_device_train_batch_size": "stream rows per process; the global batch is this × processes",
    "bptt": "tokens per truncated-BPTT window (the Transformer LM's context length)",
    "eval_batch_size": "rows the validation stream is cut into (1 scores every token in one stream)",
    "shuffle_windows": "NNLM only: read fixed (context + bptt) windows in a random order",
}


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``training/train_lm.py``: model, tokenizer, data and engine options."""
    parser = argparse.ArgumentParser(description="Train an NNLM, RNN/LSTM/GRU (TBPTT) or Transformer causal language model.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_model_arguments(parser, MODEL_FAMILIES, "rnn", "tiny, zaremba-small, bengio-2003")
    add_tokenizer_arguments(parser, default_kind="char")
    data = parser.add_argument_group("data")
    data.add_argument("--train_file", help="plain .txt file: the whole file is one stream")
    data.add_argument("--validation_file", help="plain .txt file (None: the end of the training text)")
    data.add_argument("--dataset_name", help="a datasets name (instead of --train_file)")
    data.add_argument("--dataset_config_name")
    add_dataset_label_argument(data)
    data.add_argument("--text_column", default="text")
    data.add_argument("--validation_split_percentage", type=float, default=10.0,
                      help="without validation text: the last N %% of the training text (by characters)")
    data.add_argument("--preprocessing_num_workers", type=int, default=None)
    add_engine_arguments(parser, LMTrainingArguments, LM_HELP)
    return parser


# --------------------------------------------------------------------------- pieces of main


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, load text and tokenizer, build the model and train it; returns the results dict."""
    args = build_parser().parse_args(argv)
    configure_logging()
    training_args = engine_arguments(args, LMTrainingArguments)
    check_model_arguments(args, MODEL_FAMILIES)
    accelerator = make_accelerator(training_args)  # sets up the processes of `accelerate launch` / torchrun
    texts = load_text_splits(args.train_file, args.validation_file, args.dataset_name, args.dataset_config_name,
                             args.text_column, args.validation_split_percentage)
    tokenizer = load_tokenizer(args, texts.train, accelerator)
    set_seed(training_args.seed)
    model = build_model(args, tokenizer, MODEL_FAMILIES, AutoModelForCausalLM)
    train_ids = tokenize_texts(texts.train, tokenizer, num_proc=args.preprocessing_num_workers)
    eval_ids = tokenize_texts(texts.validation, tokenizer, num_proc=args.preprocessing_num_workers)
    logger.info(f"{type(model).__name__} with {model.num_parameters():,} parameters; "
                f"{train_ids.numel():,} training and {eval_ids.numel():,} validation tokens.")
    results = train_causal_lm(model, tokenizer, train_ids, eval_ids, training_args, accelerator,
                              training_data=describe_data(args, tokenizer) + continued_from(args),
                              eval_dataset=dataset_label(args))
    finish_processes(accelerator)
    return results


def describe_data(args: argparse.Namespace, tokenizer) -> str:
    """One sentence for the model card: which text, which split, which tokenizer."""
    source = f"`{Path(args.train_file).name}`" if args.train_file else f"the `{args.dataset_name}` dataset"
    validation = (f"validated on `{Path(args.validation_file).name}`" if args.validation_file else
                  f"validated on the last {args.validation_split_percentage:g} % of its characters")
    how = (f"a tokenizer from `{args.tokenizer_name_or_path}`" if args.tokenizer_name_or_path
           else f"a {args.tokenizer_kind}-level tokenizer trained on the training text")
    return f"Trained on {source}, {validation}; {len(tokenizer)} tokens, {how}."


__all__ = ["MODEL_FAMILIES", "build_parser", "main"]
