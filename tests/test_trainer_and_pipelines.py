"""The RNN heads inside the Hugging Face tooling: Trainer fine-tuning and pipelines."""

from __future__ import annotations

import random

import pytest
import torch
from datasets import Dataset
from transformers import DataCollatorWithPadding, Trainer, TrainingArguments, pipeline

import hf_seqmodels  # noqa: F401
from hf_seqmodels import RNNConfig, RNNForCausalLM, RNNForSequenceClassification, RNNForTokenClassification
from hf_seqmodels.tokenization import train_tokenizer

POSITIVE = ["good", "great", "fine", "lovely"]
NEGATIVE = ["bad", "awful", "poor", "dull"]
FILLER = ["the", "film", "was", "a", "story", "and", "very", "plot", "acting", "quite"]


def make_sentences(n: int, seed: int) -> list[dict]:
    """Sentiment toy task: the label is the polarity of the one opinion word in the sentence."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.randint(0, 1)
        words = rng.sample(FILLER, rng.randint(2, 6))
        words.insert(rng.randint(0, len(words)), rng.choice(POSITIVE if label else NEGATIVE))
        rows.append({"text": " ".join(words), "label": label})
    return rows


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text("\n".join(r["text"] for r in make_sentences(200, seed=0)), encoding="utf-8")
    return train_tokenizer([corpus], kind="word", vocab_size=100, min_frequency=1)


def encode(rows, tokenizer):
    return Dataset.from_list(rows).map(lambda b: tokenizer(b["text"]), batched=True, remove_columns=["text"])


def classifier(tokenizer, **overrides):
    torch.manual_seed(0)
    config = RNNConfig.from_preset(
        "tiny", vocab_size=len(tokenizer), cell_type="gru", bidirectional=True, pooling="max",
        pad_token_id=tokenizer.pad_token_id, id2label={0: "NEGATIVE", 1: "POSITIVE"}, **overrides,
    )
    return RNNForSequenceClassification(config)


def test_trainer_fine_tuning_lowers_the_loss(tokenizer, tmp_path):
    model = classifier(tokenizer)
    train, held_out = encode(make_sentences(256, seed=1), tokenizer), encode(make_sentences(64, seed=2), tokenizer)
    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=16, per_device_eval_batch_size=32,
        num_train_epochs=4, learning_rate=1e-2, use_cpu=True, save_strategy="no", logging_steps=5,
        report_to="none", seed=0,
    )

    def accuracy(eval_pred):
        logits, labels = eval_pred
        return {"accuracy": float((logits.argmax(-1) == labels).mean())}

    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=held_out,
                      processing_class=tokenizer, data_collator=DataCollatorWithPadding(tokenizer),
                      compute_metrics=accuracy)
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    assert after["eval_loss"] < 0.5 * before["eval_loss"]
    assert after["eval_accuracy"] >= 0.9


def test_gradient_accumulation_does_not_rescale_the_logged_loss(tokenizer, tmp_path):
    """Trainer must divide a per-sentence mean loss by the accumulation steps (HF_FACTS §6 trap)."""
    data = encode(make_sentences(32, seed=3), tokenizer)
    losses = {}
    for steps in (1, 2):
        args = TrainingArguments(output_dir=str(tmp_path / str(steps)), per_device_train_batch_size=16 // steps,
                                 gradient_accumulation_steps=steps, max_steps=1, learning_rate=0.0,
                                 use_cpu=True, save_strategy="no", logging_steps=1, report_to="none")
        trainer = Trainer(model=classifier(tokenizer), args=args, train_dataset=data,
                          data_collator=DataCollatorWithPadding(tokenizer))
        trainer.train()
        losses[steps] = trainer.state.log_history[0]["loss"]
    assert losses[2] == pytest.approx(losses[1], rel=0.05)


def test_text_classification_pipeline(tokenizer):
    model = classifier(tokenizer).eval()
    classify = pipeline("text-classification", model=model, tokenizer=tokenizer)
    results = classify(["the film was good", "a bad plot"])
    assert [r["label"] for r in results] != [] and all(r["label"] in {"NEGATIVE", "POSITIVE"} for r in results)
    with torch.no_grad():
        probs = model(**tokenizer("the film was good", return_tensors="pt")).logits.softmax(-1)[0]
    assert results[0]["score"] == pytest.approx(probs.max().item(), abs=1e-5)


def test_token_classification_pipeline(tokenizer):
    torch.manual_seed(0)
    config = RNNConfig.from_preset("tiny", vocab_size=len(tokenizer), bidirectional=True, num_labels=3,
                                   id2label={0: "O", 1: "POS", 2: "NEG"})
    model = RNNForTokenClassification(config).eval()
    tag = pipeline("token-classification", model=model, tokenizer=tokenizer)
    entities = tag("the film was good")
    with torch.no_grad():
        enc = tokenizer("the film was good", return_tensors="pt")
        predicted = model(**enc).logits.argmax(-1)[0].tolist()
    words_tagged = [e["word"] for e in entities]
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    expected = [t for t, p in zip(tokens, predicted, strict=True) if p != 0 and t not in tokenizer.all_special_tokens]
    assert words_tagged == expected


def test_text_generation_pipeline_greedy_and_beam(tokenizer):
    torch.manual_seed(0)
    model = RNNForCausalLM(RNNConfig.from_preset("tiny", vocab_size=len(tokenizer))).eval()
    generator = pipeline("text-generation", model=model, tokenizer=tokenizer)
    for kwargs in (dict(do_sample=False), dict(num_beams=3, do_sample=False)):
        text = generator("the film", max_new_tokens=5, min_new_tokens=5, return_full_text=False, **kwargs)
        ids = tokenizer("the film", return_tensors="pt")["input_ids"]
        expected = model.generate(ids, max_new_tokens=5, min_new_tokens=5, **kwargs)[0, ids.shape[1]:]
        assert text[0]["generated_text"].strip() == tokenizer.decode(expected, skip_special_tokens=True).strip()
