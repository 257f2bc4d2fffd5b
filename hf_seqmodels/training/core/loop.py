"""The training engine under every training script of the package: one loop, several tasks.

:class:`TrainingLoop` owns what every run needs — ``accelerate`` for devices and processes, the
optimizer and learning-rate schedule, gradient clipping, logging and the loss history, the time
cap, atomic checkpoints that resume exactly, the loss-curve plot and the final Hub-ready save. A
task subclass says only what differs:

* :meth:`TrainingLoop.build_batches` – the epoch's batches, an object with ``len()`` and
  ``batch(index, epoch)``, deterministic for a given epoch so that a resumed run reads exactly
  what an uninterrupted one would have read;
* :meth:`TrainingLoop.compute_loss` – the loss of one batch and its number of target tokens;
* :meth:`TrainingLoop.evaluate_metrics` – validation metrics, at least ``eval_loss``;
* :meth:`TrainingLoop.card_arguments` – the task's lines of the model card's hyper-parameter table.

The tasks are causal language modelling with truncated BPTT (:mod:`..lm.trainer`) and
sequence-to-sequence training with teacher forcing (:mod:`..seq2seq.trainer`).

Stop signals and the time cap are :mod:`.signals`'; the launch (DDP, FSDP2, DeepSpeed) is :mod:`.launch`'s;
model cards are :mod:`.cards`'.
"""

from __future__ import annotations

import contextlib
import functools
import math
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.logging import get_logger
from accelerate.utils import (
    DistributedType,
    set_seed,
)
from tqdm.auto import tqdm

from ...models.config_utils import invalid
from ...models.input_checks import inputs_checked_by_caller
from .arguments import OPTIMIZERS, EngineArguments
from .cards import configure_generation, engine_card_arguments, write_run_model_card
from .checkpointing import (
    CheckpointWriteError,
    TrainerState,
    checkpoint_step,
    gather_full_state,
    load_checkpoint,
    load_weights,
    resolve_checkpoint,
    save_checkpoint,
    warn_if_low_disk_space,
)
from .compiling import compile_model
from .device_batches import move_batch, padding_multiple, pins_memory, prefetched
from .finished_run import FinishedRun
from .launch import make_accelerator
from .master_weights import MasterWeights
from .optimizers import build_optimizer, group_settings, model_width, restore_group_settings
from .plotting import plot_learning_rate, plot_loss_curves, write_history
from .precision import configure_tf32
from .run_files import record_arguments
from .schedules import build_scheduler
from .sharded import ShardedModelAccess
from .signals import STOP_SIGNALS, StopSignals, TrainingInterrupted

logger = get_logger(__name__)



def share_counts(batches: list[dict[str, Any]], keys: tuple[str, ...]) -> list[float]:
    """For :meth:`TrainingLoop.micro_batch_weights` of tasks whose batches carry the number of targets their
    loss is normalised by (over all processes) under ``keys``: every batch gets the update's total of each
    count, so the summed losses are the mean over all the update's targets; the weights are then 1."""
    for key in keys:
        total = sum(batch[key] for batch in batches)
        for batch in batches:
            batch[key] = total
    return [1.0] * len(batches)


def process_share(accelerator: Accelerator | None) -> tuple[int, int]:
    """``(index, count)``: the process evaluates every ``count``-th item from ``index`` (``(0, 1)``: all of them)."""
    return (accelerator.process_index, accelerator.num_processes) if accelerator is not None else (0, 1)


def models_read_inputs_on(device: torch.device) -> bool:
    """Whether the models check their training inputs' values themselves on ``device``. Those checks, and the
    shortcuts that look at a mask's values, read tensors back to the host: on a GPU that is a wait at every update.
    Off the CPU the loop vouches for its batches instead (:func:`~hf_seqmodels.models.input_checks.
    inputs_checked_by_caller`): their ids come from the run's tokenizer, checked against the model when the loop
    is built, and their labels from the same data."""
    return device.type == "cpu"


def perplexity(loss: float) -> float:
    return math.exp(loss) if loss < 700 else math.inf


