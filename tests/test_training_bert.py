"""BERT pretraining data and loop: documents, NSP pairs, dynamic 80/10/10 masking, exact resume."""

from __future__ import annotations

import json
import logging
import math
import random

import numpy as np
import pytest
import torch
from distributed_utils import launch_two_cpu_processes
from huggingface_hub import ModelCard
from model_test_utils import run_in_python_without_package
from safetensors.torch import load_file
from transformers import AutoModelForPreTraining, AutoTokenizer, pipeline

from hf_seqmodels import BertConfig, BertForPreTraining
from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.bert.cli import main as bert_main
from hf_seqmodels.training.bert.data import (
    SpecialIds,
    create_pretraining_examples,
    mask_tokens,
    special_tokens_mask,
    split_documents,
    tokenize_documents,
    wordpiece_word_starts,
)
from hf_seqmodels.training.bert.trainer import BertPretrainingArguments, MaskedPairBatches, pretrain_bert

SPECIAL = SpecialIds(cls=5, sep=6, mask=7, pad=0)
WORDS = "the cat dog sat ran on a mat hill under tree big small red blue".split()


def synthetic_documents(n_docs: int, seed: int = 0) -> list[list[list[int]]]:
    rng = random.Random(seed)
    return [[[rng.randint(10, 99) for _ in range(rng.randint(3, 9))] for _ in range(rng.randint(4, 10))]
            for _ in range(n_docs)]


