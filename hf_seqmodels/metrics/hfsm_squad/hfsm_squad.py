"""SQuAD v1.1 exact match and F1, as an ``evaluate`` metric module that loads from this folder, without the Hub.

    import evaluate
    from hf_seqmodels.metrics import metric_path
    squad = evaluate.load(metric_path("hfsm_squad"))
    squad.compute(predictions=[{"id": "q1", "prediction_text": "Ada"}],
                  references=[{"id": "q1", "answers": {"text": ["Ada"], "answer_start": [18]}}])
    # {"exact_match": 100.0, "f1": 100.0}

As in the official evaluation script: answers are normalised (lower case, punctuation removed, the articles
``a``/``an``/``the`` removed, whitespace collapsed); a prediction scores the maximum over the gold answers of
its question; F1 is over the bags of normalised words. Both scores are in percent, averaged over the
questions. Every question needs exactly one prediction (matched by id).
"""

import re
import string
from collections import Counter

import datasets
import evaluate

_CITATION = """@inproceedings{rajpurkar-etal-2016-squad,
  title={{SQ}u{AD}: 100,000+ Questions for Machine Comprehension of Text},
  author={Rajpurkar, Pranav and Zhang, Jian and Lopyrev, Konstantin and Liang, Percy},
  booktitle={Proceedings of the 2016 Conference on Empirical Methods in Natural Language Processing},
  year={2016}
}"""

_INPUTS = """predictions: list of {"id": str, "prediction_text": str};
references: list of {"id": str, "answers": {"text": list of str, "answer_start": list of int}}.
Predictions and references are matched by id, one prediction per reference. Returns {"exact_match", "f1"} in percent."""

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    """F1 of the normalised words shared by ``prediction`` and ``gold`` (0 when none is shared)."""
    predicted, true = normalize_answer(prediction).split(), normalize_answer(gold).split()
    shared = sum((Counter(predicted) & Counter(true)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(true)
    return 2 * precision * recall / (precision + recall)


class HfsmSquad(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="SQuAD v1.1 exact match and F1 of extractive answers.",
            citation=_CITATION,
            inputs_description=_INPUTS,
            features=datasets.Features({
                "predictions": {"id": datasets.Value("string"), "prediction_text": datasets.Value("string")},
                "references": {"id": datasets.Value("string"),
                               "answers": datasets.Sequence({"text": datasets.Value("string"),
                                                             "answer_start": datasets.Value("int32")})},
            }),
        )

    def _compute(self, predictions, references):
        if not references:
            raise ValueError("No references to score: pass at least one question with its answers.")
        answers = {}
        for reference in references:
            if reference["id"] in answers:
                raise ValueError(f"The reference id {reference['id']!r} occurs more than once.")
            if not reference["answers"]["text"]:
                raise ValueError(f"The reference {reference['id']!r} has no answer text; SQuAD v1.1 needs one.")
            answers[reference["id"]] = reference["answers"]["text"]
        seen = set()
        em_total = f1_total = 0.0
        for prediction in predictions:  # as many as references (checked by evaluate): one per question
            question, text = prediction["id"], prediction["prediction_text"]
            if question not in answers:
                raise ValueError(f"The prediction id {question!r} is not the id of any reference.")
            if question in seen:
                raise ValueError(f"The prediction id {question!r} occurs more than once.")
            seen.add(question)
            em_total += max(exact_match(text, gold) for gold in answers[question])
            f1_total += max(f1(text, gold) for gold in answers[question])
        return {"exact_match": 100.0 * em_total / len(answers), "f1": 100.0 * f1_total / len(answers)}
