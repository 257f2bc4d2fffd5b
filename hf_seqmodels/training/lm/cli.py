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

A ``--train_file`` is tokenised once into cached token files (:mod:`.token_streams`). A corpus too large for
that cache is streamed instead (:mod:`.streaming`: tokenised as it is read, split by process, resumed at
its saved position); a stream has no length, so the run is counted in ``--max_steps``::

    python training/train_lm.py --streaming --train_file big.txt --validation_file valid.txt \
        --tokenizer_name my-tokenizer --max_steps 100000 --preset gpt-1 --output_dir runs/gpt
    python training/train_lm.py --streaming --dataset_name <hub dataset> --max_eval_samples 2000 ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelerate.logging import get_logger
from accelerate.utils import set_seed
from transformers import AutoModelForCausalLM

from ...models.config_utils import invalid
from ...registry import FamiliesWithHead
from ..core.cli import (
    CommandLineParser,
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
from ..core.text import load_dataset_splits
from .data import tokenizer_training_files
from .streaming import load_text_stream, text_stream_splits, tokenize_stream
from .token_streams import dataset_train_texts, lm_dataset_token_streams, lm_token_streams
from .trainer import LM_DEFAULTS, LMTrainingArguments, LMTrainingLoop

logger = get_logger(__name__)

MODEL_FAMILIES = FamiliesWithHead(AutoModelForCausalLM)  # nnlm, rnn, transformer_lm
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
    streaming: bool = field(default=False, metadata={"help": (
        "read the training text as a datasets stream, tokenised as it is read (no token files): needs --max_steps, "
        "--tokenizer_name or --model_name_or_path, and --validation_file (or the dataset's validation split)")})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "train on the first N windows of --block_size tokens of the training text only"})
    max_eval_samples: int | None = field(default=None, metadata={
        "help": "with --streaming: validate on the first N examples of the validation text only"})


def build_parser() -> CommandLineParser:
    """The command line's parser: its flags and ``--help``."""
    return CommandLineParser(
        (ModelArguments, DataArguments, LMTrainingArguments),
        description="Train an NNLM, RNN/LSTM/GRU (truncated BPTT) or Transformer causal language model.",
        epilog=__doc__)  # the module docstring, with its examples


def parse_arguments(argv: list[str] | None = None):
    """``(model_args, data_args, training_args)`` of ``argv``, the training arguments completed by the recipe."""
    model_args, data_args, training_args = parse_command_line(build_parser(), argv)
    if data_args.train_file is None and data_args.dataset_name is None:
        raise ValueError("Give --train_file (a .txt file) or --dataset_name (a datasets name).")
    training_args = default_actions(training_args.with_recipe(family_recipe(model_args), LM_DEFAULTS))
    check_streaming(model_args, data_args, training_args)
    return model_args, data_args, training_args


