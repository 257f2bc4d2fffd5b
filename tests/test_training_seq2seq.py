"""Sequence-to-sequence training: corpus reading, length batching, token-weighted losses, the loop.

The engine is model-agnostic, so the loop is checked here on a tiny built-in ``MarianMTModel``; the
package's own encoder-decoders are trained through the command line in their own tests.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import random
import shutil
from pathlib import Path

import pytest
import torch
from distributed_utils import launch_two_cpu_processes
from huggingface_hub import ModelCard
from model_test_utils import run_in_python_without_package
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, MarianConfig, MarianMTModel, pipeline

from hf_seqmodels.metrics import metric_path
from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.seq2seq.cli import MODEL_FAMILIES, attention_map
from hf_seqmodels.training.seq2seq.cli import main as seq2seq_main
from hf_seqmodels.training.seq2seq.data import (
    EncodedPairs,
    LengthBatches,
    ParallelCorpus,
    collate_pairs,
    encode_corpus,
    read_parallel_corpus,
    seq2seq_tokenizer,
)
from hf_seqmodels.training.seq2seq.trainer import (
    Seq2SeqTrainingArguments,
    corpus_bleu,
    ddp_token_weight,
    train_seq2seq,
)

WORDS = "alpha beta gamma delta eps zeta eta theta".split()


def reversal_corpus(n: int, seed: int) -> ParallelCorpus:
    rng = random.Random(seed)
    sources = [" ".join(rng.choices(WORDS, k=rng.randint(2, 5))) for _ in range(n)]
    return ParallelCorpus(sources, [" ".join(reversed(s.split())) for s in sources])


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    corpus = reversal_corpus(50, seed=0)
    path = tmp_path_factory.mktemp("tok") / "text.txt"
    path.write_text("\n".join(corpus.sources + corpus.targets))
    return train_tokenizer([str(path)], kind="word", vocab_size=40, min_frequency=1)


# --------------------------------------------------------------------------- reading


def test_reads_tsv_with_and_without_header_jsonl_and_line_aligned_files(tmp_path):
    (tmp_path / "h.tsv").write_text("id\ten\tde\n1\ta cat\teine Katze\n2\ta dog\tein Hund\n")
    with_header = read_parallel_corpus(str(tmp_path / "h.tsv"), source_field="en", target_field="de")
    assert with_header == ParallelCorpus(["a cat", "a dog"], ["eine Katze", "ein Hund"])
    (tmp_path / "n.tsv").write_text("a cat\teine Katze\na dog\tein Hund\n")
    assert read_parallel_corpus(str(tmp_path / "n.tsv"), source_field="0", target_field="1") == with_header
    records = [{"translation": {"en": s, "de": t}} for s, t in zip(with_header.sources, with_header.targets, strict=True)]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    nested = read_parallel_corpus(str(tmp_path / "d.jsonl"), source_field="translation.en",
                                  target_field="translation.de")
    assert nested == with_header
    with gzip.open(tmp_path / "x.en.gz", "wt") as f:
        f.write("a cat\na dog\n")
    (tmp_path / "x.de").write_text("eine Katze\nein Hund\n")
    aligned = read_parallel_corpus(source_file=str(tmp_path / "x.en.gz"), target_file=str(tmp_path / "x.de"))
    assert aligned == with_header


def test_reading_errors_name_the_problem(tmp_path):
    (tmp_path / "h.tsv").write_text("en\tde\na\tb\n")
    with pytest.raises(KeyError, match="no column 'source'"):
        read_parallel_corpus(str(tmp_path / "h.tsv"))
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    (tmp_path / "b.txt").write_text("eins\n")
    with pytest.raises(ValueError, match="2 sources and 1 targets"):
        read_parallel_corpus(source_file=str(tmp_path / "a.txt"), target_file=str(tmp_path / "b.txt"))
    with pytest.raises(ValueError, match=r"`train_file`=.*\.tsv or \.jsonl"):
        read_parallel_corpus(str(tmp_path / "data.parquet"))
    (tmp_path / "r.jsonl").write_text('{"en": "a"}\n')
    with pytest.raises(KeyError, match="record 1: no field 'de'"):
        read_parallel_corpus(str(tmp_path / "r.jsonl"), source_field="en", target_field="de")


# --------------------------------------------------------------------------- ids and batches


def test_encode_appends_eos_drops_empty_and_long_pairs_or_truncates(tokenizer):
    corpus = ParallelCorpus(["alpha beta", "", "alpha beta gamma delta"], ["beta alpha", "x", "delta gamma beta alpha"])
    pairs = encode_corpus(corpus, tokenizer, max_source_length=4, max_target_length=4)
    eos = tokenizer.eos_token_id
    assert len(pairs) == 1 and pairs.sources[0][-1] == eos and len(pairs.sources[0]) == 3
    assert tokenizer.decode(pairs.targets[0], skip_special_tokens=True) == "beta alpha"
    kept = encode_corpus(corpus, tokenizer, max_source_length=4, max_target_length=4, drop_longer=False)
    assert len(kept) == 2 and len(kept.sources[1]) == 4 and kept.sources[1][-1] == eos


def test_encoded_ids_come_from_the_tokenizer_and_equal_the_hand_appended_eos(tokenizer, tmp_path):
    """The tokenizer adds <eos> (the A <eos> template, as Marian/T5 do for text_target); the ids are the
    ones the hand-appended <eos> gave, for a causal-template tokenizer saved by earlier versions too."""
    corpus = ParallelCorpus(["alpha beta", "gamma", "alpha beta gamma delta"], ["beta alpha", "delta", "delta gamma"])
    eos = tokenizer.eos_token_id
    plain = lambda texts: tokenizer(texts, add_special_tokens=False)["input_ids"]  # noqa: E731
    expected = EncodedPairs([ids + [eos] for ids in plain(corpus.sources)], [ids + [eos] for ids in plain(corpus.targets)])
    tokenizer.save_pretrained(tmp_path / "old")
    saved = AutoTokenizer.from_pretrained(tmp_path / "old")  # "<bos> A" template, as saved before
    for tok in (tokenizer, saved):
        pairs = encode_corpus(corpus, tok)
        assert (pairs.sources, pairs.targets) == (expected.sources, expected.targets)
        assert tok("alpha")["input_ids"][0] == tok.bos_token_id  # the tokenizer given is left as it was
    switched = seq2seq_tokenizer(saved)
    assert switched(text_target="beta alpha")["input_ids"] == expected.targets[0]
    assert seq2seq_tokenizer(switched) is switched  # already A <eos>: used as it is
    cut = encode_corpus(corpus, saved, max_source_length=3, drop_longer=False)
    assert cut.sources[2] == expected.sources[2][:2] + [eos]


def test_collate_pads_sources_with_pad_and_labels_with_minus_100():
    batch = collate_pairs([[5, 6, 3], [7, 3]], [[8, 3], [9, 10, 11, 3]], pad_token_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 3], [7, 3, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"].tolist() == [[8, 3, -100, -100], [9, 10, 11, 3]]


def _pairs(n: int, seed: int = 0) -> EncodedPairs:
    rng = random.Random(seed)
    sources = [[rng.randint(4, 20) for _ in range(rng.randint(1, 12))] + [3] for _ in range(n)]
    targets = [[rng.randint(4, 20) for _ in range(rng.randint(1, 12))] + [3] for _ in range(n)]
    return EncodedPairs(sources, targets)


def _rows(batch) -> list[tuple]:
    return [tuple(row[m.bool()].tolist()) for row, m in zip(batch["input_ids"], batch["attention_mask"], strict=True)]


@pytest.mark.parametrize("sizes", [{"batch_size": 8}, {"max_tokens": 40}])
def test_length_batches_visit_every_pair_once_per_epoch_in_a_seeded_order(sizes):
    pairs = _pairs(100)
    batches = LengthBatches(pairs, pad_token_id=0, seed=7, **sizes)
    epoch0 = [batches.batch(i, epoch=0) for i in range(len(batches))]
    seen = sorted(r for b in epoch0 for r in _rows(b))
    assert seen == sorted(tuple(s) for s in pairs.sources)  # every pair exactly once
    for b in epoch0:
        padded = b["input_ids"].numel(), b["labels"].numel()
        if "max_tokens" in sizes:
            assert max(padded) <= sizes["max_tokens"]
        assert b["num_items_in_batch"] == int((b["labels"] != -100).sum())
    again = LengthBatches(pairs, pad_token_id=0, seed=7, **sizes)
    assert all(torch.equal(again.batch(i, 0)["input_ids"], epoch0[i]["input_ids"]) for i in range(len(batches)))
    assert any(not torch.equal(batches.batch(i, 1)["input_ids"], epoch0[i]["input_ids"]) for i in range(len(batches)))


def test_two_process_shards_make_up_the_global_batch_and_its_gradient():
    torch.manual_seed(0)
    pairs = _pairs(40, seed=1)
    whole = LengthBatches(pairs, pad_token_id=0, batch_size=10, seed=3)
    shards = [LengthBatches(pairs, pad_token_id=0, batch_size=10, seed=3, process_index=p, num_processes=2)
              for p in (0, 1)]
    embed, head = torch.nn.Embedding(21, 8), torch.nn.Linear(8, 21)

    def grad_of(batch, weight=1.0):
        """Gradient of a toy model's mean token loss, the way the loop weights it."""
        embed.zero_grad(), head.zero_grad()
        labels = batch["labels"]
        hidden = embed(batch["input_ids"]).mean(dim=1, keepdim=True)  # (B, 1, 8)
        logits = head(hidden).expand(-1, labels.shape[1], -1)  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        (loss * weight).backward()
        return head.weight.grad.clone()

    for index in range(len(whole)):
        full = whole.batch(index, epoch=2)
        parts = [s.batch(index, epoch=2) for s in shards]
        assert sorted(_rows(parts[0]) + _rows(parts[1])) == sorted(_rows(full))
        assert parts[0]["num_items_in_batch"] == parts[1]["num_items_in_batch"] == full["num_items_in_batch"]
        assert [p["num_tokens"] for p in parts] == [int((p["labels"] != -100).sum()) for p in parts]
        reference = grad_of(full)
        weights = [ddp_token_weight(int((p["labels"] != -100).sum()), p["num_items_in_batch"], 2) for p in parts]
        averaged = (grad_of(parts[0], weights[0]) + grad_of(parts[1], weights[1])) / 2  # what DDP computes
        torch.testing.assert_close(averaged, reference, rtol=1e-5, atol=1e-7)


