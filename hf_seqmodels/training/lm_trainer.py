"""The causal-LM training engine: truncated back-propagation through time over contiguous streams.

:func:`train_causal_lm` trains any stateful causal LM of the package (RNN/LSTM/GRU, NNLM) with
``accelerate``: unchanged on one CPU process, under ``accelerate launch`` / ``torchrun`` with
several processes, or on a GPU. With ``P`` processes the ``B = per_device_train_batch_size × P``
global stream rows are split into ``P`` contiguous blocks, one per process; every process averages
its loss over the same number of tokens and DDP averages the gradients, so ``P`` processes with
``B / P`` rows each compute the same update as one process with ``B`` rows.

One update = one TBPTT window (:mod:`.data`): forward with the carried state, backward, clip,
optimizer step, scheduler step, detach the state. The validation loss (mean token NLL in nats,
token-weighted, over the whole validation stream with the state carried) is computed after each
epoch and at the end. Checkpoints (:mod:`.checkpointing`) make interrupted runs resume exactly.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.logging import get_logger
from accelerate.utils import set_seed
from tqdm.auto import tqdm

from ..models import RecurrentState
from .checkpointing import TrainerState, load_checkpoint, resolve_checkpoint, save_checkpoint
from .data import ShuffledContextWindows, StreamWindows, Window, batchify, shard_rows
from .plotting import plot_loss_curves, write_history
from .schedules import SCHEDULES, build_scheduler

logger = get_logger(__name__)

OPTIMIZERS = ("sgd", "adamw")


def _invalid(field: str, value, allowed: str) -> ValueError:
    return ValueError(f"Invalid `{field}`={value!r}: expected {allowed}.")


@dataclass
class LMTrainingArguments:
    """Everything that shapes a training run (the model's shape lives in its config).

    Batch sizes count *stream rows*; one update reads ``per_device_train_batch_size × bptt`` tokens
    per process. ``max_steps`` and ``max_train_minutes`` stop a run early and cleanly (evaluate,
    checkpoint, save). ``lr_scheduler`` is one of ``"zaremba"`` (``decay_start_epoch``,
    ``decay_factor``), ``"cosine"`` (``min_lr_ratio``) or ``"constant"``; all take ``warmup_steps``.
    ``resume_from_checkpoint`` is ``"latest"`` (the newest checkpoint of ``output_dir``, if any) or a
    checkpoint folder. ``shuffle_windows`` (NNLM only) reads fixed windows in a random order.
    """

    output_dir: str
    num_train_epochs: int = 1
    max_steps: int | None = None
    max_train_minutes: float | None = None
    per_device_train_batch_size: int = 20
    bptt: int = 35
    learning_rate: float = 1.0
    optimizer: str = "sgd"
    weight_decay: float = 0.0
    lr_scheduler: str = "constant"
    decay_start_epoch: int = 4
    decay_factor: float = 0.5
    min_lr_ratio: float = 0.0
    warmup_steps: int = 0
    max_grad_norm: float | None = 5.0
    seed: int = 42
    eval_batch_size: int = 10
    checkpointing_steps: int | None = None
    save_total_limit: int | None = 2
    resume_from_checkpoint: str | None = None
    logging_steps: int = 50
    plot: bool = True
    shuffle_windows: bool = False
    generation_max_new_tokens: int = 200
    mixed_precision: str = "no"
    use_cpu: bool = False
    disable_tqdm: bool = False

    def __post_init__(self):
        for name in ("num_train_epochs", "per_device_train_batch_size", "bptt", "eval_batch_size",
                     "logging_steps", "generation_max_new_tokens"):
            if getattr(self, name) < 1:
                raise _invalid(name, getattr(self, name), "an integer >= 1")
        for name in ("max_steps", "checkpointing_steps", "save_total_limit"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise _invalid(name, getattr(self, name), "None or an integer >= 1")
        if self.max_train_minutes is not None and self.max_train_minutes <= 0:
            raise _invalid("max_train_minutes", self.max_train_minutes, "None or a positive number of minutes")
        if self.learning_rate <= 0:
            raise _invalid("learning_rate", self.learning_rate, "a positive number")
        if self.optimizer not in OPTIMIZERS:
            raise _invalid("optimizer", self.optimizer, "one of " + ", ".join(map(repr, OPTIMIZERS)))
        if self.lr_scheduler not in SCHEDULES:
            raise _invalid("lr_scheduler", self.lr_scheduler, "one of " + ", ".join(map(repr, SCHEDULES)))
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise _invalid("max_grad_norm", self.max_grad_norm, "None (no clipping) or a positive number")


# --------------------------------------------------------------------------- building blocks


def build_optimizer(model: torch.nn.Module, args: LMTrainingArguments) -> torch.optim.Optimizer:
    """Plain SGD (Zaremba et al.) or AdamW over all parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=args.learning_rate, weight_decay=args.weight_decay)
    return torch.optim.AdamW(params, lr=args.learning_rate, weight_decay=args.weight_decay)


