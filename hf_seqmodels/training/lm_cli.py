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
import dataclasses
import logging
import tempfile
from pathlib import Path
from typing import Any

from accelerate import Accelerator
from accelerate.logging import get_logger
from accelerate.utils import set_seed

from ..models import NNLMConfig, RNNConfig
from .data import load_text_splits, tokenize_texts
from .engine import make_accelerator
from .lm_trainer import LMTrainingArguments, train_causal_lm

logger = get_logger(__name__)

MODEL_FAMILIES = {"nnlm": NNLMConfig, "rnn": RNNConfig}
TOKENIZER_FIELDS = ("vocab_size", "pad_token_id", "bos_token_id", "eos_token_id")

ENGINE_HELP = {
    "output_dir": "folder for checkpoints, the final model, tokenizer, history and plot",
    "num_train_epochs": "passes over the training streams",
    "max_steps": "stop after this many updates (caps the epochs)",
    "max_train_minutes": "stop cleanly (evaluate, checkpoint, save) after this many minutes",
    "per_device_train_batch_size": "stream rows per process; the global batch is this × processes",
    "bptt": "tokens per truncated-BPTT window",
    "optimizer": "sgd or adamw",
    "lr_scheduler": "zaremba, cosine or constant",
    "decay_start_epoch": "zaremba: epochs at the initial learning rate",
    "decay_factor": "zaremba: factor applied each later epoch",
    "min_lr_ratio": "cosine: final learning rate / initial",
    "max_grad_norm": "clip the gradient norm to this (none: no clipping)",
    "eval_batch_size": "rows the validation stream is cut into (1 scores every token in one stream)",
    "checkpointing_steps": "also checkpoint every N updates (checkpoints are always written at epoch ends)",
    "save_total_limit": "keep at most this many checkpoints (none: all)",
    "resume_from_checkpoint": "'latest' or a checkpoint folder",
    "shuffle_windows": "NNLM only: read fixed (context + bptt) windows in a random order",
    "generation_max_new_tokens": "max_new_tokens of the saved generation_config",
    "mixed_precision": "no, fp16 or bf16 (accelerate)",
    "use_cpu": "force the CPU even when a GPU is present",
}


# --------------------------------------------------------------------------- typed values


def _parse_typed(name: str, raw: str, annotation: str) -> Any:
    """Convert ``raw`` to the type named by a dataclass annotation such as ``"float | int | None"``."""
    members = [m.strip() for m in str(annotation).split("|")]
    low = raw.strip().lower()
    if "None" in members and low in ("none", "null"):
        return None
    if "bool" in members and low in ("true", "false", "yes", "no"):
        return low in ("true", "yes")
    for kind in (int, float):
        if kind.__name__ in members:
            try:
                return kind(raw)
            except ValueError:
                pass
    if "str" in members:
        return raw
    raise ValueError(f"Invalid value {raw!r} for `{name}`: expected {annotation}.")


def parse_config_overrides(text: str | None, config_class: type) -> dict[str, Any]:
    """``"hidden_size=512,cell_type=gru"`` → ``{"hidden_size": 512, "cell_type": "gru"}``, typed by the config's fields."""
    if not text:
        return {}
    fields = {f.name: f.type for f in dataclasses.fields(config_class)}
    overrides = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"Invalid --config_overrides item {item!r}: expected key=value.")
        if key not in fields:
            raise ValueError(f"Unknown config field {key!r} in --config_overrides for {config_class.__name__}; "
                             f"known fields: {', '.join(sorted(fields))}.")
        if key in TOKENIZER_FIELDS:
            raise ValueError(f"Invalid --config_overrides field {key!r}: it is set from the tokenizer.")
        overrides[key] = _parse_typed(key, raw, fields[key])
    return overrides


# --------------------------------------------------------------------------- the parser


