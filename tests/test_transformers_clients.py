"""Our models as users of transformers' example scripts meet them: each test follows an example script step by
step through the same public APIs (``datasets.map`` preprocessing, transformers' data collators, ``Trainer`` and
``Seq2SeqTrainer``) on a tiny model and toy data written here, with the package imported. The saved folder loaded
with ``trust_remote_code=True`` in a Python process that cannot import the package runs the same clients for
:data:`SHORT_RUN`'s few steps, and must report what the package's classes report for those steps: the same
preprocessing, losses, predictions and label names, so that it learns what the package's classes learn.

The client functions below use transformers and datasets only, so the very same code runs in that process: its
source is sent there with :func:`inspect.getsource`.
"""

from __future__ import annotations

import inspect
import json
import math  # noqa: F401  (used by the client functions, here and in the process without the package)
import random
import textwrap
from itertools import chain  # noqa: F401

import pytest
import torch
from datasets import Dataset  # noqa: F401
from model_test_utils import run_in_python_without_package
from transformers import (  # noqa: F401
    DataCollatorForLanguageModeling,
    DataCollatorForMultipleChoice,
    DataCollatorForSeq2Seq,
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    Trainer,
    TrainingArguments,
)

import hf_seqmodels  # noqa: F401  (registers the Auto classes)
from hf_seqmodels import (
    BertConfig,
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForTokenClassification,
    RNNConfig,
    RNNForCausalLM,
    RNNSeq2SeqConfig,
    RNNSeq2SeqForConditionalGeneration,
    TextCNNConfig,
    TextCNNForSequenceClassification,
)
from hf_seqmodels.tokenization import train_tokenizer

# what the client functions import, in the process without the package
CLIENT_IMPORTS = (
    "import json, math, random\nfrom itertools import chain\nimport torch\nfrom datasets import Dataset\n"
    "from transformers import (DataCollatorForLanguageModeling, DataCollatorForMultipleChoice, DataCollatorForSeq2Seq,\n"
    "    DataCollatorForTokenClassification, DataCollatorWithPadding, Seq2SeqTrainer, Seq2SeqTrainingArguments,\n"
    "    Trainer, TrainingArguments)\nimport transformers\n"
)
SUBJECTS = ["the cat", "a dog", "the bird", "my friend", "the old man"]
VERBS = ["sat on", "ran to", "looked at", "walked past"]
OBJECTS = ["the mat", "a log", "the tree", "the river", "a house"]


# ----------------------------------------------------------------------------------------------- toy data
def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} ." for _ in range(n)]


def sentiment_rows(n: int, seed: int) -> list[dict]:
    """The label (a string, as in a csv file) is the polarity of the one opinion word in the sentence."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.choice(["negative", "positive"])
        words = rng.choice(SUBJECTS).split() + ["was"]
        words.append(rng.choice(["good", "great", "lovely"] if label == "positive" else ["bad", "awful", "dull"]))
        rows.append({"sentence": " ".join(words), "label": label})
    return rows


NAMES, PLACES = ["ada", "bob", "carla", "dmitri"], ["paris", "rome", "lisbon", "oslo"]


def tagging_rows(n: int, seed: int) -> list[dict]:
    """CoNLL-style rows: ``tokens`` (words) and ``ner_tags`` (ids of O, PER, LOC)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        name, place = rng.choice(NAMES), rng.choice(PLACES)
        words = [name, rng.choice(["lives", "works", "stays"]), "in", place, "."]
        rows.append({"tokens": words, "ner_tags": [1, 0, 0, 2, 0]})
    return rows


def translation_rows(n: int, seed: int) -> list[dict]:
    """The toy translation: the target is the source reversed (2 to 6 words)."""
    rng = random.Random(seed)
    words = ["red", "green", "blue", "one", "two", "three", "cat", "dog"]
    rows = []
    for _ in range(n):
        source = [rng.choice(words) for _ in range(rng.randint(2, 6))]
        rows.append({"translation": {"src": " ".join(source), "tgt": " ".join(reversed(source))}})
    return rows


