"""training/finetune.py: GLUE-style reading, label spaces, and Trainer fine-tuning end to end for each task
kind on the tiny shipped data (classification, tagging, extractive QA), from a saved pretrained model and
from random initialisation."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch
from model_test_utils import run_in_python_without_package
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, pipeline

import hf_seqmodels  # noqa: F401  (registers the model types)
from hf_seqmodels import BertConfig, BertForPreTraining
from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.core.cli import run_command
from hf_seqmodels.training.finetune.classification_data import (
    encode_classification,
    label_space,
    read_classification_file,
    resolve_text_columns,
)
from hf_seqmodels.training.finetune.cli import (
    DataArguments,
    ModelArguments,
    build_model,
    load_tokenizer,
    main,
    parse_arguments,
)

DATA = Path(__file__).parent / "data" / "finetune"


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    """A saved tiny BertForPreTraining with a WordPiece tokenizer trained on the three tiny data sets."""
    folder = tmp_path_factory.mktemp("bert")
    text = folder / "corpus.txt"
    squad = json.loads((DATA / "squad_tiny.json").read_text(encoding="utf-8"))
    paragraphs = [p for article in squad["data"] for p in article["paragraphs"]]
    lines = (DATA / "sst2_tiny.tsv").read_text(encoding="utf-8").splitlines()[1:]
    lines += [line.split(" ")[0] for line in (DATA / "conll_tiny.txt").read_text(encoding="utf-8").splitlines()]
    lines += [p["context"] for p in paragraphs] + [q["question"] for p in paragraphs for q in p["qas"]]
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tokenizer = train_tokenizer([str(text)], kind="wordpiece", vocab_size=400, min_frequency=1,
                                add_bert_special_tokens=True)
    torch.manual_seed(0)
    config = BertConfig.from_preset("tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    BertForPreTraining(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def common_args(out: Path, *extra: str) -> list[str]:
    return ["--output_dir", str(out), "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "16",
            "--learning_rate", "5e-3", "--report_to", "none", "--save_strategy", "no", "--logging_steps", "2",
            "--use_cpu", "--seed", "0", "--disable_tqdm", *extra]


# ---------------------------------------------------------------------------------------------- data

def test_glue_tsv_keeps_quotes_and_finds_pair_columns(tmp_path):
    path = tmp_path / "mrpc.tsv"
    path.write_text('label\tsentence1\tsentence2\n1\tHe said "yes" .\tHe agreed .\n0\tA cat .\tA "dog\n',
                    encoding="utf-8")
    ds = read_classification_file(path)
    assert ds.column_names == ["text", "text_pair", "label"]
    assert ds["text"][0] == 'He said "yes" .' and ds["text_pair"][1] == 'A "dog'
    assert resolve_text_columns(["label", "content"]) == ("content", None)
    with pytest.raises(ValueError, match="text_column"):
        resolve_text_columns(["label", "body"])
    with pytest.raises(ValueError, match="`text_column`='nope'"):
        resolve_text_columns(["label", "content"], text_column="nope")


def test_malformed_tsv_row_names_file_and_line(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("label\tcontent\n1\tfine\n0\ttoo\tmany\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.tsv, line 3"):
        read_classification_file(path)


def test_label_space_orders_numbers_numerically_and_detects_regression():
    space = label_space(["10", "2", "2", "1"])
    assert space.labels == ("1", "2", "10") and not space.is_regression
    assert [space.encode(v) for v in ("1", 2, 10.0)] == [0, 1, 2]
    with pytest.raises(ValueError, match="Invalid label '3'"):
        space.encode("3")
    assert label_space(["0.5", "3.8", "1"]).is_regression
    assert label_space(["1", "2"], regression=True).num_labels == 1
    assert label_space(["neutral", "entailment"]).labels == ("entailment", "neutral")
    with pytest.raises(ValueError, match="at least two"):
        label_space(["1", "1"])


def test_pairs_are_encoded_with_segments(bert_folder):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(bert_folder)
    ds = read_classification_file(DATA / "sst2_tiny.tsv")
    ds = ds.add_column("text_pair", ds["text"][::-1])
    encoded = encode_classification(ds, tokenizer, max_length=16, labels=label_space(ds["label"]))
    row = encoded[0]
    assert len(row["input_ids"]) <= 16 and row["labels"] in (0, 1)
    assert 0 in row["token_type_ids"] and 1 in row["token_type_ids"]


def test_data_arguments_are_checked_when_built():
    with pytest.raises(ValueError, match="`task`='ner'"):
        DataArguments(task="ner", train_file="x")
    with pytest.raises(ValueError, match="`doc_stride`=128"):
        DataArguments(task="question-answering", train_file="x", max_seq_length=128, doc_stride=128)


# ------------------------------------------------------------------------------------- end to end

def test_sequence_classification_from_a_pretrained_folder(bert_folder, tmp_path):
    out = tmp_path / "sst2"
    metrics = main(["--task", "sequence-classification", "--model_name_or_path", str(bert_folder),
                    "--train_file", str(DATA / "sst2_tiny.tsv"), "--validation_file", str(DATA / "sst2_tiny.tsv"),
                    "--test_file", str(DATA / "sst2_tiny.tsv"), "--max_seq_length", "32",
                    "--num_train_epochs", "30", *common_args(out)])
    # the tiny model can fit 40 training sentences: it must do better than the majority class on them
    assert metrics["eval_accuracy"] > 0.75, metrics
    history = json.loads((out / "training_history.json").read_text())
    losses = [r["train_loss"] for r in history if "train_loss" in r]
    assert losses[-1] < losses[0]
    model = AutoModelForSequenceClassification.from_pretrained(out)
    assert model.config.id2label == {0: "0", 1: "1"}
    card = (out / "README.md").read_text()
    assert "text-classification" in card and "eval_accuracy" in card
    predictions = [json.loads(line) for line in (out / "test_predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 40 and {p["label"] for p in predictions} <= {"0", "1"}
    assert (out / "loss_curve.png").is_file()
    assert not (out / "training_args.bin").exists()  # no pickle next to the weights
    assert json.loads((out / "training_args.json").read_text())["learning_rate"] == 5e-3


def test_a_pretrained_encoder_is_loaded_not_reinitialised(bert_folder):
    args = ModelArguments(model_name_or_path=str(bert_folder))
    model = build_model(args, "sequence-classification", load_tokenizer(args), {"num_labels": 2})
    pretrained = BertForPreTraining.from_pretrained(bert_folder)
    for name, weight in pretrained.bert.state_dict().items():
        assert torch.equal(model.bert.state_dict()[name], weight), name


def test_random_initialisation_baseline_needs_a_tokenizer_and_uses_the_preset(bert_folder, tmp_path):
    with pytest.raises(ValueError, match="needs --tokenizer_name"):
        load_tokenizer(ModelArguments(preset="tiny"))
    args = ModelArguments(preset="tiny", tokenizer_name=str(bert_folder))
    tokenizer = load_tokenizer(args)
    model = build_model(args, "sequence-classification", tokenizer, {"num_labels": 3})
    assert model.config.num_labels == 3 and model.config.vocab_size == len(tokenizer)
    with pytest.raises(ValueError, match="`--preset`='huge'"):
        ModelArguments(preset="huge", tokenizer_name=str(bert_folder))
    with pytest.raises(ValueError, match="model_family rnn has no head for the task question-answering"):
        build_model(ModelArguments(model_family="rnn", preset="tiny", tokenizer_name=str(bert_folder)),
                    "question-answering", tokenizer, {})


def test_regression_labels_train_a_single_output(bert_folder, tmp_path):
    path = tmp_path / "stsb.tsv"
    rows = [f"{(i % 5) + 0.5}\tthe movie is good number {i}\tthe film is fine {i}" for i in range(24)]
    path.write_text("label\tsentence1\tsentence2\n" + "\n".join(rows) + "\n", encoding="utf-8")
    metrics = main(["--task", "sequence-classification", "--model_name_or_path", str(bert_folder),
                    "--train_file", str(path), "--validation_file", str(path), "--max_seq_length", "24",
                    "--num_train_epochs", "1", *common_args(tmp_path / "out")])
    assert {"eval_pearson", "eval_spearmanr"} & set(metrics), metrics
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "out")
    assert model.config.num_labels == 1 and model.config.problem_type == "regression"


def test_token_classification_reports_entity_f1(bert_folder, tmp_path):
    out = tmp_path / "ner"
    metrics = main(["--task", "token-classification", "--model_name_or_path", str(bert_folder),
                    "--train_file", str(DATA / "conll_tiny.txt"), "--validation_file", str(DATA / "conll_tiny.txt"),
                    "--test_file", str(DATA / "conll_tiny.txt"), "--max_seq_length", "48",
                    "--num_train_epochs", "10", *common_args(out)])
    assert 0.0 <= metrics["eval_overall_f1"] <= 1.0 and metrics["eval_overall_accuracy"] > 0.5, metrics
    model = AutoModelForTokenClassification.from_pretrained(out)
    assert "O" in model.config.label2id and any(t.startswith("B-") for t in model.config.label2id)
    records = [json.loads(line) for line in (out / "test_predictions.jsonl").read_text().splitlines()]
    assert all(len(r["tokens"]) == len(r["predicted_tags"]) for r in records)


def test_question_answering_reports_exact_match_and_f1(bert_folder, tmp_path):
    out = tmp_path / "qa"
    metrics = main(["--task", "question-answering", "--model_name_or_path", str(bert_folder),
                    "--train_file", str(DATA / "squad_tiny.json"), "--validation_file", str(DATA / "squad_tiny.json"),
                    "--max_seq_length", "64", "--doc_stride", "16", "--num_train_epochs", "2", *common_args(out)])
    assert 0.0 <= metrics["eval_exact_match"] <= 100.0 and 0.0 <= metrics["eval_f1"] <= 100.0, metrics
    assert metrics["eval_f1"] >= metrics["eval_exact_match"]
    assert metrics["eval_loss"] > 0  # held-out windows carry their answer's positions too
    assert (out / "model.safetensors").is_file()
    assert "question-answering" in (out / "README.md").read_text()
    # the folder declares the question-answering pipeline and carries its code: it runs by name without the package
    assert list(json.loads((out / "config.json").read_text())["custom_pipelines"]) == ["hfsm-question-answering"]
    question, context = "Who wrote the program?", "Ada Lovelace wrote the first program."
    script = (f"import json\nfrom transformers import pipeline\nqa = pipeline('hfsm-question-answering', model={str(out)!r}, "
              f"trust_remote_code=True)\nprint(json.dumps(qa(question={question!r}, context={context!r})))")
    remote = json.loads(run_in_python_without_package(script, cwd=tmp_path).stdout.strip().splitlines()[-1])
    local = pipeline("hfsm-question-answering", model=str(out), trust_remote_code=True)(question=question, context=context)
    assert remote["answer"] == local["answer"] and remote["score"] == pytest.approx(local["score"], abs=1e-5)


# --------------------------------------------------------------------------------- the training loop

def test_a_loaded_model_takes_transformers_defaults_and_a_preset_its_recipe(bert_folder):
    base = ["--task", "sequence-classification", "--train_file", str(DATA / "sst2_tiny.tsv"), "--output_dir", "x"]
    _, _, args = parse_arguments([*base, "--model_name_or_path", str(bert_folder)])
    assert (args.optim, args.learning_rate, args.lr_scheduler_type, args.num_train_epochs,
            args.per_device_train_batch_size, args.max_grad_norm, args.warmup_steps) == (
        "adamw_torch", 5e-5, "linear", 3.0, 8, 1.0, 0)
    # BERT from scratch: the family's fine-tuning recipe for the head (not the pretraining one: 10^6 steps)
    _, _, args = parse_arguments([*base, "--preset", "bert-mini", "--tokenizer_name", str(bert_folder)])
    assert (args.learning_rate, args.per_device_train_batch_size, args.warmup_steps, args.max_steps) == (
        2e-5, 32, 0.1, -1)
    _, _, args = parse_arguments([*base, "--model_family", "textcnn", "--preset", "kim2014", "--tokenizer_name",
                                  str(bert_folder), "--learning_rate", "0.5"])
    assert (args.learning_rate, args.per_device_train_batch_size, args.num_train_epochs) == (0.5, 50, 25)


def test_user_mistakes_are_one_line_errors(bert_folder, tmp_path, capsys):
    base = ["--task", "sequence-classification", "--train_file", str(DATA / "sst2_tiny.tsv"),
            "--output_dir", str(tmp_path / "out"), "--use_cpu"]
    cases = {
        "--tokenizer_name_or_path": [*base, "--preset", "tiny", "--tokenizer_name_or_path", str(bert_folder)],
        "--do_predict needs --test_file": [*base, "--model_name_or_path", str(bert_folder), "--do_predict"],
        "--do_eval needs held-out data": [*base, "--model_name_or_path", str(bert_folder), "--do_eval"],
        "`--vocab_size`=100": [*base, "--preset", "tiny", "--tokenizer_name", str(bert_folder), "--vocab_size", "100"],
        "needs --tokenizer_name": [*base, "--preset", "tiny"],
        "`max_tokens_per_batch`=0": [*base, "--model_name_or_path", str(bert_folder), "--max_tokens_per_batch", "0"],
        "`max_tokens_per_batch`=4: expected at least the longest example": [
            *base, "--model_name_or_path", str(bert_folder), "--max_tokens_per_batch", "4"],
    }
    for expected, argv in cases.items():
        assert run_command(main, argv) == 2, expected
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines[-1].startswith("error: ") and expected in lines[-1], (expected, lines[-3:])
    with pytest.raises(SystemExit, match="2"):  # the parser's own error
        main([*base, "--model_name_or_path", str(bert_folder), "--group_by_length", "maybe"])
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: argument --group_by_length")


def test_a_used_output_folder_is_refused_and_predictions_write_predict_results(bert_folder, tmp_path, capsys):
    out = tmp_path / "sst2"
    argv = ["--task", "sequence-classification", "--model_name_or_path", str(bert_folder),
            "--train_file", str(DATA / "sst2_tiny.tsv"), "--test_file", str(DATA / "sst2_tiny.tsv"),
            "--max_seq_length", "24", "--max_steps", "2", "--save_steps", "1", "--max_predict_samples", "5",
            "--do_train", "--do_predict", "--learning_rate", "5e-3", "--output_dir", str(out), "--use_cpu",
            "--no_plot", "--disable_tqdm"]
    results = main(argv)
    assert {path.name for path in out.glob("checkpoint-*")} == {"checkpoint-1", "checkpoint-2"}
    predicted = json.loads((out / "predict_results.json").read_text())
    assert set(predicted) == {"predict_loss", "predict_accuracy", "predict_f1", "predict_matthews_correlation",
                              "predict_samples"} and predicted["predict_samples"] == 5
    assert len((out / "test_predictions.jsonl").read_text().splitlines()) == 5
    everything = json.loads((out / "all_results.json").read_text())
    assert everything["predict_samples"] == 5 and "train_loss" in everything and results["steps"] == 2
    assert not (out / "eval_results.json").exists()  # nothing held out: no evaluation
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2 and state["log_history"][-1]["step"] == 2

    assert run_command(main, argv) == 2  # another run would mix with this one's checkpoints
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "holds the checkpoints of another run" in error and "--resume_from_checkpoint latest" in error
    main([*argv, "--overwrite_output_dir"])
    assert {path.name for path in out.glob("checkpoint-*")} == {"checkpoint-1", "checkpoint-2"}


def test_processes_share_a_global_batch_and_weight_their_loss_by_its_labelled_tokens(bert_folder):
    """Two processes, each with half of a global batch of tagged sentences (padding, ignored sub-tokens and
    special tokens differ per half), make the gradient of one process reading the whole batch."""
    from transformers import AutoTokenizer, DataCollatorForTokenClassification

    from hf_seqmodels import BertForTokenClassification
    from hf_seqmodels.training.finetune.tasks import target_counts
    from hf_seqmodels.training.finetune.token_classification_data import (
        label_list,
        read_conll,
        tokenize_and_align_labels,
    )
    from hf_seqmodels.training.finetune.trainer import FeatureBatches, model_rows

    tokenizer = AutoTokenizer.from_pretrained(bert_folder)
    sentences = read_conll(DATA / "conll_tiny.txt")
    tags = label_list(sentences)
    features = tokenize_and_align_labels(sentences, tokenizer, {t: i for i, t in enumerate(tags)}, max_length=48)
    rows, targets = model_rows(features), target_counts("token-classification", features, per_sentence=False)
    assert len(set(targets.tolist())) > 1  # sentences with different numbers of labelled tokens
    torch.manual_seed(0)
    model = BertForTokenClassification(BertConfig.from_preset("tiny", vocab_size=len(tokenizer),
                                                              num_labels=len(tags))).eval()
    collator = DataCollatorForTokenClassification(tokenizer)

    def gradient(process_index: int, num_processes: int) -> torch.Tensor:
        batches = FeatureBatches(rows, targets, collator, batch_size=6, seed=1, process_index=process_index,
                                 num_processes=num_processes)
        batch = batches.batch(1, epoch=2)
        total, local = batch.pop("num_targets"), batch.pop("local_targets")
        assert batch.pop("num_tokens") == int(batch["attention_mask"].sum())  # counted on the CPU, for tokens_seen
        model.zero_grad()
        (model(**batch).loss * (local * num_processes / total)).backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    whole = gradient(0, 1)
    shared = (gradient(0, 2) + gradient(1, 2)) / 2  # DDP averages the processes' gradients
    torch.testing.assert_close(shared, whole, rtol=1e-4, atol=1e-6)
    one = FeatureBatches(rows, targets, collator, batch_size=6, seed=1)
    assert torch.equal(one.batch(0, 5)["input_ids"], one.batch(0, 5)["input_ids"])  # an epoch's order is fixed
    assert len(FeatureBatches(rows[:10], targets, collator, batch_size=4, seed=1, num_processes=2)) == 3
    assert len(FeatureBatches(rows[:9], targets, collator, batch_size=4, seed=1, num_processes=2)) == 2  # 1 row < 2


def test_overwrite_cache_tokenises_again_instead_of_reading_the_cache_files(bert_folder, tmp_path):
    from datasets import load_from_disk
    from transformers import AutoTokenizer

    from hf_seqmodels.training.finetune.tasks import prepare_task

    read_classification_file(DATA / "sst2_tiny.tsv").save_to_disk(tmp_path / "sst2")
    train = load_from_disk(tmp_path / "sst2")  # backed by files, so map writes and reads cache files
    tokenizer = AutoTokenizer.from_pretrained(bert_folder)

    def tokenised(overwrite_cache: bool) -> dict[str, int]:
        data = DataArguments(train_file=str(DATA / "sst2_tiny.tsv"), overwrite_cache=overwrite_cache)
        prepare_task(data, {"train": train}, tokenizer)
        return {p.name: p.stat().st_mtime_ns for p in (tmp_path / "sst2").glob("cache-*.arrow")}

    first = tokenised(False)
    assert first, "the map wrote a cache file"
    assert tokenised(False) == first  # read back, not written again
    rewritten = tokenised(True)
    assert rewritten.keys() == first.keys() and all(rewritten[name] > first[name] for name in first)
    assert parse_arguments(["--train_file", str(DATA / "sst2_tiny.tsv"), "--preset", "tiny", "--output_dir",
                            str(tmp_path / "o"), "--overwrite_cache"])[1].overwrite_cache


def test_pad_to_multiple_of_rounds_the_training_batches_and_keeps_the_loss(bert_folder, tmp_path, monkeypatch):
    """--pad_to_multiple_of (8 by default on a GPU) reaches transformers' collators through the training batches;
    the padding is masked, so the first update's loss is the unrounded one."""
    from transformers import AutoTokenizer

    from hf_seqmodels.training.finetune.trainer import FeatureBatches

    shapes, make = [], FeatureBatches.batch

    def batch(self, index, epoch=0):
        made = make(self, index, epoch)
        shapes.append(tuple(made["input_ids"].shape))
        return made

    monkeypatch.setattr(FeatureBatches, "batch", batch)
    folder = tmp_path / "no-dropout"  # dropout draws as many numbers as the batch has positions
    BertForPreTraining.from_pretrained(bert_folder, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                       ).save_pretrained(folder)
    AutoTokenizer.from_pretrained(bert_folder).save_pretrained(folder)
    args = ["--task", "token-classification", "--model_name_or_path", str(folder), "--train_file",
            str(DATA / "conll_tiny.txt"), "--max_seq_length", "48", "--max_steps", "2", "--eval_strategy", "no"]
    losses = {}
    for multiple in ("1", "32"):
        shapes.clear()
        out = tmp_path / multiple
        main([*args, *common_args(out, "--pad_to_multiple_of", multiple, "--logging_steps", "1")])
        history = json.loads((out / "training_history.json").read_text())
        losses[multiple] = [record["train_loss"] for record in history if "train_loss" in record]
        lengths = {length for _, length in shapes}
        assert all(length % 32 == 0 for length in lengths) == (multiple == "32"), lengths
    assert losses["32"] == pytest.approx(losses["1"], rel=1e-4)


