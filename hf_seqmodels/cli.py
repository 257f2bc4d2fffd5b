"""The ``hf-seqmodels`` command: ``demo``, ``train-lm``, ``train-seq2seq``, ``pretrain-bert``, ``finetune``,
``train-tokenizer``, ``ngram``, ``embeddings``, ``presets``, ``export`` and ``push``."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COMMANDS = {"train-lm": ".training.lm.cli", "train-seq2seq": ".training.seq2seq.cli",
            "pretrain-bert": ".training.bert.cli", "finetune": ".training.finetune.cli",
            "train-tokenizer": ".tokenization.cli", "ngram": ".training.classic.ngram_cli",
            "embeddings": ".training.classic.embeddings_cli"}


#: the demo's flags before they took the training scripts' names
DEMO_RENAMED = {"--epochs": "--num_train_epochs", "--minutes": "--max_time_minutes",
                "--batch_size": "--per_device_train_batch_size"}


class _Renamed(argparse.Action):
    """A flag that was renamed: one error line naming the new one."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} is now {self.new} (the training scripts' name)")


def _demo_parser(subparsers) -> None:
    from .demo import SIZES, DemoOptions
    from .models.recurrent_stack import CELL_TYPES

    defaults = DemoOptions()
    p = subparsers.add_parser(
        "demo", help="train a tokenizer and a small LM on the embedded corpus, generate, export",
        description="Train a tokenizer and a small language model on a small corpus (by default the "
        "embedded Tiny Shakespeare slice), report validation perplexity, generate with greedy search, beam "
        "search and sampling, and write a Hub-ready folder.",
        epilog="Example (the training options carry the training scripts' names):\n\n"
        "    hf-seqmodels demo --model_family nnlm --size tiny --num_train_epochs 1 --per_device_train_batch_size 16 "
        "--max_time_minutes 2",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--output_dir", default=defaults.output_dir)
    p.add_argument("--model_family", choices=sorted(SIZES), default=defaults.model_family)
    p.add_argument("--cell_type", choices=CELL_TYPES, default=defaults.cell_type,
                   help="recurrent cell (model_family rnn)")
    p.add_argument("--size", choices=["tiny", "small", "medium"], default=defaults.size)
    p.add_argument("--corpus_file", default=None, help="a UTF-8 text file instead of the embedded corpus")
    p.add_argument("--tokenizer_kind", choices=["char", "word", "bpe", "wordpiece", "unigram"],
                   default=defaults.tokenizer_kind)
    p.add_argument("--vocab_size", type=int, default=defaults.vocab_size, help="cap for word/subword tokenizers")
    p.add_argument("--num_train_epochs", type=float, default=defaults.num_train_epochs, help="passes over the data")
    p.add_argument("--max_time_minutes", type=float, default=defaults.max_time_minutes,
                   help="stop training cleanly after this many minutes")
    p.add_argument("--per_device_train_batch_size", type=int, default=defaults.per_device_train_batch_size,
                   help="stream rows per update")
    for old, new in DEMO_RENAMED.items():
        p.add_argument(old, action=_Renamed, new=new, help=argparse.SUPPRESS)
    p.add_argument("--block_size", type=int, default=defaults.block_size, help="tokens per training window")
    p.add_argument("--learning_rate", type=float, default=defaults.learning_rate)
    p.add_argument("--max_new_tokens", type=int, default=defaults.max_new_tokens)
    p.add_argument("--num_beams", type=int, default=defaults.num_beams)
    p.add_argument("--seed", type=int, default=defaults.seed)


def _push_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "push", help="publish a trained output folder as a Hub model repository (allow-listed files only)",
        description="Validate a trained output folder (config.json with auto_map, model.safetensors, a model card "
        "whose YAML header parses, no pickle files) and upload its config, weights, generation config, tokenizer, "
        "model code, README.md and the card's images to a Hub model repository, created if needed. Checkpoints, "
        "optimizer states and training logs stay local. The token comes from --token, HF_TOKEN or "
        "`hf auth login`; prefer the last two (a command-line token is visible to other users of the machine).",
    )
    p.add_argument("folder", help="the output folder of a training run or of hf_seqmodels.cards.save_for_hub")
    p.add_argument("repo_id", help="the repository, e.g. user/char-lstm")
    p.add_argument("--private", action="store_true", help="create the repository as private")
    p.add_argument("--token", default=None, help="a Hub token (default: HF_TOKEN or the stored login)")
    p.add_argument("--dry-run", "--dry_run", dest="dry_run", action="store_true",
                   help="no network: write the folder that would be uploaded and list its files")
    p.add_argument("--dry_run_dir", "--dry-run-dir", dest="dry_run_dir", default=None,
                   help="where --dry-run writes the folder (an empty or new folder; default: a temporary folder)")
    p.add_argument("--commit_message", default="Upload with hf_seqmodels")


