"""Sequence-to-sequence training on the engine: teacher forcing, validation loss and BLEU.

:func:`train_seq2seq` trains any ``AutoModelForSeq2SeqLM`` of the package (the attention RNN
encoder-decoder, the Transformer) — or a built-in one — on encoded sentence pairs. One update is
one global batch of :class:`~.seq2seq_data.LengthBatches`: the model computes the teacher-forced
loss from ``labels`` (its own label smoothing applies), and the loss is re-weighted by this
process's share of the batch's target tokens, so ``P`` processes make exactly the update one
process makes on the same global batch.

Validation reports ``eval_loss`` (mean token NLL in nats, without label smoothing) and
``eval_perplexity``; with ``eval_bleu_every_epoch`` also ``eval_bleu``, sacreBLEU of beam-search
translations against the detokenised references.

With separate source and target vocabularies the loop also holds the source tokenizer: its pad id
pads the sources, the target tokenizer decodes the translations, and both are saved (the source one
in ``output_dir/source_tokenizer/``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import gather_object
from tqdm.auto import tqdm

from ...cards import SOURCE_TOKENIZER_FOLDER
from ...models.config_utils import invalid
from ...models.cross_entropy import summed_cross_entropy
from ..core.arguments import EngineArguments
from ..core.launch import make_accelerator
from ..core.loop import TrainingLoop, perplexity, process_share, share_counts
from .data import EncodedPairs, LengthBatches, collate_pairs
from .token_pairs import TokenPairs

#: the task's values of what neither the command line nor a recipe sets
SEQ2SEQ_DEFAULTS = {"per_device_train_batch_size": 64, "per_device_eval_batch_size": 64, "generation_max_length": 128}


@dataclass
class Seq2SeqTrainingArguments(EngineArguments):
    """The loop's arguments plus batching and generation of a translation model (names of transformers'
    ``Seq2SeqTrainingArguments`` and ``run_translation.py``).

    ``max_tokens_per_batch`` (padded tokens of the longer side, all processes together) replaces
    ``per_device_train_batch_size`` × processes sentences when given. BLEU comes from beam search with
    ``num_beams`` beams and at most ``generation_max_length`` new tokens: at the end of training always, at
    every evaluation during training with ``predict_with_generate``.
    """

    max_tokens_per_batch: int | None = field(default=None, metadata={"help": (
        "padded tokens per global batch, batching by length (replaces --per_device_train_batch_size)")})
    max_source_length: int = field(default=128, metadata={"help": "longest source in tokens (longer training pairs "
                                                                   "are dropped, longer held-out sources cut)"})
    max_target_length: int = field(default=128, metadata={"help": "longest target in tokens"})
    num_beams: int = field(default=5, metadata={"help": "beams of the beam search behind BLEU and predictions"})
    predict_with_generate: bool = field(default=False, metadata={"help": (
        "translate the validation data (BLEU) at every evaluation during training, not only at the end")})

    def check(self):
        super().check()
        for name in ("max_source_length", "max_target_length", "num_beams"):
            if isinstance(getattr(self, name), bool) or getattr(self, name) < 1:
                raise invalid(name, getattr(self, name), "an integer >= 1")
        if self.max_tokens_per_batch is not None and self.max_tokens_per_batch < 1:
            raise invalid("max_tokens_per_batch", self.max_tokens_per_batch, "an integer >= 1")


def ddp_token_weight(local_tokens: int, global_tokens: int, num_processes: int) -> float:
    """Factor for a process's mean token loss so that DDP's average of the processes' gradients equals
    the gradient of the mean loss over all ``global_tokens`` target tokens of the global batch."""
    return local_tokens * num_processes / global_tokens


def _length_sorted_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


@torch.no_grad()
def pairs_nll(model, pairs: EncodedPairs, pad_token_id: int, batch_size: int, device) -> tuple[float, int]:
    """``(sum of target-token NLLs in nats, number of target tokens)`` under teacher forcing; ``pad_token_id``
    pads the sources."""
    total, count = 0.0, 0
    for rows in _length_sorted_batches([len(s) for s in pairs.sources], batch_size):
        batch = collate_pairs([pairs.sources[i] for i in rows], [pairs.targets[i] for i in rows], pad_token_id)
        batch = {k: v.to(device) for k, v in batch.items()}
        logits = model(**batch).logits  # (B, T, V)
        total += summed_cross_entropy(logits.flatten(0, 1), batch["labels"].flatten()).item()  # float32
        count += int((batch["labels"] != -100).sum())
    return total, count


@torch.no_grad()
def translate_ids(model, sources: list[list[int]], tokenizer, *, pad_token_id: int | None = None, batch_size: int = 64,
                  num_beams: int = 5, max_new_tokens: int = 128, disable_tqdm: bool = False,
                  **generate_kwargs) -> list[str]:
    """Beam-search translations of encoded ``sources`` (length-sorted batches, returned in input order),
    decoded with the target ``tokenizer``, with a progress bar (sentences, rate, time left). ``pad_token_id``
    pads the sources (default: the tokenizer's; give the source tokenizer's with separate vocabularies)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    texts: list[str | None] = [None] * len(sources)
    progress = tqdm(total=len(sources), desc=f"Translating (beam {num_beams})", unit="sentence",
                    disable=disable_tqdm or len(sources) == 0)
    for rows in _length_sorted_batches([len(s) for s in sources], batch_size):
        batch = collate_pairs([sources[i] for i in rows], None,
                              tokenizer.pad_token_id if pad_token_id is None else pad_token_id)
        out = model.generate(**{k: v.to(device) for k, v in batch.items()}, num_beams=num_beams,
                             max_new_tokens=max_new_tokens, do_sample=False, **generate_kwargs)
        for i, text in zip(rows, tokenizer.batch_decode(out, skip_special_tokens=True), strict=True):
            texts[i] = text.strip()
        progress.update(len(rows))
    progress.close()
    model.train(was_training)
    return texts


