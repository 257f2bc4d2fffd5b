"""Cost of the per-step loop: the peephole LSTM stack against torch's fused LSTM stack.

Both are :class:`RecurrentStack` of the same sizes; the peephole stack holds the LSTM's weights and
zero peepholes, checked to give the LSTM's outputs before timing (so both do the same work, plus the
peephole products the loop cannot skip). Timed: a training step (forward and backward over a
``batch × time`` window) and a generation step (one token, state carried). Ratios are informational:
a Python loop cannot match a fused kernel; they tell a user what choosing ``cell_type="peephole_lstm"``
costs. The child-sum Tree-LSTM on chains (one level per word) is timed against the fused LSTM too.

    python -m benchmarks.bench_recurrent_cells
    python -m benchmarks.bench_recurrent_cells --hidden-size 650 --time 35 --threads 1 --json out.json
"""

from __future__ import annotations

import argparse
import statistics

import torch

from hf_seqmodels.models.recurrent_stack import RecurrentStack
from hf_seqmodels.models.tree_lstm import ChildSumTreeLSTM

from .common import (
    add_common_args,
    interleaved_timings,
    paired_ratio,
    print_table,
    report_ratio,
    setup,
    write_json,
)


def build_pair(args) -> tuple[RecurrentStack, RecurrentStack]:
    fused = RecurrentStack("lstm", args.hidden_size, args.hidden_size, num_layers=args.num_layers)
    looped = RecurrentStack("peephole_lstm", args.hidden_size, args.hidden_size, num_layers=args.num_layers)
    looped.rnn.load_state_dict(fused.rnn.state_dict(), strict=False)
    with torch.no_grad():
        for name, param in looped.rnn.named_parameters():
            if "peephole" in name:
                param.zero_()
    return fused, looped


def check_same_outputs(fused, looped, x) -> None:
    with torch.no_grad():
        if not torch.allclose(fused(x)[0], looped(x)[0], atol=1e-4):
            raise SystemExit("the peephole stack with zero peepholes does not reproduce the LSTM: timings void")


def training_step(stack, x):
    def step():
        outputs, _ = stack(x)
        outputs.square().mean().backward()
        stack.zero_grad(set_to_none=True)
    return step


def generation_steps(stack, x, steps: int):
    @torch.no_grad()
    def run():
        state = None
        for t in range(steps):
            _, state = stack(x[:1, t : t + 1], state)
    return run


def tree_chain(tree: ChildSumTreeLSTM, x):
    parents = torch.tensor([list(range(1, x.shape[1])) + [-1]] * x.shape[0])

    @torch.no_grad()
    def run():
        tree(x, parents)
    return run


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--time", type=int, default=35, help="window length (time steps)")
    add_common_args(parser, repeats=5)
    args = parser.parse_args(argv)
    setup(args)
    fused, looped = build_pair(args)
    x = torch.randn(args.batch_size, args.time, args.hidden_size)
    check_same_outputs(fused, looped, x)
    tree = ChildSumTreeLSTM(args.hidden_size, args.hidden_size)
    one_layer = RecurrentStack("lstm", args.hidden_size, args.hidden_size)
    contenders = {
        "fused lstm train": training_step(fused, x),
        "peephole train": training_step(looped, x),
        "fused lstm generate": generation_steps(fused, x, args.time),
        "peephole generate": generation_steps(looped, x, args.time),
        "fused 1-layer lstm forward": lambda: torch.no_grad()(one_layer)(x),
        "tree-lstm chain forward": tree_chain(tree, x),
    }
    times = interleaved_timings(contenders, args.repeats, args.warmup)
    steps = args.time
    print(f"B={args.batch_size} T={args.time} H={args.hidden_size} L={args.num_layers} threads={torch.get_num_threads()}")
    print_table(["contender", "ms / time step (median)"],
                [[name, 1000 * statistics.median(t) / steps] for name, t in times.items()])
    ratios = [
        report_ratio("training step time, peephole / fused LSTM", paired_ratio(times["peephole train"],
                                                                               times["fused lstm train"])),
        report_ratio("generation step time (batch 1), peephole / fused LSTM",
                     paired_ratio(times["peephole generate"], times["fused lstm generate"])),
        report_ratio("forward time, Tree-LSTM on chains / fused 1-layer LSTM",
                     paired_ratio(times["tree-lstm chain forward"], times["fused 1-layer lstm forward"])),
    ]
    results = {"args": vars(args), "times": times, "ratios": ratios}
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
