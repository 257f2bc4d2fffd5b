# %% [markdown]
# # 5. Word vectors (word2vec, GloVe) in a TextCNN
#
# Word vectors learnt from unlabelled text put words used in the same contexts near each other. Given to a
# classifier as its input embeddings, they let it treat a word it never saw labelled like the words it did.
# We train word2vec and GloVe vectors with `hf_seqmodels.embeddings`, look at their neighbours, and train Kim's
# (2014) TextCNN three times: from random embeddings (CNN-rand) and from each set of vectors, frozen (CNN-static).
#
# At tiny settings the text is generated: film reviews whose opinion words come in pairs of the same polarity
# ("... was superb and lovely"). The labelled training sentences use only some opinion words; the test sentences
# only the others, so only what the vectors learnt from the unlabelled text can tell them apart.
# `--full` (or `HFSM_TUTORIAL_FULL=1`) trains 100-d vectors on WikiText-2 and SST-2's sentences and the
# classifiers on SST-2 (`../shared/data/` beside the repository; about 20 minutes on a laptop CPU).

# %%
import csv
import os
import random
import sys
import tempfile
from pathlib import Path

import matplotlib

if "ipykernel" not in sys.modules:  # a plain `python` run draws into files instead of windows
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from transformers import DataCollatorWithPadding, set_seed

from hf_seqmodels import TextCNNConfig, TextCNNForSequenceClassification
from hf_seqmodels.embeddings import GloVeConfig, Word2VecConfig, train_glove, train_word2vec
from hf_seqmodels.tokenization import CleaningConfig, train_tokenizer

FULL = os.environ.get("HFSM_TUTORIAL_FULL") == "1" or "--full" in sys.argv
set_seed(0)
OUTPUT = Path(tempfile.gettempdir()) / "hf_seqmodels-tutorials" / "05_embeddings_textcnn"  # text, figures
OUTPUT.mkdir(parents=True, exist_ok=True)


def shared_data(relative: str) -> Path:
    """A file of the shared datasets beside the repository (`../shared/data/...`), for the full-size run."""
    start = Path(globals().get("__file__", Path.cwd())).resolve()
    root = next((p for p in (start, *start.parents) if (p / "pyproject.toml").is_file()), Path.cwd())
    path = root.parent / "shared" / "data" / relative
    if not path.is_file():
        raise FileNotFoundError(f"--full needs {path} (the shared datasets beside the repository); "
                                "run without --full to use generated data")
    return path


# %% [markdown]
# ## Unlabelled text and labelled sentences

# %%
GOOD, BAD = "good great superb lovely fun brilliant".split(), "bad awful dull boring poor weak".split()
SEEN = {"good", "great", "superb", "bad", "awful", "dull"}  # the only opinion words of the labelled training set
NEUTRAL = "the film plot acting music story cast was is really quite very".split()


def review(rng: random.Random, opinions: list[str], count: int) -> str:
    words = rng.choices(NEUTRAL, k=5)
    position = rng.randrange(len(words) + 1)
    return " ".join(words[:position] + " and ".join(rng.sample(opinions, count)).split() + words[position:])


def labelled(n: int, seed: int, seen: bool) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        words = [w for w in (GOOD if i % 2 else BAD) if (w in SEEN) == seen]
        rows.append({"sentence": review(rng, words, 1), "label": i % 2})
    return rows


