"""Sentence(-pair) classification and regression scores (the GLUE ones), as an ``evaluate`` metric module
that loads from this folder, without the Hub. Plain numpy.

    import evaluate
    from hf_seqmodels.metrics import metric_path
    scores = evaluate.load(metric_path("hfsm_classification"))
    scores.compute(predictions=[1, 0, 1], references=[1, 1, 1])  # {"accuracy", "f1", "matthews_correlation"}
    scores.compute(predictions=[0, 2, 1], references=[0, 1, 1], average="macro")
    similarity = evaluate.load(metric_path("hfsm_classification"), "regression")
    similarity.compute(predictions=[0.1, 2.5, 4.0], references=[0.0, 3.0, 3.5])  # {"pearson", "spearmanr"}

Classification (the default configuration, also named ``"classification"``): integer class ids. ``f1`` is
the F1 of class 1 when ``average="binary"`` (only ids 0 and 1 allowed), or the unweighted mean of every
class's F1 when ``average="macro"`` (classes: the ids seen in the predictions or references); by default
binary when every id is 0 or 1, macro otherwise. ``matthews_correlation`` is the multi-class Matthews
correlation (Gorodkin's R_K), 0 when undefined. A class without any true or predicted example has F1 0.

Regression (configuration ``"regression"``): float scores; ``pearson`` and ``spearmanr`` (Pearson
correlation of the ranks, tied values sharing their average rank), NaN for a constant input.
"""

import datasets
import evaluate
import numpy as np

_CITATION = """@inproceedings{wang-etal-2018-glue,
  title={{GLUE}: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding},
  author={Wang, Alex and Singh, Amanpreet and Michael, Julian and Hill, Felix and Levy, Omer and Bowman, Samuel},
  booktitle={Proceedings of the 2018 EMNLP Workshop BlackboxNLP},
  year={2018}
}"""

_INPUTS = """predictions: list of int class ids (list of float scores for the "regression" configuration);
references: list of the same kind and length.
average (classification only): "binary" (F1 of class 1; ids must be 0/1) or "macro"; default: binary for
0/1 ids, macro otherwise.
Returns {"accuracy", "f1", "matthews_correlation"}, or {"pearson", "spearmanr"} for regression."""

_CONFIGS = ("default", "classification", "regression")
_AVERAGES = ("binary", "macro")


def _confusion(y_true: np.ndarray, y_pred: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """``(C, C)`` counts over the sorted ``classes``: row = true class, column = predicted class."""
    counts = np.zeros((len(classes), len(classes)), dtype=np.int64)
    np.add.at(counts, (np.searchsorted(classes, y_true), np.searchsorted(classes, y_pred)), 1)
    return counts


def _f1_per_class(confusion: np.ndarray) -> np.ndarray:
    """``(C,)`` F1 of each class, 2 TP / (2 TP + FP + FN), 0 where the class never occurs."""
    true_positives = np.diag(confusion).astype(np.float64)
    denominator = confusion.sum(axis=0) + confusion.sum(axis=1)  # = 2 TP + FP + FN
    return np.divide(2 * true_positives, denominator, out=np.zeros_like(true_positives), where=denominator > 0)


def _matthews(confusion: np.ndarray) -> float:
    confusion = confusion.astype(np.float64)
    total, correct = confusion.sum(), np.trace(confusion)
    true_counts, pred_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    covariance = correct * total - true_counts @ pred_counts
    denominator = np.sqrt((total**2 - pred_counts @ pred_counts) * (total**2 - true_counts @ true_counts))
    return float(covariance / denominator) if denominator > 0 else 0.0


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    return float(np.clip(x @ y / denominator, -1.0, 1.0)) if denominator > 0 else float("nan")


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x``; a run of equal values gets the mean of the ranks it spans."""
    order = np.argsort(x, kind="stable")
    ordered = x[order]
    first_of_run = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    starts = np.flatnonzero(first_of_run)
    ends = np.append(starts[1:], len(x))  # exclusive
    run_rank = (starts + ends + 1) / 2  # mean of the ranks starts + 1 .. ends
    ranks = np.empty(len(x))
    ranks[order] = run_rank[np.cumsum(first_of_run) - 1]
    return ranks


class HfsmClassification(evaluate.Metric):
    def _info(self):
        if self.config_name not in _CONFIGS:
            raise ValueError(f"Invalid configuration {self.config_name!r}: expected one of {', '.join(_CONFIGS)}.")
        value = datasets.Value("float64" if self.config_name == "regression" else "int64")
        return evaluate.MetricInfo(
            description="Accuracy, F1 and Matthews correlation of class ids, or Pearson and Spearman "
                        "correlation of regression scores.",
            citation=_CITATION,
            inputs_description=_INPUTS,
            features=datasets.Features({"predictions": value, "references": value}),
        )

    def _compute(self, predictions, references, average=None):
        y_pred, y_true = np.asarray(predictions), np.asarray(references)
        if len(y_true) == 0:
            raise ValueError("No references to score: pass at least one prediction and reference.")
        if self.config_name == "regression":
            if average is not None:
                raise ValueError("average applies to classification, not to the 'regression' configuration.")
            return {"pearson": _pearson(y_pred, y_true),
                    "spearmanr": _pearson(_average_ranks(y_pred), _average_ranks(y_true))}
        classes = np.union1d(y_true, y_pred)
        is_binary = bool(np.isin(classes, (0, 1)).all())
        average = average if average is not None else ("binary" if is_binary else "macro")
        if average not in _AVERAGES:
            raise ValueError(f"Invalid average {average!r}: expected one of {', '.join(_AVERAGES)}.")
        if average == "binary":
            if not is_binary:
                raise ValueError(f"average='binary' needs class ids 0 and 1 only, got {classes.tolist()}; "
                                 "use average='macro'.")
            classes = np.array([0, 1])
        confusion = _confusion(y_true, y_pred, classes)
        per_class = _f1_per_class(confusion)
        f1 = per_class[1] if average == "binary" else per_class.mean()
        return {"accuracy": float((y_pred == y_true).mean()), "f1": float(f1),
                "matthews_correlation": _matthews(confusion)}