def text_corpus(n_docs: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    docs = [" ".join(" ".join(rng.choices(WORDS, k=rng.randint(3, 8))).capitalize() + "."
                     for _ in range(rng.randint(3, 6))) for _ in range(n_docs)]
    return "\n\n".join(docs) + "\n"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "corpus.txt"
    path.write_text(text_corpus(40))
    return train_tokenizer([str(path)], kind="wordpiece", vocab_size=80, min_frequency=1, add_bert_special_tokens=True)


def test_split_documents_by_blank_lines_and_by_wikitext_titles():
    assert split_documents("One. Two!\nThree?\n\nFour.\n") == [["One.", "Two!", "Three?"], ["Four."]]
    wiki = " = Alpha = \n\n First line. Second one.\n\n = = Section = = \n\n More text.\n = Beta = \n\n Last.\n"
    assert split_documents(wiki) == [["First line.", "Second one.", "More text."], ["Last."]]


def test_pairs_are_laid_out_as_cls_a_sep_b_sep_and_nsp_is_balanced():
    documents = synthetic_documents(60)
    examples = create_pretraining_examples(documents, SPECIAL, max_seq_length=32, short_seq_prob=0.1, seed=1)
    assert len(examples) > 100
    for e in examples:
        ids, types = e["input_ids"], e["token_type_ids"]
        assert len(ids) <= 32 and ids[0] == SPECIAL.cls and ids[-1] == SPECIAL.sep and ids.count(SPECIAL.sep) == 2
        first_sep = ids.index(SPECIAL.sep)
        assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        assert first_sep > 1 and len(ids) - first_sep > 2  # A and B are not empty
    is_next = [e for e in examples if e["next_sentence_label"] == 0]
    share = len(is_next) / len(examples)
    assert 0.4 < share < 0.6, share  # 50 % IsNext (a one-sentence chunk can only get a random B)
    # IsNext: A then B is a run of one document (unless truncation cut between them); NotNext: never
    flat = [" " + " ".join(str(t) for sentence in doc for t in sentence) + " " for doc in documents]

    def contiguous(e):
        sep = e["input_ids"].index(SPECIAL.sep)
        run = " " + " ".join(str(t) for t in e["input_ids"][1:sep] + e["input_ids"][sep + 1 : -1]) + " "
        return any(run in doc for doc in flat)

    assert sum(map(contiguous, is_next)) / len(is_next) > 0.5
    not_next = [e for e in examples if e["next_sentence_label"] == 1]
    assert sum(map(contiguous, not_next)) / len(not_next) < 0.05


def test_masking_statistics_follow_15_and_80_10_10_and_never_touch_specials_or_padding():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(10, 1000, (400, 64), generator=generator)
    ids[:, 0], ids[:, 30], ids[:, -8:] = SPECIAL.cls, SPECIAL.sep, SPECIAL.pad
    special = special_tokens_mask(ids, SPECIAL)
    masked, labels = mask_tokens(ids, special, vocab_size=1000, mask_token_id=SPECIAL.mask, generator=generator)
    chosen = labels != -100
    assert not chosen[special].any() and torch.equal(labels[chosen], ids[chosen])
    assert chosen.sum() / (~special).sum() == pytest.approx(0.15, abs=0.01)
    became_mask = (masked == SPECIAL.mask) & chosen
    unchanged = (masked == ids) & chosen
    assert became_mask.sum() / chosen.sum() == pytest.approx(0.8, abs=0.02)
    assert unchanged.sum() / chosen.sum() == pytest.approx(0.1 + 0.1 / 1000, abs=0.02)  # kept, or random = same
    assert torch.equal(masked[~chosen], ids[~chosen])


def test_whole_word_masking_masks_every_piece_of_a_word_together(tokenizer):
    text = ["the catdog sat undertree on a bigmat"] * 64  # unseen words: split into ## pieces
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    pieces = [t for t in tokenizer.convert_ids_to_tokens(ids[0]) if t.startswith("##")]
    assert pieces, "the tiny vocabulary should split some words into pieces"
    starts = wordpiece_word_starts(ids, tokenizer)
    special = special_tokens_mask(ids, SpecialIds.of(tokenizer))
    _, labels = mask_tokens(ids, special, len(tokenizer), tokenizer.mask_token_id,
                            generator=torch.Generator().manual_seed(3), word_starts=starts, mlm_probability=0.3)
    word = torch.cumsum(starts.long(), dim=1)
    for row in range(ids.shape[0]):
        for w in word[row].unique():
            in_word = (word[row] == w) & ~special[row]
            picked = (labels[row] != -100)[in_word]
            assert picked.all() or not picked.any()


def test_batches_are_seeded_and_two_processes_split_one_global_batch(tokenizer):
    documents = tokenize_documents(split_documents(text_corpus(30, seed=2)), tokenizer)
    examples = create_pretraining_examples(documents, SpecialIds.of(tokenizer), max_seq_length=32, seed=0)
    whole = MaskedPairBatches(examples, tokenizer, len(tokenizer), batch_size=8, seed=4)
    again = MaskedPairBatches(examples, tokenizer, len(tokenizer), batch_size=8, seed=4)
    assert torch.equal(whole.batch(2, epoch=1)["input_ids"], again.batch(2, epoch=1)["input_ids"])
    assert not torch.equal(whole.batch(2, epoch=1)["labels"], whole.batch(2, epoch=2)["labels"])
    halves = [MaskedPairBatches(examples, tokenizer, len(tokenizer), batch_size=8, seed=4, process_index=p,
                                num_processes=2).batch(2, epoch=1) for p in (0, 1)]
    full = whole.batch(2, epoch=1)
    assert torch.equal(torch.cat([halves[0]["labels"], halves[1]["labels"]]),
                       torch.cat([full["labels"][0::2], full["labels"][1::2]]))
    assert halves[0]["num_masked"] == full["num_masked"] == int((full["labels"] != -100).sum())
    for half in halves:  # this process's counts, made on the CPU
        assert half["local_masked"] == int((half["labels"] != -100).sum())
        assert half["num_tokens"] == int(half["attention_mask"].sum())


def test_batches_carry_masked_positions_only_when_the_loss_uses_them(tokenizer):
    """Without ``masked_positions_only`` the batches carry no ``masked_lm_positions`` (nothing finds them); with it
    they carry them (padded to a recurring size), the other tensors are the same and so is the loss."""
    documents = tokenize_documents(split_documents(text_corpus(30, seed=2)), tokenizer)
    examples = create_pretraining_examples(documents, SpecialIds.of(tokenizer), max_seq_length=32, seed=0)
    plain, positioned = (MaskedPairBatches(examples, tokenizer, len(tokenizer), batch_size=8, seed=4,
                                           pad_to_multiple_of=8, masked_positions_only=only).batch(2, epoch=1)
                         for only in (False, True))
    assert "masked_lm_positions" not in plain
    positions = positioned.pop("masked_lm_positions")
    labelled = (plain["labels"].flatten() != -100).nonzero().squeeze(1)
    assert len(positions) % 8 == 0 and set(labelled.tolist()) <= set(positions.tolist())
    assert plain.keys() == positioned.keys()
    assert all(torch.equal(plain[k], positioned[k]) if torch.is_tensor(plain[k]) else plain[k] == positioned[k]
               for k in plain)
    tensors = {k: v for k, v in plain.items() if torch.is_tensor(v)}
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.from_preset("tiny", vocab_size=len(tokenizer), max_position_embeddings=32))
    model.eval()
    with torch.no_grad():
        full = model(**tensors, masked_positions_only=False)
        gathered = model(**tensors, masked_positions_only=True, masked_lm_positions=positions)
    torch.testing.assert_close(gathered.loss, full.loss)
    torch.testing.assert_close(gathered.mlm_loss, full.mlm_loss)