class TrainingLoop(ShardedModelAccess, FinishedRun):
    """One training run; :meth:`run` is the whole loop. Subclasses implement the four task hooks."""

    plot_title = "Training"
    #: whether the task reads its batches through a ``DataLoader`` (``--dataloader_num_workers``)
    uses_dataloader = False
    #: past this many losses not read yet, they are joined into one tensor: a run that logs rarely holds few of them
    unread_chunk = 1024

    def __init__(self, model, tokenizer, args: EngineArguments, accelerator: Accelerator):
        self.deepspeed = accelerator.distributed_type == DistributedType.DEEPSPEED
        self.sharded = accelerator.distributed_type == DistributedType.FSDP
        if self.sharded and accelerator.state.fsdp_plugin.fsdp_version != 2:
            raise NotImplementedError(
                "The training engine shards models with FSDP2 only (fsdp_version: 2 in the accelerate config, as "
                "in training/configs/fsdp.yaml): FSDP1 wraps the model, so evaluation and generation on it differ.")
        if unfilled := args.unfilled(self.task_defaults()):  # filled once, where the run starts
            raise ValueError(f"{type(self).__name__} takes filled arguments, but {', '.join(unfilled)} are unset: "
                             "pass args.with_recipe(recipe, task_defaults), as the train_* functions do.")
        self.args, self.accelerator, self.tokenizer = args, accelerator, tokenizer
        #: evaluate during and at the end of training (transformers: an eval_strategy other than "no" sets do_eval)
        self.evaluating = args.do_eval or args.eval_strategy != "no"
        if args.dataloader_num_workers and not self.uses_dataloader:
            raise invalid("dataloader_num_workers", args.dataloader_num_workers,
                          f"0 for {type(self).__name__}, whose batches are slices of tensors already in memory")
        self.model_class = type(model)  # FSDP2 changes the class of the model it shards
        vocab_size = getattr(getattr(model, "config", None), "vocab_size", None)
        if tokenizer is not None and isinstance(vocab_size, int) and vocab_size < len(tokenizer):
            raise ValueError(f"The model's vocab_size={vocab_size} is smaller than the tokenizer's {len(tokenizer)} "
                             "tokens: give the tokenizer the model was trained with.")
        self.models_read_inputs = models_read_inputs_on(accelerator.device)
        if args.gradient_checkpointing:
            if not getattr(model, "supports_gradient_checkpointing", False):
                raise invalid("gradient_checkpointing", True, f"False for {type(model).__name__}, which has no "
                              "layers to recompute (supported: the Transformer family, BERT and the recurrent models)")
            # transformers 5 renamed gradient_checkpointing_enable (now deprecated) to activation_checkpointing_enable
            enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
            enable()
        #: what the tasks round the padded length of their batches up to a multiple of (None: nothing)
        self.pad_to_multiple_of = padding_multiple(args.pad_to_multiple_of, accelerator.device)
        self.batches = self.build_batches(model)
        self.updates_per_epoch = math.ceil(len(self.batches) / args.gradient_accumulation_steps)
        self.total_steps = args.total_steps(self.updates_per_epoch)
        self.logging_steps, self.eval_steps, self.save_steps = (
            args.steps(name, self.total_steps) for name in ("logging_steps", "eval_steps", "save_steps"))
        configure_tf32(args.tf32, accelerator.device.type)
        #: ``--bf16_weights``: the float32 master copies of the model's bfloat16 weights, which the optimizer updates
        self.master_weights = self.bf16_master_weights(model, args, accelerator)
        optimizer = build_optimizer(model, args, self.master_weights)
        self.model, self.optimizer = accelerator.prepare(model, optimizer)
        if args.torch_compile:  # here rather than accelerate's dynamo_backend, which a second Accelerator ignores
            self.model = compile_model(model, self.model, backend=args.torch_compile_backend,
                                       mode=args.torch_compile_mode, distributed_type=accelerator.distributed_type)
        self.scheduler = build_scheduler(
            self.optimizer, args.lr_scheduler_type, total_steps=self.total_steps,
            steps_per_epoch=self.updates_per_epoch, warmup_steps=args.steps("warmup_steps", self.total_steps),
            d_model=model_width(model), **args.scheduler_kwargs,
        )
        self.state = TrainerState(num_processes=accelerator.num_processes, windows_per_epoch=len(self.batches),
                                  gradient_accumulation_steps=args.gradient_accumulation_steps, sharded=self.sharded,
                                  deepspeed=self.deepspeed)
        self.carried = None  # what a task carries from one batch to the next (the TBPTT state)
        self.eval_dataset: str | None = None  # the held-out data's name on the model card
        self.final_results: dict[str, Any] = {}  # what train() returned
        self.training_data: str | None = None  # the model card's sentence about the data
        self.tokens_seen = 0
        #: the updates' losses still on the device: read back together at the next logging step or checkpoint
        self.unread_losses: list[torch.Tensor] = []
        self.last_lr = args.learning_rate
        self.last_checkpoint_step = -1
        self.last_checkpoint: Path | None = None
        self.stop_signals = StopSignals()
        self.last_eval: dict[str, float] | None = None
        self.last_eval_step = -1
        self.stopping_early = False  # set when --early_stopping_patience evaluations in a row did not improve

    def bf16_master_weights(self, model, args: EngineArguments, accelerator: Accelerator) -> MasterWeights | None:
        """With ``--bf16_weights``, the model on the device with bfloat16 weights and their float32 master copies
        (:mod:`.master_weights`); None without."""
        if not args.bf16_weights:
            return None
        if not args.bf16:
            raise invalid("bf16_weights", True, "False unless --bf16 is on (bfloat16 weights compute under its "
                          "autocast)")
        if self.sharded or self.deepspeed:
            raise invalid("bf16_weights", True, "False under FSDP2 and DeepSpeed, which keep float32 master weights "
                          "of their own (FSDP2's MixedPrecisionPolicy, DeepSpeed's bf16 section)")
        return MasterWeights(model.to(accelerator.device))

    def full_precision(self):
        """A context in which the model holds its float32 weights, for saving and loading them: the master weights
        with ``--bf16_weights`` (:meth:`.master_weights.MasterWeights.full_precision`), else the model as it is."""
        return self.master_weights.full_precision() if self.master_weights else contextlib.nullcontext()

    # ---- the task hooks
    def task_defaults(self) -> dict[str, Any]:
        """Values of the task's fields that neither the command line nor a recipe set (e.g. the batch size)."""
        return {}

    def build_batches(self, model):
        """This process's batches of one epoch: ``len()`` and ``batch(index, epoch)``."""
        raise NotImplementedError

    def compute_loss(self, batch) -> tuple[torch.Tensor, int]:
        """``(loss to back-propagate, number of target tokens in this process's batch)``. The number comes from
        the batch as made on the CPU (its shapes, or a count its maker added): counting the tokens of a batch
        already on the device would make the host wait for the device at every update."""
        raise NotImplementedError

    def evaluate_metrics(self, model) -> dict[str, float]:
        """Validation metrics of the unwrapped ``model``, ``eval_loss`` among them."""
        raise NotImplementedError

    def micro_batch_weights(self, batches: list) -> list[float]:
        """The factors of the losses of the batches of one update (:attr:`gradient_accumulation_steps` of them,
        fewer at the end of an epoch), such that the weighted sum is the mean over all their targets. The
        default suits losses that are means over equally many targets: ``1 / len(batches)`` each. Tasks whose
        batches count their targets (over all processes) override this, and may make every batch's count the
        update's total instead (the weights are then 1)."""
        return [1.0 / len(batches)] * len(batches)

    def card_arguments(self) -> dict[str, Any]:
        """The task's hyper-parameters for the model card, on top of :func:`engine_card_arguments`."""
        return {}

    def attention_sample(self) -> dict[str, torch.Tensor] | None:
        """Inputs (batch of one) of a held-out example whose self-attention the model card shows; None: no picture."""
        return None

    # ---- one update
    def train_step(self, batches: list) -> torch.Tensor:
        """One update on ``batches`` (their gradients summed, their losses weighted by
        :meth:`micro_batch_weights`); returns the update's loss averaged over processes, a detached tensor on
        the device: reading it here would make the host wait for the device to finish the update before it
        queues the next one (:meth:`read_losses` reads them at logging steps and checkpoints)."""
        total = 0.0
        for i, (batch, weight) in enumerate(zip(batches, self.micro_batch_weights(batches), strict=True)):
            last = i == len(batches) - 1
            # accelerate tells DeepSpeed the update's last batch (DeepSpeed steps there) by sync_gradients;
            # DDP all-reduces the gradients once, after the last batch
            self.accelerator.sync_gradients = last
            with contextlib.nullcontext() if last else self.accelerator.no_sync(self.model), \
                    contextlib.nullcontext() if self.models_read_inputs else inputs_checked_by_caller():
                loss, num_tokens = self.compute_loss(batch)
                loss = loss * weight
                # the weights already divide by the batches of the update: DeepSpeed must not divide again
                self.accelerator.backward(loss, **({"scale_wrt_gas": False} if self.deepspeed else {}))
            total = total + loss.detach()
            self.tokens_seen += num_tokens * self.accelerator.num_processes
        if self.args.clip_norm is not None:
            self.accelerator.clip_grad_norm_(self.model.parameters(), self.args.clip_norm)
        self.optimizer.step()
        self.last_lr = self.scheduler.get_last_lr()[0]  # the rate this update used
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return self.accelerator.reduce(total, reduction="mean")

    def _epoch_progress(self) -> float:
        return round(self.state.epoch + self.state.window / len(self.batches), 4)

    def _record_loss(self, loss: torch.Tensor) -> float | None:
        """Keep the update's ``loss`` on the device; at a logging step, read and log the losses since the last
        one. Returns the loss once read (at a logging step), None before."""
        self.unread_losses.append(loss.reshape(1))
        if len(self.unread_losses) > self.unread_chunk:
            self.unread_losses = [torch.cat(self.unread_losses)]
        if self.state.global_step % self.logging_steps:
            return None
        read = self.read_losses()
        self.flush_losses()
        return read[-1]

    def read_losses(self) -> list[float]:
        """Read the losses still on the device back in one transfer and count them, in order, into the state
        (the run's mean training loss, the losses to log next): what a checkpoint then records is what reading
        every loss at its own update would have recorded. Returns them."""
        if not self.unread_losses:
            return []
        read = torch.cat(self.unread_losses).tolist()
        self.unread_losses.clear()
        for loss in read:
            self.state.train_loss_sum += loss
            self.state.train_loss_count += 1
            self.state.pending_losses.append(loss)
        return read

    def flush_losses(self) -> None:
        """Log the mean of the losses not logged yet (also the last steps of a run, at its end)."""
        self.read_losses()
        pending = self.state.pending_losses
        if not pending:
            return
        record = {"step": self.state.global_step, "epoch": self._epoch_progress(),
                  "train_loss": sum(pending) / len(pending), "learning_rate": self.last_lr}
        self.record(record)
        logger.info(f"step {record['step']}: train_loss={record['train_loss']:.4f} lr={record['learning_rate']:.4g}")
        pending.clear()

    def record(self, record: dict[str, Any]) -> None:
        """Add ``record`` to the history (``training_history.json``, the loss curve) and send it to the
        ``report_to`` trackers."""
        self.state.history.append(record)
        if self.args.trackers:
            numbers = {k: v for k, v in record.items() if k != "step" and isinstance(v, (int, float))}
            self.accelerator.log(numbers, step=record["step"])

    def evaluate(self) -> dict[str, float]:
        """Evaluate the model now, log and record the metrics; returns them."""
        self.last_eval = self.evaluate_metrics(self.accelerator.unwrap_model(self.model))
        self.record({"step": self.state.global_step, "epoch": self._epoch_progress(),
                     **{k: v for k, v in self.last_eval.items() if k.startswith("eval_")}})
        self.last_eval_step = self.state.global_step
        shown = " ".join(f"{k}={v:.4f}" for k, v in self.last_eval.items() if isinstance(v, float))
        logger.info(f"step {self.state.global_step} (epoch {self._epoch_progress()}): {shown}")
        return self.last_eval

    def save_checkpoint(self) -> Path | None:
        """Checkpoint the current step (once: a second call at the same step does nothing); returns its path."""
        self.read_losses()  # the state it records counts every update's loss
        if self.last_checkpoint_step == self.state.global_step:
            return self.last_checkpoint
        if self.state.best_global_step == self.state.global_step:  # recorded in the checkpoint, kept by the rotation
            self.state.best_model_checkpoint = str(Path(self.args.output_dir) / f"checkpoint-{self.state.global_step}")
        model, optimizer_state = self.model, None
        if self.sharded:
            weights, optimizer_state = gather_full_state(self.accelerator.unwrap_model(self.model), self.optimizer)
            if self.accelerator.is_main_process:
                model = self.unsharded_model(weights)
        elif self.deepspeed and self.accelerator.is_main_process:
            model = self.unsharded_model(self.deepspeed_weights())
        try:
            with self.full_precision():
                path = save_checkpoint(
                    self.args.output_dir, accelerator=self.accelerator, model=model, optimizer=self.optimizer,
                    scheduler=self.scheduler, trainer_state=self.state, recurrent_state=self.carried,
                    save_total_limit=self.args.save_total_limit, optimizer_state=optimizer_state,
                    deepspeed_engine=self.model if self.deepspeed else None, rank_files=self.checkpoint_rank_files())
        except CheckpointWriteError as error:  # disk full, read-only...: one line, exit status 1
            raise SystemExit(f"error: {error}") from error
        self.last_checkpoint_step, self.last_checkpoint = self.state.global_step, path
        logger.info(f"Saved checkpoint {path}")
        return path

    def checkpoint_rank_files(self) -> dict[str, str] | None:
        """This process's own files for the next checkpoint (``{file name: text}``; none by default): written
        into it before its manifest, so a resumed run verifies them like the weights."""
        return None

    def write_curves(self) -> None:
        """On the main process, write ``training_history.json`` and, unless ``--plot false``, the curves."""
        if self.accelerator.is_main_process:
            write_history(self.state.history, self.args.output_dir)
            if self.args.plot:
                plot_loss_curves(self.state.history, self.args.output_dir, self.plot_title)
                plot_learning_rate(self.state.history, self.args.output_dir)

    # ---- resuming and stopping
    def maybe_resume(self) -> None:
        """Load the state of ``--resume_from_checkpoint`` (``latest``: the newest intact checkpoint) if given."""
        path = resolve_checkpoint(self.args.resume_from_checkpoint, self.args.output_dir)
        if path is None:
            if self.args.resume_from_checkpoint is not None:
                logger.warning(f"No checkpoint in {self.args.output_dir}: training from scratch.")
            set_seed(self.args.seed + self.accelerator.process_index)
            return
        model = self.accelerator.unwrap_model(self.model) if self.sharded else self.model
        settings = group_settings(self.optimizer)  # this run's weight decay and Adam constants
        with self.full_precision():
            self.state, self.carried = load_checkpoint(
                path, accelerator=self.accelerator, model=model, optimizer=self.optimizer, scheduler=self.scheduler,
                unsharded_model=self.unsharded_model() if self.sharded else None,
                deepspeed_engine=self.model if self.deepspeed else None, verify=False)  # resolve_checkpoint verified it
        restore_group_settings(self.optimizer, settings)
        if self.state.windows_per_epoch != len(self.batches):
            raise ValueError(f"Checkpoint {str(path)!r} was trained with {self.state.windows_per_epoch} batches per "
                             f"epoch, this run has {len(self.batches)}: resume with the same data and batch sizes.")
        if self.state.gradient_accumulation_steps != self.args.gradient_accumulation_steps:
            raise ValueError(f"Checkpoint {str(path)!r} was trained with gradient_accumulation_steps="
                             f"{self.state.gradient_accumulation_steps}, this run has "
                             f"{self.args.gradient_accumulation_steps}: resume with the same value.")
        self.last_checkpoint_step, self.last_checkpoint = self.state.global_step, path
        logger.info(f"Resumed from {path}: step {self.state.global_step}, epoch {self.state.epoch}, "
                    f"batch {self.state.window}/{len(self.batches)}")

    def out_of_time(self, started: float) -> bool:
        """True on every process as soon as one of them passed ``max_time_minutes`` (said once, in the log)."""
        if self.args.max_time_minutes is None:
            return False
        late = time.monotonic() - started > 60.0 * self.args.max_time_minutes
        if self.accelerator.num_processes > 1:  # one late process stops them all; alone, no device sync per update
            late = self.accelerator.reduce(torch.tensor(float(late), device=self.accelerator.device),
                                           reduction="sum").item() > 0
        if not late:
            return False
        logger.warning(f"Time cap of {self.args.max_time_minutes:g} minutes reached after step {self.state.global_step} "
                       f"of {self.total_steps}: stopping; checkpointing, evaluating and saving the model. Continue "
                       "with --resume_from_checkpoint latest and a larger --max_time_minutes.")
        return True

    def stop_signal(self) -> int:
        """The stop signal one of the processes received (the largest number), 0 if none; the same on all."""
        if self.accelerator.num_processes == 1:  # nothing to agree on: no tensor, no device sync per update
            return self.stop_signals.received
        flag = torch.tensor(self.stop_signals.received, device=self.accelerator.device)
        return int(self.accelerator.reduce(flag, reduction="max").item())

    def interrupt(self, signum: int) -> None:
        """Checkpoint the current step, write the history so far, and raise :class:`TrainingInterrupted`."""
        path = self.save_checkpoint()
        if self.accelerator.is_main_process:
            write_history(self.state.history, self.args.output_dir)
        logger.warning(f"Stopped by {signal.Signals(signum).name} after step {self.state.global_step}: "
                       f"checkpoint {path}. Continue with --resume_from_checkpoint latest (exit status {128 + signum}).")
        raise TrainingInterrupted(signum, self.state.global_step, path)

    def done(self) -> bool:
        """Whether the run has made all its updates."""
        return self.state.global_step >= self.total_steps

    # ---- the loop
    def update_batches(self) -> Iterator[tuple[range, list]]:
        """``(indices, batches)`` of each update from the current position to the end of the epoch. On a CUDA
        device with ``--dataloader_pin_memory`` the batches are pinned and copied to it, one update ahead where
        the batches object allows (:mod:`.device_batches`); on a CPU they are made when due and moved by the task."""
        step, epoch, device = self.args.gradient_accumulation_steps, self.state.epoch, self.accelerator.device
        updates = ((indices, [self.batches.batch(index, epoch) for index in indices])
                   for indices in (range(start, min(start + step, len(self.batches)))
                                   for start in range(self.state.window, len(self.batches), step)))
        if not pins_memory(self.args.dataloader_pin_memory, device):
            return updates
        move = functools.partial(move_batch, device=device)
        if not getattr(self.batches, "reads_ahead", True):
            return ((indices, move(batches)) for indices, batches in updates)
        return prefetched(updates, lambda update: (update[0], move(update[1])), device)

    def train_epoch(self, progress, started: float) -> bool:
        """Train from the current position to the end of the epoch; returns True if the run must stop early."""
        self.model.train()
        for indices, batches in self.update_batches():
            if self.stop_signal():
                return True
            loss = self.train_step(batches)
            self.state.global_step += 1
            self.state.window = indices[-1] + 1
            read = self._record_loss(loss)
            progress.update(1)
            if read is not None:  # the loss is shown when it is read, at logging steps
                progress.set_postfix(loss=f"{read:.3f}", epoch=self.state.epoch)
            if self.state.window == len(self.batches):
                return False
            self.maybe_evaluate_and_save("steps")
            if self.done() or self.stopping_early or self.out_of_time(started):
                return True
        return False

    def maybe_evaluate_and_save(self, moment: str) -> None:
        """Evaluate and checkpoint where ``--eval_strategy`` / ``--save_strategy`` ask: ``moment`` is ``"steps"``
        (after an update) or ``"epoch"`` (at an epoch's end)."""
        step = self.state.global_step
        due = {"steps": lambda every: step % every == 0, "epoch": lambda every: True}[moment]
        if self.evaluating and self.args.eval_strategy == moment and due(self.eval_steps):
            self.track_best(self.evaluate())
            self.write_curves()
        if self.args.save_strategy == moment and due(self.save_steps):
            self.save_checkpoint()

    def track_best(self, metrics: dict[str, float]) -> None:
        """Compare the evaluation's ``--metric_for_best_model`` with the best so far (transformers' ``best_metric``)
        and count the evaluations without improvement for ``--early_stopping_patience`` (its
        ``EarlyStoppingCallback``: an improvement beats the best by more than ``--early_stopping_threshold``)."""
        name = self.args.best_metric_name
        if name is None:
            return
        if name not in metrics:  # at the first evaluation: the task decides which metrics there are
            raise invalid("metric_for_best_model", self.args.metric_for_best_model or "loss",
                          "a metric the evaluation reports, with or without its eval_ prefix: "
                          + ", ".join(k for k, v in metrics.items() if isinstance(v, float)))
        value, best, state = metrics[name], self.state.best_metric, self.state
        better = best is None or (value > best if self.args.best_is_greater else value < best)
        if best is None or (better and abs(value - best) > self.args.early_stopping_threshold):
            state.early_stopping_patience_counter = 0
        else:
            state.early_stopping_patience_counter += 1
        if better:
            state.best_metric, state.best_global_step = value, state.global_step
        patience = self.args.early_stopping_patience
        if patience is not None and state.early_stopping_patience_counter >= patience:
            self.stopping_early = True
            logger.warning(f"Early stopping after step {state.global_step}: {name} has not improved on its best "
                           f"({state.best_metric:.4f} at step {state.best_global_step}) by more than "
                           f"{self.args.early_stopping_threshold:g} for {patience} evaluation(s) "
                           "(--early_stopping_patience).")

    def load_best_model(self) -> None:
        """Load the best checkpoint's weights into the model (``--load_best_model_at_end``), and make its evaluation
        the run's last one, so that the final model, its card and its results are the best checkpoint's."""
        path = Path(self.state.best_model_checkpoint)
        # one process, DDP or DeepSpeed ZeRO 0-2: the weights are whole on every process; FSDP2: its shards
        with self.full_precision():
            load_weights(path, self.accelerator.unwrap_model(self.model),
                         unsharded_model=self.unsharded_model() if self.sharded else None)
        step = checkpoint_step(path)
        evaluation = [r for r in self.state.history if r["step"] == step and self.args.best_metric_name in r]
        if evaluation:
            self.last_eval = {k: v for k, v in evaluation[-1].items() if k.startswith("eval_")}
        logger.info(f"Loaded the best model: {path} (step {step}, "
                    f"{self.args.best_metric_name}={self.state.best_metric:.4f}).")

    def end_epoch(self) -> None:
        """Close an epoch: count it, reset the carried state, evaluate and save when due."""
        self.state.epoch += 1
        self.state.window = 0
        self.carried = None  # every epoch starts from a fresh state
        self.maybe_evaluate_and_save("epoch")
        self.maybe_evaluate_and_save("steps")  # an epoch's last update counts for the step interval too

    def run(self) -> dict[str, Any]:
        """Train to the end (or the time cap) and checkpoint; a stop signal raises :class:`TrainingInterrupted`."""
        self.maybe_resume()
        if self.accelerator.is_main_process:
            warn_if_low_disk_space(self.args.output_dir, self.accelerator.unwrap_model(self.model), self.optimizer)
        if not self.args.trackers:
            return self._run()
        hyper = {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in self.args.to_dict().items()}
        self.accelerator.init_trackers(Path(self.args.output_dir).name or "run", config=hyper)
        try:
            return self._run()
        finally:  # also when stopped by a signal: the trackers flush what they have
            for tracker in self.accelerator.trackers:  # not end_training(): the processes still have work to do
                tracker.finish()

    def _run(self) -> dict[str, Any]:
        with self.stop_signals:
            started = time.monotonic()
            progress = tqdm(total=self.total_steps, initial=self.state.global_step, desc="Training",
                            disable=self.args.disable_tqdm or not self.accelerator.is_local_main_process)
            with contextlib.closing(progress):
                while not self.done() and not self.stopping_early:
                    if self.train_epoch(progress, started):
                        break
                    self.end_epoch()
            train_seconds = time.monotonic() - started
            if signum := self.stop_signal():
                self.interrupt(signum)
            self.flush_losses()
            if self.evaluating and self.last_eval_step != self.state.global_step:
                self.track_best(self.evaluate())
            self.save_checkpoint()
            self.write_curves()
            if signum := self.stop_signal():  # arrived during the final evaluation: the checkpoint is written
                self.interrupt(signum)
            if self.args.load_best_model_at_end and self.state.best_model_checkpoint is not None:
                self.load_best_model()
        return self.results(train_seconds)

    def results(self, train_seconds: float) -> dict[str, Any]:
        """The run's final figures: mean training loss, the last evaluation, steps, epochs and timing."""
        self.read_losses()
        count = self.state.train_loss_count
        return {
            "train_loss": self.state.train_loss_sum / count if count else math.nan,
            **(self.last_eval or {}),
            "steps": self.state.global_step,
            "epochs": self._epoch_progress(),
            "train_runtime_seconds": train_seconds,
            "train_tokens_per_second": self.tokens_seen / train_seconds if train_seconds > 0 else math.nan,
            "num_processes": self.accelerator.num_processes,
            **({"best_metric": self.state.best_metric, "best_global_step": self.state.best_global_step,
                "best_model_checkpoint": self.state.best_model_checkpoint}
               if self.state.best_metric is not None else {}),
        }

    def train(self, training_data: str | None = None, eval_dataset: str | None = None) -> dict[str, Any]:
        """Run, save the final model and the results files, and return the results. ``training_data`` describes
        the data on the model card; ``eval_dataset`` names the held-out data in its ``model-index`` metadata."""
        self.eval_dataset = eval_dataset
        Path(self.args.output_dir).mkdir(parents=True, exist_ok=True)
        if self.accelerator.is_main_process:
            record_arguments(self.args.output_dir, self.args.to_dict(),
                             resuming=self.args.resume_from_checkpoint is not None)
        sharding = " (FSDP2: parameters, gradients and optimizer state sharded)" if self.sharded else ""
        if self.deepspeed:
            stage = self.accelerator.state.deepspeed_plugin.zero_stage
            sharding = f" (DeepSpeed ZeRO stage {stage})"
        logger.info(f"Training {self.model_class.__name__} on {self.accelerator.num_processes} process(es){sharding}: "
                    f"{len(self.batches)} batches/epoch, {self.args.gradient_accumulation_steps} per update, "
                    f"{self.total_steps} updates; {self.args.to_dict()}")
        results = self.run()
        if self.master_weights:  # the saved model is the float32 master weights
            self.master_weights.release()
        self.final_results, self.training_data = results, training_data
        self.save_final_model(results, training_data)
        if self.accelerator.is_main_process:
            self.write_results(results)
        logger.info(f"Done: {results}")
        return results


__all__ = [
    "OPTIMIZERS",
    "STOP_SIGNALS",
    "EngineArguments",
    "StopSignals",
    "TrainingInterrupted",
    "TrainingLoop",
    "build_optimizer",
    "configure_generation",
    "engine_card_arguments",
    "make_accelerator",
    "perplexity",
    "process_share",
    "share_counts",
    "write_run_model_card",
]