FILLER = ["she", "said", "that", "it", "was", "nice", "to", "see", "them", "again", "today"]


def qa_rows(n: int, seed: int) -> list[dict]:
    """SQuAD-style rows: the answer to "where ?" is the one place named in the context."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        words = [rng.choice(FILLER) for _ in range(rng.randint(3, 9))]
        at, place = rng.randint(0, len(words)), rng.choice(PLACES)
        context = " ".join([*words[:at], "in", place, *words[at:]]) + " ."
        start = context.index(f"in {place}") + 3
        rows.append({"id": str(i), "question": "where ?", "context": context,
                     "answers": {"text": [place], "answer_start": [start]}})
    return rows


def choice_rows(n: int, seed: int) -> list[dict]:
    """SWAG-style rows: a start and four endings; the right ending is the object, the three others verbs."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.randint(0, 3)
        endings = [rng.choice(VERBS) + " ." for _ in range(4)]
        endings[label] = rng.choice(OBJECTS) + " ."
        row = {"sent1": rng.choice(SUBJECTS), "sent2": rng.choice(VERBS), "label": label}
        row.update({f"ending{k}": ending for k, ending in enumerate(endings)})
        rows.append(row)
    return rows


def corpus_tokenizer(tmp_path, lines, **kwargs):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return train_tokenizer([corpus], min_frequency=1, **kwargs)


# ---------------------------------------------------------- the clients: transformers and datasets only
#: what the clients' training arguments are overridden with: nothing for the full runs; SHORT_RUN for the runs that
#: compare the saved folder's remote code with the package's classes
OVERRIDES: dict = {}
SHORT_RUN = {"max_steps": 3}


def client_args(out, args_class=None, **overrides):
    fields = dict(output_dir=out, per_device_train_batch_size=16, per_device_eval_batch_size=32, learning_rate=1e-2,
                  num_train_epochs=8, use_cpu=True, save_strategy="no", logging_steps=10, report_to="none", seed=0,
                  disable_tqdm=True)
    fields.update(overrides, **OVERRIDES)
    return (args_class or TrainingArguments)(**fields)


