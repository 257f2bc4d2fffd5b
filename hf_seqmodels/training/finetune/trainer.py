"""Fine-tuning on the training loop: classification (incl. regression), tagging and extractive QA.

One update reads global batches of tokenised features in a seeded order per epoch (``seed + epoch``), collated
by the task's collator. With ``P`` processes, global batch ``k`` holds ``per_device_train_batch_size × P``
features (``--group_by_length``: features of similar length; ``--max_tokens_per_batch``: as many as fit in that
many padded tokens) and process ``p`` takes its rows ``p, p + P, ...``; each process weights its mean loss by its
share of the batch's targets (:func:`~.tasks.target_counts`: examples, or the labelled tokens of a token-level loss,
so padding and ``-100`` labels count for nothing), and :func:`~..core.loop.share_counts` extends the share
to the batches of an update: ``P`` processes and ``G`` accumulated batches make exactly the update of one
process reading them all at once.

Evaluation and prediction run over the features in order, in batches of ``per_device_eval_batch_size`` shared
among the processes, with a progress bar; the per-feature outputs are gathered and scored by the task
(:meth:`~.tasks.FinetuneTask.score`): ``eval_loss`` (mean over the targets) plus accuracy/F1/MCC,
entity-level F1, or SQuAD exact match and F1. Checkpoints, resuming, signals, logging and the time cap are the
loop's (:mod:`..core.loop`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import gather_object
from datasets import Dataset
from tqdm.auto import tqdm

from ...models.config_utils import invalid
from ..core.arguments import EngineArguments
from ..core.length_batches import EpochPermutation, LengthGroups
from ..core.loop import TrainingLoop, process_share, share_counts
from .tasks import BOOKKEEPING_COLUMNS, FinetuneTask, target_counts

#: transformers' ``TrainingArguments`` defaults: what fine-tuning a pretrained model uses unless told otherwise
FINETUNE_DEFAULTS = {"optim": "adamw_torch", "learning_rate": 5e-5, "lr_scheduler_type": "linear", "warmup_steps": 0,
                     "weight_decay": 0.0, "num_train_epochs": 3.0, "max_grad_norm": 1.0,
                     "per_device_train_batch_size": 8, "per_device_eval_batch_size": 8}
#: a model trained from a preset takes the optimisation from the preset's recipe; these only fill what it lacks
BATCH_DEFAULTS = {"per_device_train_batch_size": 8, "per_device_eval_batch_size": 8}


@dataclass
class FinetuneTrainingArguments(EngineArguments):
    """The loop's arguments plus how fine-tuning batches its features (transformers' ``group_by_length``, and the
    translation script's ``max_tokens_per_batch``, which replaces ``per_device_train_batch_size`` × processes
    features when given and batches by length too)."""

    group_by_length: bool = field(default=False, metadata={"help": (
        "batches of features of similar length (less padding, few padded lengths for a compiled step), visited in "
        "a new order every epoch")})
    max_tokens_per_batch: int | None = field(default=None, metadata={"help": (
        "padded tokens per global batch, batching by length (replaces --per_device_train_batch_size)")})

    def check(self):
        super().check()
        if not isinstance(self.group_by_length, bool):
            raise invalid("group_by_length", self.group_by_length, "True or False")
        if self.max_tokens_per_batch is not None and (isinstance(self.max_tokens_per_batch, bool)
                                                      or self.max_tokens_per_batch < 1):
            raise invalid("max_tokens_per_batch", self.max_tokens_per_batch, "an integer >= 1")


def model_rows(features: Dataset) -> list[dict[str, Any]]:
    """The features as one dict per row, without the QA bookkeeping columns (they are no model input)."""
    return features.remove_columns([c for c in BOOKKEEPING_COLUMNS if c in features.column_names]).to_list()


def loss_is_per_sentence(model) -> bool:
    """True when a tagger's loss is a mean over sentences (the BiLSTM-CRF's chain likelihood), not tokens."""
    return getattr(model, "crf", None) is not None


class FeatureBatches:
    """Global batches of features in a seeded order per epoch; this process's rows of each, collated.

    By default an epoch draws the features in a new random order and cuts it into global batches of ``batch_size``;
    ``len()`` is their number, the last, partial one kept when it gives every process at least one row. With
    ``group_by_length`` (or a ``max_tokens`` budget of padded tokens instead of ``batch_size``) the features are
    sorted by length, ties in a random order drawn once from ``seed`` (a file grouped by label must not give batches
    of one label), cut into batches once, and the batches are visited in a new order every epoch
    (:class:`~..core.length_batches.LengthGroups`): less padding, and few padded lengths for a compiled step.
    ``batch(index, epoch)`` is deterministic either way, so a resumed run reads what an uninterrupted one would have
    read.
    """

    carries_state = False

    def __init__(self, rows: list[dict[str, Any]], targets: np.ndarray, collator, *, batch_size: int | None = None,
                 seed: int, process_index: int = 0, num_processes: int = 1, group_by_length: bool = False,
                 max_tokens: int | None = None):
        if len(rows) < num_processes:
            raise ValueError(f"{len(rows)} training features cannot give each of {num_processes} processes a row.")
        self.rows, self.targets, self.collator = rows, targets, collator
        self.batch_size, self.seed = batch_size, seed
        self.process_index, self.num_processes = process_index, num_processes
        self.groups: LengthGroups | None = None
        if group_by_length or max_tokens is not None:
            lengths = np.fromiter((len(row["input_ids"]) for row in rows), dtype=np.int64, count=len(rows))
            ties = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed)).numpy()
            self.groups = LengthGroups(np.lexsort((ties, lengths)), lengths, seed=seed, process_index=process_index,
                                       num_processes=num_processes, item="example", items="training features",
                                       **({"max_tokens": max_tokens} if max_tokens is not None else
                                          {"batch_size": batch_size}))
        self.permutation = EpochPermutation(len(rows), seed)

    def __len__(self) -> int:
        if self.groups is not None:
            return len(self.groups)
        full, rest = divmod(len(self.rows), self.batch_size)
        return full + (rest >= self.num_processes)

    def picks(self, index: int, epoch: int = 0) -> tuple[list[int], list[int]]:
        """``(the features of global batch index of epoch, this process's rows of them)``."""
        if self.groups is not None:
            group, mine = self.groups.rows(index, epoch)
            return group.tolist(), mine.tolist()
        picks = self.permutation(epoch)[index * self.batch_size : (index + 1) * self.batch_size].tolist()
        return picks, picks[self.process_index :: self.num_processes]

    def batch(self, index: int, epoch: int = 0) -> dict[str, Any]:
        """This process's rows of global batch ``index``, collated; ``num_targets`` counts the global batch's
        targets and ``local_targets`` this process's, ``num_tokens`` its tokens (not padding): counted here, on the
        CPU, as counting them on the device would make the host wait for it."""
        picks, mine = self.picks(index, epoch)
        batch = dict(self.collator([self.rows[i] for i in mine]))
        batch["num_targets"] = int(self.targets[picks].sum())
        batch["local_targets"] = int(self.targets[mine].sum())
        mask = batch.get("attention_mask")
        batch["num_tokens"] = int(mask.sum()) if mask is not None else batch["input_ids"].numel()
        return batch


@dataclass
class Split:
    """A held-out split: its raw examples and their features (QA: several windows per example)."""

    name: str
    examples: Dataset
    features: Dataset


class FinetuneTrainingLoop(TrainingLoop):
    """Fine-tuning of a ``…ForSequenceClassification``, ``…ForTokenClassification`` or ``…ForQuestionAnswering``."""

    def __init__(self, model, tokenizer, task: FinetuneTask, train_features: Dataset | None,
                 validation: Split | None, args: FinetuneTrainingArguments, accelerator: Accelerator,
                 task_defaults: dict[str, Any] | None = None):
        self.task, self.validation = task, validation
        self.train_features = train_features
        self._task_defaults = FINETUNE_DEFAULTS if task_defaults is None else task_defaults
        self.per_sentence = loss_is_per_sentence(model)
        self.plot_title = f"Fine-tuning: {task.name}"
        super().__init__(model, tokenizer, args, accelerator)

    # ---- the task hooks
    def task_defaults(self) -> dict[str, Any]:
        return self._task_defaults

    def build_batches(self, model) -> FeatureBatches:
        features = self.train_features if self.train_features is not None else self.validation.features
        acc, args = self.accelerator, self.args
        collator = self.task.collator  # transformers' padding collators: dataclasses with pad_to_multiple_of
        if self.pad_to_multiple_of and hasattr(collator, "pad_to_multiple_of"):
            collator = replace(collator, pad_to_multiple_of=self.pad_to_multiple_of)
        sizes = ({"max_tokens": args.max_tokens_per_batch} if args.max_tokens_per_batch else
                 {"batch_size": args.per_device_train_batch_size * acc.num_processes})
        return FeatureBatches(model_rows(features), target_counts(self.task.name, features, self.per_sentence),
                              collator, seed=args.seed, process_index=acc.process_index,
                              num_processes=acc.num_processes, group_by_length=args.group_by_length, **sizes)

    def compute_loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, int]:
        total, local, num_tokens = batch.pop("num_targets"), batch.pop("local_targets"), batch.pop("num_tokens")
        batch = {k: v.to(self.accelerator.device, non_blocking=True) for k, v in batch.items()}
        out = self.model(**batch)
        if local == 0:  # nothing to learn in these rows (every label -100): a zero that keeps the graph for DDP
            loss = sum(t.sum() for t in out.values() if torch.is_tensor(t) and t.requires_grad) * 0.0
        else:  # DDP averages the processes' gradients: weight this process's mean by its share of the targets
            loss = out.loss * (local * self.accelerator.num_processes / total)
        return loss, num_tokens

    def micro_batch_weights(self, batches: list[dict[str, Any]]) -> list[float]:
        return share_counts(batches, ("num_targets",))

    def evaluate_metrics(self, model) -> dict[str, float]:
        if self.validation is None:
            raise ValueError("Evaluation needs held-out data: give --validation_file (or a dataset with a "
                             "validation split), or --eval_strategy no without --do_eval.")
        return self.score(model, self.validation, "eval")[0]

    def attention_sample(self) -> dict[str, torch.Tensor] | None:
        """The first held-out feature (a BERT model's card shows its self-attention)."""
        if self.validation is None or len(self.validation.features) == 0:
            return None
        row = model_rows(self.validation.features.select([0]))[0]
        return {k: torch.tensor([row[k]]) for k in ("input_ids", "token_type_ids") if k in row}

    def card_arguments(self) -> dict[str, Any]:
        args, world = self.args, self.accelerator.num_processes
        if args.max_tokens_per_batch:
            return {"task": self.task.name, "batch (global, by length)": f"{args.max_tokens_per_batch} tokens"}
        if args.group_by_length:
            return {"task": self.task.name,
                    "batch (global, by length)": f"{args.per_device_train_batch_size * world} examples"}
        return {"task": self.task.name, "batch (global, examples)": args.per_device_train_batch_size * world}

    def results(self, train_seconds: float) -> dict[str, Any]:
        return {**super().results(train_seconds), "train_samples": len(self.batches.rows)}

    # ---- evaluation and prediction
    @torch.no_grad()
    def outputs(self, model, features: Dataset, description: str) -> tuple[list[np.ndarray], float, int]:
        """``(per-feature outputs in order, sum of the losses × targets, number of targets)`` of ``features``;
        the batches are shared among the processes (all of them on each for a sharded model) and gathered."""
        rows, size = model_rows(features), self.args.per_device_eval_batch_size
        targets = target_counts(self.task.name, features, self.per_sentence) if self.has_labels(features) else None
        index, count = process_share(self.eval_accelerator)
        device = self.accelerator.device
        starts = list(range(0, len(rows), size))[index::count]
        was_training = model.training
        model.eval()
        mine = []
        progress = tqdm(total=len(rows), desc=description, unit="example",
                        disable=self.args.disable_tqdm or not self.accelerator.is_local_main_process)
        for start in starts:
            chunk = rows[start : start + size]
            batch = {k: v.to(device) for k, v in self.task.collator(chunk).items()}
            out = model(**batch)
            width = batch["input_ids"].shape[1]
            left = self.tokenizer.padding_side == "left"
            kept = [slice(width - len(r["input_ids"]), width) if left else slice(0, len(r["input_ids"])) for r in chunk]
            loss_sum, weight = 0.0, float(targets[start : start + size].sum()) if targets is not None else 0.0
            if weight and out.loss is not None:  # the batch's mean loss, back to a sum over its targets
                loss_sum = out.loss.item() * weight
            mine.append((start, [self.task.feature_output(out, i, keep) for i, keep in enumerate(kept)], loss_sum))
            progress.update(len(chunk) * count)
        progress.close()
        model.train(was_training)
        gathered = sorted(gather_object(mine) if count > 1 else mine, key=lambda item: item[0])
        per_feature = [output for _, outputs, _ in gathered for output in outputs]
        loss_sum = sum(item[2] for item in gathered)
        return per_feature, loss_sum, int(targets.sum()) if targets is not None else 0

    def has_labels(self, features: Dataset) -> bool:
        return bool({"labels", "start_positions"} & set(features.column_names))

    def score(self, model, split: Split, prefix: str) -> tuple[dict[str, float], list[np.ndarray]]:
        """``({prefix}_loss, {prefix}_<metric>..., {prefix}_samples)`` of ``split`` and the per-feature outputs."""
        name = {"eval": "Evaluating", "predict": "Predicting"}.get(prefix, prefix)
        outputs, loss_sum, num_targets = self.outputs(model, split.features, name)
        metrics = {}
        if num_targets:
            metrics["loss"] = loss_sum / num_targets
        metrics.update(self.task.score(outputs, split.features, split.examples))
        metrics["samples"] = len(split.examples)
        return {f"{prefix}_{k}": v for k, v in metrics.items()}, outputs

    def predict(self, split: Split) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """Metrics (``predict_*``, when the split is labelled) and one prediction record per example of ``split``."""
        metrics, outputs = self.score(self.accelerator.unwrap_model(self.model), split, "predict")
        return metrics, self.task.records(outputs, split.features, split.examples)


__all__ = ["BATCH_DEFAULTS", "FINETUNE_DEFAULTS", "FeatureBatches", "FinetuneTrainingArguments", "FinetuneTrainingLoop",
           "Split", "loss_is_per_sentence", "model_rows"]
