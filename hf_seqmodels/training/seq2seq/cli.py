"""Command line of ``training/train_seq2seq.py``: train a translation model on a parallel corpus.

The flags are transformers' (``Seq2SeqTrainingArguments`` and the data arguments of its
``run_translation.py``), plus ``--model_family``/``--preset`` for a new model. The same command runs on
one process, under ``accelerate launch`` or ``torchrun``::

    python training/train_seq2seq.py \\
        --train_source_file data/train.en.gz --train_target_file data/train.de.gz \\
        --validation_source_file data/val.en.gz --validation_target_file data/val.de.gz \\
        --model_family rnn_seq2seq --preset rnnsearch --output_dir runs/rnnsearch

    python training/train_seq2seq.py --train_file train.tsv --source_lang en --target_lang de ...

A shared source/target tokenizer is trained on both sides of the training corpus unless
``--tokenizer_name`` names one. With ``--separate_vocabularies`` the source and the target each get a
tokenizer of their own (trained on their side, or loaded with ``--source_tokenizer_name`` /
``--tokenizer_name``); the model's encoder then has ``source_vocab_size`` embeddings, and the source
tokenizer is saved in ``output_dir/source_tokenizer/`` next to the target tokenizer at the top (which
decodes ``generate()``'s output). ``--do_predict`` translates ``--test_*`` with beam search (progress bar),
reports sacreBLEU in ``predict_results.json``, writes the translations and an attention heatmap of the
first sentence; without a test set the validation set is translated at the end of training.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import field, make_dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate.logging import get_logger
from accelerate.utils import set_seed
from transformers import AutoModelForSeq2SeqLM

from ...registry import FamiliesWithHead
from ..core.cards import engine_card_arguments, write_run_model_card
from ..core.cli import (
    SEQ2SEQ_TEMPLATE,
    CommandLineParser,
    build_model,
    configure_logging,
    continued_from,
    dataset_label,
    default_actions,
    family_recipe,
    finish_processes,
    load_source_tokenizer,
    load_tokenizer,
    merged,
    model_arguments,
    parse_command_line,
    parse_config_overrides,
    start_run,
    tokenizer_config_fields,
    uses_separate_vocabularies,
)
from ..core.plotting import plot_attention
from ..core.run_files import save_metrics
from ..core.token_files import batched
from .data import (
    EncodedPairs,
    ParallelCorpus,
    encode_corpus,
    load_parallel_dataset,
    read_parallel_corpus,
    tokenizer_training_text,
)
from .token_pairs import encode_pair_batches, seq2seq_token_pairs
from .trainer import SEQ2SEQ_DEFAULTS, Seq2SeqTrainingArguments, Seq2SeqTrainingLoop, evaluate_bleu

logger = get_logger(__name__)

MODEL_FAMILIES = FamiliesWithHead(AutoModelForSeq2SeqLM)  # rnn_seq2seq, transformer
SPLITS = ("train", "validation", "test")
ATTENTION_PLOT = "attention.png"

ModelArguments = model_arguments(MODEL_FAMILIES, "rnn_seq2seq", "bpe", "tiny, rnnsearch, luong-general, transformer-base",
                                 source_tokenizer=True)


def _split_fields(split: str) -> list:
    help_ = {"train": "training", "validation": "held-out", "test": "test"}[split]
    return [
        (f"{split}_file", str | None, field(default=None, metadata={
            "help": f"{help_} pairs: a .tsv or .jsonl file (optionally .gz)"})),
        (f"{split}_source_file", str | None, field(default=None, metadata={
            "help": f"{help_} source sentences, one per line (instead of --{split}_file)"})),
        (f"{split}_target_file", str | None, field(default=None, metadata={
            "help": f"{help_} target sentences, line-aligned with the source"})),
    ]


DataArguments = make_dataclass("DataArguments", [
    *(item for split in SPLITS for item in _split_fields(split)),
    ("source_lang", str, field(default="source", metadata={"help": (
        "the source's TSV column (a number for a file without a header) or JSON key; a language code also reads "
        '{"translation": {"en": ...}} records as run_translation.py does')})),
    ("target_lang", str, field(default="target", metadata={"help": "the target's column or key"})),
    ("dataset_name", str | None, field(default=None, metadata={
        "help": "a datasets name instead of files, e.g. bentrevett/multi30k"})),
    ("dataset_config_name", str | None, field(default=None, metadata={"help": "the dataset's configuration"})),
    ("dataset_label", str | None, field(default=None, metadata={
        "help": "the data's name in the model card's model-index (default: --dataset_name or the training file's folder)"})),
    ("max_train_samples", int | None, field(default=None, metadata={"help": "use the first N training pairs"})),
    ("max_eval_samples", int | None, field(default=None, metadata={"help": "use the first N held-out pairs"})),
    ("max_predict_samples", int | None, field(default=None, metadata={"help": "translate the first N test pairs"})),
    ("cache_dir", str | None, field(default=None, metadata={"help": (
        "folder of the token files training pairs from files are encoded into once (default: $HF_SEQMODELS_CACHE, "
        "else hf_seqmodels_tokens beside the datasets cache)")})),
    ("overwrite_cache", bool, field(default=False, metadata={"help": "encode again even if token files exist"})),
    ("preprocessing_num_workers", int | None, field(default=None, metadata={
        "help": "processes that encode the training pairs"})),
])


def split_files(args, split: str) -> tuple[str | None, str | None, str | None]:
    """``(file, source_file, target_file)`` of ``split`` as given on the command line."""
    return tuple(getattr(args, f"{split}_{k}") for k in ("file", "source_file", "target_file"))


def _sample_limit(args, split: str) -> int | None:
    name = {"train": "max_train_samples", "validation": "max_eval_samples", "test": "max_predict_samples"}[split]
    limit = getattr(args, name)
    if limit is not None and limit < 1:
        raise ValueError(f"Invalid `--{name}`={limit}: expected an integer >= 1.")
    return limit


def load_split(args, split: str) -> ParallelCorpus | None:
    """The corpus of ``split`` from its file(s) or from --dataset_name (its first --max_*_samples pairs);
    None when none is given."""
    file, source, target = split_files(args, split)
    if file or source or target:
        corpus = read_parallel_corpus(file, source_file=source, target_file=target,
                                      source_field=args.source_lang, target_field=args.target_lang)
    elif args.dataset_name:
        corpus = load_parallel_dataset(args.dataset_name, args.dataset_config_name, split, args.source_lang,
                                       args.target_lang)
    else:
        return None
    limit = _sample_limit(args, split)
    if limit is not None:
        corpus = ParallelCorpus(corpus.sources[:limit], corpus.targets[:limit])
    return corpus


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
                                     pad_token_id=loop.source_tokenizer.pad_token_id, batch_size=args.per_device_eval_batch_size,
                                     num_beams=args.num_beams, max_new_tokens=args.generation_max_length,
                                     disable_tqdm=args.disable_tqdm or not acc.is_local_main_process)
    results = {f"{name}_bleu": bleu, f"{name}_sentences": len(pairs)}
    logger.info(f"sacreBLEU on {len(pairs)} {name} sentences (beam {args.num_beams}): {bleu:.2f}")
    model = loop.gathered_model()  # a sharded model is gathered: what follows runs on the main process only
    if acc.is_main_process:
        write_translations(args.output_dir, name, corpus.sources, hypotheses, corpus.targets)
        alignment = (attention_map(model, loop.tokenizer, pairs.sources[0], args.num_beams, loop.source_tokenizer)
                     if args.plot else None)  # --no_plot: no pictures at all
        images = {}
        if alignment is not None:
            weights, source_tokens, output_tokens = alignment
            plot_attention(weights.tolist(), source_tokens, output_tokens, Path(args.output_dir) / ATTENTION_PLOT,
                           title=f"Cross-attention, {name} sentence 1")
            images = {f"Cross-attention of {name} sentence 1": ATTENTION_PLOT}
        samples = {f"{name} sentence {i + 1}": f"{corpus.sources[i]}\n→ {hypotheses[i]}\n(reference: {corpus.targets[i]})"
                   for i in range(min(3, len(pairs)))}
        hyper = {**engine_card_arguments(args, acc.num_processes), **loop.card_arguments()}
        write_run_model_card(args.output_dir, model, loop.tokenizer, {**loop.final_results, **results}, hyper,
                             loop.training_data, samples=samples, tokenizer_description=loop.tokenizer_description(),
                             images=images, eval_dataset=loop.eval_dataset)
    return results


def build_parser() -> CommandLineParser:
    """The command line's parser: its flags and ``--help``."""
    return CommandLineParser(
        (ModelArguments, DataArguments, Seq2SeqTrainingArguments),
        description="Train an attention RNN encoder-decoder or a Transformer for translation.",
        epilog=__doc__)  # the module docstring, with its examples


