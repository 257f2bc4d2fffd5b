"""Causal language modelling on the training engine: truncated back-propagation through time over streams.

:func:`train_causal_lm` trains any causal LM of the package (RNN/LSTM/GRU, NNLM, Transformer) with
``accelerate``: unchanged on one CPU process, under ``accelerate launch`` / ``torchrun`` with
several processes, or on a GPU. With ``P`` processes the ``B = per_device_train_batch_size × P``
global stream rows are split into ``P`` contiguous blocks, one per process; every process averages
its loss over the same number of tokens and DDP averages the gradients, so ``P`` processes with
``B / P`` rows each compute the same update as one process with ``B`` rows.

One update = one TBPTT window (:mod:`.data`): forward with the carried state, backward, clip,
optimizer step, scheduler step, detach the state. A Transformer LM carries no state: each window
is one training context of ``bptt`` tokens. The validation loss (mean token NLL in nats,
token-weighted, over the whole validation stream with the state carried) is computed after each
epoch and at the end. The loop itself — checkpoints, resuming, logging, the time cap — is the
loop's (:mod:`..core.loop`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.logging import get_logger

from ...models import RecurrentState
from ...models.cache_naming import cache_field, output_cache
from ...models.config_utils import invalid
from ...models.cross_entropy import summed_cross_entropy
from ...models.stateful_generation import is_stateful
from ..core.arguments import EngineArguments
from ..core.cards import engine_card_arguments
from ..core.launch import make_accelerator
from ..core.loop import TrainingLoop, perplexity, process_share
from .data import ShuffledContextWindows, StreamWindows, Window, batchify, shard_rows, stream_slice
from .streaming import StreamingWindows

logger = get_logger(__name__)

#: the task's values of what neither the command line nor a recipe sets
LM_DEFAULTS = {"per_device_train_batch_size": 20, "per_device_eval_batch_size": 10, "block_size": 35,
               "generation_max_length": 200, "shuffle_windows": False}


@dataclass
class LMTrainingArguments(EngineArguments):
    """The loop's arguments plus the layout of the TBPTT streams.

    Batch sizes count *stream rows*; one update reads ``per_device_train_batch_size × block_size`` tokens
    per process; ``per_device_eval_batch_size`` is the number of rows the validation stream is cut into.
    ``shuffle_windows`` (NNLM, Transformer LM) reads fixed windows in a random order.
    """

    block_size: int | None = field(default=None, metadata={"help": (
        "tokens per training window: the truncated-BPTT length of a recurrent model, the context of a Transformer "
        "LM (default: recipe, 35)")})
    shuffle_windows: bool | None = field(default=None, metadata={"help": (
        "read fixed windows in a new random order every epoch (NNLM: context + block_size; Transformer LM: "
        "block_size) instead of carrying a state along the stream; not for recurrent models (default: recipe, "
        "False)"), "nargs": "?", "const": True})  # a bare --shuffle_windows is True

    eval_stride: int | None = field(default=None, metadata={"help": (
        "score the validation stream of a model that reads each window alone (Transformer LM) in windows of "
        "block_size tokens that move on by eval_stride tokens, each scoring its last eval_stride tokens with the "
        "block_size - eval_stride before them as context, as a recurrent model carries its state (default: "
        "block_size, windows side by side)")})

    def check(self):
        super().check()
        if self.block_size is not None and (isinstance(self.block_size, bool) or self.block_size < 1):
            raise invalid("block_size", self.block_size, "an integer >= 1")
        if self.eval_stride is not None:
            check_stride_range(self.eval_stride, self.block_size)


def build_train_windows(train_ids: torch.Tensor, args: LMTrainingArguments, model: torch.nn.Module,
                        process_index: int = 0, num_processes: int = 1):
    """This process's training windows: its block of the global stream rows (or fixed windows in a shuffled order)."""
    global_batch = args.per_device_train_batch_size * num_processes
    if not args.shuffle_windows:
        streams = shard_rows(batchify(train_ids, global_batch), process_index, num_processes)  # (B/P, N)
        return StreamWindows(streams, args.block_size)
    context_size = getattr(model.config, "context_size", None)
    if context_size is None and is_stateful(model):
        raise invalid("shuffle_windows", True, "False for a model whose state is not its last n-1 tokens "
                      f"(a recurrent state is carried along the stream in order; got {type(model).__name__})")
    context_size = context_size or 0  # a Transformer LM reads nothing before its window
    return ShuffledContextWindows(
        train_ids, context_size=context_size, block_size=args.block_size, global_batch_size=global_batch,
        process_index=process_index, num_processes=num_processes, seed=args.seed,
        fill_id=getattr(model, "context_fill_id", 0),
    )


