"""``bench_data_scale --launch_megabytes M``: train_lm's data preparation and one update under ``accelerate launch``
with 2 CPU processes against one process, on the same text in the same benchmark run.

Each run is ``accelerate launch`` of this module as the training script (``-m``): every rank records which ranks
tokenised (a wrapper around :func:`~hf_seqmodels.training.lm.token_streams._write_stream`), its RSS after the
imports, its peak RSS (``ru_maxrss``) and the seconds to the end of its first update, then runs ``train_lm``'s
``main``. From outside, the launcher samples every ``--sample_seconds`` the summed RSS and the summed PSS (shared
pages divided among the processes that map them: the torch libraries and the token files counted once) of the
launcher and all its descendant processes, read from ``/proc``. Printed: the peaks of those sums for

* **1 process**: ``accelerate launch --num_processes 1`` preparing the token files in an empty cache;
* **2 processes**: ``accelerate launch --multi_gpu --num_processes 2`` (gloo on the CPU) in another empty cache:
  the local main process tokenises (``local_main_process_first``), the other waits and maps the files;
* **2 processes again**: the same launch from the second cache (both ranks map the files),

and the ratios of the 2-process launch to the 1-process one (the target: total RSS <= 1.3x one process).
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER_FLAG = "--data_scale_worker"


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


# --------------------------------------------------------------------------- inside each rank


def worker(results: str, argv: list[str]) -> None:
    """One rank: ``train_lm``'s ``main(argv)`` with the tokenising ranks, the first update and the RSS recorded in
    ``results/rank-<RANK>.json``."""
    from hf_seqmodels.training.lm import cli, token_streams
    from hf_seqmodels.training.lm.trainer import LMTrainingLoop

    rank = int(os.environ.get("RANK", "0"))
    record: dict = {"rank": rank, "tokenised": False, "rss_after_imports_mb": _rss_mb()}
    write_stream, train_step = token_streams._write_stream, LMTrainingLoop.train_step

    def tokenising(*args):
        record["tokenised"] = True
        return write_stream(*args)

    def timed_step(self, batches):
        loss = train_step(self, batches)
        record.setdefault("first_step_s", time.perf_counter() - start)
        return loss

    token_streams._write_stream, LMTrainingLoop.train_step = tokenising, timed_step
    start = time.perf_counter()
    cli.main(argv)
    record["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(results, f"rank-{rank}.json").write_text(json.dumps(record))


# --------------------------------------------------------------------------- sampling the process tree


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children() -> dict[int, list[int]]:
    """``{parent pid: [child pids]}`` of every process in ``/proc``."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(parent, []).append(int(entry))
    return tree


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    tree, found, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(tree.get(current, []))
    return found


def _memory_kb(pid: int) -> tuple[int, int]:
    """``(RSS, PSS)`` of ``pid`` in kB from ``/proc/<pid>/smaps_rollup`` (0, 0 once it has exited)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            fields = dict(line.split(":", 1) for line in f if line[0].isupper() and ":" in line)
        return int(fields["Rss"].split()[0]), int(fields["Pss"].split()[0])
    except (OSError, KeyError, ValueError):
        return 0, 0


def launch_and_sample(processes: int, argv: list[str], results: Path, sample_seconds: float) -> dict:
    """``accelerate launch`` of ``train_lm`` on ``processes`` CPU processes, its summed RSS/PSS sampled until it
    exits: the peaks of the sums (all processes; the ranks only), wall seconds and the ranks' records."""
    results.mkdir(parents=True, exist_ok=True)
    topology = ["--multi_gpu", "--num_processes", "2"] if processes == 2 else ["--num_processes", "1"]
    command = [sys.executable, "-m", "accelerate.commands.launch", *topology, "--num_machines", "1",
               "--main_process_port", str(_free_port()), "-m", "benchmarks.data_scale_launch",
               WORKER_FLAG, str(results), *argv]
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    log = open(results / "launch.log", "w")  # noqa: SIM115 (closed below)
    start = time.perf_counter()
    launcher = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    peaks = {"rss_all": 0, "pss_all": 0, "rss_ranks": 0, "pss_ranks": 0, "processes": 0}
    while launcher.poll() is None:
        pids = descendants(launcher.pid)
        memory = {pid: _memory_kb(pid) for pid in pids}
        ranks = [m for pid, m in memory.items() if pid != launcher.pid]
        sums = {"rss_all": sum(m[0] for m in memory.values()), "pss_all": sum(m[1] for m in memory.values()),
                "rss_ranks": sum(m[0] for m in ranks), "pss_ranks": sum(m[1] for m in ranks),
                "processes": len(pids)}
        peaks = {name: max(peaks[name], value) for name, value in sums.items()}
        time.sleep(sample_seconds)
    log.close()
    if launcher.returncode != 0:
        tail = (results / "launch.log").read_text()[-3000:]
        raise SystemExit(f"accelerate launch on {processes} process(es) failed:\n{tail}")
    ranks = [json.loads(p.read_text()) for p in sorted(results.glob("rank-*.json"))]
    if len(ranks) != processes:
        raise SystemExit(f"{len(ranks)} rank records in {results}, expected {processes}")
    return {**{k: v / 1024 if k != "processes" else v for k, v in peaks.items()},
            "seconds": time.perf_counter() - start, "ranks": ranks}


