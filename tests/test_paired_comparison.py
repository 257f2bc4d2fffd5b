"""The statistics the reproductions report when they compare two kinds of run over seeds."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "training" / "reproductions" / "paired_comparison.py"
spec = importlib.util.spec_from_file_location("paired_comparison", SCRIPT)
paired_comparison = importlib.util.module_from_spec(spec)
spec.loader.exec_module(paired_comparison)


def test_statistics_of_a_worked_example():
    # differences 2, 3, 2: mean 7/3, sample sd sqrt(1/3), standard error 1/3, t = 7; of the 8 sign
    # patterns only all-plus and all-minus reach |mean| 7/3, so p = 2/8
    stats = paired_comparison.paired_statistics([3.0, 5.0, 4.0], [1.0, 2.0, 2.0])
    assert stats["diffs"] == [2.0, 3.0, 2.0]
    assert stats["mean"] == pytest.approx(7 / 3)
    assert stats["se"] == pytest.approx(1 / 3)
    assert stats["t"] == pytest.approx(7.0)
    assert stats["p"] == pytest.approx(0.25)


def test_p_value_counts_sign_patterns_at_least_as_extreme():
    # differences 1, 1, 1, -1: |mean| 0.5 is reached by the 2 patterns with all signs equal (|mean| 1) and the
    # 8 with exactly one sign against the rest (|mean| 0.5), so p = 10/16
    stats = paired_comparison.paired_statistics([1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0])
    assert stats["p"] == pytest.approx(10 / 16)
    no_difference = paired_comparison.paired_statistics([1.0, 2.0], [2.0, 1.0])
    assert no_difference["mean"] == 0 and no_difference["p"] == 1.0 and no_difference["t"] == 0


def test_unequal_or_too_short_lists_are_refused():
    with pytest.raises(ValueError, match="got 2 and 3"):
        paired_comparison.paired_statistics([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="got 1 and 1"):
        paired_comparison.paired_statistics([1.0], [2.0])


def test_cli_reads_the_runs_and_names_a_missing_one(tmp_path, capsys):
    for run, accuracies in {"a": [0.8, 0.9], "b": [0.7, 0.7]}.items():
        for seed, accuracy in zip((1, 2), accuracies, strict=True):
            folder = tmp_path / f"{run}-seed{seed}"
            folder.mkdir()
            (folder / "all_results.json").write_text(json.dumps({"eval_accuracy": accuracy}))
    pattern = str(tmp_path / "{run}-seed{seed}")
    paired_comparison.main([pattern, "--runs", "a", "b", "--seeds", "1", "2"])
    out = capsys.readouterr().out
    assert "| 1 | 80.0 | 70.0 | +10.0 |" in out and "| 2 | 90.0 | 70.0 | +20.0 |" in out
    assert "a ahead in 2 of 2 seeds; mean difference +15.00 points" in out
    assert not math.isnan(float(out.split("paired t ")[1].split()[0]))
    with pytest.raises(SystemExit, match="a-seed3.all_results.json is missing"):
        paired_comparison.main([pattern, "--runs", "a", "b", "--seeds", "1", "3"])


def test_one_seed_gives_its_table_and_says_the_statistics_need_two(tmp_path, capsys):
    for run, accuracy in {"a": 0.8, "b": 0.75}.items():
        (tmp_path / f"{run}-seed1").mkdir()
        (tmp_path / f"{run}-seed1" / "all_results.json").write_text(json.dumps({"eval_accuracy": accuracy}))
    assert paired_comparison.main([str(tmp_path / "{run}-seed{seed}"), "--runs", "a", "b", "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert "| 1 | 80.0 | 75.0 | +5.0 |" in out and "need at least 2 seeds" in out
