"""Command line of ``training/train_lm.py``: train an NNLM, RNN/LSTM/GRU (TBPTT) or Transformer causal LM.

The flags are transformers' (``TrainingArguments`` and the model/data arguments of its ``run_clm.py``
example), plus ``--model_family``/``--preset`` for a new model; the preset's training recipe fills what
the command line leaves out. The same command runs on one process, under ``accelerate launch`` or
``torchrun``::

    python training/train_lm.py --train_file hf_seqmodels/data/tiny_shakespeare.txt \\
        --tokenizer_kind char --model_family rnn --preset char-rnn \\
        --config_overrides "hidden_size=256,cell_type=gru" --output_dir runs/char-gru

    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 training/train_lm.py ...

A single ``.json`` or ``.yaml`` file of arguments works too: ``python training/train_lm.py args.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelerate.logging import get_logger
from accelerate.utils import set_seed
from transformers import AutoModelForCausalLM

from ...registry import families_with_head
from ..core.cli import (
    build_model,
    configure_logging,
    continued_from,
    dataset_label,
    default_actions,
    family_recipe,
    finish_processes,
    load_tokenizer,
    merged,
    model_arguments,
    parse_command_line,
    start_run,
)
from ..core.text import load_text_splits, tokenize_texts
from ..core.token_files import lm_token_streams
from .trainer import LM_DEFAULTS, LMTrainingArguments, LMTrainingLoop

logger = get_logger(__name__)

MODEL_FAMILIES = families_with_head(AutoModelForCausalLM)  # nnlm, rnn, transformer_lm
ModelArguments = model_arguments(MODEL_FAMILIES, "rnn", "char", "tiny, zaremba-small, bengio-2003, gpt-1")


@dataclass
class DataArguments:
    """The text: plain files or a ``datasets`` dataset (names of transformers' ``run_clm.py``)."""

    train_file: str | None = field(default=None, metadata={"help": "a plain .txt file: the whole file is one stream"})
    validation_file: str | None = field(default=None, metadata={
        "help": "a plain .txt file (default: the last --validation_split_percentage of the training text)"})
    dataset_name: str | None = field(default=None, metadata={"help": "a datasets name (instead of --train_file)"})
    dataset_config_name: str | None = field(default=None, metadata={"help": "the dataset's configuration"})
    dataset_label: str | None = field(default=None, metadata={
        "help": "the data's name in the model card's model-index (default: --dataset_name or the training file's folder)"})
    text_column: str = field(default="text", metadata={"help": "the dataset's text column"})
    validation_split_percentage: float = field(default=10.0, metadata={
        "help": "without validation text: the last N %% of the training text (by characters)"})
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "processes that tokenise"})
    cache_dir: str | None = field(default=None, metadata={"help": (
        "folder of the token files a --train_file is tokenised into once (default: $HF_SEQMODELS_CACHE, else "
        "hf_seqmodels_tokens beside the datasets cache)")})
    overwrite_cache: bool = field(default=False, metadata={"help": "tokenise again even if token files exist"})


def parse_arguments(argv: list[str] | None = None):
    """``(model_args, data_args, training_args)`` of ``argv``, the training arguments completed by the recipe."""
    model_args, data_args, training_args = parse_command_line(
        (ModelArguments, DataArguments, LMTrainingArguments), argv,
        "Train an NNLM, RNN/LSTM/GRU (truncated BPTT) or Transformer causal language model.")
    if data_args.train_file is None and data_args.dataset_name is None:
        raise ValueError("Give --train_file (a .txt file) or --dataset_name (a datasets name).")
    training_args = default_actions(training_args.with_recipe(family_recipe(model_args), LM_DEFAULTS))
    return model_args, data_args, training_args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, load text and tokenizer, build the model, train and/or evaluate; returns the results."""
    model_args, data_args, training_args = parse_arguments(argv)
    args = merged(model_args, data_args, training_args)
    configure_logging()
    accelerator = start_run(training_args)  # sets up the processes of `accelerate launch` / torchrun
    train_ids, eval_ids, tokenizer = load_token_streams(args, accelerator)
    set_seed(training_args.seed)
    model = build_model(args, tokenizer, MODEL_FAMILIES, AutoModelForCausalLM)
    logger.info(f"{type(model).__name__} with {model.num_parameters():,} parameters; "
                f"{len(train_ids):,} training and {len(eval_ids):,} validation tokens.")
    loop = LMTrainingLoop(model, tokenizer, train_ids, eval_ids, training_args, accelerator)
    if training_args.do_train:
        results = loop.train(describe_data(args, tokenizer) + continued_from(args), dataset_label(args))
    else:
        results = loop.evaluate_only()
    finish_processes(accelerator)
    return results


def load_token_streams(args, accelerator):
    """``(train ids, validation ids, tokenizer)``. A --train_file is tokenised once into memory-mapped token files
    (:func:`..core.token_files.lm_token_streams`, cached and shared by every process), so the corpus never has to fit
    in RAM; only training a new tokenizer reads the training text into memory. A --dataset_name is tokenised in RAM."""
    needs_text = args.dataset_name or not (args.tokenizer_name or args.model_name_or_path)
    texts = (load_text_splits(args.train_file, args.validation_file, args.dataset_name, args.dataset_config_name,
                              args.text_column, args.validation_split_percentage) if needs_text else None)
    tokenizer = load_tokenizer(args, texts.train if texts else [], accelerator)
    if args.train_file:
        streams = lm_token_streams(args.train_file, tokenizer, validation_file=args.validation_file,
                                   validation_split_percentage=args.validation_split_percentage,
                                   cache_dir=args.cache_dir, overwrite_cache=args.overwrite_cache,
                                   accelerator=accelerator)
        return streams.train, streams.validation, tokenizer
    return (tokenize_texts(texts.train, tokenizer, num_proc=args.preprocessing_num_workers),
            tokenize_texts(texts.validation, tokenizer, num_proc=args.preprocessing_num_workers), tokenizer)


def describe_data(args, tokenizer) -> str:
    """One sentence for the model card: which text, which split, which tokenizer."""
    source = f"`{Path(args.train_file).name}`" if args.train_file else f"the `{args.dataset_name}` dataset"
    validation = (f"validated on `{Path(args.validation_file).name}`" if args.validation_file else
                  f"validated on the last {args.validation_split_percentage:g} % of its characters")
    how = (f"a tokenizer from `{args.tokenizer_name}`" if args.tokenizer_name
           else f"a {args.tokenizer_kind}-level tokenizer trained on the training text")
    return f"Trained on {source}, {validation}; {len(tokenizer)} tokens, {how}."


__all__ = ["DataArguments", "MODEL_FAMILIES", "ModelArguments", "main", "parse_arguments"]