def build_train_windows(train_ids: torch.Tensor, args: LMTrainingArguments, model: torch.nn.Module,
                        process_index: int = 0, num_processes: int = 1):
    """This process's training windows: its block of the global stream rows (or shuffled NNLM windows)."""
    global_batch = args.per_device_train_batch_size * num_processes
    if not args.shuffle_windows:
        streams = shard_rows(batchify(train_ids, global_batch), process_index, num_processes)  # (B/P, N)
        return StreamWindows(streams, args.bptt)
    context_size = getattr(model.config, "context_size", None)
    if context_size is None:
        raise _invalid("shuffle_windows", True, "False for a model whose state is not its last n-1 tokens "
                       f"(only the NNLM can read windows out of order; got {type(model).__name__})")
    return ShuffledContextWindows(
        train_ids, context_size=context_size, block_size=args.bptt, global_batch_size=global_batch,
        process_index=process_index, num_processes=num_processes, seed=args.seed, fill_id=model.context_fill_id,
    )


def _perplexity(loss: float) -> float:
    return math.exp(loss) if loss < 700 else math.inf


@torch.no_grad()
def stream_nll(model: torch.nn.Module, windows: StreamWindows, device: torch.device) -> tuple[float, int]:
    """``(sum of token NLLs in nats, number of target tokens)`` of ``windows``, the state carried."""
    if windows.streams.shape[0] == 0:
        return 0.0, 0
    was_training = model.training
    model.eval()
    total, count, state = 0.0, 0, None
    for index in range(len(windows)):
        window = windows.window(index)
        labels = window.labels.to(device)
        out = model(window.input_ids.to(device), past_key_values=state, use_cache=True)
        logits = out.logits.float().flatten(0, 1)  # (B*T, V)
        total += F.cross_entropy(logits, labels.flatten(), ignore_index=-100, reduction="sum").item()
        count += int((labels != -100).sum())
        state = out.past_key_values
    model.train(was_training)
    return total, count


def evaluate_causal_lm(model: torch.nn.Module, eval_ids: torch.Tensor, *, batch_size: int = 10, bptt: int = 35,
                       accelerator: Accelerator | None = None) -> dict[str, float]:
    """Validation loss (nats/token) and perplexity of ``eval_ids`` ``(L,)`` cut into ``batch_size`` rows.

    The rows are shared among processes (``accelerator``) and the sums reduced, so the result does
    not depend on the number of processes. The ``L % batch_size`` last tokens are not scored.
    """
    rows = batchify(eval_ids, batch_size)  # (B_eval, N)
    rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
    device = accelerator.device if accelerator else next(model.parameters()).device
    total, count = stream_nll(model, StreamWindows(shard_rows(rows, rank, world), bptt), device)
    sums = torch.tensor([total, float(count)], dtype=torch.float64, device=device)
    if accelerator is not None and world > 1:
        sums = accelerator.reduce(sums, reduction="sum")
    loss = (sums[0] / sums[1]).item()
    return {"eval_loss": loss, "eval_perplexity": _perplexity(loss), "eval_tokens": int(sums[1].item())}


def configure_generation(model: torch.nn.Module, tokenizer, max_new_tokens: int) -> None:
    """Sensible ``generation_config`` defaults: the tokenizer's bos/eos/pad ids and ``max_new_tokens``."""
    generation_config = model.generation_config
    generation_config.max_new_tokens = max_new_tokens
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None) if tokenizer is not None else None
        if value is None:
            value = getattr(model.config, name, None)
        setattr(generation_config, name, value)


