"""BERT pretraining on the engine: masked LM + next-sentence prediction over sentence-pair examples.

The sentence pairs are drawn once (:func:`~.data.create_pretraining_examples`) as spans of the
documents' ids (:class:`~.data.PairExamples`: 40 bytes per pair in RAM, the ids read from the memory-mapped
token files when a batch is made); the masking is dynamic: global batch ``k`` of epoch ``e`` is masked with a generator seeded by ``(seed, e, k)``, so
every epoch sees new masks and a resumed run sees exactly the masks of an uninterrupted one. With ``P``
processes the global batch is masked first and then split by rows, and each process weights its mean
losses by its share of the masked tokens (MLM) and of the pairs (NSP): ``P`` processes make exactly the
update of one. Validation uses one fixed masking of the held-out pairs (made batch by batch at each
evaluation) and reports the masked-LM loss, perplexity and accuracy and the next-sentence accuracy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate import Accelerator

from ...models.config_utils import invalid
from ...models.cross_entropy import summed_cross_entropy
from ..core.arguments import EngineArguments
from ..core.launch import make_accelerator
from ..core.length_batches import EpochPermutation
from ..core.loop import TrainingLoop, perplexity, process_share, share_counts
from .data import (
    PairExamples,
    SpecialIds,
    collate_examples,
    mask_tokens,
    special_tokens_mask,
    wordpiece_word_starts,
)

#: the task's values of what neither the command line nor a recipe sets
BERT_DEFAULTS = {"per_device_train_batch_size": 32, "per_device_eval_batch_size": 64}


@dataclass
class BertPretrainingArguments(EngineArguments):
    """The loop's arguments plus masking (``mlm_probability`` 0.15, 80/10/10 inside, as ``run_mlm.py``)."""

    mlm_probability: float = field(default=0.15, metadata={"help": "share of the tokens that are masked"})
    whole_word_masking: bool = field(default=False, metadata={"help": "mask whole words (all their WordPiece parts)"})
    masked_positions_only: bool = field(default=True, metadata={"help": (
        "compute vocabulary logits at the masked positions only (much cheaper)")})

    def check(self):
        super().check()
        if not 0.0 < self.mlm_probability < 1.0:
            raise invalid("mlm_probability", self.mlm_probability, "a probability in (0, 1)")


class MaskedPairBatches:
    """Global batches of examples in a seeded order per epoch, masked per batch, split by rows among processes;
    with ``masked_positions_only``, each carries its ``masked_lm_positions`` for the model to gather."""

    carries_state = False

    def __init__(self, examples: list[dict], tokenizer, vocab_size: int, *, batch_size: int, seed: int = 0,
                 mlm_probability: float = 0.15, whole_word_masking: bool = False, process_index: int = 0,
                 num_processes: int = 1, pad_to_multiple_of: int | None = None, masked_positions_only: bool = True):
        if len(examples) < batch_size:
            raise ValueError(f"{len(examples)} pretraining examples do not fill one batch of {batch_size}.")
        self.examples, self.tokenizer, self.vocab_size = examples, tokenizer, vocab_size
        self.special = SpecialIds.of(tokenizer)
        self.batch_size, self.seed, self.mlm_probability = batch_size, seed, mlm_probability
        self.whole_word_masking, self.masked_positions_only = whole_word_masking, masked_positions_only
        self.process_index, self.num_processes = process_index, num_processes
        self.pad_to_multiple_of = pad_to_multiple_of  # the padding is special: never masked
        self.permutation = EpochPermutation(len(examples), seed)

    def __len__(self) -> int:
        return len(self.examples) // self.batch_size

    def masked(self, rows: list[dict], seed: int) -> dict[str, torch.Tensor]:
        """Collate ``rows`` and mask them with a generator seeded by ``seed``."""
        batch = collate_examples(rows, self.special.pad, self.pad_to_multiple_of)
        starts = wordpiece_word_starts(batch["input_ids"], self.tokenizer) if self.whole_word_masking else None
        generator = torch.Generator().manual_seed(seed)
        batch["input_ids"], batch["labels"] = mask_tokens(
            batch["input_ids"], special_tokens_mask(batch["input_ids"], self.special), self.vocab_size,
            self.special.mask, mlm_probability=self.mlm_probability, generator=generator, word_starts=starts)
        return batch

    def batch(self, index: int, epoch: int = 0) -> dict[str, Any]:
        """This process's rows of masked global batch ``index``; ``num_masked``/``num_pairs`` count the global batch,
        ``local_masked`` and ``num_tokens`` (not padding) these rows: counted here, on the CPU, as counting them on
        the device would make the host wait for it; so are ``masked_lm_positions`` with ``masked_positions_only``."""
        picks = self.permutation(epoch)[index * self.batch_size : (index + 1) * self.batch_size]
        full = self.masked([self.examples[int(i)] for i in picks], seed=hash((self.seed, epoch, index)) % 2**63)
        mine = {k: v[self.process_index :: self.num_processes] for k, v in full.items()}
        mine["num_masked"] = int((full["labels"] != -100).sum())
        mine["num_pairs"] = len(picks)
        mine["local_masked"] = int((mine["labels"] != -100).sum())
        mine["num_tokens"] = int(mine["attention_mask"].sum())
        if self.masked_positions_only:
            mine["masked_lm_positions"] = masked_lm_positions(mine["labels"], self.pad_to_multiple_of)
        return mine