def translate(model, tokenizer, sentences: list[str], source_tokenizer=None, **kwargs) -> list[str]:
    """Translate raw ``sentences`` (encoded as in training with ``source_tokenizer``, or ``tokenizer`` when the
    vocabulary is shared: no special tokens, then ``<eos>``); ``tokenizer`` decodes the translations."""
    source_tokenizer = source_tokenizer or tokenizer
    eos = source_tokenizer.eos_token_id
    sources = [ids + [eos] for ids in source_tokenizer(sentences, add_special_tokens=False)["input_ids"]]
    return translate_ids(model, sources, tokenizer, pad_token_id=source_tokenizer.pad_token_id, **kwargs)


@functools.cache
def _bleu_metric():
    import evaluate

    from ...metrics import metric_path

    return evaluate.load(metric_path("hfsm_sacrebleu"))


def corpus_bleu(hypotheses: list[str], references: list[str]) -> float:
    """sacreBLEU (13a tokenisation, one reference per sentence) of detokenised text, through the ``evaluate``
    module the package ships (:mod:`hf_seqmodels.metrics`), which loads without the Hub."""
    return _bleu_metric().compute(predictions=hypotheses, references=[[r] for r in references])["score"]


def evaluate_bleu(model, tokenizer, pairs: EncodedPairs, references: list[str], *, accelerator: Accelerator | None = None,
                  **translate_kwargs) -> tuple[float, list[str]]:
    """BLEU of beam-search translations of ``pairs.sources`` against ``references``; returns the translations
    too. With several processes each translates every ``P``-th sentence and the results are gathered."""
    rank, world = process_share(accelerator)
    mine = list(range(rank, len(pairs), world))
    texts = translate_ids(model, [pairs.sources[i] for i in mine], tokenizer, **translate_kwargs)
    if world > 1:
        gathered = gather_object([(i, t) for i, t in zip(mine, texts, strict=True)])
        texts = [t for _, t in sorted(gathered)]
    return corpus_bleu(texts, references), texts