def check_streaming(model_args, data_args, training_args) -> None:
    """One-line errors for what a streamed run cannot do (and for its options without --streaming)."""
    if data_args.max_train_samples is not None and data_args.max_train_samples < 1:
        raise invalid("max_train_samples", data_args.max_train_samples, "an integer >= 1")
    if not data_args.streaming:
        if data_args.max_eval_samples is not None:
            raise invalid("max_eval_samples", data_args.max_eval_samples, "no value without --streaming")
        return
    if training_args.max_steps is None or training_args.max_steps < 1:
        raise invalid("max_steps", training_args.max_steps, "a number of updates >= 1 with --streaming (a stream "
                      "has no length, so --num_train_epochs cannot be counted)")
    if not (model_args.tokenizer_name or model_args.model_name_or_path):
        raise ValueError("--streaming needs a saved tokenizer: give --tokenizer_name or --model_name_or_path (a "
                         "tokenizer is trained on the whole training text, which a stream does not hold).")
    if data_args.train_file and not data_args.validation_file:
        raise invalid("validation_file", None, "a .txt file with --streaming --train_file (a stream cannot set "
                      "aside its last --validation_split_percentage)")
    if training_args.shuffle_windows:
        raise invalid("shuffle_windows", True, "False with --streaming (a stream is read in order; a preset's "
                      "recipe that shuffles is turned off with --shuffle_windows False)")
    if data_args.max_train_samples is not None:
        raise invalid("max_train_samples", data_args.max_train_samples, "none with --streaming (a stream is "
                      "counted in --max_steps)")
    if data_args.preprocessing_num_workers:
        raise invalid("preprocessing_num_workers", data_args.preprocessing_num_workers,
                      "none with --streaming (the stream is tokenised as it is read)")
    if data_args.max_eval_samples is not None and data_args.max_eval_samples < 1:
        raise invalid("max_eval_samples", data_args.max_eval_samples, "an integer >= 1")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, load text and tokenizer, build the model, train and/or evaluate; returns the results."""
    model_args, data_args, training_args = parse_arguments(argv)
    args = merged(model_args, data_args, training_args)
    configure_logging()
    accelerator = start_run(training_args)  # sets up the processes of `accelerate launch` / torchrun
    if data_args.streaming:
        train_ids, (train_stream, eval_ids, tokenizer) = None, load_text_stream_splits(args, accelerator)
    else:
        train_stream, (train_ids, eval_ids, tokenizer) = None, load_token_streams(args, accelerator)
        if data_args.max_train_samples is not None:  # run_clm's samples: windows of block_size tokens
            train_ids = train_ids[: data_args.max_train_samples * training_args.block_size + 1]
    set_seed(training_args.seed)
    model = build_model(args, tokenizer, MODEL_FAMILIES, AutoModelForCausalLM)
    training = "streamed training text" if train_stream is not None else f"{len(train_ids):,} training tokens"
    logger.info(f"{type(model).__name__} with {model.num_parameters():,} parameters; "
                f"{training} and {len(eval_ids):,} validation tokens.")
    loop = LMTrainingLoop(model, tokenizer, train_ids, eval_ids, training_args, accelerator,
                          train_stream=train_stream, stream_text_column=data_args.text_column)
    if training_args.do_train:
        results = loop.train(describe_data(args, tokenizer) + continued_from(args), dataset_label(args))
    else:
        results = loop.evaluate_only()
    finish_processes(accelerator)
    return results


def load_token_streams(args, accelerator):
    """``(train ids, validation ids, tokenizer)``, tokenised once into memory-mapped token files (cached and shared
    by every process), so the corpus never has to fit in RAM: a --train_file read in blocks
    (:func:`.token_streams.lm_token_streams`), a --dataset_name's memory-mapped Arrow splits read a batch at a
    time (:func:`.token_streams.lm_dataset_token_streams`). A new tokenizer is trained by the main process on
    the text before the validation split, read from the file itself or from the dataset."""
    files = dict(cache_dir=args.cache_dir, overwrite_cache=args.overwrite_cache, accelerator=accelerator)
    if args.dataset_name:
        train, validation = load_dataset_splits(args.dataset_name, args.dataset_config_name, args.text_column)
        held_out = args.validation_split_percentage if validation is None else None

        def examples():  # each example one line or more for the tokenizer trainer (the text builder drops "\n")
            texts = dataset_train_texts(train, args.text_column, held_out)
            return [], (text if text.endswith("\n") else text + "\n" for text in texts)

        tokenizer = load_tokenizer(args, examples, accelerator)
        streams = lm_dataset_token_streams(train, tokenizer, validation=validation, text_column=args.text_column,
                                           validation_split_percentage=args.validation_split_percentage, **files)
        return streams.train, streams.validation, tokenizer
    tokenizer = load_tokenizer(args, lambda: (tokenizer_training_files(
        args.train_file, args.validation_file, args.validation_split_percentage), []), accelerator)
    streams = lm_token_streams(args.train_file, tokenizer, validation_file=args.validation_file,
                               validation_split_percentage=args.validation_split_percentage, **files)
    return streams.train, streams.validation, tokenizer


def load_text_stream_splits(args, accelerator):
    """``(training stream, validation ids, tokenizer)`` of a --streaming run: the training text as a ``datasets``
    IterableDataset (:func:`.streaming.load_text_stream`; each process keeps its share when it reads it), the
    validation text (--validation_file, else the dataset's validation split; --max_eval_samples examples of it)
    tokenised into RAM."""
    tokenizer = load_tokenizer(args, [], accelerator)
    train = load_text_stream(args.train_file, dataset_name=args.dataset_name,
                             dataset_config_name=args.dataset_config_name, text_column=args.text_column)
    if args.train_file:
        validation = load_text_stream(args.validation_file, split="validation")
    else:
        splits = text_stream_splits(args.dataset_name, args.dataset_config_name)
        name = next((s for s in ("validation", "valid", "dev") if s in splits), None)
        if name is None:
            raise invalid("dataset_name", args.dataset_name, f"a dataset with a validation split for --streaming "
                          f"(found {splits})")
        validation = load_text_stream(dataset_name=args.dataset_name, dataset_config_name=args.dataset_config_name,
                                      split=name, text_column=args.text_column)
    if args.max_eval_samples is not None:
        validation = validation.take(args.max_eval_samples)
    eval_ids = tokenize_stream(validation, tokenizer, args.text_column)
    if not len(eval_ids):
        raise ValueError("The validation text of the --streaming run has no tokens.")
    return train, eval_ids, tokenizer


def describe_data(args, tokenizer) -> str:
    """One sentence for the model card: which text, which split, which tokenizer."""
    source = f"`{Path(args.train_file).name}`" if args.train_file else f"the `{args.dataset_name}` dataset"
    if args.streaming:
        source += " (streamed, tokenised as it was read)"
    validation = (f"validated on `{Path(args.validation_file).name}`" if args.validation_file else
                  f"validated on the last {args.validation_split_percentage:g} % of its characters")
    how = (f"a tokenizer from `{args.tokenizer_name}`" if args.tokenizer_name
           else f"a {args.tokenizer_kind}-level tokenizer trained on the training text")
    return f"Trained on {source}, {validation}; {len(tokenizer)} tokens, {how}."


__all__ = ["DataArguments", "MODEL_FAMILIES", "ModelArguments", "check_streaming", "main", "parse_arguments"]