def _push(args: argparse.Namespace) -> int:
    from .publishing import PushError, format_file_list, push_folder_to_hub

    try:
        if args.dry_run:
            target = push_folder_to_hub(args.folder, args.repo_id, args.private, dry_run=True,
                                        dry_run_dir=args.dry_run_dir)
            files = sorted((p.relative_to(target).as_posix(), p.stat().st_size)
                           for p in Path(target).rglob("*") if p.is_file())
            print(f"Dry run, nothing uploaded. {args.repo_id} would receive ({target}):")
            print(format_file_list(files))
            return 0
        url = push_folder_to_hub(args.folder, args.repo_id, args.private, args.token,
                                 commit_message=args.commit_message)
    except PushError as error:
        print(f"hf-seqmodels push: error: {error}", file=sys.stderr)
        return 1
    print(f"Pushed {args.folder} to {url}")
    return 0


def _export_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "export", help="export a saved model with torch.export, to ONNX or to ExecuTorch, checking parity with eager mode",
        description="Load a saved model folder, export its forward pass with dynamic batch and sequence "
        "dimensions (ONNX: also the decoding graphs of every generative head, for generation in onnxruntime), "
        "compare the exported program with eager PyTorch on inputs of another size, and write README.md beside it.",
    )
    p.add_argument("--model", required=True, help="a folder written by save_pretrained")
    p.add_argument("--format", choices=["onnx", "torch", "executorch"], default="onnx",
                   help="executorch: .pte programs (XNNPACK delegate, batch 1) of the decoding graphs or the forward")
    p.add_argument("--quantize", choices=["int8"], default=None,
                   help="with --format onnx: replace the ONNX files by their dynamic int8 versions (onnxruntime)")
    p.add_argument("--output", required=True, help="the folder to write (created if needed)")


def _export(args: argparse.Namespace) -> int:
    from .export.executorch_export import ExecuTorchUnavailable, require_executorch
    from .export.exporting import export_model, load_saved_model
    from .export.quantization import quantize_onnx_export

    quantized = None
    try:
        if args.quantize and args.format != "onnx":
            raise ValueError(f"--quantize {args.quantize} applies to --format onnx, not --format {args.format}.")
        if args.format == "executorch":
            require_executorch()  # before loading the model
        model = load_saved_model(args.model)
        result = export_model(model, args.output, format=args.format)
        if args.quantize:
            quantized = quantize_onnx_export(model, result, args.quantize)
    except (ValueError, OSError, AssertionError, ExecuTorchUnavailable) as error:
        print(f"error: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=sys.stderr)
        return 2
    print(f"Exported {result.model_class} to {result.path} (largest difference from eager: {result.parity:.2e})")
    if quantized is not None:
        print(f"Quantized to int8: {quantized.ratio:.2f} of the float32 bytes, largest difference from eager "
              f"{quantized.parity:.2e} ({quantized.relative:.1%} of the outputs' largest magnitude)")
    if result.generation:
        same = "the same tokens as" if result.generation_parity else "NOT the same tokens as"
        names = ", ".join(path.name for path in result.generation.values())
        runtime = "executorch.runtime" if result.format == "executorch" else "onnxruntime"
        print(f"Decoding graphs: {names}; greedy decoding in {runtime} gave {same} eager generate()")
    return 0 if result.generation_parity in (None, True) else 1


# ------------------------------------------------------------------------------------------- presets ----
#: the classic models' configuration classes: ``{listing name: (module, class name, vectors per word)}``;
#: they carry their training settings themselves, and their size depends on the vocabulary they are fitted to
CLASSIC_CONFIGS = {"ngram": (".ngram", "NGramConfig", None), "word2vec": (".embeddings", "Word2VecConfig", 2),
                   "glove": (".embeddings", "GloVeConfig", 2), "svd": (".embeddings", "SVDConfig", 1)}


def _presets_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "presets", help="list every family's presets with parameter counts and the training recipe they carry",
        description="List the presets of every model family: the parameter count of the family's main model "
        "(built on the meta device, so nothing is allocated) and the training recipe the preset carries, keyed "
        "by the training scripts' argument names (explicit arguments override it); then the n-gram and "
        "embedding presets with their settings.",
    )
    p.add_argument("--family", default=None, help="only this family (rnn, bert, ..., ngram, word2vec, glove, svd)")
    p.add_argument("--format", choices=["table", "json"], default="table")