class Seq2SeqTrainingLoop(TrainingLoop):
    """Teacher-forced training over length-sorted batches of sentence pairs.

    ``tokenizer`` is the target side's (it decodes translations and is saved at the top of ``output_dir``);
    ``source_tokenizer`` the source side's when the vocabularies are separate (None: shared).
    """

    plot_title = "Sequence-to-sequence training"

    def __init__(self, model, tokenizer, train_pairs: EncodedPairs | TokenPairs, eval_pairs: EncodedPairs,
                 eval_references: list[str], args: Seq2SeqTrainingArguments, accelerator: Accelerator,
                 source_tokenizer=None):
        self.train_pairs, self.eval_pairs, self.eval_references = train_pairs, eval_pairs, eval_references
        self.separate_source_tokenizer = source_tokenizer
        super().__init__(model, tokenizer, args, accelerator)

    def task_defaults(self) -> dict[str, Any]:
        return SEQ2SEQ_DEFAULTS

    @property
    def source_tokenizer(self):
        """The tokenizer of the sources: the separate one, or the shared ``tokenizer``."""
        return self.separate_source_tokenizer or self.tokenizer

    def tokenizer_description(self) -> str | None:
        """The model card's vocabulary note with separate vocabularies (None: the default note)."""
        if self.separate_source_tokenizer is None:
            return None
        return (f"target side, see tokenizer.json; the source side has its own tokenizer of "
                f"{len(self.separate_source_tokenizer)} tokens in {SOURCE_TOKENIZER_FOLDER}/")

    def build_batches(self, model):
        args, acc = self.args, self.accelerator
        sizes = ({"max_tokens": args.max_tokens_per_batch} if args.max_tokens_per_batch else
                 {"batch_size": args.per_device_train_batch_size * acc.num_processes})
        return LengthBatches(self.train_pairs, self.source_tokenizer.pad_token_id, seed=args.seed,
                             process_index=acc.process_index, num_processes=acc.num_processes,
                             pad_to_multiple_of=self.pad_to_multiple_of, **sizes)

    def compute_loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, int]:
        global_tokens, local_tokens = batch.pop("num_items_in_batch"), batch.pop("num_tokens")
        batch = {k: v.to(self.accelerator.device, non_blocking=True) for k, v in batch.items()}
        loss = self.model(**batch).loss  # mean over this process's target tokens
        return loss * ddp_token_weight(local_tokens, global_tokens, self.accelerator.num_processes), local_tokens

    def micro_batch_weights(self, batches: list[dict[str, Any]]) -> list[float]:
        return share_counts(batches, ("num_items_in_batch",))

    def evaluate_metrics(self, model, with_bleu: bool | None = None) -> dict[str, float]:
        acc, args = self.accelerator, self.args
        index, count = process_share(self.eval_accelerator)
        shard = EncodedPairs(self.eval_pairs.sources[index::count], self.eval_pairs.targets[index::count])
        was_training = model.training
        model.eval()
        total, tokens = pairs_nll(model, shard, self.source_tokenizer.pad_token_id, args.per_device_eval_batch_size, acc.device)
        model.train(was_training)
        sums = torch.tensor([total, float(tokens)], dtype=torch.float64, device=acc.device)
        if count > 1:
            sums = acc.reduce(sums, reduction="sum")
        loss = (sums[0] / sums[1]).item()
        metrics = {"eval_loss": loss, "eval_perplexity": perplexity(loss)}
        if with_bleu if with_bleu is not None else args.predict_with_generate:
            metrics["eval_bleu"] = self.bleu(model)
        return metrics

    def bleu(self, model) -> float:
        limit = len(self.eval_pairs)
        pairs = EncodedPairs(self.eval_pairs.sources[:limit], self.eval_pairs.targets[:limit])
        score, _ = evaluate_bleu(model, self.tokenizer, pairs, self.eval_references[:limit],
                                 accelerator=self.eval_accelerator,
                                 pad_token_id=self.source_tokenizer.pad_token_id,
                                 batch_size=self.args.per_device_eval_batch_size, num_beams=self.args.num_beams,
                                 max_new_tokens=self.args.generation_max_length,
                                 disable_tqdm=self.args.disable_tqdm or not self.accelerator.is_local_main_process)
        return score

    def run(self) -> dict[str, Any]:
        results = super().run()
        if "eval_bleu" not in results:  # BLEU at least once, on the final model
            self.last_eval["eval_bleu"] = results["eval_bleu"] = self.bleu(self.accelerator.unwrap_model(self.model))
        return results

    def save_final_model(self, results: dict[str, Any], training_data: str | None = None, **card_kwargs) -> None:
        """The engine's final save, plus the source tokenizer in ``output_dir/source_tokenizer/``."""
        if self.separate_source_tokenizer is not None:
            if self.accelerator.is_main_process:
                self.separate_source_tokenizer.save_pretrained(Path(self.args.output_dir) / SOURCE_TOKENIZER_FOLDER)
            card_kwargs.setdefault("tokenizer_description", self.tokenizer_description())
        super().save_final_model(results, training_data, **card_kwargs)

    def card_arguments(self) -> dict[str, Any]:
        args = self.args
        batch = (f"{args.max_tokens_per_batch} tokens" if args.max_tokens_per_batch else
                 f"{args.per_device_train_batch_size * self.accelerator.num_processes} sentence pairs")
        return {"batch (global, by length)": batch,
                "max source / target length": f"{args.max_source_length} / {args.max_target_length}",
                "label smoothing": getattr(self.accelerator.unwrap_model(self.model).config, "label_smoothing", None),
                "validation BLEU": f"beam search, {args.num_beams} beams"}


def train_seq2seq(model, tokenizer, train_pairs: EncodedPairs | TokenPairs, eval_pairs: EncodedPairs, eval_references: list[str],
                  args: Seq2SeqTrainingArguments, accelerator: Accelerator | None = None,
                  training_data: str | None = None, source_tokenizer=None,
                  eval_dataset: str | None = None) -> dict[str, Any]:
    """Train ``model`` on ``train_pairs`` (in RAM, or memory-mapped token files), validate on ``eval_pairs``
    (BLEU against ``eval_references``).
    ``tokenizer`` is the target side's; ``source_tokenizer`` the source side's with separate vocabularies.

    Returns ``train_loss``, ``eval_loss``, ``eval_perplexity``, ``eval_bleu``, ``steps``, ``epochs``,
    ``train_runtime_seconds`` and ``train_tokens_per_second`` (target tokens, all processes); writes
    the model, tokenizer, checkpoints, history, loss curve and model card to ``args.output_dir``.
    """
    args = args.filled(SEQ2SEQ_DEFAULTS)
    accelerator = accelerator or make_accelerator(args)
    loop = Seq2SeqTrainingLoop(model, tokenizer, train_pairs, eval_pairs, eval_references, args, accelerator,
                               source_tokenizer=source_tokenizer)
    return loop.train(training_data, eval_dataset)


__all__ = [
    "SEQ2SEQ_DEFAULTS",
    "Seq2SeqTrainingArguments",
    "Seq2SeqTrainingLoop",
    "corpus_bleu",
    "ddp_token_weight",
    "evaluate_bleu",
    "pairs_nll",
    "train_seq2seq",
    "translate",
    "translate_ids",
]
