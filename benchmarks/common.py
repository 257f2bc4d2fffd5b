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
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

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


def add_device_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--device``: ``auto`` (the default) runs on CUDA when torch sees a GPU, else on the CPU."""
    parser.add_argument("--device", default="auto",
                        help="auto (cuda if available, else cpu), cpu, cuda or cuda:N: where both contenders run")


def resolve_device(name: str) -> torch.device:
    """The ``torch.device`` of ``--device`` (``auto``: ``cuda`` when available, else ``cpu``)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {name}: torch {torch.__version__} sees no CUDA device")
    return device


def device_name(device: torch.device) -> str:
    """What the results were measured on: the GPU's name, or the CPU's model name from ``/proc/cpuinfo``."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or platform.machine()


def synchronizer(device: torch.device) -> Callable[[], None] | None:
    """What makes the host wait for the device's queued work (None on the CPU, where work is synchronous).

    A CUDA call returns as soon as its kernels are queued: without waiting for them at both ends of a
    timed round, the clock would measure the launches, not the work.
    """
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return None


def precision(device: torch.device, bf16: bool) -> Callable[[], AbstractContextManager]:
    """What a forward runs under: bf16 autocast on ``device`` (weights and optimizer stay fp32) or nothing."""
    if bf16:
        return lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext


def adamw(model: torch.nn.Module, master_weights=None, **kwargs) -> torch.optim.AdamW:
    """AdamW (``kwargs``: its settings) over ``model``'s parameters; with ``master_weights`` (the model's
    ``hf_seqmodels.training.core.master_weights.MasterWeights``, as ``--bf16_weights`` trains) over their float32
    copies, written back into the model's bfloat16 weights after each step."""
    groups = [{"params": list(model.parameters())}]
    if master_weights is None:
        return torch.optim.AdamW(groups, **kwargs)
    return master_weights.attach(torch.optim.AdamW(master_weights.optimizer_groups(groups), **kwargs))


def setup(args: argparse.Namespace) -> None:
    """Seed torch and apply ``--threads`` when given."""
    torch.manual_seed(args.seed)
    if args.threads is not None:
        torch.set_num_threads(args.threads)


def time_once(fn: Callable[[], object], sync: Callable[[], None] | None = None) -> float:
    """Seconds taken by one call of ``fn`` (garbage collected beforehand, so no pause lands inside).

    With ``sync`` (see :func:`synchronizer`), the device's queue is drained before the clock starts and
    after ``fn`` returns, so the time is that of the work ``fn`` queued.
    """
    gc.collect()
    if sync is not None:
        sync()
    start = time.perf_counter()
    fn()
    if sync is not None:
        sync()
    return time.perf_counter() - start


def interleaved_timings(
    contenders: dict[str, Callable[[], object]], repeats: int, warmup: int = 1,
    sync: Callable[[], None] | None = None,
) -> dict[str, list[float]]:
    """Time every contender ``repeats`` times, round by round, after ``warmup`` untimed rounds.

    The order within a round alternates (A B, B A, A B, ...), so slow drift of the machine's speed
    falls on every contender equally. Returns the seconds of each round, per contender. ``sync`` is
    passed to :func:`time_once` (needed on a GPU).
    """
    for _ in range(warmup):
        for fn in contenders.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for round_index in range(repeats):
        for name in names if round_index % 2 == 0 else reversed(names):
            times[name].append(time_once(contenders[name], sync))
    return times


class GPUUtilization:
    """GPU utilisation sampled in a background thread, per contender, while the contenders run.

    The driver reports, per sample, the share of its last sampling period (1/6 s to 1 s) in which at least
    one kernel ran: 100 % says the GPU never waited for the host, not that its arithmetic units were busy.
    NVML is read through ``pynvml`` (the ``nvidia-ml-py`` package) when it imports, else through
    ``nvidia-smi --query-gpu=utilization.gpu`` polled in the thread. :meth:`wrap` tags a contender's calls, so
    each sample is filed under the contender running when it was taken. On a CPU, or with neither reader,
    :meth:`summary` says ``n/a``.
    """

    def __init__(self, device: torch.device, interval_s: float = 0.05):
        self.interval_s = interval_s
        self.samples: dict[str, list[float]] = {}
        self.running: str | None = None
        #: where the samples come from ("pynvml", "nvidia-smi" or "n/a") and the function reading one
        self.source, self.reader = self._reader(device) if device.type == "cuda" else ("n/a", None)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def _reader(device: torch.device) -> tuple[str, Callable[[], float] | None]:
        index = device.index if device.index is not None else torch.cuda.current_device()
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)

            return "pynvml", lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except Exception:  # pynvml missing, or NVML unusable: try the command line tool
            pass
        if shutil.which("nvidia-smi") is None:
            return "n/a", None
        command = ["nvidia-smi", f"--id={index}", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
        return "nvidia-smi", lambda: float(subprocess.run(command, capture_output=True, text=True,
                                                           check=True).stdout.split()[0])

    def wrap(self, name: str, fn: Callable[[], object]) -> Callable[[], object]:
        """``fn``, with the samples taken while it runs filed under ``name``."""
        self.samples.setdefault(name, [])

        def tagged() -> object:
            self.running = name
            try:
                return fn()
            finally:
                self.running = None

        return tagged

    def _poll(self) -> None:
        while not self._stop.wait(self.interval_s):
            name = self.running
            try:
                value = self.reader()
            except Exception:  # a failed read is a missing sample, not a failed benchmark
                continue
            if name is not None and name == self.running:
                self.samples[name].append(value)

    def __enter__(self) -> GPUUtilization:
        if self.reader is not None:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def summary(self) -> dict[str, float | str]:
        """Mean utilisation in per cent per contender (``"n/a"`` when nothing could be sampled)."""
        return {name: statistics.mean(values) if values else "n/a" for name, values in self.samples.items()}


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
    """Versions, thread count and the GPU torch sees (if any), stored next to the results."""
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": device_name(torch.device("cpu")),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "num_threads": torch.get_num_threads(),
    }


def write_json(path: str | None, results: dict) -> None:
    """Write ``results`` plus :func:`environment` to ``path`` (nothing when ``path`` is None)."""
    if path is None:
        return
    with open(path, "w") as f:
        json.dump({"environment": environment(), **results}, f, indent=2)
    print(f"wrote {path}")
