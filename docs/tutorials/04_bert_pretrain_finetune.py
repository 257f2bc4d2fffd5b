# %% [markdown]
# # 4. BERT: pretraining with MLM + NSP, then fine-tuning with the Trainer
#
# Devlin et al.'s recipe in two stages, both with transformers' `Trainer`:
#
# 1. pretrain `BertForPreTraining` on plain text with the masked-LM and next-sentence objectives;
# 2. load the pretrained weights into `BertForSequenceClassification` and fine-tune it on a sentiment task.
#
# At tiny settings the text is a slice of the Tiny Shakespeare the package ships and the sentiment task is
# generated; it takes seconds. `--full` (or `HFSM_TUTORIAL_FULL=1`) pretrains the `bert-mini` preset on
# WikiText-2 (`../shared/data/wikitext2-heldout/`) and fine-tunes it on SST-2 (`../shared/data/sst2/`) beside the
# repository: about an hour on a laptop CPU, minutes on a GPU.

# %%
import csv
import os
import random
import sys
import tempfile
from pathlib import Path

import torch
from datasets import Dataset
from transformers import (
    DataCollatorForLanguageModeling,
    DataCollatorWithPadding,
    Trainer,
    TrainingArguments,
    pipeline,
    set_seed,
)

import hf_seqmodels
from hf_seqmodels import BertConfig, BertForPreTraining, BertForSequenceClassification
from hf_seqmodels.tokenization import CleaningConfig, train_tokenizer
from hf_seqmodels.training.bert.data import (
    SpecialIds,
    create_pretraining_examples,
    split_documents,
    tokenize_documents,
)

FULL = os.environ.get("HFSM_TUTORIAL_FULL") == "1" or "--full" in sys.argv
set_seed(0)
OUTPUT = Path(tempfile.gettempdir()) / "hf_seqmodels-tutorials" / "04_bert"  # models
OUTPUT.mkdir(parents=True, exist_ok=True)


def shared_data(relative: str) -> Path:
    """A file of the shared datasets beside the repository (`../shared/data/...`), for the full-size run."""
    start = Path(globals().get("__file__", Path.cwd())).resolve()
    root = next((p for p in (start, *start.parents) if (p / "pyproject.toml").is_file()), Path.cwd())
    path = root.parent / "shared" / "data" / relative
    if not path.is_file():
        raise FileNotFoundError(f"--full needs {path} (the shared datasets beside the repository); "
                                "run without --full to use the data the package ships")
    return path


# %% [markdown]
# ## Data for both stages
#
# Pretraining reads documents of sentences (`split_documents` cuts plain text at blank lines, WikiText at its
# article titles). The sentiment task: SST-2 at full size; at tiny settings sentences whose one opinion word
# among neutral ones decides the label.

# %%
def sentiment_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    good, bad = "good great superb lovely fun".split(), "bad awful dull boring poor".split()
    neutral = "the film plot acting music was a really quite very".split()
    rows = []
    for i in range(n):
        words = rng.choices(neutral, k=5)
        words.insert(rng.randrange(6), rng.choice(good if i % 2 else bad))
        rows.append({"sentence": " ".join(words), "label": i % 2})
    return rows


