#!/usr/bin/env python
"""Compare two kinds of fine-tuning run seed by seed: dev accuracy of each, their differences, the mean
difference with its standard error, the paired t statistic and an exact sign-flip permutation p-value
(two-sided: how often flipping the signs of the per-seed differences gives a mean at least as far from zero).

The runs are named by a pattern with ``{run}`` and ``{seed}``, as ``sst2_pair.sh`` names them::

    python training/reproductions/paired_comparison.py "runs/sst2-bert-mini-{run}-seed{seed}-lr3e-4" \\
        --runs tapt scratch --seeds 42 43 44 45

Each run's accuracy is read from ``all_results.json`` (``eval_accuracy``); a missing run is an error naming it.
"""

import argparse
import itertools
import json
import math
import sys
from pathlib import Path


def paired_statistics(a, b):
    """Mean of ``a - b``, its standard error, the paired t and the exact two-sided sign-flip p-value."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"need two equally long lists of at least 2 values, got {len(a)} and {len(b)}")
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    se = sd / math.sqrt(n)
    t = mean / se if se > 0 else math.copysign(math.inf, mean) if mean else 0.0
    observed = abs(mean)
    flips = list(itertools.product((1, -1), repeat=n))
    extreme = sum(
        abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) / n >= observed - 1e-12 for signs in flips
    )
    return {"diffs": diffs, "mean": mean, "se": se, "t": t, "p": extreme / len(flips)}


def read_accuracy(folder):
    path = Path(folder) / "all_results.json"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: has the run {folder} finished?")
    return json.loads(path.read_text())["eval_accuracy"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "pattern", help='run folders, with {run} and {seed}, e.g. "runs/sst2-{run}-seed{seed}"'
    )
    parser.add_argument("--runs", nargs=2, required=True, metavar=("A", "B"), help="the two values of {run}")
    parser.add_argument("--seeds", nargs="+", required=True, help="the values of {seed}")
    args = parser.parse_args(argv)
    for field in ("{run}", "{seed}"):
        if field not in args.pattern:
            parser.error(f"pattern {args.pattern!r} has no {field}")
    acc = {
        run: [100 * read_accuracy(args.pattern.format(run=run, seed=seed)) for seed in args.seeds]
        for run in args.runs
    }
    a, b = (acc[run] for run in args.runs)
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    print(f"| seed | {args.runs[0]} | {args.runs[1]} | difference |")
    print("|---|---|---|---|")
    for seed, x, y, d in zip(args.seeds, a, b, diffs, strict=True):
        print(f"| {seed} | {x:.1f} | {y:.1f} | {d:+.1f} |")
    print(f"| mean | {sum(a) / len(a):.2f} | {sum(b) / len(b):.2f} | {sum(diffs) / len(diffs):+.2f} |")
    if len(args.seeds) < 2:
        print("one seed: the paired statistics (standard error, t, p) need at least 2 seeds")
        return 0
    stats = paired_statistics(a, b)
    print(
        f"{args.runs[0]} ahead in {sum(d > 0 for d in stats['diffs'])} of {len(a)} seeds; mean difference "
        f"{stats['mean']:+.2f} points, standard error {stats['se']:.2f}, paired t {stats['t']:.2f} on {len(a) - 1} "
        f"degrees of freedom, exact sign-flip p = {stats['p']:.3f} (two-sided)"
    )


if __name__ == "__main__":
    sys.exit(main())
