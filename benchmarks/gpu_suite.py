"""The GPU benchmarks of issue 39 in one command: BERT-base pre-training, the nanoGPT step, the LSTM LM.

Runs, one after the other and each in its own process (a crash or a stuck compile loses one benchmark, not
the others), at the sizes of the issue's targets:

* ``bench_bert_pretraining --preset bert-base --bf16 --bf16-weights --compile``: batch 32 x 512, eager and
  compiled, ours with the bf16 weights of the BERT presets' GPU recipe, MFU;
* ``bench_transformer_step --sizes nanogpt-shakespeare-char --bf16 --bf16-weights --compile``: against the
  hand-written GPT, eager and compiled as nanoGPT compiles it, ours with the bf16 weights of the GPU presets;
* ``bench_lstm_training --preset zaremba-medium``: tokens/s against the hand-written cuDNN loop, and the
  GPU's utilisation.

Each writes ``OUTPUT/<benchmark>.json`` and ``OUTPUT/<benchmark>.log`` (its printed output, also echoed
here); then a summary of every ratio with its target, verdict and device is printed and written to
``OUTPUT/summary.txt``. Rounds and steps are bounded so that the three should take about 4 minutes on an
H200, compiling included (an estimate, not yet measured there); each has a time limit (``TIMEOUT_S``), 8
minutes in all.

``--smoke`` runs the same three at tiny sizes, eager only, a single round each: a check that the scripts
run (under 2 minutes on a loaded 2-core CPU), not a measurement. Exit status 1 when a benchmark failed (its
correctness check, a crash or its time limit); a missed target is a result, not a failure.

    python -m benchmarks.gpu_suite results/          # on the GPU machine
    python -m benchmarks.gpu_suite --smoke /tmp/smoke  # anywhere
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

from .common import print_table

ROOT = Path(__file__).resolve().parent.parent  # the benchmarks run as modules from the repository's root

#: seconds each benchmark may take at the GPU sizes before it is stopped
TIMEOUT_S = {"bert_pretraining": 270, "transformer_step": 150, "lstm_training": 60}
GPU = {
    "bert_pretraining": ["--preset", "bert-base", "--bf16", "--bf16-weights", "--compile", "--steps", "10", "--repeats", "5",
                         "--matmul-size", "8192", "--matmul-count", "10"],
    "transformer_step": ["--sizes", "nanogpt-shakespeare-char", "--bf16", "--bf16-weights", "--compile", "--repeats",
                         "7"],
    "lstm_training": ["--preset", "zaremba-medium", "--steps", "100", "--repeats", "5"],
}
SMOKE = {
    "bert_pretraining": ["--vocab-size", "100", "--hidden-size", "32", "--num-layers", "1", "--num-heads", "2",
                         "--intermediate-size", "64", "--batch-size", "4", "--seq-length", "16",
                         "--matmul-size", "64", "--repeats", "1", "--threads", "1"],
    "transformer_step": ["--sizes", "tiny", "--repeats", "1", "--threads", "1"],
    "lstm_training": ["--vocab-size", "50", "--embedding-size", "16", "--hidden-size", "16", "--batch-size", "2",
                      "--bptt", "8", "--steps", "2", "--repeats", "1", "--threads", "1"],
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", type=Path, help="folder for the JSON, log and summary files (created)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, eager, one round: that the scripts run")
    parser.add_argument("--device", default="auto", help="passed to every benchmark (auto: cuda if available)")
    parser.add_argument("--only", nargs="+", choices=list(GPU), default=list(GPU), help="a subset, in this order")
    return parser.parse_args(argv)


def run_benchmark(name: str, options: list[str], output: Path, device: str, timeout_s: float) -> dict:
    """Run ``benchmarks.bench_<name>`` in a child process; its output goes to the terminal and to its log."""
    json_path = output / f"{name}.json"
    json_path.unlink(missing_ok=True)
    command = [sys.executable, "-u", "-m", f"benchmarks.bench_{name}", *options, "--device", device,
               "--json", str(json_path)]
    print(f"\n=== {name}: {' '.join(command[2:])}", flush=True)
    start = time.perf_counter()
    with open(output / f"{name}.log", "w") as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)

        def echo() -> None:  # as the lines come, so that a long compile shows progress
            for line in process.stdout:
                print(line, end="", flush=True)
                log.write(line)

        reader = threading.Thread(target=echo, daemon=True)
        reader.start()
        try:
            status = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            status = None
        reader.join()
    seconds = time.perf_counter() - start
    if status is None:
        return {"benchmark": name, "failed": f"stopped at its limit of {timeout_s:.0f} s", "seconds": seconds}
    if status != 0 or not json_path.exists():
        return {"benchmark": name, "failed": f"exit status {status}", "seconds": seconds}
    return {**json.loads(json_path.read_text()), "seconds": seconds}


def summary_rows(result: dict) -> list[list[object]]:
    """One row per ratio of a benchmark's JSON (and one for the LSTM's GPU utilisation)."""
    name = result["benchmark"]
    if "failed" in result:
        return [[name, "FAILED: " + result["failed"], "-", "-", "-"]]
    rows = []
    for entry in result["results"]:
        target = "" if "target" not in entry else (">= " if entry["higher_is_better"] else "<= ") + str(entry["target"])
        rows.append([name, entry["label"], entry["ratio"], target, entry.get("verdict", "info")])
    if "gpu_utilization_percent" in result:
        busy = ", ".join(f"{k} {v:.0f} %" if isinstance(v, float) else f"{k} {v}"
                         for k, v in result["gpu_utilization_percent"].items())
        rows.append([name, f"GPU utilisation ({result['gpu_utilization_source']})", busy, "", "info"])
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.output = args.output.resolve()  # the children run in the repository's root
    args.output.mkdir(parents=True, exist_ok=True)
    options = SMOKE if args.smoke else GPU
    results = [run_benchmark(name, options[name], args.output, args.device,
                             timeout_s=TIMEOUT_S[name] * (2 if args.smoke else 1)) for name in args.only]
    rows = [row for result in results for row in summary_rows(result)]
    table = StringIO()
    with redirect_stdout(table):
        devices = sorted({f"{result['device_name']} ({result['device']})" for result in results if "failed" not in result})
        print(("smoke run (tiny sizes, not a measurement)" if args.smoke else "GPU sizes") + f" on {', '.join(devices)}; "
              "seconds: " + ", ".join(f"{result['benchmark']} {result['seconds']:.0f}" for result in results))
        print_table(["benchmark", "ratio", "value", "target", "verdict"], rows)
    print("\n" + table.getvalue(), end="")
    (args.output / "summary.txt").write_text(table.getvalue())
    return 1 if any("failed" in result for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