def test_group_by_length_batches_features_of_similar_length_in_a_new_order_every_epoch(bert_folder):
    """Every feature once per epoch, the batches (cut once from the length order) visited in another order each
    epoch; two processes' rows make up the global batch; a token budget bounds the padded tokens of a batch."""
    from transformers import AutoTokenizer, DataCollatorForTokenClassification

    from hf_seqmodels.training.finetune.tasks import target_counts
    from hf_seqmodels.training.finetune.token_classification_data import (
        label_list,
        read_conll,
        tokenize_and_align_labels,
    )
    from hf_seqmodels.training.finetune.trainer import FeatureBatches, model_rows

    tokenizer = AutoTokenizer.from_pretrained(bert_folder)
    sentences = read_conll(DATA / "conll_tiny.txt")
    features = tokenize_and_align_labels(sentences, tokenizer, {t: i for i, t in enumerate(label_list(sentences))},
                                         max_length=48)
    rows, targets = model_rows(features), target_counts("token-classification", features, per_sentence=False)
    collator = DataCollatorForTokenClassification(tokenizer)
    for sizes in ({"batch_size": 4, "group_by_length": True}, {"max_tokens": 96}):
        batches = FeatureBatches(rows, targets, collator, seed=1, **sizes)
        epochs = [[batches.picks(index, epoch)[0] for index in range(len(batches))] for epoch in (0, 1)]
        for epoch in epochs:
            assert sorted(i for picks in epoch for i in picks) == list(range(len(rows)))
        assert sorted(epochs[0]) == sorted(epochs[1]) and epochs[0] != epochs[1]
        spans = sorted((min(lengths), max(lengths)) for lengths in
                       ([len(rows[i]["input_ids"]) for i in picks] for picks in epochs[0]))
        assert all(longest <= next_shortest for (_, longest), (next_shortest, _) in itertools.pairwise(spans))
        if "max_tokens" in sizes:
            assert all(batches.batch(index, 0)["input_ids"].numel() <= 96 for index in range(len(batches)))
        shards = [FeatureBatches(rows, targets, collator, seed=1, process_index=p, num_processes=2, **sizes)
                  for p in (0, 1)]
        assert len(shards[0]) == len(shards[1]) <= len(batches)  # a batch of one feature gives a process none
        for index in range(len(shards[0])):
            (whole, first), (same, second) = (shard.picks(index, 1) for shard in shards)
            assert whole == same and sorted(first + second) == sorted(whole) and len(first) - len(second) in (0, 1)