def card_training_args(args: LMTrainingArguments, num_processes: int = 1) -> dict[str, Any]:
    """The hyper-parameters a model card lists under "Training procedure"."""
    schedule = f"{args.lr_scheduler}, {args.warmup_steps} warm-up steps"
    if args.lr_scheduler == "zaremba":
        schedule += f", x{args.decay_factor} per epoch after epoch {args.decay_start_epoch}"
    return {
        "optimizer": f"{args.optimizer} (weight decay {args.weight_decay})",
        "learning rate": args.learning_rate,
        "schedule": schedule,
        "streams per batch (global)": args.per_device_train_batch_size * num_processes,
        "BPTT length": args.bptt,
        "gradient clipping (max norm)": args.max_grad_norm,
        "epochs (max)": args.num_train_epochs,
        "time cap (minutes)": args.max_train_minutes,
        "processes": num_processes,
        "seed": args.seed,
    }


def write_run_model_card(output_dir: str, model, tokenizer, results: dict[str, Any], args: LMTrainingArguments,
                         num_processes: int = 1, training_data: str | None = None, **card_kwargs) -> None:
    """The model card of a training run: results, hyper-parameters, data and loss curve."""
    from ..hub import summarize_results, write_model_card

    write_model_card(output_dir, model, tokenizer, summarize_results(results),
                     training_args=card_training_args(args, num_processes),
                     training_data=training_data or "Not recorded.", **card_kwargs)


# --------------------------------------------------------------------------- the loop