def test_pretraining_lowers_the_loss_and_resumes_exactly(tokenizer, tmp_path):
    documents = tokenize_documents(split_documents(text_corpus(60, seed=5)), tokenizer)
    examples = create_pretraining_examples(documents, SpecialIds.of(tokenizer), max_seq_length=32, seed=0)
    train, held_out = examples[: len(examples) - 32], examples[-32:]

    def model():
        torch.manual_seed(0)
        return BertForPreTraining(BertConfig.from_preset("tiny", vocab_size=len(tokenizer), max_position_embeddings=32))

    def args(out, **kw):
        return BertPretrainingArguments(output_dir=str(out), num_train_epochs=2, per_device_train_batch_size=16,
                                        optim="adamw_torch", learning_rate=3e-3, plot=False, disable_tqdm=True,
                                        use_cpu=True, seed=3, save_strategy="epoch", lr_scheduler_type="constant",
                                        **kw)

    straight = pretrain_bert(model(), tokenizer, train, held_out, args(tmp_path / "a"))
    history = json.loads((tmp_path / "a" / "training_history.json").read_text())
    evals = [r["eval_loss"] for r in history if "eval_loss" in r]
    assert len(evals) == 2 and evals[1] < evals[0] < math.log(len(tokenizer))  # below a uniform guess
    assert 0.0 <= straight["eval_mlm_accuracy"] <= 1.0 and 0.0 <= straight["eval_nsp_accuracy"] <= 1.0
    pretrain_bert(model(), tokenizer, train, held_out, args(tmp_path / "b", max_steps=3))
    resumed = pretrain_bert(model(), tokenizer, train, held_out, args(tmp_path / "b", resume_from_checkpoint="latest"))
    assert resumed["steps"] == straight["steps"]
    a, b = load_file(str(tmp_path / "a" / "model.safetensors")), load_file(str(tmp_path / "b" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_compiled_pretraining_step_is_one_graph_and_trains_like_eager(tokenizer, tmp_path, caplog):
    """The masked-LM loss at the masked positions only (gathered at the positions the batches carry) stays inside
    the one graph the step compiles to; aot_eager captures the graphs inductor would compile, without its codegen."""
    # earlier tests of this process compiled the same forward methods: past dynamo's recompile limit a
    # fullgraph compile finds no frame to compile, so this one starts from an empty cache, as a run does
    torch._dynamo.reset()
    caplog.set_level(logging.INFO, logger="hf_seqmodels")
    documents = tokenize_documents(split_documents(text_corpus(30, seed=5)), tokenizer)
    examples = create_pretraining_examples(documents, SpecialIds.of(tokenizer), max_seq_length=32, seed=0)
    train, held_out = examples[: len(examples) - 16], examples[-16:]
    results = {}
    for name, compiled in (("eager", {}), ("compiled", {"torch_compile": True, "torch_compile_backend": "aot_eager"})):
        torch.manual_seed(0)
        config = BertConfig.from_preset("tiny", vocab_size=len(tokenizer), max_position_embeddings=32,
                                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        results[name] = pretrain_bert(BertForPreTraining(config), tokenizer, train, held_out, BertPretrainingArguments(
            output_dir=str(tmp_path / name), max_steps=3, per_device_train_batch_size=8, optim="adamw_torch",
            learning_rate=3e-3, plot=False, disable_tqdm=True, use_cpu=True, save_strategy="no", **compiled))
    assert results["compiled"]["train_loss"] == pytest.approx(results["eager"]["train_loss"], rel=1e-5)
    assert results["compiled"]["eval_loss"] == pytest.approx(results["eager"]["eval_loss"], rel=1e-5)
    assert "aot_eager, one graph" in caplog.text


def test_pretrain_bert_command_trains_a_tokenizer_and_writes_a_loadable_model(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text_corpus(40, seed=7))
    out = tmp_path / "run"
    results = bert_main(["--train_file", str(corpus), "--preset", "tiny", "--vocab_size", "80", "--min_frequency", "1",
                         "--max_seq_length", "32", "--config_overrides", "max_position_embeddings=32",
                         "--validation_split_percentage", "20", "--per_device_train_batch_size", "8",
                         "--max_steps", "4", "--optim", "adamw_torch", "--learning_rate", "1e-3", "--lowercase",
                         "--output_dir", str(out), "--disable_tqdm", "--use_cpu"])
    assert results["steps"] == 4 and 0.0 <= results["eval_nsp_accuracy"] <= 1.0
    model = AutoModelForPreTraining.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert type(model).__name__ == "BertForPreTraining" and tokenizer.mask_token == "[MASK]"
    card = (out / "README.md").read_text()
    assert "AutoModelForPreTraining.from_pretrained" in card and "AutoModelForCausalLM" not in card
    assert "pipeline_tag: fill-mask" in card and "| eval_nsp_accuracy |" in card and "| eval_mlm_accuracy |" in card
    assert (out / "self_attention.png").is_file() and "](self_attention.png)" in card
    assert "| hardware | 1 process on CPU (" in card
    assert "tokens (uncased, see tokenizer.json) |" in card  # --lowercase
    index = {r.metric_name: r.metric_value for r in ModelCard.load(out / "README.md").data.eval_results}
    assert index["Next-sentence prediction accuracy"] == round(results["eval_nsp_accuracy"], 4)
    pair = tokenizer("the cat sat", "a dog ran")
    assert tokenizer("The Cat SAT")["input_ids"] == pair["input_ids"][:5]  # an uncased vocabulary (--lowercase)
    assert pair["token_type_ids"].count(1) == len(tokenizer("a dog ran", add_special_tokens=False)["input_ids"]) + 1
    # no pipeline of ours runs the pre-training head (no custom_pipelines, never an empty one); fill-mask runs by
    # name from the folder where the package cannot be imported
    assert "custom_pipelines" not in json.loads((out / "config.json").read_text())
    script = (f"import json\nfrom transformers import pipeline\nfill = pipeline('fill-mask', model={str(out)!r}, "
              "trust_remote_code=True)\nprint(json.dumps([(r['token'], round(r['score'], 5)) for r in fill('the cat "
              "[MASK] on a mat.')]))")
    remote = json.loads(run_in_python_without_package(script, cwd=tmp_path).stdout.strip().splitlines()[-1])
    local = pipeline("fill-mask", model=str(out), trust_remote_code=True)("the cat [MASK] on a mat.")
    assert [token for token, _ in remote] == [r["token"] for r in local] and len(remote) == 5
    assert [score for _, score in remote] == pytest.approx([r["score"] for r in local], abs=1e-5)
    with pytest.raises(ValueError, match="`--max_seq_length`=64: the model has max_position_embeddings=32"):
        bert_main(["--train_file", str(corpus), "--preset", "tiny", "--max_seq_length", "64", "--vocab_size", "80",
                   "--min_frequency", "1", "--config_overrides", "max_position_embeddings=32",
                   "--output_dir", str(tmp_path / "bad"), "--disable_tqdm"])


def test_a_validation_file_and_sample_limits_as_in_run_mlm(tmp_path, caplog):
    corpus, held = tmp_path / "corpus.txt", tmp_path / "held.txt"
    corpus.write_text(text_corpus(30, seed=3))
    held.write_text(text_corpus(6, seed=4))
    flags = ["--train_file", str(corpus), "--validation_file", str(held), "--preset", "tiny", "--vocab_size", "80",
             "--min_frequency", "1", "--max_seq_length", "32", "--config_overrides", "max_position_embeddings=32",
             "--per_device_train_batch_size", "4", "--num_train_epochs", "1", "--optim", "adamw_torch",
             "--output_dir", str(tmp_path / "run"), "--disable_tqdm", "--use_cpu", "--save_strategy", "no"]
    with caplog.at_level(logging.INFO):
        results = bert_main([*flags, "--max_train_samples", "12", "--max_eval_samples", "3"])
    assert results["steps"] == 3  # 12 pairs in batches of 4
    assert "30 documents, 12 training and 3 held-out sentence pairs" in caplog.text  # every document trains
    for bad, named in ((["--max_train_samples", "0"], "`--max_train_samples`=0"),
                       (["--dataset_name", "x"], "`--validation_file`")):
        args = [*flags, *bad] if bad[0] != "--dataset_name" else [*flags[2:4], *bad, *flags[4:]]
        with pytest.raises(ValueError, match=named):
            bert_main(args)


@pytest.mark.slow
def test_two_cpu_processes_match_one_process(tokenizer, tmp_path):
    """2 gloo processes with 4 sentence pairs each make the same updates as 1 process with 8 (no dropout):
    the masks are drawn per global batch and the losses are normalised over the whole global batch. DDP only:
    BERT pretraining under FSDP2 and ZeRO-2 is test_gradient_accumulation's two-process test (the same run with
    2 batches per update), and one batch per update under them is test_training_lm's."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text_corpus(40, seed=7))
    tokenizer.save_pretrained(tmp_path / "tok")
    common = ["--train_file", str(corpus), "--tokenizer_name", str(tmp_path / "tok"), "--preset", "tiny",
              "--max_seq_length", "32", "--config_overrides",
              "max_position_embeddings=32,hidden_dropout_prob=0.0,attention_probs_dropout_prob=0.0",
              "--validation_split_percentage", "20", "--max_steps", "4", "--logging_steps", "1",
              "--optim", "adamw_torch", "--learning_rate", "1e-3", "--disable_tqdm", "--no_plot"]
    launch_two_cpu_processes("pretrain_bert.py", [*common, "--output_dir", str(tmp_path / "two"),
                                                  "--per_device_train_batch_size", "4"])
    one = bert_main([*common, "--output_dir", str(tmp_path / "one"), "--per_device_train_batch_size", "8",
                     "--use_cpu"])
    assert one["steps"] == 4
    a, b = load_file(str(tmp_path / "two" / "model.safetensors")), load_file(str(tmp_path / "one" / "model.safetensors"))
    assert a.keys() == b.keys()
    # A key bias adds q·b to every score of a query, which the softmax cancels: its true gradient is 0 and
    # Adam turns the rounding noise left in its place into full-size steps that differ between the runs.
    for name in (n for n in b if not n.endswith("k_proj.bias")):
        torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=1e-4)
    curve = lambda run: [r["train_loss"] for r in json.loads((tmp_path / run / "training_history.json").read_text())  # noqa: E731
                         if "train_loss" in r]
    assert len(curve("one")) == 4 and curve("one")[-1] < curve("one")[0]  # the updates did something
    torch.testing.assert_close(torch.tensor(curve("two")), torch.tensor(curve("one")), atol=1e-5, rtol=1e-5)


def test_continued_pretraining_starts_from_the_model_and_says_so_on_its_card(tokenizer, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text_corpus(40, seed=7))
    tokenizer.save_pretrained(tmp_path / "tok")
    common = lambda lr: ["--train_file", str(corpus), "--max_seq_length", "32", "--max_steps", "2",  # noqa: E731
                         "--optim", "adamw_torch", "--learning_rate", lr, "--per_device_train_batch_size", "4",
                         "--use_cpu", "--disable_tqdm", "--no_plot"]
    bert_main([*common("1e-3"), "--tokenizer_name", str(tmp_path / "tok"), "--preset", "tiny",
               "--config_overrides", "max_position_embeddings=32", "--output_dir", str(tmp_path / "base")])
    base = load_file(str(tmp_path / "base" / "model.safetensors"))
    # with updates of ~0 the continued model keeps the base weights: it did start from them
    bert_main([*common("1e-12"), "--model_name_or_path", str(tmp_path / "base"),
               "--output_dir", str(tmp_path / "continued")])
    continued = load_file(str(tmp_path / "continued" / "model.safetensors"))
    for name in base:
        torch.testing.assert_close(continued[name], base[name], atol=1e-6, rtol=0)
    card = (tmp_path / "continued" / "README.md").read_text()
    assert "Training continued from the weights of `base`." in card
    assert "continued from" not in (tmp_path / "base" / "README.md").read_text()


# --------------------------------------------------------------------------- token files


def walk_over_id_lists(documents: list[list[list[int]]], special: SpecialIds, max_seq_length: int,
                       short_seq_prob: float, seed: int) -> list[dict]:
    """The reference: Google's create_pretraining_data.py walk, on lists of ids (our former implementation)."""
    rng, max_tokens, examples = random.Random(seed), max_seq_length - 3, []
    for index, document in enumerate(documents):
        target = rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens
        chunk, length, i = [], 0, 0
        while i < len(document):
            chunk.append(document[i])
            length += len(document[i])
            if i == len(document) - 1 or length >= target:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                a = [t for sentence in chunk[:a_end] for t in sentence]
                if len(chunk) >= 2 and rng.random() < 0.5:
                    b, label = [t for sentence in chunk[a_end:] for t in sentence], 0
                else:
                    pick = rng.randrange(len(documents) - 1)
                    other, b, label = documents[pick + (pick >= index)], [], 1
                    for sentence in other[rng.randrange(len(other)) :]:
                        b.extend(sentence)
                        if len(b) >= target - len(a):
                            break
                    i -= len(chunk) - a_end
                while len(a) + len(b) > max_tokens:
                    longer = a if len(a) > len(b) else b
                    del longer[0 if rng.random() < 0.5 else -1]
                if a and b:
                    examples.append({"input_ids": [special.cls, *a, special.sep, *b, special.sep],
                                     "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1),
                                     "next_sentence_label": label})
                chunk, length = [], 0
            i += 1
    return examples


@pytest.mark.parametrize(("max_seq_length", "short_seq_prob"), [(8, 0.0), (32, 0.1), (128, 0.5)])
def test_pair_spans_reproduce_the_walk_over_id_lists(max_seq_length, short_seq_prob):
    documents = synthetic_documents(40, seed=max_seq_length) + [[[11] * 50], [[12, 13]]]  # long and short ones
    ours = create_pretraining_examples(documents, SPECIAL, max_seq_length=max_seq_length,
                                       short_seq_prob=short_seq_prob, seed=2)
    assert list(ours) == walk_over_id_lists(documents, SPECIAL, max_seq_length, short_seq_prob, seed=2)
    assert ours.spans.shape == (len(ours), 4) and list(ours[3:7]) == list(ours)[3:7]


def test_examples_from_token_files_equal_those_from_documents_in_ram(tokenizer, tmp_path, monkeypatch):
    from hf_seqmodels.training.bert import token_documents
    from hf_seqmodels.training.bert.token_documents import bert_token_documents

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text_corpus(30, seed=3))
    mapped = bert_token_documents([corpus], tokenizer, cache_dir=tmp_path / "cache")
    in_ram = tokenize_documents(split_documents(corpus.read_text()), tokenizer)
    special = SpecialIds.of(tokenizer)
    for documents in (slice(None, -6), slice(-6, None)):  # the training and the held-out documents
        ours = create_pretraining_examples(mapped[documents], special, max_seq_length=32, seed=1)
        assert isinstance(ours.tokens, np.memmap)
        assert list(ours) == list(create_pretraining_examples(in_ram[documents], special, max_seq_length=32, seed=1))
    monkeypatch.setattr(token_documents, "_tokenize_sentences", lambda *a: pytest.fail("tokenised again"))
    assert bert_token_documents([corpus], tokenizer, cache_dir=tmp_path / "cache").folder == mapped.folder
    monkeypatch.undo()
    other = train_tokenizer([str(corpus)], kind="wordpiece", vocab_size=60, min_frequency=1,
                            add_bert_special_tokens=True)
    changed = bert_token_documents([corpus], other, cache_dir=tmp_path / "cache")
    assert changed.folder != mapped.folder and list(changed) == tokenize_documents(split_documents(
        corpus.read_text()), other)


def test_pretrain_bert_command_tokenises_once_and_resumes_exactly_from_the_token_files(tokenizer, tmp_path,
                                                                                         monkeypatch):
    from hf_seqmodels.training.bert import token_documents

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text_corpus(40, seed=7))
    tokenizer.save_pretrained(tmp_path / "tok")
    cache = tmp_path / "cache"

    def run(name: str, *extra: str) -> dict:
        return bert_main(["--train_file", str(corpus), "--tokenizer_name", str(tmp_path / "tok"), "--preset", "tiny",
                          "--max_seq_length", "32", "--config_overrides", "max_position_embeddings=32",
                          "--validation_split_percentage", "20", "--per_device_train_batch_size", "8",
                          "--max_steps", "4", "--save_steps", "2", "--optim", "adamw_torch", "--learning_rate",
                          "1e-3", "--cache_dir", str(cache), "--output_dir", str(tmp_path / name), "--use_cpu",
                          "--disable_tqdm", "--no_plot", *extra])

    straight = run("straight")
    folders = list(cache.iterdir())
    assert [f.name[:5] for f in folders] == ["bert-"]
    monkeypatch.setattr(token_documents, "_tokenize_sentences", lambda *a: pytest.fail("tokenised again"))
    run("resumed", "--max_steps", "2")
    resumed = run("resumed", "--resume_from_checkpoint", "latest")
    assert resumed["steps"] == straight["steps"] == 4 and list(cache.iterdir()) == folders
    assert resumed["eval_loss"] == straight["eval_loss"]
    a = load_file(str(tmp_path / "straight" / "model.safetensors"))
    b = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_masked_lm_positions_are_found_on_the_host_and_padded_to_a_recurring_size():
    """The pretraining batches carry every masked position (the model gathers them on the device without
    reading the labels back), then unlabelled positions up to a multiple of ``pad_to_multiple_of``."""
    from hf_seqmodels.training.bert.trainer import masked_lm_positions

    labels = torch.full((3, 8), -100)
    labels[0, 2], labels[1, 5], labels[2, 0] = 7, 9, 11
    assert masked_lm_positions(labels).tolist() == [2, 13, 16]
    padded = masked_lm_positions(labels, pad_to_multiple_of=8)
    assert len(padded) == 8 and padded[:3].tolist() == [2, 13, 16]
    assert (labels.flatten()[padded[3:]] == -100).all() and len(set(padded.tolist())) == 8
