"""What the training command lines share: parsing (transformers' ``HfArgumentParser``, also from one JSON or
YAML file), one-line errors, the model and tokenizer arguments, the recipe, the start of a run, config
overrides, logging set-up and the tokenizer (loaded, or trained on the training text).

Every script's ``main(argv)`` raises on bad input (a ``ValueError`` naming the argument, the value and what
is allowed); :func:`run_command` is what the command lines call around it: a user's mistake prints one line
``error: ...`` and exits with status 2, and ``--debug`` (or ``HF_SEQMODELS_DEBUG=1``) shows the traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from accelerate import Accelerator
from accelerate.logging import get_logger
from transformers import HfArgumentParser

from ...cards import SOURCE_TOKENIZER_FOLDER
from ...tokenization import TOKENIZER_KINDS
from .arguments import EngineArguments
from .launch import make_accelerator
from .run_files import claim_output_dir
from .tokenizers import (  # noqa: F401  (the scripts read them from here)
    SEQ2SEQ_TEMPLATE,
    add_tokenizer_flags,
    load_source_tokenizer,
    load_tokenizer,
    tokenizer_config_fields,
    tokenizer_fields,
    uses_separate_vocabularies,
)

logger = get_logger(__name__)

TOKENIZER_FIELDS = ("vocab_size", "pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
                    "source_vocab_size")

#: what a user can get wrong on a command line: printed as one line by :func:`run_command`
USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``--help`` with every flag's default (as transformers' parser shows them) and the description and epilog as
    written, so that the examples of a script's docstring keep their lines."""