def test_corpus_bleu_is_sacrebleu_through_the_shipped_evaluate_module():
    import evaluate
    import sacrebleu

    hypotheses, references = ["a small cat sat on the mat .", "the dog ran"], ["a small cat sat on the mat .",
                                                                             "a dog runs fast"]
    assert corpus_bleu(hypotheses, references) == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    assert corpus_bleu(["dog"], ["a small cat sat on the mat ."]) == pytest.approx(0.0)
    metric = evaluate.load(metric_path("hfsm_sacrebleu"))  # from the package folder, no Hub
    two_refs = metric.compute(predictions=["the big dog ran home ."],
                              references=[["a dog runs fast", "the big dog ran home ."]])
    assert two_refs["score"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="Invalid metric name 'bleu'"):
        metric_path("bleu")


# --------------------------------------------------------------------------- the loop


def tiny_marian(tokenizer) -> MarianMTModel:
    torch.manual_seed(0)
    config = MarianConfig(vocab_size=len(tokenizer), d_model=16, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                          decoder_ffn_dim=32, max_position_embeddings=32, pad_token_id=tokenizer.pad_token_id,
                          eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.bos_token_id,
                          forced_eos_token_id=None)
    return MarianMTModel(config)


def run_args(output_dir: Path, **overrides) -> Seq2SeqTrainingArguments:
    defaults = dict(output_dir=str(output_dir), num_train_epochs=2, per_device_train_batch_size=16,
                    optim="adamw_torch", learning_rate=1e-2, num_beams=2, generation_max_length=8,
                    plot=False, disable_tqdm=True, use_cpu=True, seed=5, save_strategy="epoch",
                    lr_scheduler_type="constant")
    return Seq2SeqTrainingArguments(**{**defaults, **overrides})


