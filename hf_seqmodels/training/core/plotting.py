"""The curves of a training run: ``training_history.json``, ``loss_curve.png`` and ``learning_rate.png``.

The history is a list of records, each with ``step`` and ``epoch`` and either ``train_loss`` (and
``learning_rate``) or ``eval_loss`` / ``eval_perplexity``; losses are in nats per token.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HISTORY_FILE = "training_history.json"
PLOT_FILE = "loss_curve.png"
LR_PLOT_FILE = "learning_rate.png"


def write_history(history: list[dict[str, Any]], output_dir: str | Path) -> Path:
    """Write the history as JSON into ``output_dir``; returns the file's path."""
    path = Path(output_dir) / HISTORY_FILE
    path.write_text(json.dumps(history, indent=2), encoding="utf-8")
    return path


def plot_loss_curves(history: list[dict[str, Any]], output_dir: str | Path, title: str | None = None,
                     ylabel: str = "cross-entropy (nats / token)") -> Path:
    """Training and validation loss against the update step, as a PNG in ``output_dir``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [(r["step"], r["train_loss"]) for r in history if "train_loss" in r]
    evals = [(r["step"], r["eval_loss"]) for r in history if "eval_loss" in r]
    fig, ax = plt.subplots(figsize=(7, 4))
    if train:
        ax.plot(*zip(*train, strict=True), label="training loss", linewidth=1)
    if evals:
        ax.plot(*zip(*evals, strict=True), label="validation loss", marker="o")
    ax.set_xlabel("update step")
    ax.set_ylabel(ylabel)
    ax.set_title(title or "Language-model training")
    ax.grid(alpha=0.3)
    ax.legend()
    path = Path(output_dir) / PLOT_FILE
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_learning_rate(history: list[dict[str, Any]], output_dir: str | Path, title: str | None = None) -> Path | None:
    """The learning rate of the logged updates against the update step (the schedule as it ran), as
    ``learning_rate.png`` in ``output_dir``; None when no record carries one."""
    points = [(r["step"], r["learning_rate"]) for r in history if r.get("learning_rate") is not None]
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot(*zip(*points, strict=True), linewidth=1, marker="." if len(points) < 50 else None)
    ax.set_xlabel("update step")
    ax.set_ylabel("learning rate")
    ax.set_title(title or "Learning-rate schedule")
    ax.grid(alpha=0.3)
    path = Path(output_dir) / LR_PLOT_FILE
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_attention(weights, source_tokens: list[str], target_tokens: list[str], path: str | Path,
                   title: str | None = None, xlabel: str = "source", ylabel: str = "output") -> Path:
    """An attention heatmap: ``weights`` ``(target_len, source_len)``, one row per generated token, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    weights = [[float(w) for w in row] for row in weights]
    if len(weights) != len(target_tokens) or any(len(row) != len(source_tokens) for row in weights):
        raise ValueError(f"Attention weights of shape ({len(weights)}, {len(weights[0]) if weights else 0}) do not "
                         f"match {len(target_tokens)} target and {len(source_tokens)} source tokens.")
    fig, ax = plt.subplots(figsize=(max(4.0, 1.5 + 0.32 * len(source_tokens)), max(3.0, 1.2 + 0.3 * len(target_tokens))))
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, aspect="auto")
    ax.set_xticks(range(len(source_tokens)), source_tokens, rotation=90, fontsize=8)
    ax.set_yticks(range(len(target_tokens)), target_tokens, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title or "Attention weights", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04)
    path = Path(path)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["HISTORY_FILE", "LR_PLOT_FILE", "PLOT_FILE", "plot_attention", "plot_learning_rate", "plot_loss_curves",
           "write_history"]