# --------------------------------------------------------------------------- the comparison


def train_lm_argv(corpus: Path, tokenizer: Path, cache: Path, output: Path) -> list[str]:
    return ["--train_file", str(corpus), "--tokenizer_name", str(tokenizer), "--cache_dir", str(cache),
            "--output_dir", str(output), "--model_family", "transformer_lm", "--preset", "tiny",
            "--block_size", "64", "--per_device_train_batch_size", "8", "--max_steps", "1", "--do_train",
            "--eval_strategy", "no", "--save_strategy", "no", "--disable_tqdm", "--plot", "False"]


def compare_launches(folder: Path, corpus: Path, tokenizer: Path, sample_seconds: float = 0.2) -> dict[str, dict]:
    """The three launches (1 process, 2 processes, 2 processes from the cache), printed; returns their results."""
    runs = {}
    for name, processes, cache in (("1 process", 1, "cache-1"), ("2 processes", 2, "cache-2"),
                                   ("2 processes again", 2, "cache-2")):
        label = name.replace(" ", "-")
        argv = train_lm_argv(corpus, tokenizer, folder / cache, folder / f"run-{label}")
        runs[name] = launch_and_sample(processes, argv, folder / f"records-{label}", sample_seconds)
    print(f"{'launch':<20}{'seconds':>9}{'RSS sum MB':>12}{'PSS sum MB':>12}{'ranks RSS':>11}{'ranks PSS':>11}"
          f"  per rank: peak RSS / above imports / s to 1st update / tokenised")
    for name, run in runs.items():
        ranks = "; ".join(f"rank {r['rank']}: {r['peak_rss_mb']:.0f} / {r['peak_rss_mb'] - r['rss_after_imports_mb']:.0f}"
                          f" / {r['first_step_s']:.1f} / {'yes' if r['tokenised'] else 'no'}" for r in run["ranks"])
        print(f"{name:<20}{run['seconds']:>9.1f}{run['rss_all']:>12.0f}{run['pss_all']:>12.0f}"
              f"{run['rss_ranks']:>11.0f}{run['pss_ranks']:>11.0f}  {ranks}")
    tokenisers = [r["rank"] for r in runs["2 processes"]["ranks"] if r["tokenised"]]
    again = [r["rank"] for r in runs["2 processes again"]["ranks"] if r["tokenised"]]
    print(f"ranks that tokenised in the 2-process launch: {tokenisers} (expected [0]); from the cache: {again} "
          f"(expected []): {'PASS' if tokenisers == [0] and not again else 'MISS'}")
    one, two = runs["1 process"], runs["2 processes"]
    for label, key in (("RSS, all processes of the launch", "rss_all"), ("RSS, the ranks only", "rss_ranks"),
                       ("PSS, all processes of the launch", "pss_all")):
        ratio = two[key] / one[key]
        print(f"2 processes / 1 process, peak summed {label}: {two[key]:.0f} / {one[key]:.0f} MB = {ratio:.2f} "
              f"(target <= 1.3: {'PASS' if ratio <= 1.3 else 'MISS'})")
    above = {name: sum(r["peak_rss_mb"] - r["rss_after_imports_mb"] for r in run["ranks"]) for name, run in runs.items()}
    imports = sum(r["rss_after_imports_mb"] for r in two["ranks"]) / len(two["ranks"])
    print(f"above each rank's RSS after its imports ({imports:.0f} MB per rank: Python, torch, transformers), summed: "
          f"2 processes {above['2 processes']:.0f} MB, 1 process {above['1 process']:.0f} MB, ratio "
          f"{above['2 processes'] / above['1 process']:.2f}; 2 processes from the cache {above['2 processes again']:.0f} MB")
    return runs


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == WORKER_FLAG:
    worker(sys.argv[2], sys.argv[3:])
