"""What the training command lines share: typed flags from dataclass fields, config overrides,
logging set-up and the tokenizer (loaded, or trained on the training text)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import tempfile
from pathlib import Path
from typing import Any

from accelerate import Accelerator
from accelerate.logging import get_logger

from ...hub import SOURCE_TOKENIZER_FOLDER

logger = get_logger(__name__)

TOKENIZER_FIELDS = ("vocab_size", "pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
                    "source_vocab_size")

ENGINE_HELP = {
    "output_dir": "folder for checkpoints, the final model, tokenizer, history and plot",
    "num_train_epochs": "passes over the training data",
    "max_steps": "stop after this many updates (caps the epochs)",
    "max_train_minutes": "stop cleanly (evaluate, checkpoint, save) after this many minutes",
    "optimizer": "sgd or adamw",
    "lr_scheduler": "zaremba, cosine, noam or constant",
    "decay_start_epoch": "zaremba: epochs at the initial learning rate",
    "decay_factor": "zaremba: factor applied each later epoch",
    "min_lr_ratio": "cosine: final learning rate / initial",
    "warmup_steps": "linear warm-up updates (noam: the paper's warmup_steps)",
    "gradient_accumulation_steps": "batches per update: the gradients of N batches are summed, their losses weighted "
                                   "so that the update sees the mean over all their targets (the effective batch is "
                                   "N x batch size x processes)",
    "max_grad_norm": "clip the gradient norm to this (none: no clipping)",
    "checkpointing_steps": "also checkpoint every N updates (checkpoints are always written at epoch ends)",
    "save_total_limit": "keep at most this many checkpoints (none: all)",
    "resume_from_checkpoint": "'latest' or a checkpoint folder",
    "generation_max_new_tokens": "max_new_tokens of the saved generation_config",
    "mixed_precision": "no, fp16 or bf16 (accelerate)",
    "use_cpu": "force the CPU even when a GPU is present",
    "report_to": "experiment trackers (accelerate): none, all, or a list such as tensorboard,wandb; "
                 "they write under OUTPUT_DIR/runs",
    "gradient_checkpointing": "recompute activations in the backward pass: each layer (Transformer, BERT), each "
                              "recurrent stack (RNN, LSTM, GRU models); not the NNLM",
    "torch_compile": "compile the model with torch.compile (inductor) before training",
}


def parse_typed(name: str, raw: str, annotation: str) -> Any:
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
        overrides[key] = parse_typed(key, raw, fields[key])
    return overrides


def check_model_arguments(args: argparse.Namespace, families: dict[str, type]) -> dict[str, Any]:
    """Fail fast (before any data is read) on a missing preset or a bad override; returns the overrides."""
    if args.model_name_or_path:
        return {}
    if not args.preset:
        raise ValueError("Give --preset (a named config of --model_family) or --model_name_or_path.")
    if args.model_family not in families:
        raise ValueError(f"Invalid `--model_family`={args.model_family!r}: expected one of {', '.join(families)}.")
    config_class = families[args.model_family]
    if args.preset not in config_class.PRESETS:
        raise ValueError(f"Invalid `--preset`={args.preset!r} for --model_family {args.model_family}: expected one of "
                         f"{', '.join(config_class.available_presets())}.")
    return parse_config_overrides(args.config_overrides, config_class)


def build_model(args, tokenizer, families: dict[str, type], auto_class, **config_kwargs):
    """A fresh ``auto_class`` model from --model_family/--preset/--config_overrides, or --model_name_or_path's.

    ``args`` is the parsed flags or any object with those fields (e.g. fine-tuning's model arguments);
    ``config_kwargs`` (a head's ``num_labels``, ``id2label``, ...) go to the config either way."""
    if args.model_name_or_path:
        model = auto_class.from_pretrained(args.model_name_or_path,
                                           trust_remote_code=getattr(args, "trust_remote_code", False), **config_kwargs)
        if model.config.vocab_size < len(tokenizer):
            raise ValueError(f"The model's vocab_size={model.config.vocab_size} is smaller than the tokenizer's "
                             f"{len(tokenizer)} tokens: give the tokenizer the model was trained with.")
        return bind_tokenizer(model, tokenizer)
    overrides = check_model_arguments(args, families)
    config = families[args.model_family].from_preset(args.preset, **overrides, **tokenizer_config_fields(tokenizer),
                                                     **config_kwargs)
    return bind_tokenizer(auto_class.from_config(config), tokenizer)


def bind_tokenizer(model, tokenizer):
    """Let a model copy what it needs from its tokenizer (``model.bind_tokenizer``: the characters of each
    token for a character encoder, the special-token ids a tagger leaves untagged); returns the model."""
    if hasattr(model, "bind_tokenizer"):
        model.bind_tokenizer(tokenizer)
    return model


def add_model_arguments(parser: argparse.ArgumentParser, families: dict[str, type], default: str, examples: str) -> None:
    model = parser.add_argument_group("model")
    model.add_argument("--model_family", choices=sorted(families), default=default)
    model.add_argument("--preset", help=f"named preset of the family's config (e.g. {examples})")
    model.add_argument("--config_overrides", help='comma-separated config fields, e.g. "hidden_size=512,cell_type=gru"')
    model.add_argument("--model_name_or_path", help="an existing model folder to continue training instead")


def add_engine_arguments(parser: argparse.ArgumentParser, args_class: type, help_texts: dict[str, str]) -> None:
    """One flag per field of the dataclass ``args_class`` (``--no-x`` turns a boolean off; ``none`` unsets)."""
    group = parser.add_argument_group(f"training engine ({args_class.__name__})")
    for f in dataclasses.fields(args_class):
        annotation = str(f.type)
        help_text = help_texts.get(f.name, ENGINE_HELP.get(f.name, f.name.replace("_", " ")))
        if annotation == "bool":
            group.add_argument(f"--{f.name}", action=argparse.BooleanOptionalAction, default=f.default, help=help_text)
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        group.add_argument(f"--{f.name}", type=lambda raw, n=f.name, a=annotation: parse_typed(n, raw, a),
                           default=default, required=f.default is dataclasses.MISSING, help=help_text)


def engine_arguments(args: argparse.Namespace, args_class: type):
    """The ``args_class`` dataclass filled from the parsed flags of :func:`add_engine_arguments`."""
    return args_class(**{f.name: getattr(args, f.name) for f in dataclasses.fields(args_class)})


def add_dataset_label_argument(group) -> None:
    group.add_argument("--dataset_label", help="the name of the evaluation data in the model card's model-index "
                       "metadata (default: --dataset_name, or the name of the folder holding the training file)")


def dataset_label(args) -> str | None:
    """What the model card's ``model-index`` calls the data: ``--dataset_label``, ``--dataset_name``, or the
    folder of the (first) training file (``data/multi30k/train.tsv`` → ``multi30k``). ``args`` is the parsed
    flags or any object with those fields (e.g. fine-tuning's data arguments)."""
    label = getattr(args, "dataset_label", None) or getattr(args, "dataset_name", None)
    if label:
        return label
    train_file = getattr(args, "train_file", None)
    if isinstance(train_file, list):
        train_file = train_file[0] if train_file else None
    if not train_file:
        return None
    return Path(train_file).resolve().parent.name or None


def continued_from(args) -> str:
    """The model card's note that training started from an existing model (--model_name_or_path), or ""."""
    if not getattr(args, "model_name_or_path", None):
        return ""
    return f" Training continued from the weights of `{Path(args.model_name_or_path).name}`."


def configure_logging() -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    import datasets
    import transformers

    datasets.utils.logging.set_verbosity_warning()
    transformers.utils.logging.set_verbosity_warning()


def _train_tokenizer(args: argparse.Namespace, train_texts: list[str], accelerator: Accelerator,
                     add_bert_special_tokens: bool = False, subfolder: str | None = None,
                     vocab_size: int | None = None, **special_token_switches: bool):
    """Train a tokenizer on the training text (main process), save it in output_dir (or its ``subfolder``),
    load it everywhere. ``vocab_size`` replaces --vocab_size; ``special_token_switches`` (``add_bos_token``,
    ``add_eos_token``) choose the template, e.g. ``A <eos>`` for a translation model's sentences."""
    from transformers import AutoTokenizer

    output_dir = Path(args.output_dir) / subfolder if subfolder else Path(args.output_dir)
    reuse = args.resume_from_checkpoint is not None and (output_dir / "tokenizer.json").is_file()
    if not reuse and accelerator.is_main_process:
        from ...tokenization import CleaningConfig, train_tokenizer

        output_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=output_dir) as tmp:
            text_file = Path(tmp) / "train.txt"
            text_file.write_text("".join(train_texts), encoding="utf-8")
            sizes = {k: getattr(args, k) for k in ("vocab_size", "min_frequency") if getattr(args, k) is not None}
            if vocab_size is not None:
                sizes["vocab_size"] = vocab_size
            cleaning = CleaningConfig(lowercase=True) if args.lowercase else None
            tokenizer = train_tokenizer([str(text_file)], kind=args.tokenizer_kind, cleaning=cleaning,
                                        add_bert_special_tokens=add_bert_special_tokens, **sizes,
                                        **special_token_switches)
        tokenizer.save_pretrained(output_dir)
        where = f" (saved in {subfolder}/)" if subfolder else ""
        logger.info(f"Trained a {args.tokenizer_kind} tokenizer of {len(tokenizer)} tokens on the training text{where}.")
    accelerator.wait_for_everyone()
    return AutoTokenizer.from_pretrained(output_dir)


def finish_processes(accelerator: Accelerator) -> None:
    """End a run's processes together: wait until every one is done (the main process writes the final model,
    card and pictures last), then take the process group down, so that no process exits while another still
    needs it and none leaves the collective backend's threads to the interpreter's exit. Nothing to do on one
    process."""
    accelerator.wait_for_everyone()
    accelerator.state.destroy_process_group()


def load_tokenizer(args: argparse.Namespace, train_texts: list[str], accelerator: Accelerator,
                   add_bert_special_tokens: bool = False, **special_token_switches: bool):
    """The tokenizer of --tokenizer_name_or_path, of --model_name_or_path, or one trained on ``train_texts``
    (with ``[CLS]``/``[SEP]``/``[MASK]`` when ``add_bert_special_tokens``, with the template that
    ``special_token_switches`` choose)."""
    from transformers import AutoTokenizer

    source = args.tokenizer_name_or_path or args.model_name_or_path
    if source:
        return AutoTokenizer.from_pretrained(source)
    return _train_tokenizer(args, train_texts, accelerator, add_bert_special_tokens, **special_token_switches)


def add_tokenizer_arguments(parser: argparse.ArgumentParser, default_kind: str) -> None:
    tok = parser.add_argument_group("tokenizer")
    tok.add_argument("--tokenizer_name_or_path", help="an existing tokenizer folder")
    tok.add_argument("--tokenizer_kind", default=default_kind,
                     help="kind of tokenizer to train: char, word, bpe, wordpiece, unigram")
    tok.add_argument("--vocab_size", type=int, help="vocabulary size of a trained tokenizer (None: train_tokenizer's)")
    tok.add_argument("--min_frequency", type=int,
                     help="minimum count of a token of a trained tokenizer (None: train_tokenizer's)")
    tok.add_argument("--lowercase", action="store_true",
                     help="a trained tokenizer lowercases its input (an uncased vocabulary, built into its normalizer)")


def add_source_tokenizer_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of encoder-decoders whose source side has a tokenizer (and vocabulary) of its own."""
    tok = parser.add_argument_group("source tokenizer (separate source and target vocabularies)")
    tok.add_argument("--separate_vocabularies", action="store_true",
                     help="one tokenizer for the source side and one for the target side (trained on their own "
                          "side, or loaded) instead of one shared tokenizer; the source tokenizer is saved in "
                          f"output_dir/{SOURCE_TOKENIZER_FOLDER}/")
    tok.add_argument("--source_tokenizer_name_or_path",
                     help="an existing source-side tokenizer folder (implies --separate_vocabularies); "
                          "--tokenizer_name_or_path then names the target side's")
    tok.add_argument("--source_vocab_size", type=int,
                     help="vocabulary size of a trained source tokenizer (None: --vocab_size)")


def uses_separate_vocabularies(args: argparse.Namespace) -> bool:
    """Whether the flags ask for a source tokenizer of its own: --separate_vocabularies,
    --source_tokenizer_name_or_path, or a --model_name_or_path folder with a source tokenizer."""
    model_folder = Path(args.model_name_or_path) if args.model_name_or_path else None
    from_model = model_folder is not None and (model_folder / SOURCE_TOKENIZER_FOLDER).is_dir()
    separate = bool(args.separate_vocabularies or args.source_tokenizer_name_or_path or from_model)
    if args.source_vocab_size is not None and not separate:
        raise ValueError(f"Invalid `--source_vocab_size`={args.source_vocab_size}: it sizes a separate source "
                         "tokenizer; add --separate_vocabularies, or leave it out for one shared vocabulary.")
    return separate


#: A translation model's sentences are ``A <eos>`` on both sides, as transformers' translation tokenizers
#: (Marian, T5) encode them: ``tokenizer(text_target=...)`` then gives model-ready labels.
SEQ2SEQ_TEMPLATE = {"add_bos_token": False, "add_eos_token": True}


def load_source_tokenizer(args: argparse.Namespace, train_texts: list[str], accelerator: Accelerator):
    """The source-side tokenizer of --source_tokenizer_name_or_path, of --model_name_or_path's
    ``source_tokenizer/`` subfolder, or one trained on ``train_texts`` (the source side) with
    --source_vocab_size tokens (default --vocab_size) and saved in ``output_dir/source_tokenizer/``
    (reused when resuming)."""
    from transformers import AutoTokenizer

    if args.source_tokenizer_name_or_path:
        return AutoTokenizer.from_pretrained(args.source_tokenizer_name_or_path)
    if args.model_name_or_path:
        folder = Path(args.model_name_or_path) / SOURCE_TOKENIZER_FOLDER
        if not folder.is_dir():
            raise ValueError(f"--model_name_or_path {args.model_name_or_path!r} has no {SOURCE_TOKENIZER_FOLDER}/ "
                             "folder: give the source tokenizer with --source_tokenizer_name_or_path.")
        return AutoTokenizer.from_pretrained(folder)
    vocab_size = args.source_vocab_size if args.source_vocab_size is not None else args.vocab_size
    return _train_tokenizer(args, train_texts, accelerator, subfolder=SOURCE_TOKENIZER_FOLDER, vocab_size=vocab_size,
                            **SEQ2SEQ_TEMPLATE)


def tokenizer_config_fields(tokenizer) -> dict[str, Any]:
    """``vocab_size`` and the pad/bos/eos ids a model config takes from its tokenizer."""
    return {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}


__all__ = [
    "ENGINE_HELP",
    "finish_processes",
    "TOKENIZER_FIELDS",
    "add_engine_arguments",
    "add_source_tokenizer_arguments",
    "add_tokenizer_arguments",
    "add_model_arguments",
    "build_model",
    "check_model_arguments",
    "configure_logging",
    "continued_from",
    "engine_arguments",
    "SEQ2SEQ_TEMPLATE",
    "load_source_tokenizer",
    "load_tokenizer",
    "parse_config_overrides",
    "parse_typed",
    "tokenizer_config_fields",
    "uses_separate_vocabularies",
]