def causal_lm_client(model, tokenizer, data, out):
    """run_clm.py: tokenize, ``group_texts`` into blocks, ``DataCollatorForLanguageModeling(mlm=False)``."""
    block_size = 16

    def group_texts(examples):
        concatenated = {k: list(chain(*examples[k])) for k in examples}
        total = (len(concatenated["input_ids"]) // block_size) * block_size
        result = {k: [t[i : i + block_size] for i in range(0, total, block_size)] for k, t in concatenated.items()}
        result["labels"] = result["input_ids"].copy()
        return result

    raw = {split: Dataset.from_dict({"text": texts}) for split, texts in data.items()}
    lm = {split: ds.map(lambda b: tokenizer(b["text"]), batched=True, remove_columns=["text"]).map(group_texts,
                                                                                                  batched=True)
          for split, ds in raw.items()}
    trainer = Trainer(model=model, args=client_args(out, learning_rate=2e-2, num_train_epochs=30),
                      train_dataset=lm["train"], eval_dataset=lm["validation"],
                      processing_class=tokenizer, data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    after = trainer.evaluate()["eval_loss"]
    return {"before": before, "after": after, "perplexity": math.exp(after),
            "block_lengths": sorted({len(r) for r in lm["train"]["input_ids"]})}


def masked_lm_client(model, tokenizer, data, out):
    """run_mlm.py: tokenize with the special-tokens mask, ``group_texts``, ``DataCollatorForLanguageModeling``."""
    block_size = 24

    def group_texts(examples):
        concatenated = {k: list(chain(*examples[k])) for k in examples}
        total = (len(concatenated["input_ids"]) // block_size) * block_size
        return {k: [t[i : i + block_size] for i in range(0, total, block_size)] for k, t in concatenated.items()}

    def tokenize(batch):
        return tokenizer(batch["text"], return_special_tokens_mask=True)

    lm = {split: Dataset.from_dict({"text": texts}).map(tokenize, batched=True, remove_columns=["text"])
          .map(group_texts, batched=True) for split, texts in data.items()}
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=0)
    trainer = Trainer(model=model, args=client_args(out, learning_rate=1e-2, num_train_epochs=15),
                      train_dataset=lm["train"], eval_dataset=lm["validation"], processing_class=tokenizer,
                      data_collator=collator)
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    after = trainer.evaluate()["eval_loss"]
    return {"before": before, "after": after, "mask_token": tokenizer.mask_token}


def text_classification_client(model, tokenizer, data, out):
    """run_glue.py: string labels mapped through ``config.label2id``, ``DataCollatorWithPadding``."""
    label_to_id = model.config.label2id

    def preprocess(batch):
        result = tokenizer(batch["sentence"], truncation=True)
        result["label"] = [label_to_id[label] for label in batch["label"]]
        return result

    encoded = {split: Dataset.from_list(rows).map(preprocess, batched=True, remove_columns=["sentence"])
               for split, rows in data.items()}

    def compute_metrics(prediction):
        return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}

    trainer = Trainer(model=model, args=client_args(out, num_train_epochs=6), train_dataset=encoded["train"],
                      eval_dataset=encoded["validation"], processing_class=tokenizer,
                      data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=compute_metrics)
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    predicted = trainer.predict(encoded["validation"])
    names = [model.config.id2label[int(i)] for i in predicted.predictions.argmax(-1)]
    return {"before": before["eval_loss"], "after": after["eval_loss"], "accuracy": after["eval_accuracy"],
            "label2id": label_to_id, "id2label": {str(k): v for k, v in model.config.id2label.items()},
            "predicted_names": sorted(set(names)), "predictions_shape": list(predicted.predictions.shape)}


def token_classification_client(model, tokenizer, data, out):
    """run_ner.py: words tokenized with ``is_split_into_words``, labels aligned with ``word_ids()`` (the first
    piece of a word gets its label, the others and the special tokens -100), ``DataCollatorForTokenClassification``."""

    def tokenize_and_align_labels(batch):
        encoded = tokenizer(batch["tokens"], truncation=True, is_split_into_words=True)
        encoded["labels"] = []
        for i, tags in enumerate(batch["ner_tags"]):
            previous, labels = None, []
            for word in encoded.word_ids(batch_index=i):
                labels.append(-100 if word is None or word == previous else tags[word])
                previous = word
            encoded["labels"].append(labels)
        return encoded

    encoded = {split: Dataset.from_list(rows).map(tokenize_and_align_labels, batched=True,
                                                  remove_columns=["tokens", "ner_tags"])
               for split, rows in data.items()}

    def compute_metrics(prediction):
        keep = prediction.label_ids != -100
        return {"accuracy": float((prediction.predictions.argmax(-1)[keep] == prediction.label_ids[keep]).mean())}

    trainer = Trainer(model=model, args=client_args(out, learning_rate=5e-3), train_dataset=encoded["train"],
                      eval_dataset=encoded["validation"], processing_class=tokenizer,
                      data_collator=DataCollatorForTokenClassification(tokenizer), compute_metrics=compute_metrics)
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    after = trainer.evaluate()
    labels = encoded["validation"]["labels"]
    return {"before": before, "after": after["eval_loss"], "accuracy": after["eval_accuracy"],
            "labelled": sum(label != -100 for row in labels for label in row),
            "words": sum(len(row["tokens"]) for row in data["validation"]),
            "pieces": sum(len(row) for row in labels)}


def translation_client(model, tokenizer, data, out):
    """run_translation.py: ``tokenizer(inputs, text_target=targets)``, ``DataCollatorForSeq2Seq``,
    ``Seq2SeqTrainer(predict_with_generate=True)``; the generated lengths say whether the model learnt to stop."""

    def preprocess(batch):
        inputs = [pair["src"] for pair in batch["translation"]]
        targets = [pair["tgt"] for pair in batch["translation"]]
        return tokenizer(inputs, text_target=targets, max_length=32, truncation=True)

    encoded = {split: Dataset.from_list(rows).map(preprocess, batched=True, remove_columns=["translation"])
               for split, rows in data.items()}
    collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)
    args = client_args(out, Seq2SeqTrainingArguments, predict_with_generate=True, generation_max_length=32,
                       num_train_epochs=20, learning_rate=2e-2)
    trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=encoded["train"],
                             eval_dataset=encoded["validation"], processing_class=tokenizer, data_collator=collator)
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    predicted = trainer.predict(encoded["validation"])
    generated = predicted.predictions
    generated[generated == -100] = tokenizer.pad_token_id
    texts = tokenizer.batch_decode(generated, skip_special_tokens=True)
    references = [row["translation"]["tgt"] for row in data["validation"]]
    return {"before": before, "after": predicted.metrics["test_loss"],
            "generated_lengths": [len(t.split()) for t in texts], "reference_lengths": [len(r.split()) for r in references],
            "exact": sum(t.split() == r.split() for t, r in zip(texts, references, strict=True)) / len(references),
            "labels_end_with_eos": all(row[-1] == tokenizer.eos_token_id for row in encoded["train"]["labels"])}


