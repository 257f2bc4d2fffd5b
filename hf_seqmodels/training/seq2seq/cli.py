"""Command line of ``training/train_seq2seq.py``: train a translation model on a parallel corpus.

Examples (the same command runs on one process, under ``accelerate launch`` or ``torchrun``)::

    python training/train_seq2seq.py \\
        --train_source_file data/train.en.gz --train_target_file data/train.de.gz \\
        --validation_source_file data/val.en.gz --validation_target_file data/val.de.gz \\
        --model_family rnn_seq2seq --preset rnnsearch --output_dir runs/rnnsearch

    python training/train_seq2seq.py --train_file train.tsv --source_field en --target_field de ...

A shared source/target tokenizer is trained on both sides of the training corpus unless
``--tokenizer_name_or_path`` names one. With ``--separate_vocabularies`` the source and the target
each get a tokenizer of their own (trained on their side, or loaded with
``--source_tokenizer_name_or_path`` / ``--tokenizer_name_or_path``); the model's encoder then has
``source_vocab_size`` embeddings, and the source tokenizer is saved in ``output_dir/source_tokenizer/``
next to the target tokenizer at the top (which decodes ``generate()``'s output). At the end the model translates ``--test_*`` (or the
validation set) with beam search, reports sacreBLEU, writes the translations and an attention heatmap
of the first sentence, and saves a Hub-ready folder.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import torch
from accelerate.logging import get_logger
from accelerate.utils import set_seed
from transformers import AutoModelForSeq2SeqLM

from ...registry import FAMILIES
from ..core.cards import engine_card_arguments, write_run_model_card
from ..core.cli import (
    SEQ2SEQ_TEMPLATE,
    add_dataset_label_argument,
    add_engine_arguments,
    add_model_arguments,
    add_source_tokenizer_arguments,
    add_tokenizer_arguments,
    build_model,
    check_model_arguments,
    configure_logging,
    continued_from,
    dataset_label,
    engine_arguments,
    finish_processes,
    load_source_tokenizer,
    load_tokenizer,
    tokenizer_config_fields,
    uses_separate_vocabularies,
)
from ..core.launch import make_accelerator
from ..core.plotting import plot_attention
from .data import ParallelCorpus, encode_corpus, load_parallel_dataset, read_parallel_corpus
from .trainer import Seq2SeqTrainingArguments, Seq2SeqTrainingLoop, evaluate_bleu

logger = get_logger(__name__)

MODEL_FAMILIES = {config.model_type.removeprefix("hfsm_"): config
                  for config, heads in FAMILIES.items() if AutoModelForSeq2SeqLM in heads}
SPLITS = ("train", "validation", "test")
ATTENTION_PLOT = "attention.png"

SEQ2SEQ_HELP = {
    "per_device_train_batch_size": "sentence pairs per process (unless --max_tokens_per_batch)",
    "max_tokens_per_batch": "padded tokens per global batch, batching by length (replaces sentence counts)",
    "eval_bleu_samples": "translate only the first N validation sentences for BLEU (none: all)",
}


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``training/train_seq2seq.py``: model, tokenizer, data and engine options."""
    parser = argparse.ArgumentParser(description="Train an attention RNN encoder-decoder or a Transformer for "
                                     "translation.", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_model_arguments(parser, MODEL_FAMILIES, "rnn_seq2seq", "tiny, rnnsearch, luong-general, transformer-base")
    add_tokenizer_arguments(parser, default_kind="bpe")
    add_source_tokenizer_arguments(parser)
    data = parser.add_argument_group("data")
    for split in SPLITS:
        data.add_argument(f"--{split}_file", help=f"{split} pairs: a .tsv or .jsonl file (optionally .gz)")
        data.add_argument(f"--{split}_source_file", help=f"{split} source sentences, one per line (or --{split}_file)")
        data.add_argument(f"--{split}_target_file", help=f"{split} target sentences, line-aligned with the source")
    data.add_argument("--source_field", default="source", help="TSV column or JSON key of the source (0 for no header)")
    data.add_argument("--target_field", default="target", help="TSV column or JSON key of the target (1 for no header)")
    data.add_argument("--dataset_name", help="a datasets name (instead of files), e.g. bentrevett/multi30k")
    data.add_argument("--dataset_config_name")
    add_dataset_label_argument(data)
    data.add_argument("--max_train_samples", type=int, help="use only the first N training pairs")
    add_engine_arguments(parser, Seq2SeqTrainingArguments, SEQ2SEQ_HELP)
    return parser


def load_split(args: argparse.Namespace, split: str) -> ParallelCorpus | None:
    """The corpus of ``split`` from its file(s) or from --dataset_name; None when none is given."""
    file, source, target = (getattr(args, f"{split}_{k}") for k in ("file", "source_file", "target_file"))
    if file or source or target:
        return read_parallel_corpus(file, source_file=source, target_file=target,
                                    source_field=args.source_field, target_field=args.target_field)
    if args.dataset_name:
        return load_parallel_dataset(args.dataset_name, args.dataset_config_name, split, args.source_field,
                                     args.target_field)
    return None


def write_translations(output_dir: str, name: str, sources: list[str], hypotheses: list[str],
                       references: list[str]) -> Path:
    """``{name}_translations.tsv``: source, hypothesis and reference of every sentence."""
    path = Path(output_dir) / f"{name}_translations.tsv"
    rows = ["source\thypothesis\treference"] + [
        "\t".join(t.replace("\t", " ") for t in row) for row in zip(sources, hypotheses, references, strict=True)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@torch.no_grad()
def attention_map(model, tokenizer, source_ids: list[int], num_beams: int = 5,
                  source_tokenizer=None) -> tuple[torch.Tensor, list[str], list[str]] | None:
    """Cross-attention ``(target_len, source_len)`` of the model's own beam-search translation of one
    sentence (last layer, heads averaged), with the source tokens (``source_tokenizer``, or ``tokenizer``
    when shared) and output tokens (``tokenizer``) as text; None for a model without attention (the plain
    encoder-decoder)."""
    model.eval()
    device = next(model.parameters()).device
    source = torch.tensor([source_ids], device=device)
    output = model.generate(source, num_beams=num_beams, do_sample=False)[0, 1:]  # drop decoder_start
    output = output[output != tokenizer.pad_token_id]
    out = model(input_ids=source, labels=output[None], output_attentions=True, return_dict=True)
    if not out.cross_attentions:
        return None
    weights = out.cross_attentions[-1][0]  # (T, S) or (H, T, S)
    weights = weights.mean(dim=0) if weights.dim() == 3 else weights
    tokens = lambda tok, ids: [tok.decode([i]).strip() or tok.convert_ids_to_tokens(i) for i in ids]  # noqa: E731
    return weights.float().cpu(), tokens(source_tokenizer or tokenizer, source_ids), tokens(tokenizer, output.tolist())


def report_test_set(loop: Seq2SeqTrainingLoop, corpus: ParallelCorpus, name: str) -> dict[str, Any]:
    """Translate ``corpus`` with beam search, report sacreBLEU, write the translations, the attention heatmap
    of the first sentence and the updated model card."""
    args, acc = loop.args, loop.accelerator
    model = acc.unwrap_model(loop.model)
    pairs = encode_corpus(corpus, loop.tokenizer, source_tokenizer=loop.source_tokenizer,
                          max_source_length=args.max_source_length, max_target_length=args.max_target_length,
                          drop_longer=False)
    bleu, hypotheses = evaluate_bleu(model, loop.tokenizer, pairs, corpus.targets,
                                     accelerator=loop.eval_accelerator,
                                     pad_token_id=loop.source_tokenizer.pad_token_id, batch_size=args.eval_batch_size,
                                     num_beams=args.eval_num_beams, max_new_tokens=args.eval_max_new_tokens)
    results = {f"{name}_bleu": bleu, f"{name}_sentences": len(pairs)}
    logger.info(f"sacreBLEU on {len(pairs)} {name} sentences (beam {args.eval_num_beams}): {bleu:.2f}")
    model = loop.gathered_model()  # a sharded model is gathered: what follows runs on the main process only
    if acc.is_main_process:
        write_translations(args.output_dir, name, corpus.sources, hypotheses, corpus.targets)
        alignment = attention_map(model, loop.tokenizer, pairs.sources[0], args.eval_num_beams, loop.source_tokenizer)
        if alignment is not None:
            weights, source_tokens, output_tokens = alignment
            plot_attention(weights.tolist(), source_tokens, output_tokens, Path(args.output_dir) / ATTENTION_PLOT,
                           title=f"Cross-attention, {name} sentence 1")
        samples = {f"{name} sentence {i + 1}": f"{corpus.sources[i]}\n→ {hypotheses[i]}\n(reference: {corpus.targets[i]})"
                   for i in range(min(3, len(pairs)))}
        hyper = {**engine_card_arguments(args, acc.num_processes), **loop.card_arguments()}
        write_run_model_card(args.output_dir, model, loop.tokenizer, {**loop.final_results, **results}, hyper,
                             loop.training_data, samples=samples, tokenizer_description=loop.tokenizer_description(),
                             images={f"Cross-attention of {name} sentence 1": ATTENTION_PLOT}, eval_dataset=loop.eval_dataset)
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, load the corpora and tokenizer, build the model, train, test; returns the results."""
    args = build_parser().parse_args(argv)
    configure_logging()
    training_args = engine_arguments(args, Seq2SeqTrainingArguments)
    check_model_arguments(args, MODEL_FAMILIES)
    accelerator = make_accelerator(training_args)
    train, validation, test = (load_split(args, split) for split in SPLITS)
    if train is None or validation is None:
        raise ValueError("Give training and validation pairs: --train_file/--validation_file, the --*_source_file/"
                         "--*_target_file pairs, or --dataset_name.")
    if args.max_train_samples:
        train = ParallelCorpus(train.sources[: args.max_train_samples], train.targets[: args.max_train_samples])
    tokenizer, source_tokenizer = load_tokenizers(args, train, accelerator)
    set_seed(training_args.seed)
    model = build_seq2seq_model(args, tokenizer, source_tokenizer)
    if not args.model_name_or_path:
        model.config.decoder_start_token_id = model.generation_config.decoder_start_token_id = tokenizer.bos_token_id
    lengths = dict(max_source_length=training_args.max_source_length, max_target_length=training_args.max_target_length)
    train_pairs = encode_corpus(train, tokenizer, source_tokenizer=source_tokenizer, **lengths, drop_longer=True)
    eval_pairs = encode_corpus(validation, tokenizer, source_tokenizer=source_tokenizer, **lengths, drop_longer=False)
    logger.info(f"{type(model).__name__} with {model.num_parameters():,} parameters; {len(train_pairs):,} of "
                f"{len(train):,} training pairs within the length limits, {len(eval_pairs):,} validation pairs.")
    loop = Seq2SeqTrainingLoop(model, tokenizer, train_pairs, eval_pairs, validation.targets, training_args,
                               accelerator, source_tokenizer=source_tokenizer)
    results = loop.train(describe_data(args, tokenizer, len(train_pairs), source_tokenizer) + continued_from(args),
                         dataset_label(args))
    results.update(report_test_set(loop, test or validation, "test" if test else "validation"))
    finish_processes(accelerator)
    return results


def load_tokenizers(args: argparse.Namespace, train: ParallelCorpus, accelerator):
    """``(target tokenizer, source tokenizer)``: one shared tokenizer (trained on both sides) and None, or with
    separate vocabularies one tokenizer per side, each loaded or trained on its own side."""
    lines = lambda texts: [t + "\n" for t in texts]  # noqa: E731
    if not uses_separate_vocabularies(args):
        return load_tokenizer(args, lines(train.sources + train.targets), accelerator, **SEQ2SEQ_TEMPLATE), None
    source_tokenizer = load_source_tokenizer(args, lines(train.sources), accelerator)
    return load_tokenizer(args, lines(train.targets), accelerator, **SEQ2SEQ_TEMPLATE), source_tokenizer


def build_seq2seq_model(args: argparse.Namespace, tokenizer, source_tokenizer=None):
    """:func:`build_model` with the target ``tokenizer``'s vocabulary and, with separate vocabularies,
    ``source_vocab_size`` from ``source_tokenizer``; the options that tie encoder and decoder embeddings
    (``share_encoder_decoder_embeddings``) are switched off unless --config_overrides sets them (which then
    fails: they need one vocabulary). A loaded model must match the tokenizers' vocabularies."""
    if args.model_name_or_path:
        model = build_model(args, tokenizer, MODEL_FAMILIES, AutoModelForSeq2SeqLM)
        check_source_vocabulary(model.config, source_tokenizer)
        return model
    if source_tokenizer is None:
        return build_model(args, tokenizer, MODEL_FAMILIES, AutoModelForSeq2SeqLM)
    overrides = check_model_arguments(args, MODEL_FAMILIES)
    config_class = MODEL_FAMILIES[args.model_family]
    if "source_vocab_size" not in {f.name for f in dataclasses.fields(config_class)}:
        raise ValueError(f"--model_family {args.model_family} has no separate source vocabulary; leave out "
                         "--separate_vocabularies/--source_tokenizer_name_or_path.")
    untied = {field: False for field in config_class.ENCODER_DECODER_TYING_FIELDS if field not in overrides}
    config = config_class.from_preset(args.preset, **{**untied, **overrides}, **tokenizer_config_fields(tokenizer),
                                      source_vocab_size=len(source_tokenizer))
    return AutoModelForSeq2SeqLM.from_config(config)


def check_source_vocabulary(config, source_tokenizer) -> None:
    """A loaded model's source vocabulary must fit the source tokenizer (or be shared when there is none)."""
    source_vocab_size = getattr(config, "source_vocab_size", None)
    if source_tokenizer is None and source_vocab_size is not None:
        raise ValueError(f"The model has a separate source vocabulary (source_vocab_size={source_vocab_size}): give "
                         "its source tokenizer with --source_tokenizer_name_or_path.")
    if source_tokenizer is not None and (source_vocab_size is None or source_vocab_size < len(source_tokenizer)):
        raise ValueError(f"The model's source_vocab_size={source_vocab_size} does not fit the source tokenizer's "
                         f"{len(source_tokenizer)} tokens (None: the model shares one vocabulary; leave out "
                         "--separate_vocabularies/--source_tokenizer_name_or_path).")


def describe_data(args: argparse.Namespace, tokenizer, num_pairs: int, source_tokenizer=None) -> str:
    """One sentence for the model card: which corpus and which tokenizer(s)."""
    if args.dataset_name:
        source = f"the `{args.dataset_name}` dataset"
    else:
        source = ", ".join(f"`{Path(f).name}`" for f in (args.train_file, args.train_source_file,
                                                          args.train_target_file) if f)
    if source_tokenizer is not None:
        sides = (("source", source_tokenizer, args.source_tokenizer_name_or_path or args.model_name_or_path),
                 ("target", tokenizer, args.tokenizer_name_or_path or args.model_name_or_path))
        how = "; ".join(f"{name}: {len(tok)} tokens, " + (f"a tokenizer from `{path}`" if path else
                        f"a {args.tokenizer_kind} tokenizer trained on the {name} side") for name, tok, path in sides)
        return f"Trained on {num_pairs:,} sentence pairs of {source}; separate vocabularies ({how})."
    how = (f"a tokenizer from `{args.tokenizer_name_or_path}`" if args.tokenizer_name_or_path
           else f"a shared {args.tokenizer_kind} tokenizer trained on both sides of the training pairs")
    return f"Trained on {num_pairs:,} sentence pairs of {source}; {len(tokenizer)} tokens, {how}."


__all__ = ["MODEL_FAMILIES", "attention_map", "build_parser", "build_seq2seq_model", "load_split", "load_tokenizers",
           "main", "report_test_set", "write_translations"]