def parse_arguments(argv: list[str] | None = None):
    """``(model_args, data_args, training_args)`` of ``argv``, the training arguments completed by the recipe."""
    model_args, data_args, training_args = parse_command_line(build_parser(), argv)
    training_args = training_args.with_recipe(family_recipe(model_args), SEQ2SEQ_DEFAULTS)
    return model_args, data_args, default_actions(training_args)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, load the corpora and tokenizer, build the model, train, evaluate, predict; returns the
    results."""
    model_args, data_args, training_args = parse_arguments(argv)
    args = merged(model_args, data_args, training_args)
    configure_logging()
    validation, test = (load_split(args, split) for split in SPLITS[1:])
    _sample_limit(args, "train")
    if not (any(split_files(args, "train")) or args.dataset_name) or validation is None:
        raise ValueError("Give training and validation pairs: --train_file/--validation_file, the --*_source_file/"
                         "--*_target_file pairs, or --dataset_name.")
    if training_args.do_predict and test is None:
        raise ValueError("--do_predict needs test pairs: --test_file or --test_source_file/--test_target_file.")
    accelerator = start_run(training_args)
    read_train = functools.cache(lambda: load_split(args, "train"))  # in RAM only to train a tokenizer
    tokenizer, source_tokenizer = load_tokenizers(args, read_train, accelerator)
    read_train.cache_clear()  # the text is not held while training
    set_seed(training_args.seed)
    model = build_seq2seq_model(args, tokenizer, source_tokenizer)
    if not args.model_name_or_path:
        model.config.decoder_start_token_id = model.generation_config.decoder_start_token_id = tokenizer.bos_token_id
    lengths = dict(max_source_length=training_args.max_source_length, max_target_length=training_args.max_target_length)
    train_pairs, read = training_pairs(args, read_train, tokenizer, source_tokenizer, accelerator)
    eval_pairs = encode_corpus(validation, tokenizer, source_tokenizer=source_tokenizer, **lengths, drop_longer=False)
    logger.info(f"{type(model).__name__} with {model.num_parameters():,} parameters; {len(train_pairs):,} of "
                f"{read:,} training pairs within the length limits, {len(eval_pairs):,} validation pairs.")
    loop = Seq2SeqTrainingLoop(model, tokenizer, train_pairs, eval_pairs, validation.targets, training_args,
                               accelerator, source_tokenizer=source_tokenizer)
    if not training_args.do_train:
        results = loop.evaluate_only() if training_args.do_eval else {}
    else:
        results = loop.train(describe_data(args, tokenizer, len(train_pairs), source_tokenizer) + continued_from(args),
                             dataset_label(args))
        if not training_args.do_predict:  # the headline figure: the validation set translated by beam search
            results.update(report_test_set(loop, validation, "validation"))
    if training_args.do_predict:
        predicted = report_test_set(loop, test, "test")
        if accelerator.is_main_process:
            save_metrics(training_args.output_dir, "predict", predicted)
        results.update(predicted)
    finish_processes(accelerator)
    return results


def training_pairs(args, read_train: Callable[[], ParallelCorpus], tokenizer, source_tokenizer, accelerator):
    """``(encoded training pairs, pairs read)``. Pairs from files are encoded once into memory-mapped token
    files (:func:`~.token_pairs.seq2seq_token_pairs`: cached under --cache_dir, prepared by each machine's
    main process, mapped by every process), so the corpus never has to fit in RAM; a --dataset_name is encoded
    in RAM. Both give the ids of :func:`~.data.encode_corpus` (pairs longer than the limits dropped)."""
    options = dict(source_tokenizer=source_tokenizer, max_source_length=args.max_source_length,
                   max_target_length=args.max_target_length, drop_longer=True)
    file, source_file, target_file = split_files(args, "train")
    workers = args.preprocessing_num_workers
    if workers is not None and workers < 1:
        raise ValueError(f"Invalid `--preprocessing_num_workers`={workers}: expected an integer >= 1.")
    if not (file or source_file or target_file):
        corpus = read_train()
        if not workers or workers < 2:
            return encode_corpus(corpus, tokenizer, **options), len(corpus)
        batches = batched(zip(corpus.sources, corpus.targets, strict=True), 4096)
        parts = list(encode_pair_batches(batches, tokenizer, workers, **options))
        return EncodedPairs([s for p in parts for s in p.sources], [t for p in parts for t in p.targets]), len(corpus)
    pairs = seq2seq_token_pairs(tokenizer, file, source_file=source_file, target_file=target_file,
                                source_field=args.source_lang, target_field=args.target_lang,
                                max_pairs=_sample_limit(args, "train"), cache_dir=args.cache_dir,
                                overwrite_cache=args.overwrite_cache, accelerator=accelerator, num_proc=workers,
                                **options)
    return pairs, pairs.pairs_read


def load_tokenizers(args, read_train: Callable[[], ParallelCorpus], accelerator):
    """``(target tokenizer, source tokenizer)``: one shared tokenizer (trained on both sides) and None, or with
    separate vocabularies one tokenizer per side, each loaded or trained on its own side. ``read_train`` gives
    the training corpus of a --dataset_name, read only when a tokenizer is trained; training files are read by the
    main process alone (:func:`~.data.tokenizer_training_text`)."""

    def lines(*sides: str):
        named = args.source_tokenizer_name if sides == ("sources",) else args.tokenizer_name
        if named or args.model_name_or_path:
            return []  # loaded, not trained: no text needed
        file, source_file, target_file = split_files(args, "train")
        if file or source_file or target_file:  # read by the main process only, from the files themselves
            return lambda: tokenizer_training_text(sides, file, source_file=source_file, target_file=target_file,
                                                   source_field=args.source_lang, target_field=args.target_lang,
                                                   max_pairs=_sample_limit(args, "train"))
        corpus = read_train()
        return [text + "\n" for side in sides for text in getattr(corpus, side)]

    if not uses_separate_vocabularies(args):
        return load_tokenizer(args, lines("sources", "targets"), accelerator, **SEQ2SEQ_TEMPLATE), None
    source_tokenizer = load_source_tokenizer(args, lines("sources"), accelerator)
    return load_tokenizer(args, lines("targets"), accelerator, **SEQ2SEQ_TEMPLATE), source_tokenizer


def build_seq2seq_model(args, tokenizer, source_tokenizer=None):
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
    config_class = MODEL_FAMILIES[args.model_family]
    overrides = parse_config_overrides(args.config_overrides, config_class)
    if "source_vocab_size" not in {f.name for f in dataclasses.fields(config_class)}:
        raise ValueError(f"--model_family {args.model_family} has no separate source vocabulary; leave out "
                         "--separate_vocabularies/--source_tokenizer_name.")
    untied = {field: False for field in config_class.ENCODER_DECODER_TYING_FIELDS if field not in overrides}
    config = config_class.from_preset(args.preset, **{**untied, **overrides}, **tokenizer_config_fields(tokenizer),
                                      source_vocab_size=len(source_tokenizer))
    return AutoModelForSeq2SeqLM.from_config(config)


def check_source_vocabulary(config, source_tokenizer) -> None:
    """A loaded model's source vocabulary must fit the source tokenizer (or be shared when there is none)."""
    source_vocab_size = getattr(config, "source_vocab_size", None)
    if source_tokenizer is None and source_vocab_size is not None:
        raise ValueError(f"The model has a separate source vocabulary (source_vocab_size={source_vocab_size}): give "
                         "its source tokenizer with --source_tokenizer_name.")
    if source_tokenizer is not None and (source_vocab_size is None or source_vocab_size < len(source_tokenizer)):
        raise ValueError(f"The model's source_vocab_size={source_vocab_size} does not fit the source tokenizer's "
                         f"{len(source_tokenizer)} tokens (None: the model shares one vocabulary; leave out "
                         "--separate_vocabularies/--source_tokenizer_name).")