def test_training_lowers_the_loss_and_resume_ends_with_the_same_weights(tokenizer, tmp_path):
    train = encode_corpus(reversal_corpus(64, seed=1), tokenizer)
    valid_corpus = reversal_corpus(8, seed=2)
    valid = encode_corpus(valid_corpus, tokenizer, drop_longer=False)
    straight = train_seq2seq(tiny_marian(tokenizer), tokenizer, train, valid, valid_corpus.targets,
                             run_args(tmp_path / "a"))
    assert straight["steps"] == 8 and 0.0 <= straight["eval_bleu"] <= 100.0
    assert straight["eval_loss"] < straight["train_loss"]  # the mean over updates includes the first ones
    assert straight["eval_loss"] < math.log(len(tokenizer))  # better than a uniform guess
    assert (tmp_path / "a" / "model.safetensors").is_file() and (tmp_path / "a" / "README.md").is_file()

    train_seq2seq(tiny_marian(tokenizer), tokenizer, train, valid, valid_corpus.targets,
                  run_args(tmp_path / "b", max_steps=3))
    resumed = train_seq2seq(tiny_marian(tokenizer), tokenizer, train, valid, valid_corpus.targets,
                            run_args(tmp_path / "b", resume_from_checkpoint="latest"))
    assert resumed["steps"] == 8
    a, b = load_file(str(tmp_path / "a" / "model.safetensors")), load_file(str(tmp_path / "b" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_arguments_are_validated():
    with pytest.raises(ValueError, match=r"`num_beams`=0"):
        Seq2SeqTrainingArguments(output_dir="x", num_beams=0)
    with pytest.raises(ValueError, match=r"`max_tokens_per_batch`=0"):
        Seq2SeqTrainingArguments(output_dir="x", max_tokens_per_batch=0)
    with pytest.raises(ValueError, match=r"`max_tokens_per_batch`=3: expected at least the longest sentence"):
        LengthBatches(_pairs(10), pad_token_id=0, max_tokens=3)


@pytest.mark.parametrize("family", sorted(MODEL_FAMILIES))
def test_cli_trains_reports_bleu_and_writes_a_hub_ready_folder(family, tmp_path):
    run_cli(family, tmp_path, ["--dataset_label", "parallel"])
    out = tmp_path / "run"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json", "README.md",
                 "attention.png", "loss_curve.png", "validation_translations.tsv"):
        assert (out / name).is_file(), name
    lines = (out / "validation_translations.tsv").read_text().splitlines()
    assert len(lines) == 7 and lines[0] == "source\thypothesis\treference"
    card = (out / "README.md").read_text()
    assert "| validation_bleu |" in card and "](attention.png)" in card and "AutoModelForSeq2SeqLM" in card
    assert "tokens (see tokenizer.json) |" in card  # a cased vocabulary: not called "uncased"
    index = {(r.metric_type, r.dataset_split, r.dataset_name) for r in ModelCard.load(out / "README.md").data.eval_results}
    assert {("bleu", "validation", "parallel"), ("perplexity", "validation", "parallel")} <= index
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert reloaded.config.model_type == f"hfsm_{family}" and reloaded.config.decoder_start_token_id == 2
    # the saved tokenizer gives model-ready sentences, as transformers' translation tokenizers do: `A <eos>`
    saved = AutoTokenizer.from_pretrained(out)
    labels = saved(text_target=["a b c"])["input_ids"][0]
    assert labels[-1] == saved.eos_token_id and saved.bos_token_id not in labels
    assert saved(["a b c"])["input_ids"][0] == labels
    # the folder declares its pipelines and carries their code: they run by name where the package cannot be imported
    tasks = json.loads((out / "config.json").read_text())["custom_pipelines"]
    assert sorted(tasks) == ["hfsm-summarization", "hfsm-text2text-generation", "hfsm-translation"]
    kwargs = {"num_beams": 2, "max_new_tokens": 4, "min_new_tokens": 4}
    script = (f"import json\nfrom transformers import pipeline\ntranslate = pipeline('hfsm-translation', model={str(out)!r}, "
              f"trust_remote_code=True)\nprint(json.dumps(translate(['alpha beta gamma', 'delta eps'], **{kwargs!r})))")
    remote = json.loads(run_in_python_without_package(script, cwd=tmp_path).stdout.strip().splitlines()[-1])
    assert remote == pipeline("hfsm-translation", model=str(out), trust_remote_code=True)(
        ["alpha beta gamma", "delta eps"], **kwargs)


def test_cli_reports_a_model_without_attention_without_a_heatmap(tmp_path):
    run_cli("rnn_seq2seq", tmp_path, ["--config_overrides", "attention_score=none"])
    card = (tmp_path / "run" / "README.md").read_text()
    assert "| validation_bleu |" in card and not (tmp_path / "run" / "attention.png").exists()


def test_a_predict_only_run_of_a_saved_model_writes_into_a_new_folder(tmp_path):
    """--do_predict alone (as in transformers: no training) scores a saved model on the test pairs and writes its
    translations and results into an output folder that does not exist yet."""
    run_cli("transformer", tmp_path, [])
    predicted = tmp_path / "predict"
    results = seq2seq_main([
        "--model_name_or_path", str(tmp_path / "run"), "--train_file", str(tmp_path / "train.tsv"),
        "--validation_file", str(tmp_path / "valid.tsv"), "--test_file", str(tmp_path / "valid.tsv"),
        "--source_lang", "src", "--target_lang", "tgt", "--do_predict", "--output_dir", str(predicted),
        "--num_beams", "2", "--generation_max_length", "8", "--disable_tqdm"])
    assert "steps" not in results and 0.0 <= results["test_bleu"] <= 100.0
    assert len((predicted / "test_translations.tsv").read_text().splitlines()) == 7
    assert json.loads((predicted / "predict_results.json").read_text())["test_bleu"] == results["test_bleu"]


def run_cli(family: str, tmp_path, extra: list[str], corpus=reversal_corpus, max_steps: int = 3) -> dict:
    for split, n, seed in (("train", 48, 1), ("valid", 6, 2)):
        pairs = corpus(n, seed)
        rows = ["src\ttgt"] + [f"{s}\t{t}" for s, t in zip(pairs.sources, pairs.targets, strict=True)]
        (tmp_path / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "run"
    results = seq2seq_main([
        "--train_file", str(tmp_path / "train.tsv"), "--validation_file", str(tmp_path / "valid.tsv"),
        "--source_lang", "src", "--target_lang", "tgt", "--tokenizer_kind", "word", "--vocab_size", "40",
        "--min_frequency", "1", "--model_family", family, "--preset", "tiny", "--output_dir", str(out),
        "--max_steps", str(max_steps), "--per_device_train_batch_size", "16", "--optim", "adamw_torch",
        "--learning_rate", "1e-2", "--num_beams", "2", "--generation_max_length", "8", "--disable_tqdm", *extra,
    ])
    assert results["steps"] == max_steps and 0.0 <= results["validation_bleu"] <= 100.0
    return results


# --------------------------------------------------------------------------- separate vocabularies

SOURCE_WORDS = "alpha beta gamma delta eps zeta eta theta iota kappa lambda mu".split()
TARGET_WORDS = "eins zwei drei vier".split()  # 12 source words -> 4 target words: a larger source vocabulary


def two_vocabulary_corpus(n: int, seed: int) -> ParallelCorpus:
    """Source: 2-5 Greek letters; target: the letters reversed, each mapped to one of four German numbers."""
    rng = random.Random(seed)
    sources = [rng.choices(SOURCE_WORDS, k=rng.randint(2, 5)) for _ in range(n)]
    to_target = lambda word: TARGET_WORDS[SOURCE_WORDS.index(word) % len(TARGET_WORDS)]  # noqa: E731
    return ParallelCorpus([" ".join(s) for s in sources], [" ".join(map(to_target, reversed(s))) for s in sources])


def run_separate(family: str, tmp_path, extra: list[str] = (), max_steps: int = 2) -> dict:
    return run_cli(family, tmp_path, ["--separate_vocabularies", "--source_vocab_size", "30", *extra],
                   corpus=two_vocabulary_corpus, max_steps=max_steps)


@pytest.mark.parametrize("family", sorted(MODEL_FAMILIES))
def test_cli_with_separate_vocabularies_saves_both_tokenizers_resumes_and_translates(family, tmp_path, caplog):
    run_separate(family, tmp_path)
    out = tmp_path / "run"
    source_tokenizer = AutoTokenizer.from_pretrained(out, subfolder="source_tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(out, trust_remote_code=True)
    assert set(SOURCE_WORDS) <= set(source_tokenizer.get_vocab()) and not set(SOURCE_WORDS) & set(tokenizer.get_vocab())
    assert set(TARGET_WORDS) <= set(tokenizer.get_vocab()) and len(source_tokenizer) > len(tokenizer)
    model = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    assert (model.config.source_vocab_size, model.config.vocab_size) == (len(source_tokenizer), len(tokenizer))
    assert model.get_input_embeddings().num_embeddings == len(source_tokenizer)
    assert model.get_output_embeddings().out_features == len(tokenizer)
    card = (out / "README.md").read_text()
    assert 'subfolder="source_tokenizer"' in card and "separate vocabularies" in card
    for side, words in ((source_tokenizer, "kappa mu"), (tokenizer, "eins zwei")):  # both sides end in <eos>
        assert side(words)["input_ids"][-1] == side.eos_token_id == 3 and side.bos_token_id not in side(words)["input_ids"]

    # resuming reuses both saved tokenizers (nothing is trained again) and continues from the checkpoint
    with caplog.at_level(logging.INFO):
        resumed = run_separate(family, tmp_path, ["--resume_from_checkpoint", "latest"], max_steps=3)
    assert resumed["steps"] == 3 and not [r for r in caplog.records if "Trained a" in r.getMessage()]
    assert AutoTokenizer.from_pretrained(out, subfolder="source_tokenizer").get_vocab() == source_tokenizer.get_vocab()
    model = AutoModelForSeq2SeqLM.from_pretrained(out).eval()  # the resumed run's

    # each side is read with its own tokenizer: TSV hypotheses in target words, heatmap labels in source words
    rows = [line.split("\t") for line in (out / "validation_translations.tsv").read_text().splitlines()[1:]]
    assert all(set(hypothesis.split()) <= set(TARGET_WORDS) for _, hypothesis, _ in rows)
    source_ids = source_tokenizer("kappa mu alpha", add_special_tokens=False)["input_ids"] + [3]
    assert max(source_ids) >= len(tokenizer)  # ids only the source vocabulary has
    alignment = attention_map(model, tokenizer, source_ids, num_beams=2, source_tokenizer=source_tokenizer)
    assert alignment is not None and alignment[1][:3] == ["kappa", "mu", "alpha"]
    assert set(alignment[2]) <= set(TARGET_WORDS) | {"<eos>", ""}

    # the pipeline the folder declares finds source_tokenizer/ and encodes with it; without it, it says what is missing
    translate = pipeline("hfsm-translation", model=str(out), trust_remote_code=True)
    text = "kappa mu alpha"
    encoded = source_tokenizer(text, return_tensors="pt")
    expected = model.generate(**encoded, max_new_tokens=4, min_new_tokens=4)
    translation = translate(text, max_new_tokens=4, min_new_tokens=4)[0]["translation_text"]
    assert translation == tokenizer.decode(expected[0], skip_special_tokens=True)
    assert set(translation.split()) <= set(TARGET_WORDS)
    bare = tmp_path / "bare"
    shutil.copytree(out, bare, ignore=shutil.ignore_patterns("source_tokenizer", "checkpoint-*"))
    with pytest.raises(ValueError, match=r"separate source and target vocabularies .*pass `source_tokenizer=`"):
        pipeline("hfsm-translation", model=str(bare), trust_remote_code=True)
    explicit = pipeline("hfsm-translation", model=str(bare), source_tokenizer=str(out / "source_tokenizer"),
                        trust_remote_code=True)
    assert explicit(text, max_new_tokens=4, min_new_tokens=4)[0]["translation_text"] == translation


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(MODEL_FAMILIES))
def test_separate_vocabulary_folder_runs_its_card_snippet_without_the_package(family, tmp_path):
    """The saved folder loads with trust_remote_code in a Python without hf_seqmodels, as its model card shows."""
    run_separate(family, tmp_path)
    out = tmp_path / "run"
    snippet = (out / "README.md").read_text().split("```python\n")[1].split("```")[0]
    snippet = snippet.replace("<user>/<model-name>", str(out)).replace('"A man is riding a bike."', '"kappa mu alpha"')
    script = snippet + "print(type(model).__module__)\n"
    result = run_in_python_without_package(script, cwd=tmp_path)
    printed, module = result.stdout.strip().splitlines()[-2:]
    assert module.startswith("transformers_modules")
    assert all(set(t.split()) <= set(TARGET_WORDS) for t in json.loads(printed.replace("'", '"')))


def test_cli_refuses_tying_across_vocabularies_and_a_source_size_without_separate_vocabularies(tmp_path):
    with pytest.raises(ValueError, match=r"`share_encoder_decoder_embeddings`=True: expected False with separate"):
        run_separate("transformer", tmp_path, ["--config_overrides", "share_encoder_decoder_embeddings=true"])
    with pytest.raises(ValueError, match=r"`--source_vocab_size`=30: .*add --separate_vocabularies"):
        run_cli("rnn_seq2seq", tmp_path, ["--source_vocab_size", "30"])


#: DDP for both families; FSDP2 and ZeRO-2 for the Transformer only, the cheaper of the two. The sharded updates of a
#: recurrent stack are test_training_lm's (a GRU LM under both); what only an encoder-decoder adds to them, layers of
#: two kinds wrapped, embeddings shared between encoder, decoder and head, BLEU generation after training, is here.
TWO_PROCESS_RUNS = [("ddp", "rnn_seq2seq"), ("ddp", "transformer"), ("fsdp", "transformer"),
                    ("deepspeed", "transformer")]


@pytest.mark.parametrize("sharding, family", [pytest.param(s, f, id=f"{f}-{s}") for s, f in TWO_PROCESS_RUNS])
@pytest.mark.slow
def test_two_cpu_processes_match_one_process(sharding, family, tokenizer, tmp_path):
    """2 gloo processes with 8 pairs each make the same updates as 1 process with 16 (no dropout)."""
    if sharding == "deepspeed":
        pytest.importorskip("deepspeed")
    for split, n, seed in (("train", 48, 1), ("valid", 6, 2)):
        pairs = reversal_corpus(n, seed)
        rows = ["src\ttgt"] + [f"{s}\t{t}" for s, t in zip(pairs.sources, pairs.targets, strict=True)]
        (tmp_path / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    tokenizer.save_pretrained(tmp_path / "tok")
    common = ["--train_file", str(tmp_path / "train.tsv"), "--validation_file", str(tmp_path / "valid.tsv"),
              "--source_lang", "src", "--target_lang", "tgt", "--tokenizer_name", str(tmp_path / "tok"),
              "--model_family", family, "--preset", "tiny", "--num_train_epochs", "2", "--max_steps", "5",
              "--optim", "adamw_torch", "--learning_rate", "1e-2", "--max_grad_norm", "1.0", "--num_beams", "1",
              "--generation_max_length", "4", "--logging_steps", "1", "--disable_tqdm", "--no_plot"]
    if family == "transformer":
        common += ["--config_overrides", "dropout=0.0,attention_dropout=0.0,activation_dropout=0.0"]
    launch_two_cpu_processes("train_seq2seq.py", [*common, "--output_dir", str(tmp_path / "two"),
                                                  "--per_device_train_batch_size", "8"],
                             fsdp=sharding == "fsdp", deepspeed=sharding == "deepspeed")
    one = seq2seq_main([*common, "--output_dir", str(tmp_path / "one"), "--per_device_train_batch_size", "16"])
    two = json.loads((tmp_path / "two" / "training_history.json").read_text())
    single = json.loads((tmp_path / "one" / "training_history.json").read_text())
    assert one["steps"] == 5
    assert not (tmp_path / "one" / "attention.png").exists()  # --no_plot: no pictures
    a, b = load_file(str(tmp_path / "two" / "model.safetensors")), load_file(str(tmp_path / "one" / "model.safetensors"))
    assert a.keys() == b.keys()
    # A key bias adds q·b to every score of a query, which the softmax cancels: its true gradient is 0 and
    # Adam turns the rounding noise left in its place into full-size steps that differ between the runs.
    for name in (n for n in b if not n.endswith("k_proj.bias")):
        torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=1e-4)
    curve = lambda history: [r["train_loss"] for r in history if "train_loss" in r]  # noqa: E731
    assert len(curve(single)) == 5 and curve(single)[-1] < curve(single)[0]  # the updates did something
    torch.testing.assert_close(torch.tensor(curve(two)), torch.tensor(curve(single)), atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_two_processes_with_a_tracker_finish_the_final_report(tokenizer, tmp_path):
    """With --report_to the trackers are finished, not the whole run ended: accelerate's end_training() also
    destroys the process group, and the report's BLEU decoding after training gathers across processes."""
    for split, n, seed in (("train", 32, 1), ("valid", 6, 2)):
        pairs = reversal_corpus(n, seed)
        rows = ["src\ttgt"] + [f"{s}\t{t}" for s, t in zip(pairs.sources, pairs.targets, strict=True)]
        (tmp_path / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    tokenizer.save_pretrained(tmp_path / "tok")
    out = tmp_path / "two"
    launch_two_cpu_processes("train_seq2seq.py", [
        "--train_file", str(tmp_path / "train.tsv"), "--validation_file", str(tmp_path / "valid.tsv"),
        "--source_lang", "src", "--target_lang", "tgt", "--tokenizer_name", str(tmp_path / "tok"),
        "--preset", "tiny", "--max_steps", "3", "--per_device_train_batch_size", "8", "--num_beams", "2",
        "--generation_max_length", "4", "--logging_steps", "1", "--disable_tqdm", "--no_plot",
        "--report_to", "tensorboard", "--output_dir", str(out)])
    assert len((out / "validation_translations.tsv").read_text().splitlines()) == 1 + 6
    assert "validation_bleu" in (out / "README.md").read_text()
    assert list((out / "runs").rglob("events.out.tfevents.*"))  # the tracker wrote the run


def test_a_parallel_file_of_another_kind_is_refused_by_both_readers(tmp_path):
    from hf_seqmodels.training.seq2seq.data import stream_parallel_corpus

    for read in (read_parallel_corpus, stream_parallel_corpus):
        with pytest.raises(ValueError, match=r"`train_file`='pairs.csv'.*\.tsv or \.jsonl"):
            read("pairs.csv")


# --------------------------------------------------------------------------- token files


def test_length_batches_read_the_same_batches_from_token_files(tokenizer, tmp_path):
    from hf_seqmodels.training.seq2seq.token_pairs import seq2seq_token_pairs

    corpus = reversal_corpus(90, seed=4)
    (tmp_path / "src.txt").write_text("\n".join(corpus.sources) + "\n")
    (tmp_path / "tgt.txt").write_text("\n".join(corpus.targets) + "\n")
    mapped = seq2seq_token_pairs(tokenizer, source_file=str(tmp_path / "src.txt"),
                                 target_file=str(tmp_path / "tgt.txt"), max_pairs=80, cache_dir=tmp_path / "cache")
    in_ram = encode_corpus(ParallelCorpus(corpus.sources[:80], corpus.targets[:80]), tokenizer)
    assert mapped.pairs_read == 80 and mapped.targets[0][-1] == tokenizer.eos_token_id  # targets end with <eos>
    for sizes in ({"batch_size": 8}, {"max_tokens": 30}):
        for rank in range(2):
            options = dict(pad_token_id=0, seed=3, process_index=rank, num_processes=2, **sizes)
            ours, reference = LengthBatches(mapped, **options), LengthBatches(in_ram, **options)
            assert len(ours) == len(reference)
            for epoch in range(2):
                for index in range(len(ours)):
                    got, want = ours.batch(index, epoch), reference.batch(index, epoch)
                    assert got.keys() == want.keys()
                    assert all(torch.equal(got[k], want[k]) if torch.is_tensor(got[k]) else got[k] == want[k]
                               for k in got)


def test_cli_encodes_training_pairs_once_and_resumes_exactly_from_the_token_files(tokenizer, tmp_path, monkeypatch):
    from hf_seqmodels.training.seq2seq import token_pairs

    tokenizer.save_pretrained(tmp_path / "tok")
    cache = tmp_path / "cache"
    for split, n, seed in (("train", 48, 1), ("valid", 6, 2)):
        pairs = reversal_corpus(n, seed)
        (tmp_path / f"{split}.src").write_text("\n".join(pairs.sources) + "\n")
        (tmp_path / f"{split}.tgt").write_text("\n".join(pairs.targets) + "\n")

    def run(name: str, *extra: str) -> dict:
        return seq2seq_main([
            "--train_source_file", str(tmp_path / "train.src"), "--train_target_file", str(tmp_path / "train.tgt"),
            "--validation_source_file", str(tmp_path / "valid.src"),
            "--validation_target_file", str(tmp_path / "valid.tgt"), "--tokenizer_name", str(tmp_path / "tok"),
            "--cache_dir", str(cache), "--model_family", "rnn_seq2seq", "--preset", "tiny",
            "--output_dir", str(tmp_path / name), "--max_steps", "4", "--save_steps", "2",
            "--per_device_train_batch_size", "16", "--optim", "adamw_torch", "--learning_rate", "1e-2",
            "--num_beams", "1", "--generation_max_length", "8", "--disable_tqdm", "--no_plot", *extra])

    straight = run("straight")
    folders = list(cache.iterdir())
    assert [f.name[:8] for f in folders] == ["seq2seq-"]
    monkeypatch.setattr(token_pairs, "_encode_batch", lambda *a, **k: pytest.fail("encoded the pairs again"))
    run("resumed", "--max_steps", "2")  # stopped after 2 of the 4 steps, then resumed
    resumed = run("resumed", "--resume_from_checkpoint", "latest")
    assert resumed["steps"] == straight["steps"] == 4
    assert list(cache.iterdir()) == folders  # both runs mapped the files of the first
    assert resumed["train_loss"] == pytest.approx(straight["train_loss"], rel=1e-6)
    a = load_file(str(tmp_path / "straight" / "model.safetensors"))
    b = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_token_files_of_another_tokenizer_or_limit_are_prepared_anew(tokenizer, tmp_path):
    from hf_seqmodels.training.seq2seq.token_pairs import seq2seq_token_pairs

    corpus = reversal_corpus(30, seed=6)
    (tmp_path / "pairs.tsv").write_text("src\ttgt\n" + "".join(f"{s}\t{t}\n" for s, t in zip(
        corpus.sources, corpus.targets, strict=True)))
    options = dict(source_field="src", target_field="tgt", cache_dir=tmp_path / "cache")
    first = seq2seq_token_pairs(tokenizer, str(tmp_path / "pairs.tsv"), **options)
    assert seq2seq_token_pairs(tokenizer, str(tmp_path / "pairs.tsv"), **options).folder == first.folder
    other = train_tokenizer([str(tmp_path / "pairs.tsv")], kind="word", vocab_size=60, min_frequency=1)
    changed = seq2seq_token_pairs(other, str(tmp_path / "pairs.tsv"), **options)
    assert changed.folder != first.folder
    assert list(changed.sources) == encode_corpus(corpus, other).sources != list(first.sources)
    limited = seq2seq_token_pairs(tokenizer, str(tmp_path / "pairs.tsv"), max_pairs=10, **options)
    assert limited.folder != first.folder and len(limited) == limited.pairs_read == 10
    with pytest.raises(ValueError, match="`max_pairs`=0"):
        seq2seq_token_pairs(tokenizer, str(tmp_path / "pairs.tsv"), max_pairs=0, **options)