class _LMTrainer:
    """State of one run; :meth:`run` is the whole loop. Use :func:`train_causal_lm`."""

    def __init__(self, model, tokenizer, train_ids, eval_ids, args: LMTrainingArguments, accelerator: Accelerator):
        self.args, self.accelerator, self.tokenizer, self.eval_ids = args, accelerator, tokenizer, eval_ids
        self.windows = build_train_windows(train_ids, args, model, accelerator.process_index,
                                           accelerator.num_processes)
        total = args.num_train_epochs * len(self.windows)
        self.total_steps = min(total, args.max_steps) if args.max_steps else total
        optimizer = build_optimizer(model, args)
        self.model, self.optimizer = accelerator.prepare(model, optimizer)
        self.scheduler = build_scheduler(
            self.optimizer, args.lr_scheduler, total_steps=self.total_steps, steps_per_epoch=len(self.windows),
            warmup_steps=args.warmup_steps, decay_start_epoch=args.decay_start_epoch,
            decay_factor=args.decay_factor, min_lr_ratio=args.min_lr_ratio,
        )
        self.state = TrainerState(num_processes=accelerator.num_processes, windows_per_epoch=len(self.windows))
        self.carried: RecurrentState | None = None
        self.tokens_seen = 0
        self.last_lr = args.learning_rate
        self.last_checkpoint_step = -1
        self.last_eval: dict[str, float] | None = None
        self.last_eval_step = -1

    # ---- pieces of a step
    def _model_state(self, window: Window) -> RecurrentState | None:
        if window.context is not None:
            return RecurrentState((window.context.to(self.accelerator.device),), 0)
        return self.carried

    def train_step(self, window: Window) -> float:
        """One update on ``window``; returns the loss averaged over processes."""
        device = self.accelerator.device
        out = self.model(window.input_ids.to(device), past_key_values=self._model_state(window),
                         shift_labels=window.labels.to(device), use_cache=True)
        self.accelerator.backward(out.loss)
        if self.args.max_grad_norm is not None:
            self.accelerator.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
        self.optimizer.step()
        self.last_lr = self.scheduler.get_last_lr()[0]  # the rate this update used
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.carried = out.past_key_values.detach() if self.windows.carries_state else None
        self.tokens_seen += window.labels.numel() * self.accelerator.num_processes
        return self.accelerator.reduce(out.loss.detach(), reduction="mean").item()

    def _epoch_progress(self) -> float:
        return round(self.state.epoch + self.state.window / len(self.windows), 4)

    def _record_loss(self, loss: float) -> None:
        self.state.train_loss_sum += loss
        self.state.train_loss_count += 1
        pending = self.state.pending_losses
        pending.append(loss)
        if self.state.global_step % self.args.logging_steps == 0:
            record = {"step": self.state.global_step, "epoch": self._epoch_progress(),
                      "train_loss": sum(pending) / len(pending), "learning_rate": self.last_lr}
            self.state.history.append(record)
            logger.info(f"step {record['step']}: train_loss={record['train_loss']:.4f} lr={record['learning_rate']:.4g}")
            pending.clear()

    def evaluate(self) -> dict[str, float]:
        model = self.accelerator.unwrap_model(self.model)
        self.last_eval = evaluate_causal_lm(model, self.eval_ids, batch_size=self.args.eval_batch_size,
                                            bptt=self.args.bptt, accelerator=self.accelerator)
        self.state.history.append({"step": self.state.global_step, "epoch": self._epoch_progress(),
                                   "eval_loss": self.last_eval["eval_loss"],
                                   "eval_perplexity": self.last_eval["eval_perplexity"]})
        self.last_eval_step = self.state.global_step
        logger.info(f"step {self.state.global_step} (epoch {self._epoch_progress()}): "
                    f"eval_loss={self.last_eval['eval_loss']:.4f} eval_perplexity={self.last_eval['eval_perplexity']:.3f}")
        return self.last_eval

    def save_checkpoint(self) -> None:
        if self.last_checkpoint_step == self.state.global_step:
            return
        path = save_checkpoint(self.args.output_dir, accelerator=self.accelerator, model=self.model,
                               optimizer=self.optimizer, scheduler=self.scheduler, trainer_state=self.state,
                               recurrent_state=self.carried, save_total_limit=self.args.save_total_limit)
        self.last_checkpoint_step = self.state.global_step
        logger.info(f"Saved checkpoint {path}")

    def write_curves(self) -> None:
        if self.accelerator.is_main_process:
            write_history(self.state.history, self.args.output_dir)
            if self.args.plot:
                plot_loss_curves(self.state.history, self.args.output_dir)

    # ---- resuming and stopping
    def maybe_resume(self) -> None:
        path = resolve_checkpoint(self.args.resume_from_checkpoint, self.args.output_dir)
        if path is None:
            if self.args.resume_from_checkpoint is not None:
                logger.warning(f"No checkpoint in {self.args.output_dir}: training from scratch.")
            set_seed(self.args.seed + self.accelerator.process_index)
            return
        self.state, self.carried = load_checkpoint(path, accelerator=self.accelerator, model=self.model,
                                                   optimizer=self.optimizer, scheduler=self.scheduler)
        if self.state.windows_per_epoch != len(self.windows):
            raise ValueError(f"Checkpoint {str(path)!r} was trained with {self.state.windows_per_epoch} windows per epoch, "
                             f"this run has {len(self.windows)}: resume with the same data, batch size and bptt.")
        self.last_checkpoint_step = self.state.global_step
        logger.info(f"Resumed from {path}: step {self.state.global_step}, epoch {self.state.epoch}, "
                    f"window {self.state.window}/{len(self.windows)}")

    def out_of_time(self, started: float) -> bool:
        """True on every process as soon as one of them passed ``max_train_minutes``."""
        if self.args.max_train_minutes is None:
            return False
        late = float(time.monotonic() - started > 60.0 * self.args.max_train_minutes)
        flag = torch.tensor(late, device=self.accelerator.device)
        return self.accelerator.reduce(flag, reduction="sum").item() > 0

    def done(self) -> bool:
        return self.state.global_step >= self.total_steps

    # ---- the loop
    def train_epoch(self, progress, started: float) -> bool:
        """Train from the current position to the end of the epoch; returns True if the run must stop early."""
        self.model.train()
        for index in range(self.state.window, len(self.windows)):
            loss = self.train_step(self.windows.window(index, self.state.epoch))
            self.state.global_step += 1
            self.state.window = index + 1
            self._record_loss(loss)
            progress.update(1)
            progress.set_postfix(loss=f"{loss:.3f}", epoch=self.state.epoch)
            if self.state.window == len(self.windows):
                return False
            if self.args.checkpointing_steps and self.state.global_step % self.args.checkpointing_steps == 0:
                self.save_checkpoint()
            if self.done() or self.out_of_time(started):
                return True
        return False

    def end_epoch(self) -> None:
        self.state.epoch += 1
        self.state.window = 0
        self.carried = None  # every epoch starts the streams from a fresh state
        self.evaluate()
        self.write_curves()
        self.save_checkpoint()

    def run(self) -> dict[str, Any]:
        self.maybe_resume()
        started = time.monotonic()
        progress = tqdm(total=self.total_steps, initial=self.state.global_step, desc="Training",
                        disable=self.args.disable_tqdm or not self.accelerator.is_local_main_process)
        while self.state.epoch < self.args.num_train_epochs and not self.done():
            if self.train_epoch(progress, started):
                break
            self.end_epoch()
        progress.close()
        train_seconds = time.monotonic() - started
        if self.last_eval_step != self.state.global_step:
            self.evaluate()
        self.save_checkpoint()
        self.write_curves()
        return self.results(train_seconds)

    def results(self, train_seconds: float) -> dict[str, Any]:
        count = self.state.train_loss_count
        return {
            "train_loss": self.state.train_loss_sum / count if count else math.nan,
            "eval_loss": self.last_eval["eval_loss"],
            "eval_perplexity": self.last_eval["eval_perplexity"],
            "steps": self.state.global_step,
            "epochs": self._epoch_progress(),
            "train_runtime_seconds": train_seconds,
            "train_tokens_per_second": self.tokens_seen / train_seconds if train_seconds > 0 else math.nan,
            "num_processes": self.accelerator.num_processes,
            "global_train_batch_size": self.args.per_device_train_batch_size * self.accelerator.num_processes,
        }