def sst2(name: str) -> list[dict]:
    with shared_data(f"sst2/{name}").open(encoding="utf-8") as f:
        return [{"sentence": row.get("sentence") or row["content"], "label": int(row["label"])}
                for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


corpus = OUTPUT / "unlabelled.txt"  # one sentence per line, as the embedding trainers read it
if FULL:
    data = {"train": sst2("train.tsv"), "test": sst2("dev.tsv")}
    wiki = [shared_data(f"wikitext2-heldout/{s}.txt").read_text(encoding="utf-8") for s in ("valid", "test")]
    corpus.write_text("\n".join([*wiki, *(row["sentence"] for row in data["train"])]), encoding="utf-8")
else:
    rng = random.Random(0)
    corpus.write_text("\n".join(review(rng, rng.choice([GOOD, BAD]), 2) for _ in range(3000)), encoding="utf-8")
    data = {"train": labelled(200, seed=1, seen=True), "test": labelled(200, seed=2, seen=False)}
print(corpus.read_text(encoding="utf-8").splitlines()[:2], data["train"][0], data["test"][0], sep="\n")

# %% [markdown]
# ## word2vec and GloVe
#
# Skip-gram with negative sampling (Mikolov et al. 2013) and GloVe (Pennington et al. 2014) on the same
# vocabulary; both return a `WordVectors` with `most_similar`, `analogy`, `save` and
# `embedding_matrix_for_vocab`.

# %%
size = 100 if FULL else 16
vectors = {
    "word2vec": train_word2vec(corpus, Word2VecConfig(architecture="skipgram", loss="negative_sampling",
                                                      vector_size=size, window=5 if FULL else 3, epochs=5,
                                                      sample=1e-4 if FULL else 0.0), min_count=5 if FULL else 1),
    "GloVe": train_glove(corpus, GloVeConfig(vector_size=size, window=10 if FULL else 4, x_max=10.0,
                                             epochs=25 if FULL else 40, batch_size=512 if FULL else 64),
                         min_count=5 if FULL else 1),
}
for name, wv in vectors.items():
    print(f"{name}: nearest to 'lovely': {[(w, round(s, 2)) for w, s in wv.most_similar('lovely', topn=4)]}")

# %% [markdown]
# ## TextCNN three ways
#
# A lower-cased word tokenizer gives the classifier its ids; `embedding_matrix_for_vocab` lays the vectors out in
# the tokenizer's order (words the vectors lack get small random rows). `embedding_mode="static"` keeps them
# frozen; `rand` learns its own embeddings from the labelled sentences alone.

# %%
tokenizer = train_tokenizer([corpus], kind="word", vocab_size=30_000 if FULL else 100, min_frequency=1,
                            cleaning=CleaningConfig(lowercase=True))
encoded = {split: [dict(tokenizer(row["sentence"], truncation=True, max_length=64), labels=row["label"])
                   for row in rows] for split, rows in data.items()}
collator = DataCollatorWithPadding(tokenizer)
shrink = {} if FULL else dict(num_filters=16, classifier_dropout=0.0)


def textcnn(vectors=None) -> TextCNNForSequenceClassification:
    torch.manual_seed(0)
    config = TextCNNConfig.from_preset("kim2014", vocab_size=len(tokenizer), embedding_size=size,
                                       pad_token_id=tokenizer.pad_token_id, id2label={0: "negative", 1: "positive"},
                                       embedding_mode="rand" if vectors is None else "static", **shrink)
    model = TextCNNForSequenceClassification(config)
    if vectors is not None:
        model.init_embeddings(vectors.embedding_matrix_for_vocab(tokenizer.get_vocab(),
                                                                 padding_idx=tokenizer.pad_token_id))
    return model


def train_and_test(model, epochs: int = 4 if FULL else 30, batch_size: int = 50) -> float:
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adadelta(trainable, lr=1.0) if FULL else torch.optim.Adam(trainable, lr=1e-2)
    rng = random.Random(0)
    model.train()
    for _ in range(epochs):
        order = rng.sample(encoded["train"], len(encoded["train"]))
        for start in range(0, len(order), batch_size):
            loss = model(**collator(order[start : start + batch_size])).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            model.apply_max_norm()  # Kim's l2 constraint on the output layer (none when the preset has none)
    model.eval()
    with torch.no_grad():
        batch = collator(encoded["test"])
        return (model(**batch).logits.argmax(-1) == batch["labels"]).float().mean().item()


accuracy = {"random (CNN-rand)": train_and_test(textcnn())}
for name, wv in vectors.items():
    accuracy[f"{name} (CNN-static)"] = train_and_test(textcnn(wv))
for name, value in accuracy.items():
    print(f"{name:22s} test accuracy {value:.3f}")

# %%
plt.figure(figsize=(6, 3))
plt.barh(list(accuracy), list(accuracy.values()))
plt.axvline(0.5, color="grey", linestyle="--", label="chance")
plt.xlabel("test accuracy")
plt.xlim(0, 1)
plt.legend()
plt.tight_layout()
plt.savefig(OUTPUT / "accuracy.png")
plt.show()