def question_answering_client(model, tokenizer, data, out):
    """run_qa.py: question and context tokenized with ``truncation="only_second"`` and
    ``return_offsets_mapping``; the answer's characters mapped to start/end token positions through the offsets
    and ``sequence_ids``; the predicted span read back from the context through the offsets."""
    max_length = 32

    def prepare_features(batch):
        encoded = tokenizer(batch["question"], batch["context"], truncation="only_second", max_length=max_length,
                            return_offsets_mapping=True, padding="max_length")
        encoded["start_positions"], encoded["end_positions"] = [], []
        for i, offsets in enumerate(encoded["offset_mapping"]):
            answer = batch["answers"][i]
            start_char = answer["answer_start"][0]
            end_char = start_char + len(answer["text"][0])
            sequence_ids = encoded.sequence_ids(i)
            context = [j for j, sequence in enumerate(sequence_ids) if sequence == 1]
            encoded["start_positions"].append(max(j for j in context if offsets[j][0] <= start_char))
            encoded["end_positions"].append(min(j for j in context if offsets[j][1] >= end_char))
            # as run_qa.py keeps them for its post-processing: the offsets of the context's tokens only
            encoded["offset_mapping"][i] = [o if s == 1 else None for o, s in zip(offsets, sequence_ids, strict=True)]
        return encoded

    features = {split: Dataset.from_list(rows).map(prepare_features, batched=True,
                                                   remove_columns=["id", "question", "context", "answers"])
                for split, rows in data.items()}

    def span_text(row, offsets, start, end):
        return row["context"][offsets[start][0] : offsets[end][1]]

    validation = features["validation"]
    labelled = [span_text(row, f["offset_mapping"], f["start_positions"], f["end_positions"])
                for row, f in zip(data["validation"], validation, strict=True)]
    trainer = Trainer(model=model, args=client_args(out, learning_rate=5e-3, num_train_epochs=15),
                      train_dataset=features["train"].remove_columns("offset_mapping"),
                      processing_class=tokenizer)
    before = trainer.predict(validation.remove_columns("offset_mapping")).metrics["test_loss"]
    trainer.train()
    predicted = trainer.predict(validation.remove_columns("offset_mapping"))
    start_logits, end_logits = predicted.predictions
    answers = []
    for row, feature, starts, ends in zip(data["validation"], validation, start_logits, end_logits, strict=True):
        context = [j for j, offsets in enumerate(feature["offset_mapping"]) if offsets is not None]
        start = max(context, key=lambda j: starts[j])
        end = max((j for j in context if j >= start), key=lambda j: ends[j])
        answers.append(span_text(row, feature["offset_mapping"], start, end))
    truth = [row["answers"]["text"][0] for row in data["validation"]]
    return {"before": before, "after": predicted.metrics["test_loss"],
            "labelled_spans_exact": labelled == truth, "logits_shape": list(start_logits.shape),
            "exact_match": sum(a == t for a, t in zip(answers, truth, strict=True)) / len(truth)}