def check_stride_range(stride: int, block_size: int | None) -> None:
    """``--eval_stride`` must be an integer from 1 to ``block_size`` (when that is known)."""
    if isinstance(stride, bool) or stride < 1 or (block_size is not None and stride > block_size):
        raise invalid("eval_stride", stride, f"an integer from 1 to --block_size ({block_size})")


def check_eval_stride(model: torch.nn.Module, stride: int | None, block_size: int) -> int:
    """The validation windows' stride (``block_size`` when None); a clear error for one that is not in
    ``[1, block_size]`` or for a model that carries its state along the stream."""
    if stride is None or stride == block_size:
        return block_size
    if is_stateful(model):
        raise invalid("eval_stride", stride, f"None for {type(model).__name__}, which carries its state along the "
                      "validation stream (every token is already scored with all the text before it)")
    check_stride_range(stride, block_size)
    return stride


@torch.no_grad()
def stream_nll(model: torch.nn.Module, windows: StreamWindows, device: torch.device) -> tuple[float, int]:
    """``(sum of token NLLs in nats, number of target tokens)`` of ``windows``, the state carried (a
    model without a state, the Transformer LM, scores each window on its own)."""
    if windows.streams.shape[0] == 0:
        return 0.0, 0
    was_training = model.training
    model.eval()
    total, count, state, stateful = 0.0, 0, None, is_stateful(model)
    for index in range(len(windows)):
        window = windows.batch(index)
        labels = window.labels.to(device)
        carried = {**cache_field(state), "use_cache": True} if stateful else {"use_cache": False}
        out = model(window.input_ids.to(device), **carried)
        total += summed_cross_entropy(out.logits.flatten(0, 1), labels.flatten()).item()  # float32, (B*T, V)
        count += int((labels != -100).sum())
        state = output_cache(out)
    model.train(was_training)
    return total, count


def evaluate_causal_lm(model: torch.nn.Module, eval_ids: torch.Tensor, *, batch_size: int = 10, block_size: int = 35,
                       accelerator: Accelerator | None = None, stride: int | None = None) -> dict[str, float]:
    """Validation loss (nats/token) and perplexity of ``eval_ids`` ``(L,)`` cut into ``batch_size`` rows.

    The rows are shared among processes (``accelerator``) and the sums reduced, so the result does
    not depend on the number of processes. The ``L % batch_size`` last tokens are not scored.
    ``stride`` (a model without a carried state): windows of ``block_size`` tokens that move on by ``stride``,
    each scoring its last ``stride`` tokens (``--eval_stride``); default: windows side by side.
    """
    stride = check_eval_stride(model, stride, block_size)
    rows = batchify(eval_ids, batch_size)  # (B_eval, N)
    rank, world = process_share(accelerator)
    device = accelerator.device if accelerator else next(model.parameters()).device
    windows = StreamWindows(shard_rows(rows, rank, world), stride, context=block_size - stride)
    total, count = stream_nll(model, windows, device)
    sums = torch.tensor([total, float(count)], dtype=torch.float64, device=device)
    if accelerator is not None and world > 1:
        sums = accelerator.reduce(sums, reduction="sum")
    loss = (sums[0] / sums[1]).item()
    return {"eval_loss": loss, "eval_perplexity": perplexity(loss), "eval_tokens": int(sums[1].item())}