def describe_data(args, tokenizer, num_pairs: int, source_tokenizer=None) -> str:
    """One sentence for the model card: which corpus and which tokenizer(s)."""
    if args.dataset_name:
        source = f"the `{args.dataset_name}` dataset"
    else:
        source = ", ".join(f"`{Path(f).name}`" for f in (args.train_file, args.train_source_file,
                                                          args.train_target_file) if f)
    if source_tokenizer is not None:
        sides = (("source", source_tokenizer, args.source_tokenizer_name or args.model_name_or_path),
                 ("target", tokenizer, args.tokenizer_name or args.model_name_or_path))
        how = "; ".join(f"{name}: {len(tok)} tokens, " + (f"a tokenizer from `{path}`" if path else
                        f"a {args.tokenizer_kind} tokenizer trained on the {name} side") for name, tok, path in sides)
        return f"Trained on {num_pairs:,} sentence pairs of {source}; separate vocabularies ({how})."
    how = (f"a tokenizer from `{args.tokenizer_name}`" if args.tokenizer_name
           else f"a shared {args.tokenizer_kind} tokenizer trained on both sides of the training pairs")
    return f"Trained on {num_pairs:,} sentence pairs of {source}; {len(tokenizer)} tokens, {how}."


__all__ = ["DataArguments", "MODEL_FAMILIES", "ModelArguments", "attention_map", "parse_arguments", "build_seq2seq_model", "load_split", "load_tokenizers",
           "main", "report_test_set", "write_translations"]
