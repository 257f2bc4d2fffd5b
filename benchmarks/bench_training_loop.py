"""Overhead of the training loop: time per step of ``LMTrainingLoop`` against a hand-written accelerate loop.

Both sides train the same LSTM language model (``RNNForCausalLM``, equal initial weights, no dropout) on the
same token stream (Tiny Shakespeare, character level, or random ids with ``--vocab-size``) with truncated
back-propagation through time: ``--batch-size`` stream rows read in windows of ``--bptt`` tokens, one window
per step, the recurrent state carried from one window to the next, detached. Same optimizer (AdamW,
constant learning rate, no weight decay), same gradient clipping (norm 1.0), same number of steps.

* ours: :class:`hf_seqmodels.training.lm.trainer.LMTrainingLoop`, built as ``train_causal_lm`` builds it
  (``LMTrainingArguments`` with ``lr_scheduler_type="constant"``, ``eval_strategy="no"``,
  ``save_strategy="no"``, a large ``logging_steps``, ``disable_tqdm``).
* reference: ``Accelerator().prepare(model, optimizer)`` and the textbook loop: slice the window, forward
  with the carried state, ``accelerator.backward``, ``accelerator.clip_grad_norm_``, ``optimizer.step()``,
  ``optimizer.zero_grad()``, detach the state. One ``.item()`` per round, none per step.

**What is timed, and why it is the per-step cost.** One timed round of ours is one call of
``TrainingLoop.train_epoch`` over an epoch of exactly ``--steps`` windows, followed by ``end_epoch`` (which
drops the carried state; with no evaluation and no checkpoint due it does nothing else). ``train_epoch`` is
all that ``TrainingLoop.run`` repeats per update: the stop-signal check, reading the window, ``train_step``
(forward, backward, clipping, optimizer and scheduler steps, ``reduce(...)``), the loss record (kept on the
device, read back at logging steps) and its logging, the progress bar, the evaluation/checkpoint/time-cap
checks. What ``run`` does once per run (resuming, the final evaluation, the final checkpoint, the model card)
is left out, as the reference has none of it. Rounds of the two sides alternate (A B, B A, ...); the ratio is
the median over rounds of (ours / reference) of rounds that ran next to each other. Before timing, the script
checks that the two sides did the same work: after the warmup round the weights of both models must agree.

Two ratios are printed: of wall time, and of the process's CPU time (with ``--threads 1`` that is the wall
time less the slices other processes took from the core, so it moves much less on a busy machine).
``--profile`` adds cProfile's view of one round of each side and the time of each call the loop makes per
update that the reference does not, timed alone.

Target: time per step ours / reference <= 1.05 (both clocks).

    python -m benchmarks.bench_training_loop --threads 1
    python -m benchmarks.bench_training_loop --vocab-size 1000 --steps 40 --repeats 9 --profile --json out.json
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import pstats
import statistics
import tempfile
import time
import timeit
from pathlib import Path

import torch
from accelerate import Accelerator
from tqdm.auto import tqdm

from hf_seqmodels import RNNConfig, RNNForCausalLM
from hf_seqmodels.models.cache_naming import cache_field, output_cache
from hf_seqmodels.training.lm.data import batchify
from hf_seqmodels.training.lm.trainer import LM_DEFAULTS, LMTrainingArguments, LMTrainingLoop

from .common import (
    add_common_args,
    interleaved_timings,
    paired_ratio,
    print_table,
    report_ratio,
    setup,
    write_json,
)

TARGET = 1.05
CORPUS = Path(__file__).resolve().parent.parent / "hf_seqmodels" / "data" / "tiny_shakespeare.txt"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab-size", type=int, default=None,
                        help="random ids from this vocabulary (default: Tiny Shakespeare characters, 65)")
    parser.add_argument("--embedding-size", type=int, default=256)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=20, help="stream rows per window")
    parser.add_argument("--bptt", type=int, default=35, help="tokens per TBPTT window (one training step)")
    parser.add_argument("--steps", type=int, default=20, help="training steps per timed round")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--profile", action="store_true",
                        help="after timing, print cProfile's view of one round of each side")
    add_common_args(parser, repeats=9)
    return parser.parse_args()


def token_stream(args: argparse.Namespace) -> tuple[torch.Tensor, int]:
    """``(ids (L,), vocabulary size)``: exactly ``batch_size`` rows of ``steps * bptt + 1`` tokens, so one
    epoch is ``steps`` full windows."""
    length = args.batch_size * (args.steps * args.bptt + 1)
    if args.vocab_size is not None:
        generator = torch.Generator().manual_seed(args.seed)
        return torch.randint(args.vocab_size, (length,), generator=generator), args.vocab_size
    text = CORPUS.read_text(encoding="utf-8")
    alphabet = sorted(set(text))
    if len(text) < length:
        raise SystemExit(f"error: --steps {args.steps} needs {length} characters; the corpus has {len(text)}")
    index = {char: i for i, char in enumerate(alphabet)}
    return torch.tensor([index[char] for char in text[:length]]), len(alphabet)


def build_ours(model: RNNForCausalLM, ids: torch.Tensor, args: argparse.Namespace, output_dir: str) -> LMTrainingLoop:
    """The loop as ``train_causal_lm`` builds it; no evaluation, no checkpoints, logging once in 10^9 steps."""
    loop_args = LMTrainingArguments(
        output_dir=output_dir, optim="adamw_torch", learning_rate=args.lr, weight_decay=0.0,
        lr_scheduler_type="constant", max_grad_norm=args.max_grad_norm, per_device_train_batch_size=args.batch_size,
        block_size=args.bptt, max_steps=10**9, logging_steps=10**9, eval_strategy="no", save_strategy="no",
        disable_tqdm=True, plot=False, seed=args.seed,
    ).filled(LM_DEFAULTS)
    accelerator = Accelerator()
    loop = LMTrainingLoop(model, None, ids, ids[: 2 * args.bptt + 2], loop_args, accelerator)
    if len(loop.batches) != args.steps:
        raise SystemExit(f"FAIL: the loop cut {len(loop.batches)} windows, expected {args.steps}")
    return loop


def ours_round(loop: LMTrainingLoop) -> None:
    """One epoch (``--steps`` updates) through the loop's own per-update path, then the epoch's end."""
    progress = tqdm(total=loop.total_steps, disable=True)
    before = loop.state.global_step
    stopped = loop.train_epoch(progress, time.monotonic())
    loop.end_epoch()
    if stopped or loop.state.global_step - before != len(loop.batches):
        raise SystemExit("FAIL: the loop stopped before the end of its epoch")


class HandWrittenLoop:
    """A plain accelerate TBPTT loop: what one would write by hand for the same training."""

    def __init__(self, model: RNNForCausalLM, ids: torch.Tensor, args: argparse.Namespace):
        self.accelerator = Accelerator()
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.streams = batchify(ids, args.batch_size)  # (B, N)
        self.bptt, self.max_grad_norm = args.bptt, args.max_grad_norm

    def round(self) -> float:
        """One epoch of windows; returns the mean loss (the round's only ``.item()``)."""
        device, state, total, steps = self.accelerator.device, None, 0.0, 0
        self.model.train()
        for start in range(0, self.streams.shape[1] - 1, self.bptt):
            inputs = self.streams[:, start : start + self.bptt].contiguous().to(device)  # (B, T)
            labels = self.streams[:, start + 1 : start + 1 + self.bptt].contiguous().to(device)
            out = self.model(inputs, shift_labels=labels, use_cache=True, **cache_field(state))
            self.accelerator.backward(out.loss)
            self.accelerator.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            state = output_cache(out).detach()
            total, steps = total + out.loss.detach(), steps + 1
        return (total / steps).item()


def with_cpu_time(fn, cpu_seconds: list[float]):
    """``fn`` that also appends the process CPU time of each call to ``cpu_seconds``: with one thread it is the
    wall time minus the time other processes held the core, so it moves less on a busy machine."""

    def timed() -> None:
        start = time.process_time()
        fn()
        cpu_seconds.append(time.process_time() - start)

    return timed


def check_same_weights(ours: torch.nn.Module, reference: torch.nn.Module) -> float:
    """Largest absolute difference between the two models' weights; stop if they trained differently."""
    theirs = dict(reference.named_parameters())
    worst = max((p.detach() - theirs[name].detach()).abs().max().item() for name, p in ours.named_parameters())
    if worst > 1e-4:
        raise SystemExit(f"FAIL: after the same steps the weights differ by up to {worst:.3g}: not the same work")
    return worst


def profile_round(label: str, fn) -> None:
    """cProfile of one round of ``fn``: the 15 functions with the most own time."""
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
    print(f"\n--- cProfile, one round of {label} (sorted by own time)\n{text.getvalue()}")


def loop_extras(loop: LMTrainingLoop, repeats: int = 5, number: int = 2000) -> dict[str, float]:
    """Microseconds (best of ``repeats``) of each call the loop makes per update that the hand-written loop does
    not make, timed alone on the trained loop (run after the timing: it moves the scheduler and progress bar)."""
    loss, progress = torch.tensor(1.5, device=loop.accelerator.device), tqdm(total=1, disable=True)
    window = loop.batches.batch(0)
    calls = {
        "stop_signal()": loop.stop_signal,
        "micro_batch_weights([window])": lambda: loop.micro_batch_weights([window]),
        "sync flag (_set_sync_gradients)": lambda: loop.accelerator.gradient_state._set_sync_gradients(True),
        "loss * weight": lambda: loss * 1.0,
        "reduce(total, 'mean')": lambda: loop.accelerator.reduce(loss, reduction="mean"),
        "scheduler.get_last_lr() + step()": lambda: (loop.scheduler.get_last_lr(), loop.scheduler.step()),
        "_record_loss (no log due)": lambda: loop._record_loss(loss),
        "progress update + set_postfix": lambda: (progress.update(1), progress.set_postfix(loss="1.500", epoch=0)),
        "evaluate/save/done/time-cap checks": lambda: (loop.maybe_evaluate_and_save("steps"), loop.done(),
                                                       loop.out_of_time(time.monotonic())),
    }
    return {name: min(timeit.repeat(fn, number=number, repeat=repeats)) / number * 1e6 for name, fn in calls.items()}


def main() -> None:
    args = parse_args()
    setup(args)
    ids, vocab_size = token_stream(args)
    config = RNNConfig(vocab_size=vocab_size, cell_type="lstm", embedding_size=args.embedding_size,
                       hidden_size=args.hidden_size, num_hidden_layers=args.num_layers,
                       hidden_dropout_prob=0.0, tie_word_embeddings=False)
    model = RNNForCausalLM(config)
    reference = HandWrittenLoop(copy.deepcopy(model), ids, args)
    with tempfile.TemporaryDirectory() as output_dir:
        loop = build_ours(model, ids, args, output_dir)
        with loop.stop_signals:  # as in TrainingLoop.run: SIGTERM/SIGINT handlers installed
            ours_round(loop)
            reference.round()
            worst = check_same_weights(loop.accelerator.unwrap_model(loop.model), reference.model)
            print(f"same weights after one round of {args.steps} steps on both sides (max |diff| {worst:.2g})")
            contenders = {"LMTrainingLoop": lambda: ours_round(loop), "hand-written accelerate": reference.round}
            cpu_times = {name: [] for name in contenders}
            times = interleaved_timings(
                {name: with_cpu_time(fn, cpu_times[name]) for name, fn in contenders.items()},
                repeats=args.repeats, warmup=max(0, args.warmup - 1),
            )
            cpu_times = {name: rounds[-args.repeats:] for name, rounds in cpu_times.items()}  # without warmup
            if args.profile:
                profile_round("LMTrainingLoop", lambda: ours_round(loop))
                profile_round("the hand-written loop", reference.round)
                extras = loop_extras(loop)
                print_table(["per-update call of the loop only", "us"], [[k, v] for k, v in extras.items()])
                print(f"sum: {sum(extras.values()):.1f} us per update\n")
    per_step = {name: [t / args.steps * 1000 for t in rounds] for name, rounds in times.items()}
    cpu_per_step = {name: [t / args.steps * 1000 for t in rounds] for name, rounds in cpu_times.items()}
    source = f"random ids, V={vocab_size}" if args.vocab_size else f"Tiny Shakespeare characters, V={vocab_size}"
    print(f"\nLSTM LM training steps ({source}): E={args.embedding_size} H={args.hidden_size} L={args.num_layers} "
          f"B={args.batch_size} bptt={args.bptt}, AdamW + clipping {args.max_grad_norm}, {args.steps} steps x "
          f"{args.repeats} rounds, device {loop.accelerator.device}, {torch.get_num_threads()} thread(s)")
    rows = [[name, statistics.median(ms), min(ms), max(ms), statistics.median(cpu_per_step[name])]
            for name, ms in per_step.items()]
    print_table(["loop", "median ms/step", "min", "max", "median CPU ms/step"], rows)
    results = {}
    for clock, rounds in (("wall", times), ("CPU", cpu_times)):
        ours, ref = rounds["LMTrainingLoop"], rounds["hand-written accelerate"]
        spread = sorted(o / r for o, r in zip(ours, ref, strict=True))
        print(f"{clock} per-round ratios: {' '.join(f'{r:.3f}' for r in spread)}")
        results[clock] = report_ratio(f"{clock} time per step ours / hand-written", paired_ratio(ours, ref), TARGET,
                                      higher_is_better=False)
    write_json(args.json, {"benchmark": "training_loop", "args": vars(args), "ms_per_step": per_step,
                           "cpu_ms_per_step": cpu_per_step, "results": results})


if __name__ == "__main__":
    main()