class CommandLineParser(HfArgumentParser):
    """``HfArgumentParser`` whose errors are one line, ``error: ...``, with exit status 2; ``epilog`` (a script's
    docstring, with its examples) follows the flags in ``--help`` as written."""

    def __init__(self, dataclass_types, **kwargs):
        super().__init__(dataclass_types, formatter_class=HelpFormatter, **kwargs)

    def error(self, message: str):
        print(f"error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def run_command(main: Callable[[list[str] | None], Any], argv: Sequence[str] | None = None) -> int:
    """Run a script's ``main``; a user error (:data:`USER_ERRORS`) prints ``error: ...`` and returns 2, unless
    ``--debug`` is on the command line or ``HF_SEQMODELS_DEBUG`` is set, which show the traceback. A process of
    a multi-process launch that finished its work leaves at once (:func:`leave_launched_process`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        main(argv)
    except USER_ERRORS as error:
        if "--debug" in argv or os.environ.get("HF_SEQMODELS_DEBUG", "") not in ("", "0"):
            raise
        message = str(error.args[0]) if isinstance(error, KeyError) else str(error)
        print(f"error: {' '.join(message.split())}", file=sys.stderr)
        return 2
    if launched_processes() > 1:
        leave_launched_process()
    return 0


def launched_processes() -> int:
    """How many processes the launcher (``accelerate launch``, torchrun, deepspeed) started for this run: its
    ``WORLD_SIZE``, 1 for a plain ``python`` command."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def leave_launched_process() -> None:
    """End one process of a finished multi-process run, its work written (:func:`finish_processes`), without
    finalising the interpreter.

    ``destroy_process_group`` shuts the collective backend down, but while any object still refers to a
    process group (FSDP2's device meshes and torch's DTensor caches keep theirs for as long as the process
    lives) its gloo worker threads live on, and the interpreter's finalisation can free the last tensors they
    hold. Such a thread then needs the GIL of an interpreter that is going away, and the process aborts
    ("terminate called without an active exception", SIGABRT), so that the launcher reports a finished run as
    failed. Leaving at once, after flushing what was logged and printed, is what stays correct."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing left to flush
            pass
    os._exit(0)


def parse_command_line(parser: CommandLineParser, argv: Sequence[str] | None) -> tuple:
    """The dataclasses of ``parser`` (a script's ``build_parser()``) filled from ``argv``, or from its only item when
    that is a ``.json``/``.yaml`` file of arguments (as transformers' example scripts accept)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 1 and argv[0].endswith((".json", ".yaml", ".yml")):
        if not Path(argv[0]).is_file():
            raise FileNotFoundError(f"Arguments file {argv[0]!r} does not exist.")
        if argv[0].endswith(".json"):
            parsed = tuple(parser.parse_json_file(json_file=argv[0]))
        else:
            parsed = tuple(parser.parse_yaml_file(yaml_file=argv[0]))
    else:
        parsed = tuple(parser.parse_args_into_dataclasses(args=argv))
    check_data_files(parsed)
    return parsed


def check_data_files(parsed: Sequence[Any]) -> None:
    """Every data file a ``--*_file`` flag names (``--train_file``, ``--validation_file``, ``--test_file``,
    ``--train_source_file``...; one path or a list) must exist: a missing one fails before anything is read,
    with one line naming the flag and the path. ``parsed``: the parsed dataclasses, or an ``argparse`` namespace."""
    for arguments in parsed:
        values = (dataclasses.asdict(arguments) if dataclasses.is_dataclass(arguments) else vars(arguments))
        for name, value in values.items():
            if not name.endswith("_file") or value is None:
                continue
            for path in value if isinstance(value, list | tuple) else [value]:
                if not Path(path).is_file():
                    problem = "is a folder, not a file" if Path(path).is_dir() else "does not exist"
                    raise FileNotFoundError(f"`--{name}` {str(path)!r} {problem}.")


def merged(*dataclass_objects) -> SimpleNamespace:
    """One namespace with the fields of all the parsed dataclasses (the model, data and training arguments)."""
    values: dict[str, Any] = {}
    for obj in dataclass_objects:
        values.update({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
    return SimpleNamespace(**values)


def model_arguments(families: dict[str, type], default_family: str, default_tokenizer_kind: str,
                    examples: str, source_tokenizer: bool = False) -> type:
    """The model and tokenizer arguments of a script whose model families are ``families`` (name → config
    class), as a dataclass for :func:`parse_command_line`; names as in transformers' example scripts, plus
    ``--model_family``/``--preset`` and the tokenizer-training options."""
    help_ = lambda text: {"help": text}  # noqa: E731
    fields = [
        ("model_name_or_path", str | None, field(default=None, metadata=help_(
            "a saved model folder to continue from (its config and weights)"))),
        ("model_family", str | None, field(default=None, metadata=help_(
            f"family of a new model: {', '.join(sorted(families))} (default: the family of --preset where only one "
            f"family has a preset of that name, else {default_family})"))),
        ("preset", str | None, field(default=None, metadata=help_(
            f"named config and training recipe of --model_family (e.g. {examples}; `hf-seqmodels presets` lists them)"))),
        ("config_name", str | None, field(default=None, metadata=help_(
            "a config (folder or config.json) of a new model, instead of --preset"))),
        ("config_overrides", str | None, field(default=None, metadata=help_(
            'comma-separated config fields of a new model, e.g. "hidden_size=512,cell_type=gru"'))),
        *tokenizer_fields(default_tokenizer_kind),
        ("trust_remote_code", bool, field(default=False, metadata=help_("allow a Hub model's own code"))),
    ]
    if source_tokenizer:
        fields += [
            ("separate_vocabularies", bool, field(default=False, metadata=help_(
                "one tokenizer per side (source, target) instead of one shared one; the source tokenizer is saved "
                f"in OUTPUT_DIR/{SOURCE_TOKENIZER_FOLDER}/"))),
            ("source_tokenizer_name", str | None, field(default=None, metadata=help_(
                "a saved source-side tokenizer (implies --separate_vocabularies)"))),
            ("source_vocab_size", int | None, field(default=None, metadata=help_(
                "vocabulary size of a trained source tokenizer (default: --vocab_size)"))),
        ]

    def check(self) -> None:
        if self.model_family is None:
            owners = [name for name, config_class in families.items() if self.preset in config_class.PRESETS]
            self.model_family = owners[0] if len(owners) == 1 and not self.model_name_or_path else default_family
        if self.model_family not in families:
            raise ValueError(f"Invalid `--model_family`={self.model_family!r}: expected one of "
                             f"{', '.join(sorted(families))}.")
        if self.tokenizer_kind not in TOKENIZER_KINDS:
            raise ValueError(f"Invalid `--tokenizer_kind`={self.tokenizer_kind!r}: expected one of "
                             f"{', '.join(TOKENIZER_KINDS)}.")
        if self.model_name_or_path or self.config_name:
            return
        if not self.preset:
            raise ValueError("Give --preset (a named config of --model_family), --config_name or --model_name_or_path.")
        config_class = families[self.model_family]
        if self.preset not in config_class.PRESETS:
            raise ValueError(f"Invalid `--preset`={self.preset!r} for --model_family {self.model_family}: expected "
                             f"one of {', '.join(config_class.available_presets())}.")
        parse_config_overrides(self.config_overrides, config_class)

    return dataclasses.make_dataclass("ModelArguments", fields, namespace={"__post_init__": check})


def model_family(model_args):
    """The registry's :class:`~hf_seqmodels.families.Family` of the model the arguments describe: --model_family's,
    or that of the config of --model_name_or_path / --config_name; None for a model of another library (a Hub BERT)."""
    from ...registry import family_named, family_of

    source = model_args.model_name_or_path or model_args.config_name
    if not source:
        return family_named(model_args.model_family)
    from transformers import AutoConfig

    try:
        return family_of(AutoConfig.from_pretrained(source, trust_remote_code=model_args.trust_remote_code))
    except ValueError:
        return None


def model_preset(model_args) -> str | None:
    """The preset a new model is built from; None for a loaded model or one built from --config_name."""
    return None if model_args.model_name_or_path or model_args.config_name else model_args.preset


def family_recipe(model_args, task: str | type | None = None) -> dict[str, Any]:
    """The training recipe of the model the arguments describe (:meth:`Family.training_recipe`): the preset's, or the
    family's default for a loaded model or one built from --config_name; ``task`` picks a head's own recipe where
    the family has one. Empty (transformers' defaults) for a model of another library."""
    family = model_family(model_args)
    return {} if family is None else family.training_recipe(model_preset(model_args), task)


def start_run(training_args: EngineArguments) -> Accelerator:
    """The run's ``Accelerator``, after the output-folder rule (:func:`.run_files.claim_output_dir`), checked by
    the main process before anything is written into the folder, which then exists for every action (training,
    evaluation or prediction alone)."""
    accelerator = make_accelerator(training_args)
    if accelerator.is_main_process:
        claim_output_dir(training_args.output_dir, training_args.resume_from_checkpoint,
                         training_args.overwrite_output_dir)
        Path(training_args.output_dir).mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    return accelerator


def default_actions(training_args: EngineArguments) -> EngineArguments:
    """``--do_train --do_eval`` when none of ``--do_train/--do_eval/--do_predict`` is given."""
    if not (training_args.do_train or training_args.do_eval or training_args.do_predict):
        training_args.do_train = training_args.do_eval = True
    return training_args


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


def build_model(args, tokenizer, families: dict[str, type], auto_class, **config_kwargs):
    """A fresh ``auto_class`` model from --model_family/--preset (or --config_name) with --config_overrides, or
    --model_name_or_path's.

    ``args`` is the parsed flags or any object with those fields (e.g. fine-tuning's model arguments);
    ``config_kwargs`` (a head's ``num_labels``, ``id2label``, ...) go to the config either way."""
    if args.model_name_or_path:
        model = auto_class.from_pretrained(args.model_name_or_path,
                                           trust_remote_code=getattr(args, "trust_remote_code", False), **config_kwargs)
        if model.config.vocab_size < len(tokenizer):
            raise ValueError(f"The model's vocab_size={model.config.vocab_size} is smaller than the tokenizer's "
                             f"{len(tokenizer)} tokens: give the tokenizer the model was trained with.")
        return bind_tokenizer(model, tokenizer)
    if getattr(args, "config_name", None):
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(args.config_name, trust_remote_code=getattr(args, "trust_remote_code", False))
        overrides = parse_config_overrides(args.config_overrides, type(config))
        config = type(config).from_dict({**config.to_dict(), **overrides, **tokenizer_config_fields(tokenizer),
                                         **config_kwargs})
    else:
        overrides = parse_config_overrides(args.config_overrides, families[args.model_family])
        config = families[args.model_family].from_preset(args.preset, **overrides, **tokenizer_config_fields(tokenizer),
                                                         **config_kwargs)
    return bind_tokenizer(auto_class.from_config(config), tokenizer)


def bind_tokenizer(model, tokenizer):
    """Let a model copy what it needs from its tokenizer (``model.bind_tokenizer``: the characters of each
    token for a character encoder, the special-token ids a tagger leaves untagged); returns the model."""
    if hasattr(model, "bind_tokenizer"):
        model.bind_tokenizer(tokenizer)
    return model


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


def finish_processes(accelerator: Accelerator) -> None:
    """End a run's processes together: wait until every one is done (the main process writes the final model,
    card and pictures last), then take the process group down, so that no process exits while another still
    needs it. Nothing to do on one process. The command lines then leave each process at once
    (:func:`leave_launched_process`)."""
    accelerator.wait_for_everyone()
    accelerator.state.destroy_process_group()


__all__ = [
    "CommandLineParser",
    "SEQ2SEQ_TEMPLATE",
    "TOKENIZER_FIELDS",
    "USER_ERRORS",
    "add_tokenizer_flags",
    "build_model",
    "check_data_files",
    "configure_logging",
    "continued_from",
    "dataset_label",
    "default_actions",
    "family_recipe",
    "model_family",
    "model_preset",
    "finish_processes",
    "launched_processes",
    "leave_launched_process",
    "load_source_tokenizer",
    "load_tokenizer",
    "merged",
    "model_arguments",
    "parse_command_line",
    "parse_config_overrides",
    "parse_typed",
    "run_command",
    "start_run",
    "tokenizer_config_fields",
    "tokenizer_fields",
    "uses_separate_vocabularies",
]