def masked_lm_positions(labels: torch.Tensor, pad_to_multiple_of: int | None = None) -> torch.Tensor:
    """The flattened positions of the masked tokens of ``labels`` ``(B, T)`` (``!= -100``), found here on the CPU
    so that the model gathers them on the device without reading anything back; with ``pad_to_multiple_of``,
    followed by unlabelled positions up to a multiple of it, so that compiled graphs see few row counts."""
    flat = labels.flatten() != -100
    positions = flat.nonzero().squeeze(1)
    if pad_to_multiple_of:
        missing = -len(positions) % pad_to_multiple_of
        positions = torch.cat([positions, (~flat).nonzero().squeeze(1)[:missing]])
    return positions


@torch.no_grad()
def evaluate_pretraining(model, batches: Iterable[dict[str, torch.Tensor]], device) -> dict[str, float]:
    """Masked-LM loss (nats per masked token), perplexity and accuracy, and NSP accuracy over fixed batches;
    ``eval_masked_tokens`` and ``eval_pairs`` count what they were measured on."""
    was_training = model.training
    model.eval()
    mlm_sum, mlm_correct, masked, nsp_correct, pairs = 0.0, 0, 0, 0, 0
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        out = model(**batch, masked_positions_only=True)
        targets = batch["labels"][batch["labels"] != -100]  # (N,)
        logits = out.prediction_logits  # (N, V)
        mlm_sum += summed_cross_entropy(logits, targets).item()  # float32
        mlm_correct += int((logits.argmax(-1) == targets).sum())
        masked += targets.numel()
        nsp_correct += int((out.seq_relationship_logits.argmax(-1) == batch["next_sentence_label"]).sum())
        pairs += batch["next_sentence_label"].numel()
    model.train(was_training)
    mlm_loss = mlm_sum / max(masked, 1)
    return {"eval_loss": mlm_loss, "eval_mlm_perplexity": perplexity(mlm_loss),
            "eval_mlm_accuracy": mlm_correct / max(masked, 1), "eval_nsp_accuracy": nsp_correct / max(pairs, 1),
            "eval_masked_tokens": masked, "eval_pairs": pairs}


