"""Fine-tuning data and metrics: the offline ``evaluate`` modules (entity F1, SQuAD EM/F1, GLUE scores),
CoNLL reading and label alignment, SQuAD windows and answer post-processing, and the shared span search."""

from __future__ import annotations

import json
import math
from pathlib import Path

import evaluate
import numpy as np
import pytest
import torch

from hf_seqmodels.metrics import metric_path
from hf_seqmodels.qa_spans import best_spans
from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.finetune.qa_data import (
    postprocess_predictions,
    prepare_eval_features,
    prepare_train_features,
    read_squad_json,
)
from hf_seqmodels.training.finetune.token_classification_data import (
    label_list,
    predictions_to_tags,
    read_conll,
    tokenize_and_align_labels,
)

DATA = Path(__file__).parent / "data" / "finetune"
CONLL, SQUAD, SST2 = DATA / "conll_tiny.txt", DATA / "squad_tiny.json", DATA / "sst2_tiny.tsv"


@pytest.fixture(scope="module")
def seqeval():
    return evaluate.load(metric_path("hfsm_seqeval"))


@pytest.fixture(scope="module")
def squad_metric():
    return evaluate.load(metric_path("hfsm_squad"))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A WordPiece tokenizer with a vocabulary small enough that rare words split into several sub-tokens."""
    squad = json.loads(SQUAD.read_text(encoding="utf-8"))
    texts = [line.split()[0] for line in CONLL.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts += [p["context"] for a in squad["data"] for p in a["paragraphs"]]
    texts += [qa["question"] for a in squad["data"] for p in a["paragraphs"] for qa in p["qas"]]
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return train_tokenizer([corpus], kind="wordpiece", vocab_size=400, min_frequency=1,
                           add_bert_special_tokens=True, model_max_length=128)


# --------------------------------------------------------------------------- entity-level F1


def test_seqeval_counts_an_entity_only_when_type_and_both_boundaries_match(seqeval):
    references = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-ORG"]]
    predictions = [["B-PER", "O", "O", "B-LOC", "I-LOC", "O", "B-MISC"]]  # PER too short, ORG mistyped
    result = seqeval.compute(predictions=predictions, references=references)
    assert result["overall_precision"] == pytest.approx(1 / 3)
    assert result["overall_recall"] == pytest.approx(1 / 3)
    assert result["overall_f1"] == pytest.approx(1 / 3)
    assert result["overall_accuracy"] == pytest.approx(5 / 7)
    assert result["LOC"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "number": 1}
    assert result["PER"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "number": 1}
    assert result["ORG"]["number"] == 1 and result["MISC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                                               "number": 0}
    assert set(result) == {"LOC", "MISC", "ORG", "PER", "overall_precision", "overall_recall", "overall_f1",
                           "overall_accuracy"}


def test_seqeval_micro_averages_over_sentences(seqeval):
    references = [["B-PER", "O"], ["B-LOC", "I-LOC"], ["O", "B-ORG"]]
    predictions = [["B-PER", "O"], ["B-LOC", "O"], ["B-ORG", "B-ORG"]]
    # true entities PER[0], LOC[0:1], ORG[1]; predicted PER[0], LOC[0], ORG[0], ORG[1]: 2 right of 4, of 3 true
    result = seqeval.compute(predictions=predictions, references=references)
    assert result["overall_precision"] == pytest.approx(2 / 4)
    assert result["overall_recall"] == pytest.approx(2 / 3)
    assert result["overall_f1"] == pytest.approx(2 * (1 / 2) * (2 / 3) / (1 / 2 + 2 / 3))
    assert result["overall_accuracy"] == pytest.approx(4 / 6)


@pytest.mark.parametrize("tags, other", [
    # IOB1: I- opens an entity after O or another type; B- only separates two entities of one type
    (["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"], ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"]),
    # IOBES and BILOU: E/L close an entity, S/U are single-token entities
    (["S-PER", "B-LOC", "E-LOC", "I-LOC", "O"], ["U-PER", "B-LOC", "L-LOC", "B-LOC", "O"]),
    # a type may contain hyphens; an I- of another type after B- starts a new entity
    (["B-GEO-NAT", "I-GEO-NAT", "I-PER"], ["B-GEO-NAT", "I-GEO-NAT", "B-PER"]),
])
def test_seqeval_reads_iob1_iobes_and_bilou_chunks(seqeval, tags, other):
    result = seqeval.compute(predictions=[tags], references=[other])
    assert result["overall_f1"] == 1.0 and result["overall_precision"] == 1.0 and result["overall_recall"] == 1.0
    assert result["overall_accuracy"] < 1.0  # the tags differ, the entities do not


def test_seqeval_rejects_bad_tags_and_lengths(seqeval):
    with pytest.raises(ValueError, match=r"Invalid tag 'PER': expected 'O' or PREFIX-TYPE"):
        seqeval.compute(predictions=[["PER"]], references=[["B-PER"]])
    with pytest.raises(ValueError, match="Sentence 0: the prediction has 1 tags but the reference has 2"):
        seqeval.compute(predictions=[["O"]], references=[["O", "O"]])


# --------------------------------------------------------------------------- SQuAD EM and F1


def squad_references(answers: dict[str, list[str]]) -> list[dict]:
    return [{"id": key, "answers": {"text": texts, "answer_start": [0] * len(texts)}} for key, texts in answers.items()]


def test_squad_exact_match_and_f1_on_known_strings(squad_metric):
    references = squad_references({"q1": ["red dog", "a dog"], "q2": ["Paris"], "q3": ["1874"]})
    predictions = [{"id": "q1", "prediction_text": "the big red dog"},  # F1 0.8 (vs "red dog"), 0.5 (vs "dog")
                   {"id": "q2", "prediction_text": "  paris. "},  # case, punctuation and spaces normalised
                   {"id": "q3", "prediction_text": "in 1874"}]  # F1 2/3
    result = squad_metric.compute(predictions=predictions, references=references)
    assert result["exact_match"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(100 * (0.8 + 1 + 2 / 3) / 3)
    # articles are removed: "The Cat" == "a cat"; nothing in common scores 0
    result = squad_metric.compute(predictions=[{"id": "q2", "prediction_text": "London"},
                                               {"id": "q1", "prediction_text": "The Cat"}],
                                  references=squad_references({"q1": ["a cat"], "q2": ["Paris"]}))
    assert result == pytest.approx({"exact_match": 50.0, "f1": 50.0})


def test_squad_metric_rejects_unknown_and_duplicate_ids(squad_metric):
    with pytest.raises(ValueError, match="The prediction id 'q9' is not the id of any reference"):
        squad_metric.compute(predictions=[{"id": "q9", "prediction_text": "x"}],
                             references=squad_references({"q1": ["x"]}))
    with pytest.raises(ValueError, match="The prediction id 'q1' occurs more than once"):
        squad_metric.compute(predictions=[{"id": "q1", "prediction_text": "x"}] * 2,
                             references=squad_references({"q1": ["x"], "q2": ["y"]}))
    with pytest.raises(ValueError, match="The reference id 'q1' occurs more than once"):
        squad_metric.compute(predictions=[{"id": "q1", "prediction_text": "x"}] * 2,
                             references=squad_references({"q1": ["x"]}) * 2)


# --------------------------------------------------------------------------- GLUE scores


def test_classification_scores_of_a_known_binary_confusion_matrix():
    metric = evaluate.load(metric_path("hfsm_classification"))
    # TP 6, FN 2, FP 1, TN 3
    references = [1] * 8 + [0] * 4
    predictions = [1] * 6 + [0] * 2 + [1] + [0] * 3
    result = metric.compute(predictions=predictions, references=references)
    assert result["accuracy"] == pytest.approx(9 / 12)
    assert result["f1"] == pytest.approx(2 * 6 / (2 * 6 + 1 + 2))
    assert result["matthews_correlation"] == pytest.approx((6 * 3 - 1 * 2) / math.sqrt(7 * 8 * 4 * 5))
    assert metric.compute(predictions=[1, 1], references=[1, 1])["matthews_correlation"] == 0.0  # undefined


def test_classification_scores_of_three_classes():
    metric = evaluate.load(metric_path("hfsm_classification"))
    references, predictions = [0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 2, 0]
    # confusion (rows true): [[1, 1, 0], [0, 2, 0], [1, 0, 1]]; true counts 2,2,2; predicted counts 2,3,1
    result = metric.compute(predictions=predictions, references=references)
    assert result["accuracy"] == pytest.approx(4 / 6)
    assert result["f1"] == pytest.approx((2 / 4 + 4 / 5 + 2 / 3) / 3)  # macro: per-class 2TP / (2TP + FP + FN)
    assert result["matthews_correlation"] == pytest.approx((4 * 6 - (4 + 6 + 2)) / math.sqrt((36 - 14) * (36 - 12)))
    with pytest.raises(ValueError, match=r"average='binary' needs class ids 0 and 1 only, got \[0, 1, 2\]"):
        metric.compute(predictions=predictions, references=references, average="binary")
    with pytest.raises(ValueError, match="Invalid average 'micro': expected one of binary, macro"):
        metric.compute(predictions=predictions, references=references, average="micro")
    binary_as_macro = metric.compute(predictions=[1, 0, 0], references=[1, 1, 0], average="macro")
    assert binary_as_macro["f1"] == pytest.approx((2 / 3 + 2 / 3) / 2)


def test_regression_scores_pearson_and_spearman_with_ties():
    metric = evaluate.load(metric_path("hfsm_classification"), "regression")
    predictions, references = [0.1, 2.5, 4.0, 4.0], [0.0, 3.0, 3.5, 1.0]
    result = metric.compute(predictions=predictions, references=references)
    assert result["pearson"] == pytest.approx(np.corrcoef(predictions, references)[0, 1])
    # ranks: predictions 1, 2, 3.5, 3.5 (tie); references 1, 3, 4, 2 -> Pearson of the ranks = 3 / sqrt(22.5)
    assert result["spearmanr"] == pytest.approx(3 / math.sqrt(22.5))
    assert math.isnan(metric.compute(predictions=[1.0, 1.0], references=[0.0, 1.0])["pearson"])
    with pytest.raises(ValueError, match="Invalid configuration 'glue': expected one of default, classification"):
        evaluate.load(metric_path("hfsm_classification"), "glue")


# --------------------------------------------------------------------------- CoNLL


def test_read_conll_splits_sentences_and_skips_docstart():
    data = read_conll(CONLL)
    assert data.column_names == ["tokens", "tags"] and len(data) == 12
    assert data[0] == {"tokens": ["Marta", "Kovalenko", "joined", "Brightwater", "Analytics", "in", "Lisbon", "."],
                       "tags": ["B-PER", "I-PER", "O", "B-ORG", "I-ORG", "O", "B-LOC", "O"]}
    assert data[-1]["tokens"] == ["Prices", "fell", "sharply", "on", "Monday", "."]
    assert read_conll(CONLL, tag_column=1)[0]["tags"][:3] == ["NNP", "NNP", "VBD"]  # the POS column
    assert label_list(data) == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"]
    assert label_list(data.select([0]), data.select([1])) == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-MISC",
                                                              "I-ORG", "I-PER"]  # the union of several splits


def test_read_conll_names_the_file_and_line_of_a_malformed_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("-DOCSTART- -X- -X- O\n\nAda NNP B-NP B-PER\nwrote VBD O\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.txt, line 4: expected 4 whitespace-separated columns .* got 3"):
        read_conll(bad)
    with pytest.raises(ValueError, match=r"bad\.txt, line 3: tag_column=5 is out of range for a line of 4"):
        read_conll(bad, tag_column=5)
    one_column = tmp_path / "words.txt"
    one_column.write_text("Ada\n", encoding="utf-8")
    with pytest.raises(ValueError, match="token_column=0 and tag_column=-1 are the same column"):
        read_conll(one_column)


def test_labels_go_to_the_first_sub_token_of_each_word(tokenizer):
    data = read_conll(CONLL)
    labels = label_list(data)
    label2id = {label: i for i, label in enumerate(labels)}
    features = tokenize_and_align_labels(data, tokenizer, label2id, max_length=64)
    assert {"input_ids", "attention_mask", "labels"} <= set(features.column_names)
    split_words = 0
    for row, sentence in enumerate(data):
        word_ids = tokenizer(sentence["tokens"], is_split_into_words=True).word_ids()
        expected, previous = [], None
        for word in word_ids:
            expected.append(-100 if word is None or word == previous else label2id[sentence["tags"][word]])
            split_words += word is not None and word == previous
            previous = word
        assert features[row]["labels"] == expected
        assert len([label for label in expected if label != -100]) == len(sentence["tokens"])
    assert split_words > 0  # the tiny vocabulary splits some words, so the -100 continuation case is exercised

    every = tokenize_and_align_labels(data, tokenizer, label2id, max_length=64, label_all_subwords=True)
    word_ids = tokenizer(data[0]["tokens"], is_split_into_words=True).word_ids()  # "Marta Kovalenko ..."
    first_name = [label for label, word in zip(every[0]["labels"], word_ids, strict=True) if word == 0]
    assert len(first_name) > 1 and first_name == [label2id["B-PER"]] + [label2id["I-PER"]] * (len(first_name) - 1)
    with pytest.raises(ValueError, match="The tag 'B-PER' is not in label2id; known tags: O, B-LOC"):
        tokenize_and_align_labels(data, tokenizer, {"O": 0, "B-LOC": 1}, max_length=64)


def test_predictions_to_tags_round_trip_into_the_metric(tokenizer, seqeval):
    data = read_conll(CONLL)
    labels = label_list(data)
    features = tokenize_and_align_labels(data, tokenizer, {t: i for i, t in enumerate(labels)}, max_length=64)
    width = max(len(f) for f in features["labels"])
    padded = np.full((len(features), width), -100)  # what Trainer hands to compute_metrics
    for row, row_labels in enumerate(features["labels"]):
        padded[row, : len(row_labels)] = row_labels
    logits = np.eye(len(labels))[np.where(padded == -100, 0, padded)]  # (N, T, C) peaked on the labels
    first_word = np.flatnonzero(padded[0] != -100)[0]  # the first sentence's "Marta": B-PER -> B-LOC
    logits[0, first_word] = np.eye(len(labels))[labels.index("B-LOC")]
    predicted, reference = predictions_to_tags(logits, padded, dict(enumerate(labels)))
    assert reference == data["tags"]
    assert predicted[0][0] == "B-LOC" and predicted[1:] == data["tags"][1:]
    ragged_predicted, ragged_reference = predictions_to_tags(logits.argmax(-1), features["labels"], labels)
    assert (ragged_predicted, ragged_reference) == (predicted, reference)
    result = seqeval.compute(predictions=predicted, references=reference)
    entities = sum(tag.startswith("B-") for tags in data["tags"] for tag in tags)
    # "B-LOC I-PER" is two wrong entities, LOC[0] and PER[1], instead of PER[0:1]
    assert result["overall_precision"] == pytest.approx((entities - 1) / (entities + 1))
    assert result["overall_recall"] == pytest.approx((entities - 1) / entities)


# --------------------------------------------------------------------------- SQuAD data


def test_read_squad_json_rows_and_answer_offsets():
    data = read_squad_json(SQUAD)
    assert data.column_names == ["id", "title", "context", "question", "answers"] and len(data) == 12
    assert data[1]["id"] == "k2" and data[1]["title"] == "Lighthouse of Karvik"
    assert data[1]["answers"]["text"] == ["Elin Strand"]
    for row in data:
        for text, start in zip(row["answers"]["text"], row["answers"]["answer_start"], strict=True):
            assert row["context"][start:start + len(text)] == text
    assert len(set(data["context"])) == 3  # three paragraphs


def test_read_squad_json_errors_name_the_place(tmp_path):
    payload = json.loads(SQUAD.read_text(encoding="utf-8"))
    payload["data"][1]["paragraphs"][0]["qas"][2]["answers"][0]["answer_start"] += 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(payload), encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.json: data\[1\]\.paragraphs\[0\]\.qas\[2\]\.answers\[0\]: the "
                                         r"context holds 'ud\.' at answer_start=\d+, not the answer 'mud'"):
        read_squad_json(bad)
    assert len(read_squad_json(bad, check_answer_offsets=False)) == 12
    del payload["data"][0]["paragraphs"][0]["qas"][0]["question"]
    bad.write_text(json.dumps(payload), encoding="utf-8")
    with pytest.raises(ValueError, match=r"data\[0\]\.paragraphs\[0\]\.qas\[0\]: missing the field 'question'"):
        read_squad_json(bad, check_answer_offsets=False)


WINDOW = dict(max_length=48, doc_stride=12)  # several windows per context


def windows(tokenizer):
    examples = read_squad_json(SQUAD)
    kwargs = dict(batched=True, remove_columns=examples.column_names, fn_kwargs=dict(tokenizer=tokenizer, **WINDOW))
    return examples, examples.map(prepare_train_features, **kwargs), examples.map(prepare_eval_features, **kwargs)


def test_train_features_put_the_answer_span_on_the_answer_characters(tokenizer):
    examples, train, evaluation = windows(tokenizer)
    assert len(train) == len(evaluation) > 2 * len(examples)  # the same windows, several per example
    assert {"start_positions", "end_positions", "input_ids", "token_type_ids"} <= set(train.column_names)
    context_of = dict(zip(examples["id"], examples["context"], strict=True))
    answer_of = dict(zip(examples["id"], (a["text"][0] for a in examples["answers"]), strict=True))
    start_of = dict(zip(examples["id"], (a["answer_start"][0] for a in examples["answers"]), strict=True))
    labelled = {key: 0 for key in examples["id"]}
    for window, evaluated in zip(train, evaluation, strict=True):
        key, offsets = evaluated["example_id"], evaluated["offset_mapping"]
        assert window["input_ids"] == evaluated["input_ids"] and len(window["input_ids"]) <= WINDOW["max_length"]
        start, end = window["start_positions"], window["end_positions"]
        context_chars = [o for o in offsets if o is not None]
        holds_answer = (context_chars[0][0] <= start_of[key]
                        and start_of[key] + len(answer_of[key]) <= context_chars[-1][1])
        if holds_answer:
            assert 0 < start <= end and offsets[start] is not None and offsets[end] is not None
            assert context_of[key][offsets[start][0]:offsets[end][1]] == answer_of[key]
            labelled[key] += 1
        else:
            assert start == end == 0 and window["input_ids"][0] == tokenizer.cls_token_id
    assert all(count >= 1 for count in labelled.values())
    assert max(labelled.values()) >= 2  # an answer in the overlap of two windows is labelled in both
    with pytest.raises(ValueError, match=r"The question 'How tall is the tower\?' takes \d+ tokens, which leaves "
                                         r"\d+ of max_length=16 for the context, not more than doc_stride=8"):
        examples.select([2]).map(prepare_train_features, batched=True,
                                 fn_kwargs=dict(tokenizer=tokenizer, max_length=16, doc_stride=8))


def test_eval_features_keep_the_example_id_and_context_offsets_only(tokenizer):
    examples, _, evaluation = windows(tokenizer)
    assert set(evaluation["example_id"]) == set(examples["id"])
    for window in evaluation:
        types = window["token_type_ids"]
        kept = [o is not None for o in window["offset_mapping"]]
        special = set(tokenizer.all_special_ids)
        assert kept == [t == 1 and i not in special for t, i in zip(types, window["input_ids"], strict=True)]


def test_postprocess_predictions_finds_the_answer_over_all_windows(tokenizer, squad_metric):
    examples, train, evaluation = windows(tokenizer)
    width = max(len(ids) for ids in train["input_ids"]) + 3
    start_logits = np.full((len(train), width), -100.0)  # Trainer pads shorter windows with -100
    end_logits = np.full((len(train), width), -100.0)
    for row, window in enumerate(train):
        length = len(window["input_ids"])
        start_logits[row, :length] = end_logits[row, :length] = 0.0
        if window["start_positions"] != 0:  # the answer is in this window: peak on its first and last token
            start_logits[row, window["start_positions"]] = end_logits[row, window["end_positions"]] = 8.0
    answers = postprocess_predictions(examples, evaluation, start_logits, end_logits)
    assert answers == {row["id"]: row["answers"]["text"][0] for row in examples}
    predictions = [{"id": key, "prediction_text": text} for key, text in answers.items()]
    references = [{"id": row["id"], "answers": row["answers"]} for row in examples]
    assert squad_metric.compute(predictions=predictions, references=references) == {"exact_match": 100.0,
                                                                                    "f1": 100.0}
    short = postprocess_predictions(examples, evaluation, start_logits, end_logits, max_answer_length=1)
    context_of = dict(zip(examples["id"], examples["context"], strict=True))
    one_token_texts = {key: set() for key in context_of}  # the characters of each single context token
    for window in evaluation:
        key = window["example_id"]
        one_token_texts[key] |= {context_of[key][s:e] for s, e in filter(None, window["offset_mapping"])}
    assert short.keys() == one_token_texts.keys()
    assert all(short[key] in one_token_texts[key] for key in short)
    assert short != answers  # at least one full answer is longer than one token, so the limit changed it
    with pytest.raises(ValueError, match=r"must both have the shape \(num_windows=\d+, tokens\)"):
        postprocess_predictions(examples, evaluation, start_logits[:-1], end_logits[:-1])


# --------------------------------------------------------------------------- the shared span search


def test_best_spans_is_the_brute_force_argmax_of_p_start_times_p_end():
    generator = torch.Generator().manual_seed(0)
    start, end = torch.randn(3, 9, generator=generator), torch.randn(3, 9, generator=generator)
    mask = torch.zeros(3, 9, dtype=torch.bool)
    mask[:, 4:8] = True
    mask[2] = False  # a window without context tokens
    p_start = start.masked_fill(~mask, float("-inf")).softmax(-1).nan_to_num(0.0)
    p_end = end.masked_fill(~mask, float("-inf")).softmax(-1).nan_to_num(0.0)
    candidates = sorted(((float(p_start[w, i] * p_end[w, j]), w, i, j) for w in range(3) for i in range(9)
                         for j in range(i, min(i + 2, 9)) if mask[w, i] and mask[w, j]), reverse=True)
    spans = best_spans(start, end, mask, max_answer_len=2, top_k=100)
    assert len(spans) == len(candidates) == 2 * (4 + 3)  # only allowed spans, fewer than top_k
    assert [(s.window, s.start, s.end) for s in spans[:5]] == [c[1:] for c in candidates[:5]]
    assert [s.score for s in spans] == pytest.approx([c[0] for c in candidates], abs=1e-6)
    assert best_spans(start.numpy(), end.numpy(), mask.numpy(), max_answer_len=2)[0] == spans[0]
    assert best_spans(start[2:], end[2:], mask[2:]) == []
    with pytest.raises(ValueError, match="must all have the shape"):
        best_spans(start, end[:2], mask)


def test_pipeline_and_postprocess_predictions_pick_the_same_answer(tokenizer, tmp_path):
    import transformers

    from hf_seqmodels import BertConfig, BertForQuestionAnswering
    from hf_seqmodels.pipelines import QUESTION_ANSWERING_TASK

    torch.manual_seed(0)
    model = BertForQuestionAnswering(BertConfig.from_preset("tiny", vocab_size=len(tokenizer))).eval()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    qa = transformers.pipeline(QUESTION_ANSWERING_TASK, model=str(tmp_path), trust_remote_code=True)
    examples, _, evaluation = windows(tokenizer)
    width = max(len(ids) for ids in evaluation["input_ids"])
    start_logits, end_logits = np.full((2, len(evaluation), width), -100.0)  # padded as by Trainer
    with torch.no_grad():
        for row, window in enumerate(evaluation):
            out = model(**{k: torch.tensor([window[k]]) for k in ("input_ids", "token_type_ids", "attention_mask")})
            start_logits[row, : len(window["input_ids"])] = out.start_logits[0].numpy()
            end_logits[row, : len(window["input_ids"])] = out.end_logits[0].numpy()
    answers = postprocess_predictions(examples, evaluation, start_logits, end_logits, max_answer_length=15)
    for example in examples:
        result = qa(question=example["question"], context=example["context"],
                    max_seq_len=WINDOW["max_length"], doc_stride=WINDOW["doc_stride"])
        assert result["answer"] == answers[example["id"]]
    with pytest.raises(ValueError, match="needs a context with at least one token, got ' '"):
        qa(question="Who?", context=" ")


def test_tiny_sst2_file_is_balanced_glue_tsv():
    lines = SST2.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "label\tsentence"
    rows = [line.split("\t") for line in lines[1:]]
    assert all(len(row) == 2 and row[0] in ("0", "1") and row[1].strip() for row in rows)
    assert sum(row[0] == "1" for row in rows) == sum(row[0] == "0" for row in rows) == 20