def multiple_choice_client(model, tokenizer, data, out):
    """run_swag.py: the start repeated for each of the four endings, the pairs tokenized flat and regrouped by
    four, ``DataCollatorForMultipleChoice``."""

    def preprocess(batch):
        first = [[start] * 4 for start in batch["sent1"]]
        second = [[f"{header} {batch[f'ending{k}'][i]}" for k in range(4)] for i, header in enumerate(batch["sent2"])]
        encoded = tokenizer(list(chain(*first)), list(chain(*second)), truncation=True)
        return {k: [v[i : i + 4] for i in range(0, len(v), 4)] for k, v in encoded.items()}

    columns = ["sent1", "sent2", "ending0", "ending1", "ending2", "ending3"]
    encoded = {split: Dataset.from_list(rows).map(preprocess, batched=True, remove_columns=columns)
               for split, rows in data.items()}

    def compute_metrics(prediction):
        return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}

    trainer = Trainer(model=model, args=client_args(out, learning_rate=5e-3), train_dataset=encoded["train"],
                      eval_dataset=encoded["validation"], processing_class=tokenizer,
                      data_collator=DataCollatorForMultipleChoice(tokenizer), compute_metrics=compute_metrics)
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    predicted = trainer.predict(encoded["validation"])
    return {"before": before, "after": predicted.metrics["test_loss"], "accuracy": predicted.metrics["test_accuracy"],
            "predictions_shape": list(predicted.predictions.shape)}


