"""The GPU-ready benchmarks (issue 39) run at their smallest sizes on the CPU and report what they measured.

Each benchmark's ``main`` runs in-process, one round at tiny sizes: not a measurement, a check that the
script's device handling, its correctness check and its report work wherever CI runs.
"""

import json
import time

import pytest
import torch

from benchmarks import bench_bert_pretraining, bench_lstm_training, bench_transformer_step, gpu_suite
from benchmarks.common import GPUUtilization, device_name, resolve_device

ONE_ROUND = ["--repeats", "1", "--warmup", "0", "--threads", "1", "--device", "cpu"]


def check_report(summary: dict, json_path, printed: str, verdicts: int) -> None:
    """The JSON holds what ``main`` returned; every ratio has its value, and ``verdicts`` of them a verdict."""
    written = json.loads(json_path.read_text())
    assert written["benchmark"] == summary["benchmark"]
    assert written["device"] == "cpu" and written["device_name"] == device_name(torch.device("cpu"))
    assert written["environment"]["torch"] == torch.__version__
    results = written["results"]
    assert all(isinstance(entry["ratio"], float) and entry["ratio"] > 0 for entry in results)
    judged = [entry for entry in results if "target" in entry]
    assert len(judged) == verdicts
    assert all(entry["verdict"] in ("PASS", "MISS") and f"{entry['verdict']}" in printed for entry in judged)
    assert written["device_name"] in printed


def test_bert_pretraining_smoke(tmp_path, capsys):
    path = tmp_path / "bert.json"
    summary = bench_bert_pretraining.main([
        "--vocab-size", "100", "--hidden-size", "32", "--num-layers", "1", "--num-heads", "2",
        "--intermediate-size", "64", "--batch-size", "4", "--seq-length", "16", "--matmul-size", "64",
        "--json", str(path), *ONE_ROUND])
    printed = capsys.readouterr().out
    check_report(summary, path, printed, verdicts=1)
    written = json.loads(path.read_text())
    losses = written["check"]["losses"]
    assert written["check"]["same_loss"] and len(set(round(v, 4) for v in losses.values())) == 1
    assert written["peak_flops"] is None and "MFU: n/a on" in printed  # no known peak for a CPU
    # 6 P B T + 12 L H T^2 B with P the parameters less the position and token-type embeddings
    assert written["model_flops_per_step"] > 6 * 4 * 16 * 100 * 32


def test_bert_pretraining_mfu_with_a_given_peak(tmp_path, capsys):
    path = tmp_path / "bert.json"
    bench_bert_pretraining.main([
        "--vocab-size", "100", "--hidden-size", "32", "--num-layers", "1", "--num-heads", "2",
        "--intermediate-size", "64", "--batch-size", "4", "--seq-length", "16", "--matmul-size", "64",
        "--peak-tflops", "1", "--json", str(path), *ONE_ROUND])
    printed = capsys.readouterr().out
    mfu = {entry["label"]: entry for entry in json.loads(path.read_text())["results"] if entry["label"][:3] == "MFU"}
    assert set(mfu) == {"MFU ours (masked positions)", "MFU BertForPreTraining", "MFU ours (full logits)"}
    assert mfu["MFU ours (masked positions)"]["target"] == bench_bert_pretraining.TARGET_MFU
    assert "MFU against a peak of 1 TFLOP/s" in printed


def test_transformer_step_smoke(tmp_path, capsys):
    path = tmp_path / "transformer.json"
    summary = bench_transformer_step.main(["--sizes", "tiny", "--json", str(path), *ONE_ROUND])
    printed = capsys.readouterr().out
    check_report(summary, path, printed, verdicts=1)
    (size,) = json.loads(path.read_text())["sizes"]
    assert size["size"] == "tiny" and size["check"]["same_loss"]
    assert size["parameters"] > 0 and set(size["ms_per_step"]) == {"ours", "reference"}


