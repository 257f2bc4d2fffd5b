"""Entity-level precision, recall and F1 of sequence labelling (conlleval, seqeval's default mode), as an
``evaluate`` metric module that loads from this folder, without the Hub.

    import evaluate
    from hf_seqmodels.metrics import metric_path
    seqeval = evaluate.load(metric_path("hfsm_seqeval"))
    seqeval.compute(predictions=[["B-PER", "I-PER", "O"]], references=[["B-PER", "I-PER", "O"]])

Each tag is ``O`` or ``PREFIX-TYPE`` with ``PREFIX`` one of ``B`` (begin), ``I`` (inside), ``E`` (end),
``S`` (single), or BILOU's ``L`` (last, read as ``E``) and ``U`` (unit, read as ``S``); so IOB1, IOB2, IOE
and IOBES/BILOU are all read. Chunks follow conlleval:

* ``B`` and ``S`` always start a chunk; ``I`` and ``E`` continue the open chunk of the same type, or
  start one when none is open (after ``O``, after a chunk of another type, or after ``E``/``S``);
* ``E`` and ``S`` close their chunk; ``O`` and a change of type close the open chunk.

A predicted entity counts as correct only when its type and both boundaries equal those of a reference
entity. Sentences are chunked separately.
"""

from collections import Counter

import datasets
import evaluate

_CITATION = """@inproceedings{tjong-kim-sang-de-meulder-2003-introduction,
  title={Introduction to the {C}o{NLL}-2003 Shared Task: Language-Independent Named Entity Recognition},
  author={Tjong Kim Sang, Erik F. and De Meulder, Fien},
  booktitle={Proceedings of the Seventh Conference on Natural Language Learning at HLT-NAACL 2003},
  year={2003}
}"""

_INPUTS = """predictions: list of tag sequences (list of list of str), one per sentence;
references: list of tag sequences, each as long as its prediction.
Returns one dict per entity type {"precision", "recall", "f1", "number"} ("number": reference entities of
the type), plus "overall_precision", "overall_recall", "overall_f1" (micro-averaged over entities) and
"overall_accuracy" (token accuracy)."""

_PREFIXES = {"B": "B", "I": "I", "E": "E", "S": "S", "L": "E", "U": "S"}  # BILOU read as IOBES


def _parse(tag: str) -> tuple[str, str]:
    """``"B-PER"`` -> ``("B", "PER")``; ``"O"`` -> ``("O", "")``. The type may contain hyphens."""
    if tag == "O":
        return "O", ""
    prefix, dash, kind = tag.partition("-")
    if not dash or not kind or prefix not in _PREFIXES:
        raise ValueError(
            f"Invalid tag {tag!r}: expected 'O' or PREFIX-TYPE with PREFIX one of {', '.join(_PREFIXES)} "
            "(e.g. 'B-PER')."
        )
    return _PREFIXES[prefix], kind


def _chunks(tags: list[str]) -> set[tuple[str, int, int]]:
    """The chunks of one sentence as ``(type, first token, last token)`` triples (inclusive indices)."""
    found = set()
    open_kind, open_start = None, 0  # the chunk being read, if any
    for position, tag in enumerate(tags):
        prefix, kind = _parse(tag)
        continues = prefix in ("I", "E") and open_kind == kind
        if open_kind is not None and not continues:  # O, B, S, or a change of type closes the open chunk
            found.add((open_kind, open_start, position - 1))
            open_kind = None
        if prefix != "O" and not continues:
            open_kind, open_start = kind, position
        if prefix in ("E", "S"):  # explicit end
            found.add((open_kind, open_start, position))
            open_kind = None
    if open_kind is not None:
        found.add((open_kind, open_start, len(tags) - 1))
    return found


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else 0.0


def _scores(correct: int, predicted: int, true: int) -> dict[str, float]:
    precision, recall = _ratio(correct, predicted), _ratio(correct, true)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


class HfsmSeqeval(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="Entity-level precision, recall and F1 (conlleval chunking) and token accuracy.",
            citation=_CITATION,
            inputs_description=_INPUTS,
            features=datasets.Features({"predictions": datasets.Sequence(datasets.Value("string")),
                                        "references": datasets.Sequence(datasets.Value("string"))}),
        )

    def _compute(self, predictions, references):
        correct, predicted, true = Counter(), Counter(), Counter()
        right_tokens = total_tokens = 0
        for index, (guess, gold) in enumerate(zip(predictions, references, strict=True)):
            if len(guess) != len(gold):
                raise ValueError(
                    f"Sentence {index}: the prediction has {len(guess)} tags but the reference has {len(gold)}; "
                    "they must be equally long."
                )
            right_tokens += sum(g == r for g, r in zip(guess, gold, strict=True))
            total_tokens += len(gold)
            guessed, gold_entities = _chunks(guess), _chunks(gold)
            predicted.update(kind for kind, _, _ in guessed)
            true.update(kind for kind, _, _ in gold_entities)
            correct.update(kind for kind, _, _ in guessed & gold_entities)
        result = {}
        for kind in sorted(predicted.keys() | true.keys()):
            result[kind] = {**_scores(correct[kind], predicted[kind], true[kind]), "number": true[kind]}
        overall = _scores(sum(correct.values()), sum(predicted.values()), sum(true.values()))
        result.update({f"overall_{name}": value for name, value in overall.items()})
        result["overall_accuracy"] = _ratio(right_tokens, total_tokens)
        return result