# ------------------------------------------------------------------------------------------- the cases
def causal_lm_case(tmp_path):
    data = {"train": sentences(200, 1), "validation": sentences(40, 2)}
    tokenizer = corpus_tokenizer(tmp_path, data["train"], kind="word", vocab_size=60)
    torch.manual_seed(0)
    config = RNNConfig.from_preset("tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                   bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    return RNNForCausalLM(config), tokenizer, data, "AutoModelForCausalLM"


def masked_lm_case(tmp_path):
    data = {"train": sentences(300, 3), "validation": sentences(80, 4)}
    tokenizer = corpus_tokenizer(tmp_path, data["train"], kind="word", vocab_size=60, add_bert_special_tokens=True)
    torch.manual_seed(0)
    config = BertConfig.from_preset("tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    return BertForMaskedLM(config), tokenizer, data, "AutoModelForMaskedLM"


def text_classification_case(tmp_path):
    data = {"train": sentiment_rows(240, 5), "validation": sentiment_rows(60, 6)}
    tokenizer = corpus_tokenizer(tmp_path, [r["sentence"] for r in data["train"]], kind="word", vocab_size=60)
    torch.manual_seed(0)
    config = TextCNNConfig.from_preset("tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                       id2label={0: "negative", 1: "positive"})
    return TextCNNForSequenceClassification(config), tokenizer, data, "AutoModelForSequenceClassification"


def token_classification_case(tmp_path):
    data = {"train": tagging_rows(200, 7), "validation": tagging_rows(40, 8)}
    lines = [" ".join(r["tokens"]) for r in data["train"]]
    tokenizer = corpus_tokenizer(tmp_path, lines, kind="wordpiece", vocab_size=40, add_bert_special_tokens=True)
    torch.manual_seed(0)
    config = BertConfig.from_preset("tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                    id2label={0: "O", 1: "PER", 2: "LOC"})
    return BertForTokenClassification(config), tokenizer, data, "AutoModelForTokenClassification"


def translation_case(tmp_path):
    data = {"train": translation_rows(150, 9), "validation": translation_rows(40, 10)}
    lines = [row["translation"][side] for row in data["train"] for side in ("src", "tgt")]
    tokenizer = corpus_tokenizer(tmp_path, lines, kind="word", vocab_size=30, add_bos_token=False, add_eos_token=True)
    torch.manual_seed(0)
    config = RNNSeq2SeqConfig.from_preset("tiny", vocab_size=len(tokenizer), hidden_size=32, encoder_layers=1,
                                          decoder_layers=1, pad_token_id=tokenizer.pad_token_id,
                                          bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                          decoder_start_token_id=tokenizer.bos_token_id)
    return RNNSeq2SeqForConditionalGeneration(config), tokenizer, data, "AutoModelForSeq2SeqLM"


def question_answering_case(tmp_path):
    data = {"train": qa_rows(200, 11), "validation": qa_rows(40, 12)}
    lines = ["where ?"] + [row["context"] for row in data["train"]]
    tokenizer = corpus_tokenizer(tmp_path, lines, kind="word", vocab_size=40, add_bert_special_tokens=True)
    torch.manual_seed(0)
    config = BertConfig.from_preset("tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    return BertForQuestionAnswering(config), tokenizer, data, "AutoModelForQuestionAnswering"


def multiple_choice_case(tmp_path):
    data = {"train": choice_rows(160, 13), "validation": choice_rows(40, 14)}
    tokenizer = corpus_tokenizer(tmp_path, sentences(100, 15), kind="word", vocab_size=40,
                                 add_bert_special_tokens=True)
    torch.manual_seed(0)
    config = BertConfig.from_preset("tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    return BertForMultipleChoice(config), tokenizer, data, "AutoModelForMultipleChoice"


CASES = {  # name: (the case, its client)
    "causal_lm": (causal_lm_case, causal_lm_client),
    "masked_lm": (masked_lm_case, masked_lm_client),
    "text_classification": (text_classification_case, text_classification_client),
    "token_classification": (token_classification_case, token_classification_client),
    "translation": (translation_case, translation_client),
    "question_answering": (question_answering_case, question_answering_client),
    "multiple_choice": (multiple_choice_case, multiple_choice_client),
}


def run_with_package(name, tmp_path):
    case, client = CASES[name]
    model, tokenizer, data, _ = case(tmp_path)
    return client(model, tokenizer, data, str(tmp_path / "out"))


@pytest.fixture(scope="module")
def short_reports(tmp_path_factory):
    """Every case saved to a folder, then run by its client for :data:`SHORT_RUN`'s steps twice: here, from the
    package's model that was saved, and in one process without the package, from the folder. Both on one thread,
    so that the two runs add up their floats alike."""
    root = tmp_path_factory.mktemp("saved")
    jobs, package_reports = [], {}
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    OVERRIDES.update(SHORT_RUN)
    try:
        for name, (case, client) in CASES.items():
            folder = root / name
            folder.mkdir()
            model, tokenizer, data, auto_class = case(folder)
            model.save_pretrained(folder / "model")
            tokenizer.save_pretrained(folder / "model")
            jobs.append({"name": name, "folder": str(folder / "model"), "auto": auto_class,
                         "client": client.__name__, "data": data, "out": str(folder / "out")})
            package_reports[name] = client(model, tokenizer, data, str(folder / "package-out"))
    finally:
        OVERRIDES.clear()
        torch.set_num_threads(previous_threads)
    (root / "jobs.json").write_text(json.dumps(jobs))
    sources = "".join(textwrap.dedent(inspect.getsource(f)) + "\n"
                      for f in (client_args, *(client for _, client in CASES.values())))
    script = CLIENT_IMPORTS + f"OVERRIDES = {SHORT_RUN!r}\n" + sources + textwrap.dedent(
        """
        torch.set_num_threads(1)
        reports = {}
        for job in json.load(open("jobs.json")):
            model = getattr(transformers, job["auto"]).from_pretrained(job["folder"], trust_remote_code=True)
            tokenizer = transformers.AutoTokenizer.from_pretrained(job["folder"], trust_remote_code=True)
            report = globals()[job["client"]](model, tokenizer, job["data"], job["out"])
            report["module"] = type(model).__module__
            reports[job["name"]] = report
        print(json.dumps(reports))
        """)
    result = run_in_python_without_package(script, cwd=root, timeout=600)
    # through JSON as the other process's reports came: tuples become lists, integer keys strings
    return json.loads(json.dumps(package_reports)), json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_the_saved_folder_trains_like_the_package(name, short_reports):
    """The remote code, loaded through its Auto class, preprocessed, trained and evaluated by the client as the
    package's class is: the full runs' learning checks below then hold for it too."""
    package_reports, remote_reports = short_reports
    remote = dict(remote_reports[name])
    assert remote.pop("module").startswith("transformers_modules")  # our remote code, not the package
    expected = package_reports[name]
    assert remote.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, float):
            assert remote[key] == pytest.approx(value, rel=1e-5), key
        else:
            assert remote[key] == value, key
    assert expected["after"] != expected["before"]  # the steps trained


def test_causal_lm_with_group_texts_and_trainer(tmp_path):
    report = run_with_package("causal_lm", tmp_path)
    assert report["block_lengths"] == [16]
    assert report["after"] < 0.6 * report["before"]
    assert report["perplexity"] < 15


def test_masked_lm_with_the_masking_collator(tmp_path):
    report = run_with_package("masked_lm", tmp_path)
    assert report["mask_token"] == "[MASK]"
    # from uniform guessing (log |V|) to below the words' unigram entropy (2.89 nats) on this toy text; transformers'
    # own BertForMaskedLM of the same size, seeded alike, ends at the same loss in the same steps
    assert report["after"] < 0.85 * report["before"]


def test_text_classification_reads_label2id_from_the_config(tmp_path):
    report = run_with_package("text_classification", tmp_path)
    assert report["label2id"] == {"negative": 0, "positive": 1}
    assert report["id2label"] == {"0": "negative", "1": "positive"}
    assert report["predictions_shape"] == [60, 2]
    assert report["predicted_names"] == ["negative", "positive"]
    assert report["after"] < 0.5 * report["before"] and report["accuracy"] >= 0.9


def test_token_classification_aligns_labels_with_word_ids(tmp_path):
    report = run_with_package("token_classification", tmp_path)
    assert report["labelled"] == report["words"]  # one label per word, on its first piece
    assert report["pieces"] > report["words"] + 2 * 40  # some words were split into pieces (beyond CLS/SEP)
    assert report["after"] < 0.5 * report["before"] and report["accuracy"] >= 0.9


def test_translation_with_seq2seq_trainer_learns_to_stop(tmp_path):
    report = run_with_package("translation", tmp_path)
    assert report["labels_end_with_eos"]  # without <eos> in the labels the mean generated length is 31 here
    generated, reference = report["generated_lengths"], report["reference_lengths"]
    assert abs(sum(generated) / len(generated) - sum(reference) / len(reference)) <= 2, (generated, reference)
    assert max(generated) < 32  # no row ran to generation_max_length
    assert report["exact"] >= 0.8  # the reversal is learnt
    assert report["after"] < 0.5 * report["before"]


def test_question_answering_with_offsets(tmp_path):
    report = run_with_package("question_answering", tmp_path)
    assert report["labelled_spans_exact"]  # the offsets map the answer's characters to its tokens and back
    assert report["logits_shape"] == [40, 32]
    assert report["after"] < 0.5 * report["before"] and report["exact_match"] >= 0.8


def test_multiple_choice_with_its_collator(tmp_path):
    report = run_with_package("multiple_choice", tmp_path)
    assert report["predictions_shape"] == [40, 4]
    assert report["after"] < 0.5 * report["before"] and report["accuracy"] >= 0.9