def preset_listing(only: str | None = None) -> dict[str, dict[str, Any]]:
    """``{family: {"config_class", "model_class", "presets": {preset: {"parameters", "recipe" or
    "settings"}}}}`` for every family of the registry and the classic models (or only the one named
    ``only``; ValueError naming the known ones otherwise)."""
    from .families import parameter_count
    from .registry import FAMILY_DESCRIPTIONS

    known = [f.name for f in FAMILY_DESCRIPTIONS] + list(CLASSIC_CONFIGS)
    if only is not None and only not in known:
        raise ValueError(f"--family {only!r} is not a family with presets; families: {', '.join(known)}")
    listing = {}
    crf_logger = logging.getLogger("hf_seqmodels")  # quiet the untagged BIO warning of the tagger presets
    level, crf_logger.level = crf_logger.level, logging.ERROR
    try:
        for family in FAMILY_DESCRIPTIONS:
            if only in (None, family.name):
                head, config_class = family.main_head, family.config_class
                listing[family.name] = {"config_class": config_class.__name__, "model_class": head.__name__,
                                        "presets": {name: {"parameters": parameter_count(head, config_class.from_preset(name)),
                                                           "recipe": family.training_recipe(name)}
                                                    for name in config_class.available_presets()}}
    finally:
        crf_logger.setLevel(level)
    for name in CLASSIC_CONFIGS:
        if only in (None, name):
            listing[name] = _classic_listing(name)
    return listing


def _classic_listing(name: str) -> dict[str, Any]:
    """A classic model's presets: the preset's own settings plus the training values it resolves to."""
    module, class_name, vectors_per_word = CLASSIC_CONFIGS[name]
    config_class = getattr(importlib.import_module(module, __package__), class_name)
    presets = {}
    for preset in config_class.available_presets():
        resolved = dataclasses.asdict(config_class.from_preset(preset))
        training = {k: resolved[k] for k in ("learning_rate", "epochs", "batch_size") if k in resolved}
        per_word = vectors_per_word * resolved["vector_size"] if vectors_per_word else None
        presets[preset] = {"parameters": None, "parameters_per_word": per_word,
                           "settings": {**config_class.PRESETS[preset], **training}}
    return {"config_class": class_name, "model_class": None, "presets": presets}


def _count(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def format_preset_table(listing: dict[str, dict[str, Any]]) -> str:
    """The listing as text: per family a header, then per preset its size and its recipe as ``key=value``."""
    lines = []
    for family, entry in listing.items():
        model = f" ({entry['model_class']})" if entry["model_class"] else f" ({entry['config_class']})"
        lines.append(f"{family}{model}")
        width = max(map(len, entry["presets"]))
        for preset, item in entry["presets"].items():
            size = _count(item["parameters"])
            if item.get("parameters_per_word"):
                size = f"{item['parameters_per_word']}/word"
            pairs = " ".join(f"{k}={_value(v)}" for k, v in (item.get("recipe") or item["settings"]).items())
            row = f"  {preset:<{width}}  {size:>8}  {pairs}"
            lines += textwrap.wrap(row, width=120, subsequent_indent=" " * (width + 14), break_on_hyphens=False)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _presets(args: argparse.Namespace) -> int:
    try:
        listing = preset_listing(args.family)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    text = json.dumps(listing, indent=2) + "\n" if args.format == "json" else format_preset_table(listing)
    sys.stdout.write(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``hf-seqmodels`` parser: the commands of this module, and the training commands by name (their flags
    are their modules' own: :data:`COMMANDS`)."""
    parser = argparse.ArgumentParser(prog="hf-seqmodels", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    _demo_parser(subparsers)
    _push_parser(subparsers)
    _export_parser(subparsers)
    _presets_parser(subparsers)
    subparsers.add_parser("train-lm", help="train a causal LM (same options as training/train_lm.py)",
                          add_help=False)
    subparsers.add_parser("train-seq2seq", help="train a translation model (same options as "
                          "training/train_seq2seq.py)", add_help=False)
    subparsers.add_parser("pretrain-bert", help="pretrain BERT with MLM + NSP (same options as "
                          "training/pretrain_bert.py)", add_help=False)
    subparsers.add_parser("finetune", help="fine-tune on classification, tagging or extractive QA "
                          "(same options as training/finetune.py)", add_help=False)
    subparsers.add_parser("train-tokenizer", help="train a tokenizer (same options as "
                          "tokenizer_scripts/train_tokenizer.py)", add_help=False)
    subparsers.add_parser("ngram", help="fit an n-gram LM (add-k or Kneser-Ney) and report validation perplexity "
                          "(same options as training/train_ngram.py)", add_help=False)
    subparsers.add_parser("embeddings", help="train word2vec, GloVe or SVD word vectors (same options as "
                          "training/train_embeddings.py)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        from .training.core.cli import run_command

        module = importlib.import_module(COMMANDS[argv[0]], __package__)
        return run_command(module.main, argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "push":
        return _push(args)
    if args.command == "export":
        return _export(args)
    if args.command == "presets":
        return _presets(args)
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