def test_group_by_length_trains_as_well_with_fewer_padded_lengths(bert_folder, tmp_path, monkeypatch):
    """--group_by_length: the tagger learns as it does from batches in random order, from batches that meet
    fewer distinct padded lengths (fewer shapes for a compiled step to be compiled for)."""
    from hf_seqmodels.training.finetune.trainer import FeatureBatches

    lengths, make = [], FeatureBatches.batch

    def batch(self, index, epoch=0):
        made = make(self, index, epoch)
        lengths.append(made["input_ids"].shape[1])
        return made

    monkeypatch.setattr(FeatureBatches, "batch", batch)
    args = ["--task", "token-classification", "--model_name_or_path", str(bert_folder), "--train_file",
            str(DATA / "conll_tiny.txt"), "--validation_file", str(DATA / "conll_tiny.txt"), "--max_seq_length", "48",
            "--num_train_epochs", "10"]
    distinct, metrics = {}, {}
    for grouped in (False, True):
        lengths.clear()
        out = tmp_path / str(grouped)
        metrics[grouped] = main([*args, *common_args(out, *(["--group_by_length"] if grouped else []))])
        distinct[grouped] = len(set(lengths))
    assert distinct[True] < distinct[False], distinct
    assert metrics[True]["eval_overall_accuracy"] > 0.5, metrics
    assert metrics[True]["eval_overall_accuracy"] >= metrics[False]["eval_overall_accuracy"] - 0.1, metrics
    assert "by length" in (tmp_path / "True" / "README.md").read_text()
