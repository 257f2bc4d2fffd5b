"""Helpers shared by the benchmark scripts: interleaved timing, verdicts, tables and JSON output.

Every benchmark times its contenders in the same process, alternating between them, and reports
ratios. On a shared or busy machine the absolute times move a lot; the ratios much less, because
drift and contention hit neighbouring measurements alike.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import time
from collections.abc import Callable

import torch
import transformers


def add_common_args(parser: argparse.ArgumentParser, repeats: int = 5, warmup: int = 1) -> None:
    """Add ``--repeats``, ``--warmup``, ``--seed`` and ``--json`` to a benchmark's parser."""
    parser.add_argument("--repeats", type=int, default=repeats, help="timed rounds per contender (median taken)")
    parser.add_argument("--warmup", type=int, default=warmup, help="untimed rounds per contender before timing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads (default: torch's own choice); 1 is steadier on a busy machine")
    parser.add_argument("--json", metavar="PATH", help="also write the results to this JSON file")


def setup(args: argparse.Namespace) -> None:
    """Seed torch and apply ``--threads`` when given."""
    torch.manual_seed(args.seed)
    if args.threads is not None:
        torch.set_num_threads(args.threads)


def time_once(fn: Callable[[], object]) -> float:
    """Seconds taken by one call of ``fn`` (garbage collected beforehand, so no pause lands inside)."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved_timings(
    contenders: dict[str, Callable[[], object]], repeats: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Time every contender ``repeats`` times, round by round, after ``warmup`` untimed rounds.

    The order within a round alternates (A B, B A, A B, ...), so slow drift of the machine's speed
    falls on every contender equally. Returns the seconds of each round, per contender.
    """
    for _ in range(warmup):
        for fn in contenders.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for round_index in range(repeats):
        for name in names if round_index % 2 == 0 else reversed(names):
            times[name].append(time_once(contenders[name]))
    return times


def paired_ratio(numerator: list[float], denominator: list[float]) -> float:
    """Median over rounds of ``numerator[i] / denominator[i]``: each pair ran side by side in time."""
    return statistics.median(n / d for n, d in zip(numerator, denominator, strict=True))


def verdict(ratio: float, target: float, higher_is_better: bool) -> str:
    """``"PASS"`` when ``ratio`` meets ``target`` in the given direction, else ``"MISS"``."""
    met = ratio >= target if higher_is_better else ratio <= target
    return "PASS" if met else "MISS"


def report_ratio(label: str, ratio: float, target: float | None = None, higher_is_better: bool = True) -> dict:
    """Print one ratio line (with target and verdict when there is a target) and return it as a dict."""
    if target is None:
        print(f"{label}: {ratio:.3f} (informational)")
        return {"label": label, "ratio": ratio}
    sign = ">=" if higher_is_better else "<="
    result = verdict(ratio, target, higher_is_better)
    print(f"{label}: {ratio:.3f} (target {sign} {target}) {result}")
    return {"label": label, "ratio": ratio, "target": target, "higher_is_better": higher_is_better,
            "verdict": result}


def print_table(headers: list[str], rows: list[list[object]]) -> None:
    """Print rows as a fixed-width text table; floats get three decimals."""
    cells = [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def environment() -> dict:
    """Versions and thread count, stored next to the results."""
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "num_threads": torch.get_num_threads(),
    }


def write_json(path: str | None, results: dict) -> None:
    """Write ``results`` plus :func:`environment` to ``path`` (nothing when ``path`` is None)."""
    if path is None:
        return
    with open(path, "w") as f:
        json.dump({"environment": environment(), **results}, f, indent=2)
    print(f"wrote {path}")