def card_training_args(args: LMTrainingArguments, num_processes: int = 1) -> dict[str, Any]:
    """The hyper-parameters a language model's card lists under "Training procedure"."""
    values = {**engine_card_arguments(args, num_processes),
              "streams per batch (global)": args.per_device_train_batch_size * num_processes,
              "window (BPTT) length": args.block_size}
    if args.eval_stride is not None and args.eval_stride != args.block_size:
        values["validation windows"] = (f"{args.block_size} tokens moving on by {args.eval_stride}, each scoring "
                                        f"its last {args.eval_stride}")
    return values


def stream_position_file(checkpoint: Path, process_index: int) -> Path:
    """Where a streamed run keeps process ``process_index``'s stream position beside checkpoint ``checkpoint``."""
    return Path(checkpoint) / f"stream-rank-{process_index}.json"


class LMTrainingLoop(TrainingLoop):
    """TBPTT over contiguous streams; the recurrent state is carried (detached) between windows.

    ``train_stream`` (a ``datasets.IterableDataset`` with a ``stream_text_column``) replaces ``train_ids``: the
    windows are then tokenised as the stream is read (:class:`.streaming.StreamingWindows`), the run has
    ``max_steps`` updates, and each checkpoint gets every process's stream position beside it
    (``stream-rank-{i}.json``), from which a resumed run continues without re-reading what it consumed.
    """

    plot_title = "Language-model training"

    def __init__(self, model, tokenizer, train_ids: torch.Tensor | None, eval_ids: torch.Tensor,
                 args: LMTrainingArguments, accelerator: Accelerator, train_stream=None,
                 stream_text_column: str = "text"):
        if (train_ids is None) == (train_stream is None):
            raise ValueError("Give exactly one of `train_ids` (a token stream) or `train_stream` (a datasets stream).")
        self.train_ids, self.eval_ids, self.stateful = train_ids, eval_ids, is_stateful(model)
        self.train_stream, self.stream_text_column = train_stream, stream_text_column
        super().__init__(model, tokenizer, args, accelerator)

    def task_defaults(self) -> dict[str, Any]:
        return LM_DEFAULTS

    def attention_sample(self) -> dict[str, torch.Tensor]:
        """The first 32 held-out tokens."""
        return {"input_ids": stream_slice(self.eval_ids, 0, 32).unsqueeze(0)}

    def build_batches(self, model):
        check_eval_stride(model, self.args.eval_stride, self.args.block_size)  # before training, not after it
        if self.train_stream is None:
            return build_train_windows(self.train_ids, self.args, model, self.accelerator.process_index,
                                       self.accelerator.num_processes)
        if self.args.shuffle_windows:
            raise invalid("shuffle_windows", True, "False with a streamed training text, which is read in order")
        if self.args.max_steps is None or self.args.max_steps < 1:
            raise invalid("max_steps", self.args.max_steps, "a number of updates >= 1 with a streamed training text "
                          "(a stream has no length, so epochs cannot be counted)")
        return StreamingWindows(
            self.train_stream, self.tokenizer, rows=self.args.per_device_train_batch_size,
            block_size=self.args.block_size, num_windows=self.args.max_steps * self.args.gradient_accumulation_steps,
            text_column=self.stream_text_column, process_index=self.accelerator.process_index,
            num_processes=self.accelerator.num_processes)

    def checkpoint_rank_files(self) -> dict[str, str] | None:
        """A streamed run's position, ``stream-rank-{i}.json`` in the checkpoint (in its manifest, so verified on
        resume like the weights)."""
        if not isinstance(self.batches, StreamingWindows):
            return None
        name = stream_position_file(Path(), self.accelerator.process_index).name
        return {name: json.dumps(self.batches.position().to_dict())}

    def maybe_resume(self) -> None:
        """Resume as the loop does; a streamed run then continues its stream from the saved position."""
        super().maybe_resume()
        if self.last_checkpoint is None or not isinstance(self.batches, StreamingWindows):
            return
        saved = stream_position_file(self.last_checkpoint, self.accelerator.process_index)
        position = json.loads(saved.read_text()) if saved.is_file() else None
        if position is not None and position["windows"] == self.state.window:
            self.batches.restore(position)
        elif self.state.window:  # a checkpoint written before the positions were part of it
            logger.warning(f"{saved} is missing: reading the stream again up to window {self.state.window}.")

    def _state_kwargs(self, window: Window) -> dict[str, Any]:
        """What the model reads besides the window: the carried state (RNNs), the context ids of a shuffled
        window (NNLM), or nothing (a Transformer LM attends within its window only)."""
        if not self.stateful:
            return {"use_cache": False}
        if window.context is not None:
            return {**cache_field(RecurrentState((window.context.to(self.accelerator.device, non_blocking=True),), 0)),
                    "use_cache": True}
        return {**cache_field(self.carried), "use_cache": True}

    def compute_loss(self, window: Window) -> tuple[torch.Tensor, int]:
        device = self.accelerator.device  # non-blocking copies: a blocking one waits for the previous update
        out = self.model(window.input_ids.to(device, non_blocking=True),
                         shift_labels=window.labels.to(device, non_blocking=True), **self._state_kwargs(window))
        state = output_cache(out)
        self.carried = state.detach() if self.batches.carries_state and state is not None else None
        return out.loss, window.labels.numel()

    def micro_batch_weights(self, windows: list[Window]) -> list[float]:
        """Each window's loss is a mean over its labels (as many on every process): weighted by their number."""
        sizes = [window.labels.numel() for window in windows]
        return [size / sum(sizes) for size in sizes]

    def evaluate_metrics(self, model) -> dict[str, float]:
        return evaluate_causal_lm(model, self.eval_ids, batch_size=self.args.per_device_eval_batch_size,
                                  block_size=self.args.block_size, accelerator=self.eval_accelerator,
                                  stride=self.args.eval_stride)

    def card_arguments(self) -> dict[str, Any]:
        return card_training_args(self.args, self.accelerator.num_processes)

    def results(self, train_seconds: float) -> dict[str, Any]:
        global_batch = self.args.per_device_train_batch_size * self.accelerator.num_processes
        return {**super().results(train_seconds), "global_train_batch_size": global_batch}