def sst2(name: str) -> list[dict]:
    with shared_data(f"sst2/{name}").open(encoding="utf-8") as f:
        return [{"sentence": row.get("sentence") or row["content"], "label": int(row["label"])}
                for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


if FULL:
    pretraining_text = "\n".join(shared_data(f"wikitext2-heldout/{split}.txt").read_text(encoding="utf-8")
                                 for split in ("valid", "test"))
    sentiment = {"train": sst2("train.tsv"), "validation": sst2("dev.tsv")}
else:
    shipped = Path(hf_seqmodels.__file__).parent / "data" / "tiny_shakespeare.txt"
    pretraining_text = shipped.read_text(encoding="utf-8")[:40_000]
    sentiment = {"train": sentiment_rows(300, seed=0), "validation": sentiment_rows(100, seed=1)}
documents = split_documents(pretraining_text)
print(f"{len(documents)} documents, {sum(map(len, documents))} sentences; "
      f"{len(sentiment['train'])} labelled training sentences")

# %% [markdown]
# ## A WordPiece vocabulary with BERT's special tokens
#
# `add_bert_special_tokens=True` adds `[CLS]`, `[SEP]`, `[MASK]` and the template `[CLS] A [SEP] B [SEP]` with
# `token_type_ids`. It is trained on the pretraining text and the fine-tuning sentences, lower-cased.

# %%
lines = [pretraining_text + "\n", *(row["sentence"] + "\n" for row in sentiment["train"])]  # each ends its line
tokenizer = train_tokenizer(texts=lines,
                            kind="wordpiece", vocab_size=16_000 if FULL else 1_000, min_frequency=2,
                            cleaning=CleaningConfig(lowercase=True), add_bert_special_tokens=True)
print(len(tokenizer), tokenizer.tokenize("The plot was really superb"))

# %% [markdown]
# ## Stage 1: pretraining
#
# `create_pretraining_examples` builds the sentence pairs as BERT's `create_pretraining_data.py` does: half of
# the B sentences follow A in its document (`next_sentence_label` 0), half come from another document (1).
# transformers' `DataCollatorForLanguageModeling` masks 15 % of the tokens (80 % `[MASK]`, 10 % random, 10 % kept)
# anew for every batch and passes `token_type_ids` and `next_sentence_label` through.

# %%
max_seq_length = 128 if FULL else 64
pairs = create_pretraining_examples(tokenize_documents(documents, tokenizer), SpecialIds.of(tokenizer),
                                    max_seq_length=max_seq_length, seed=0)
print(f"{len(pairs)} sentence pairs, e.g. {tokenizer.decode(pairs[0]['input_ids'])!r}")

shrink = {} if FULL else dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
config = BertConfig.from_preset("bert-mini", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                max_position_embeddings=max_seq_length, **shrink)
pretrained = BertForPreTraining(config)


def arguments(folder: str, **fields) -> TrainingArguments:
    return TrainingArguments(OUTPUT / folder, use_cpu=not torch.cuda.is_available(), report_to="none",
                             save_strategy="no", disable_tqdm=True, seed=0, **fields)


pretraining = Trainer(
    model=pretrained, train_dataset=pairs, processing_class=tokenizer,
    data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=0),
    args=arguments("pretraining", per_device_train_batch_size=32 if FULL else 16, learning_rate=5e-4 if FULL else 1e-3,
                   max_steps=5000 if FULL else 60, warmup_steps=300 if FULL else 6, lr_scheduler_type="linear",
                   logging_steps=500 if FULL else 10),
)
pretraining.train()
losses = [log["loss"] for log in pretraining.state.log_history if "loss" in log]
print(f"MLM + NSP training loss: {losses[0]:.2f} at first, {losses[-1]:.2f} at the end")
pretraining.save_model(OUTPUT / "bert-pretrained")
tokenizer.save_pretrained(OUTPUT / "bert-pretrained")

# %% [markdown]
# ## Stage 2: fine-tuning for classification
#
# `BertForSequenceClassification.from_pretrained` takes the encoder and the pooler from the pretraining folder and
# starts a new classifier on the pooled `[CLS]` vector (transformers reports the classifier's weights as newly
# initialised). The sentences become a `datasets.Dataset`, padded per batch by `DataCollatorWithPadding`.

# %%
labels = {0: "negative", 1: "positive"}
classifier = BertForSequenceClassification.from_pretrained(OUTPUT / "bert-pretrained", id2label=labels)
encoded = {split: Dataset.from_list(rows).map(lambda batch: tokenizer(batch["sentence"], truncation=True,
                                                                        max_length=max_seq_length),
                                              batched=True, remove_columns=["sentence"])
           for split, rows in sentiment.items()}


def accuracy(prediction) -> dict[str, float]:
    return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}


finetuning = Trainer(
    model=classifier, train_dataset=encoded["train"], eval_dataset=encoded["validation"], processing_class=tokenizer,
    data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=accuracy,
    args=arguments("finetuning", per_device_train_batch_size=32 if FULL else 16, learning_rate=1e-4 if FULL else 1e-3,
                   num_train_epochs=2 if FULL else 6, lr_scheduler_type="linear" if FULL else "constant",
                   eval_strategy="epoch", logging_steps=500 if FULL else 20),
)
finetuning.train()
print(f"validation accuracy {finetuning.evaluate()['eval_accuracy']:.3f} (chance: 0.5)")

# %% [markdown]
# The fine-tuned model serves transformers' `text-classification` pipeline as it is.

# %%
classify = pipeline("text-classification", model=classifier, tokenizer=tokenizer)
print(classify(["the acting was really superb", "a dull and boring plot"]))