def make_accelerator(args: LMTrainingArguments) -> Accelerator:
    """The run's ``Accelerator`` (``ACCELERATE_USE_CPU=1``, set by ``accelerate launch --cpu``, also forces the CPU)."""
    return Accelerator(cpu=args.use_cpu, mixed_precision=args.mixed_precision)


def save_final_model(model, tokenizer, args: LMTrainingArguments, accelerator: Accelerator,
                     results: dict[str, Any], training_data: str | None = None) -> None:
    """``save_pretrained`` of the unwrapped model and the tokenizer, generation defaults, model card."""
    accelerator.wait_for_everyone()
    unwrapped = accelerator.unwrap_model(model)
    if accelerator.is_main_process:
        configure_generation(unwrapped, tokenizer, args.generation_max_new_tokens)
        unwrapped.save_pretrained(args.output_dir)
        if tokenizer is not None:
            tokenizer.save_pretrained(args.output_dir)
        write_run_model_card(args.output_dir, unwrapped, tokenizer, results, args, accelerator.num_processes,
                             training_data)
    accelerator.wait_for_everyone()


def train_causal_lm(model: torch.nn.Module, tokenizer, train_ids: torch.Tensor, eval_ids: torch.Tensor,
                    args: LMTrainingArguments, accelerator: Accelerator | None = None,
                    training_data: str | None = None) -> dict[str, Any]:
    """Train ``model`` on the token stream ``train_ids`` ``(L,)``, validate on ``eval_ids`` ``(L_eval,)``.

    Every process must call this with the same streams. Returns ``train_loss`` (mean over the
    updates, nats/token), ``eval_loss`` (nats/token), ``eval_perplexity``, ``steps``, ``epochs``,
    ``train_runtime_seconds``, ``train_tokens_per_second`` (all processes) and the batch layout.
    The model, tokenizer, generation config, checkpoints, ``training_history.json`` and
    ``loss_curve.png`` are written to ``args.output_dir``.
    """
    accelerator = accelerator or make_accelerator(args)
    Path(args.output_dir).mkdir(parents=True, exist_ok=True)
    trainer = _LMTrainer(model, tokenizer, train_ids, eval_ids, args, accelerator)
    logger.info(f"Training {type(model).__name__} on {accelerator.num_processes} process(es): "
                f"{len(trainer.windows)} windows/epoch, {trainer.total_steps} updates; {asdict(args)}")
    results = trainer.run()
    save_final_model(trainer.model, tokenizer, args, accelerator, results, training_data)
    logger.info(f"Done: {results}")
    return results


__all__ = [
    "LMTrainingArguments",
    "build_optimizer",
    "build_train_windows",
    "card_training_args",
    "configure_generation",
    "evaluate_causal_lm",
    "make_accelerator",
    "save_final_model",
    "stream_nll",
    "train_causal_lm",
    "write_run_model_card",
]