class BertPretrainingLoop(TrainingLoop):
    """Masked LM + next-sentence prediction; ``eval_loss`` is the masked-LM loss."""

    plot_title = "BERT pretraining (training: MLM + NSP loss; validation: MLM loss)"

    def __init__(self, model, tokenizer, train_examples: PairExamples | list[dict],
                 eval_examples: PairExamples | list[dict], args: BertPretrainingArguments, accelerator: Accelerator):
        self.train_examples, self.eval_examples = train_examples, eval_examples
        self._eval_masking = MaskedPairBatches(eval_examples, tokenizer, model.config.vocab_size, batch_size=1,
                                               seed=args.seed, mlm_probability=args.mlm_probability)
        super().__init__(model, tokenizer, args, accelerator)

    def eval_batches(self, index: int = 0, count: int = 1) -> Iterator[dict[str, torch.Tensor]]:
        """The held-out batches ``index, index + count, ...``, each masked the same way at every evaluation
        (seeded by its first example's position), made one at a time."""
        size = self.args.per_device_eval_batch_size
        for start in range(index * size, len(self.eval_examples), count * size):
            yield self._eval_masking.masked(self.eval_examples[start : start + size], seed=self.args.seed + start)

    def task_defaults(self) -> dict[str, Any]:
        return BERT_DEFAULTS

    def attention_sample(self) -> dict[str, torch.Tensor]:
        """The first held-out sentence pair, unmasked: ``[CLS] A [SEP] B [SEP]``."""
        example = self.eval_examples[0]
        return {"input_ids": torch.tensor([example["input_ids"]]),
                "token_type_ids": torch.tensor([example["token_type_ids"]])}

    def build_batches(self, model):
        acc, args = self.accelerator, self.args
        return MaskedPairBatches(self.train_examples, self.tokenizer, model.config.vocab_size,
                                 batch_size=args.per_device_train_batch_size * acc.num_processes, seed=args.seed,
                                 mlm_probability=args.mlm_probability, whole_word_masking=args.whole_word_masking,
                                 process_index=acc.process_index, num_processes=acc.num_processes,
                                 pad_to_multiple_of=self.pad_to_multiple_of,
                                 masked_positions_only=args.masked_positions_only)

    def compute_loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, int]:
        num_masked, num_pairs = batch.pop("num_masked"), batch.pop("num_pairs")
        local_masked, num_tokens = batch.pop("local_masked"), batch.pop("num_tokens")
        # with masked_positions_only the batch carries the positions found on the CPU: the device reads no mask back
        batch = {k: v.to(self.accelerator.device, non_blocking=True) for k, v in batch.items()}
        out = self.model(**batch, masked_positions_only=self.args.masked_positions_only)
        local_pairs, world = len(batch["input_ids"]), self.accelerator.num_processes
        # DDP averages the processes' gradients: weight each mean loss by this process's share
        loss = out.mlm_loss * (local_masked * world / num_masked) + out.nsp_loss * (local_pairs * world / num_pairs)
        return loss, num_tokens

    def micro_batch_weights(self, batches: list[dict[str, Any]]) -> list[float]:
        return share_counts(batches, ("num_masked", "num_pairs"))

    def evaluate_metrics(self, model) -> dict[str, float]:
        acc = self.accelerator
        index, count = process_share(self.eval_accelerator)
        metrics = evaluate_pretraining(model, self.eval_batches(index, count), acc.device)
        weights = [float(metrics.pop("eval_masked_tokens")), float(metrics.pop("eval_pairs"))]
        if count > 1:  # average the shards' metrics weighted by their sizes
            weights = torch.tensor(weights, device=acc.device)
            values = torch.tensor([metrics["eval_loss"] * weights[0], metrics["eval_mlm_accuracy"] * weights[0],
                                   metrics["eval_nsp_accuracy"] * weights[1]], device=acc.device)
            weights, values = acc.reduce(weights, reduction="sum"), acc.reduce(values, reduction="sum")
            loss = (values[0] / weights[0]).item()
            metrics = {"eval_loss": loss, "eval_mlm_perplexity": perplexity(loss),
                       "eval_mlm_accuracy": (values[1] / weights[0]).item(),
                       "eval_nsp_accuracy": (values[2] / weights[1]).item()}
        return metrics

    def card_arguments(self) -> dict[str, Any]:
        args = self.args
        return {"batch (global, sentence pairs)": args.per_device_train_batch_size * self.accelerator.num_processes,
                "masking": f"{args.mlm_probability:.0%} of tokens, 80/10/10"
                           + (", whole words" if args.whole_word_masking else ""),
                "masked-LM logits": "masked positions only" if args.masked_positions_only else "every position"}


def pretrain_bert(model, tokenizer, train_examples: PairExamples | list[dict], eval_examples: PairExamples | list[dict],
                  args: BertPretrainingArguments, accelerator: Accelerator | None = None,
                  training_data: str | None = None, eval_dataset: str | None = None) -> dict[str, Any]:
    """Pretrain ``model`` (a ``…ForPreTraining``) on sentence-pair examples; returns the final metrics."""
    args = args.filled(BERT_DEFAULTS)
    accelerator = accelerator or make_accelerator(args)
    return BertPretrainingLoop(model, tokenizer, train_examples, eval_examples, args, accelerator).train(training_data, eval_dataset)


__all__ = ["BERT_DEFAULTS", "BertPretrainingArguments", "BertPretrainingLoop", "MaskedPairBatches", "evaluate_pretraining",
           "pretrain_bert"]
