"""``evaluate`` metric modules shipped with the package, loadable offline: ``evaluate.load(metric_path(name))``."""

from __future__ import annotations

from pathlib import Path

METRICS_DIR = Path(__file__).resolve().parent


def metric_path(name: str) -> str:
    """The folder of the shipped metric module ``name`` (e.g. ``"hfsm_sacrebleu"``), for ``evaluate.load``."""
    folder = METRICS_DIR / name
    if not (folder / f"{name}.py").is_file():
        available = sorted(p.name for p in METRICS_DIR.iterdir() if (p / f"{p.name}.py").is_file())
        raise ValueError(f"Invalid metric name {name!r}: expected one of {', '.join(available)}.")
    return str(folder)


__all__ = ["METRICS_DIR", "metric_path"]