def test_lstm_training_smoke(tmp_path, capsys):
    path = tmp_path / "lstm.json"
    summary = bench_lstm_training.main([
        "--vocab-size", "50", "--embedding-size", "16", "--hidden-size", "16", "--batch-size", "2", "--bptt", "8",
        "--steps", "2", "--json", str(path), *ONE_ROUND])
    printed = capsys.readouterr().out
    check_report(summary, path, printed, verdicts=1)
    written = json.loads(path.read_text())
    assert written["check"]["same_loss"]
    assert written["gpu_utilization_source"] == "n/a"
    assert written["gpu_utilization_percent"] == {"RNNForCausalLM": "n/a", "plain torch": "n/a"}


def test_presets_fill_only_what_the_command_line_leaves_open():
    args = bench_lstm_training.parse_args(["--preset", "zaremba-medium", "--batch-size", "8"])
    assert (args.hidden_size, args.embedding_size, args.num_layers, args.bptt, args.batch_size) == (650, 650, 2, 35, 8)
    args = bench_bert_pretraining.parse_args(["--preset", "bert-base"])
    assert (args.num_layers, args.hidden_size, args.num_heads, args.batch_size, args.seq_length) == (12, 768, 12, 32, 512)


def test_auto_device_is_the_cpu_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(SystemExit, match="sees no CUDA device"):
        resolve_device("cuda")


def test_gpu_utilization_files_each_sample_under_the_running_contender():
    sampler = GPUUtilization(torch.device("cpu"), interval_s=0.001)
    sampler.source, sampler.reader = "fake", lambda: 50.0 if sampler.running == "a" else 90.0
    with sampler:
        sampler.wrap("a", lambda: time.sleep(0.05))()
        sampler.wrap("b", lambda: time.sleep(0.05))()
        sampler.wrap("c", lambda: None)
    assert sampler.summary() == {"a": 50.0, "b": 90.0, "c": "n/a"}


def test_suite_summary_rows():
    result = {"benchmark": "lstm_training", "device_name": "NVIDIA H200", "gpu_utilization_source": "pynvml",
              "gpu_utilization_percent": {"RNNForCausalLM": 91.25, "plain torch": "n/a"},
              "results": [{"label": "tokens/s ours / reference", "ratio": 0.97, "target": 0.95,
                           "higher_is_better": True, "verdict": "PASS"}]}
    assert gpu_suite.summary_rows(result) == [
        ["lstm_training", "tokens/s ours / reference", 0.97, ">= 0.95", "PASS"],
        ["lstm_training", "GPU utilisation (pynvml)", "RNNForCausalLM 91 %, plain torch n/a", "", "info"]]
    assert gpu_suite.summary_rows({"benchmark": "bert_pretraining", "failed": "exit status 1", "seconds": 3.0}) == [
        ["bert_pretraining", "FAILED: exit status 1", "-", "-", "-"]]


def test_suite_runs_a_benchmark_in_a_child_process_and_writes_its_files(tmp_path, capsys):
    assert gpu_suite.main(["--smoke", "--only", "lstm_training", "--device", "cpu", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    written = json.loads((tmp_path / "lstm_training.json").read_text())
    assert written["check"]["same_loss"] and written["results"][0]["verdict"] in ("PASS", "MISS")
    assert "same first-window loss" in (tmp_path / "lstm_training.log").read_text()
    summary = (tmp_path / "summary.txt").read_text()
    assert summary in printed and "tokens/s ours / reference" in summary
    assert f"on {written['device_name']} (cpu)" in summary


@pytest.mark.parametrize("bench", [bench_transformer_step, bench_bert_pretraining])
def test_ours_trains_with_the_gpu_presets_bf16_weights_in_the_step_benchmarks(bench, capsys, tmp_path):
    """``--bf16-weights`` times ours as the GPU presets train it: bfloat16 weights, float32 master weights."""
    sizes = (["--sizes", "tiny"] if bench is bench_transformer_step else
             ["--vocab-size", "100", "--hidden-size", "32", "--num-layers", "1", "--num-heads", "2",
              "--intermediate-size", "64", "--batch-size", "4", "--seq-length", "16", "--matmul-size", "64"])
    with pytest.raises(SystemExit):
        bench.parse_args([*sizes, "--bf16-weights"])  # it needs --bf16
    assert "needs --bf16" in capsys.readouterr().err
    bench.main([*sizes, "--bf16", "--bf16-weights", "--json", str(tmp_path / "b.json"), *ONE_ROUND])
    assert "bf16 weights" in capsys.readouterr().out