def train_causal_lm(model: torch.nn.Module, tokenizer, train_ids: torch.Tensor, eval_ids: torch.Tensor,
                    args: LMTrainingArguments, accelerator: Accelerator | None = None,
                    training_data: str | None = None, eval_dataset: str | None = None) -> dict[str, Any]:
    """Train ``model`` on the token stream ``train_ids`` ``(L,)``, validate on ``eval_ids`` ``(L_eval,)``.

    Every process must call this with the same streams. Returns ``train_loss`` (mean over the
    updates, nats/token), ``eval_loss`` (nats/token), ``eval_perplexity``, ``steps``, ``epochs``,
    ``train_runtime_seconds``, ``train_tokens_per_second`` (all processes) and the batch layout.
    The model, tokenizer, generation config, checkpoints, ``training_history.json`` and
    ``loss_curve.png`` are written to ``args.output_dir``.
    """
    args = args.filled(LM_DEFAULTS)
    accelerator = accelerator or make_accelerator(args)
    return LMTrainingLoop(model, tokenizer, train_ids, eval_ids, args, accelerator).train(training_data, eval_dataset)


__all__ = [
    "LM_DEFAULTS",
    "LMTrainingArguments",
    "LMTrainingLoop",
    "build_train_windows",
    "card_training_args",
    "evaluate_causal_lm",
    "is_stateful",
    "stream_nll",
    "stream_position_file",
    "train_causal_lm",
]