def _add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("training engine (LMTrainingArguments)")
    for f in dataclasses.fields(LMTrainingArguments):
        annotation = str(f.type)
        help_text = ENGINE_HELP.get(f.name, f.name.replace("_", " "))
        if annotation == "bool":
            group.add_argument(f"--{f.name}", action=argparse.BooleanOptionalAction, default=f.default, help=help_text)
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        group.add_argument(f"--{f.name}", type=lambda raw, n=f.name, a=annotation: _parse_typed(n, raw, a),
                           default=default, required=f.default is dataclasses.MISSING,
                           help=help_text)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``training/train_lm.py``: model, tokenizer, data and engine options."""
    parser = argparse.ArgumentParser(description="Train an NNLM or RNN/LSTM/GRU causal language model with TBPTT.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    model = parser.add_argument_group("model")
    model.add_argument("--model_family", choices=sorted(MODEL_FAMILIES), default="rnn")
    model.add_argument("--preset", help="named preset of the family's config (e.g. tiny, zaremba-small, bengio-2003)")
    model.add_argument("--config_overrides", help='comma-separated config fields, e.g. "hidden_size=512,cell_type=gru"')
    model.add_argument("--model_name_or_path", help="an existing model folder to continue training instead")
    tok = parser.add_argument_group("tokenizer")
    tok.add_argument("--tokenizer_name_or_path", help="an existing tokenizer folder")
    tok.add_argument("--tokenizer_kind", default="char", help="kind of tokenizer to train: char, word, bpe, wordpiece, unigram")
    tok.add_argument("--vocab_size", type=int, help="vocabulary size of a trained tokenizer (None: train_tokenizer's)")
    tok.add_argument("--min_frequency", type=int,
                     help="minimum count of a token of a trained tokenizer (None: train_tokenizer's)")
    data = parser.add_argument_group("data")
    data.add_argument("--train_file", help="plain .txt file: the whole file is one stream")
    data.add_argument("--validation_file", help="plain .txt file (None: the end of the training text)")
    data.add_argument("--dataset_name", help="a datasets name (instead of --train_file)")
    data.add_argument("--dataset_config_name")
    data.add_argument("--text_column", default="text")
    data.add_argument("--validation_split_percentage", type=float, default=10.0,
                      help="without validation text: the last N %% of the training text (by characters)")
    data.add_argument("--preprocessing_num_workers", type=int, default=None)
    _add_engine_arguments(parser)
    return parser


# --------------------------------------------------------------------------- pieces of main


def configure_logging() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    import datasets
    import transformers

    datasets.utils.logging.set_verbosity_warning()
    transformers.utils.logging.set_verbosity_warning()


def _train_tokenizer(args: argparse.Namespace, train_texts: list[str], accelerator: Accelerator):
    """Train a tokenizer on the training text (main process), save it in output_dir, load it everywhere."""
    from transformers import AutoTokenizer

    output_dir = Path(args.output_dir)
    reuse = args.resume_from_checkpoint is not None and (output_dir / "tokenizer.json").is_file()
    if not reuse and accelerator.is_main_process:
        try:
            from ..tokenization import train_tokenizer
        except ImportError as err:
            raise RuntimeError("Training a tokenizer needs hf_seqmodels.tokenization.train_tokenizer, which is not "
                               "available; pass --tokenizer_name_or_path instead.") from err
        output_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=output_dir) as tmp:
            text_file = Path(tmp) / "train.txt"
            text_file.write_text("".join(train_texts), encoding="utf-8")
            sizes = {k: getattr(args, k) for k in ("vocab_size", "min_frequency") if getattr(args, k) is not None}
            tokenizer = train_tokenizer([str(text_file)], kind=args.tokenizer_kind, **sizes)
        tokenizer.save_pretrained(output_dir)
        logger.info(f"Trained a {args.tokenizer_kind} tokenizer of {len(tokenizer)} tokens on the training text.")
    accelerator.wait_for_everyone()
    return AutoTokenizer.from_pretrained(output_dir)


def load_tokenizer(args: argparse.Namespace, train_texts: list[str], accelerator: Accelerator):
    """The tokenizer of --tokenizer_name_or_path, of --model_name_or_path, or one trained on the text."""
    from transformers import AutoTokenizer

    source = args.tokenizer_name_or_path or args.model_name_or_path
    if source:
        return AutoTokenizer.from_pretrained(source)
    return _train_tokenizer(args, train_texts, accelerator)


def tokenizer_config_fields(tokenizer) -> dict[str, Any]:
    """``vocab_size`` and the pad/bos/eos ids a model config takes from its tokenizer."""
    return {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}


def check_model_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """Fail fast (before any data is read) on a missing preset or a bad override; returns the overrides."""
    if args.model_name_or_path:
        return {}
    if not args.preset:
        raise ValueError("Give --preset (a named config of --model_family) or --model_name_or_path.")
    config_class = MODEL_FAMILIES[args.model_family]
    if args.preset not in config_class.PRESETS:
        raise ValueError(f"Invalid `--preset`={args.preset!r} for --model_family {args.model_family}: expected one of "
                         f"{', '.join(config_class.available_presets())}.")
    return parse_config_overrides(args.config_overrides, config_class)


def build_model(args: argparse.Namespace, tokenizer):
    """A fresh model from --model_family/--preset/--config_overrides, or the one of --model_name_or_path."""
    from transformers import AutoModelForCausalLM

    if args.model_name_or_path:
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path)
        if model.config.vocab_size < len(tokenizer):
            raise ValueError(f"The model's vocab_size={model.config.vocab_size} is smaller than the tokenizer's "
                             f"{len(tokenizer)} tokens.")
        return model
    config_class = MODEL_FAMILIES[args.model_family]
    overrides = check_model_arguments(args)
    config = config_class.from_preset(args.preset, **overrides, **tokenizer_config_fields(tokenizer))
    return AutoModelForCausalLM.from_config(config)


def engine_arguments(args: argparse.Namespace) -> LMTrainingArguments:
    return LMTrainingArguments(**{f.name: getattr(args, f.name) for f in dataclasses.fields(LMTrainingArguments)})


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, load text and tokenizer, build the model and train it; returns the results dict."""
    args = build_parser().parse_args(argv)
    configure_logging()
    training_args = engine_arguments(args)
    check_model_arguments(args)
    accelerator = make_accelerator(training_args)  # sets up the processes of `accelerate launch` / torchrun
    texts = load_text_splits(args.train_file, args.validation_file, args.dataset_name, args.dataset_config_name,
                             args.text_column, args.validation_split_percentage)
    tokenizer = load_tokenizer(args, texts.train, accelerator)
    set_seed(training_args.seed)
    model = build_model(args, tokenizer)
    train_ids = tokenize_texts(texts.train, tokenizer, num_proc=args.preprocessing_num_workers)
    eval_ids = tokenize_texts(texts.validation, tokenizer, num_proc=args.preprocessing_num_workers)
    logger.info(f"{type(model).__name__} with {model.num_parameters():,} parameters; "
                f"{train_ids.numel():,} training and {eval_ids.numel():,} validation tokens.")
    return train_causal_lm(model, tokenizer, train_ids, eval_ids, training_args, accelerator,
                           training_data=describe_data(args, tokenizer))


def describe_data(args: argparse.Namespace, tokenizer) -> str:
    """One sentence for the model card: which text, which split, which tokenizer."""
    source = f"`{Path(args.train_file).name}`" if args.train_file else f"the `{args.dataset_name}` dataset"
    validation = (f"validated on `{Path(args.validation_file).name}`" if args.validation_file else
                  f"validated on the last {args.validation_split_percentage:g} % of its characters")
    how = (f"a tokenizer from `{args.tokenizer_name_or_path}`" if args.tokenizer_name_or_path
           else f"a {args.tokenizer_kind}-level tokenizer trained on the training text")
    return f"Trained on {source}, {validation}; {len(tokenizer)} tokens, {how}."


__all__ = ["build_model", "build_parser", "main", "parse_config_overrides"]
