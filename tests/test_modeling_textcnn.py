"""Tests of the TextCNN family (Kim 2014): heads, the convolution/max-pool equations against explicit
computations, padding, the four embedding modes, loading, Trainer, pipeline and the finetune CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from accelerate import init_empty_weights
from model_test_utils import left_pad, random_ids, right_pad
from safetensors.torch import load_file, save_file
from transformers import (
    AutoModelForSequenceClassification,
    DataCollatorWithPadding,
    Trainer,
    TrainingArguments,
    pipeline,
)

import hf_seqmodels  # noqa: F401  (registers the Auto classes)
from hf_seqmodels import TextCNNConfig, TextCNNForSequenceClassification, TextCNNModel
from hf_seqmodels.embeddings import WordVectors
from hf_seqmodels.models.config_utils import ConfigValidationError
from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.tokenization.cleaning import CleaningConfig
from hf_seqmodels.training.finetune.classification_data import read_classification_file
from hf_seqmodels.training.finetune.cli import main as finetune_main
from hf_seqmodels.training.finetune.pretrained_embeddings import (
    check_embedding_source,
    initialise_embeddings,
    load_word_vectors,
)

MODES = ["rand", "static", "non-static", "multichannel"]
SST2_TINY = Path(__file__).parent / "data" / "finetune" / "sst2_tiny.tsv"


def tiny_model(model_class=TextCNNForSequenceClassification, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    return model_class(TextCNNConfig.from_preset("tiny", **overrides)).eval()


def explicit_features(model: TextCNNModel, ids: torch.Tensor) -> torch.Tensor:
    """``z`` of one unpadded sentence by the equations: every window ``x_{i:i+h-1}`` (zero vectors appended
    when the sentence is shorter than ``h``), ``c_i = relu(sum_jk W_jk x_{i+j,k} + b)``, max over ``i``."""
    x = model.embed_tokens.weight[ids]  # (n, d)
    if model.static_embed_tokens is not None:
        x = x + model.static_embed_tokens.weight[ids]
    features = []
    for width, conv in zip(model.config.filter_sizes, model.convs, strict=True):
        padded = torch.cat([x, x.new_zeros(max(0, width - len(ids)), x.shape[1])])
        windows = padded.unfold(0, width, 1)  # (n - h + 1, d, h)
        c = torch.relu(torch.einsum("wdh,fdh->wf", windows, conv.weight) + conv.bias)  # (windows, F)
        features.append(c.max(dim=0).values)
    return torch.cat(features)


# --- the equations ---------------------------------------------------------------------------------


def test_course_notes_bigram_example_by_hand():
    """Course notes 001 §4.3: "I love this movie" (d=5) and one bigram filter with b=0.5; c_1 = 0.73.
    (The notes print c_2=0.85 and c_3=0.62; the sums written out give 0.96 and 0.55.)"""
    x = torch.tensor([[0.2, -0.1, 0.5, 0.3, 0.8], [0.5, 0.8, -0.2, 0.1, 0.3],
                      [-0.1, 0.3, 0.7, 0.4, -0.2], [0.4, 0.2, -0.3, 0.6, 0.5]])
    w = torch.tensor([[0.1, 0.2, -0.1, 0.3, 0.2], [-0.2, 0.1, 0.3, -0.1, 0.4]])  # (h=2, d=5)
    model = TextCNNModel(TextCNNConfig(vocab_size=6, embedding_size=5, filter_sizes=[2], num_filters=1)).eval()
    with torch.no_grad():
        model.embed_tokens.weight[1:5] = x
        model.convs[0].weight.copy_(w.T.unsqueeze(0))  # Conv1d weight: (filters, d, h)
        model.convs[0].bias.fill_(0.5)
    out = model(torch.tensor([[1, 2, 3, 4]]), output_hidden_states=True)
    by_hand = [max(0.0, float((w * x[i : i + 2]).sum()) + 0.5) for i in range(3)]
    assert by_hand[0] == pytest.approx(0.73)
    c = out.feature_maps[0][0, 0]
    assert torch.allclose(c[:3], torch.tensor(by_hand), atol=1e-6)
    assert c.shape == (4,) and c[3] == 0  # the window running past the sentence is never pooled
    assert out.pooler_output.item() == pytest.approx(max(by_hand), abs=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_forward_equals_explicit_windows_for_every_sentence_of_a_padded_batch(mode):
    model = tiny_model(TextCNNModel, embedding_mode=mode)
    rows = [random_ids(1, n, 99, seed=n)[0] for n in (1, 2, 3, 6)]  # tiny filters are 2 and 3 wide
    ids, mask = right_pad(rows)
    pooled = model(ids, attention_mask=mask).pooler_output
    assert pooled.shape == (4, 2 * 4)
    for row, features in zip(rows, pooled, strict=True):
        assert torch.allclose(features, explicit_features(model, row), atol=1e-6)


# --- heads and padding -----------------------------------------------------------------------------


def test_sequence_classification_losses_match_transformers_conventions():
    ids = random_ids(4, 7, 99)
    model = tiny_model(num_labels=3)
    labels = torch.tensor([0, 1, 2, 1])
    out = model(ids, labels=labels)
    assert out.logits.shape == (4, 3)
    assert torch.allclose(out.loss, torch.nn.functional.cross_entropy(out.logits, labels))
    regression = tiny_model(num_labels=1)
    target = torch.rand(4)
    out = regression(ids, labels=target)
    assert out.logits.shape == (4, 1) and torch.allclose(out.loss, torch.nn.functional.mse_loss(out.logits[:, 0], target))
    multi = tiny_model(num_labels=3, problem_type="multi_label_classification")
    hot = torch.tensor([[1.0, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]])
    expected = torch.nn.functional.binary_cross_entropy_with_logits(multi(ids).logits, hot)
    assert torch.allclose(multi(ids, labels=hot).loss, expected)


def test_base_model_outputs_and_shapes():
    model = tiny_model(TextCNNModel, embedding_mode="multichannel")
    out = model(random_ids(3, 5, 99), output_hidden_states=True)
    assert out.pooler_output.shape == (3, 8)
    assert [tuple(c.shape) for c in out.feature_maps] == [(3, 4, 5), (3, 4, 5)]
    assert [tuple(h.shape) for h in out.hidden_states] == [(3, 5, 12), (3, 5, 8)]
    assert out.hidden_states[-1] is out.last_hidden_state
    assert model(random_ids(3, 5, 99)).feature_maps is None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pad", [left_pad, right_pad])
def test_padding_never_changes_a_classification(mode, pad):
    model = tiny_model(embedding_mode=mode, num_labels=3)
    rows = [random_ids(1, n, 99, seed=10 + n)[0] for n in (1, 2, 4, 9)]
    ids, mask = pad(rows)
    ids[mask == 0] = 7  # whatever sits under the mask must not matter, not even a real word
    batched = model(ids, attention_mask=mask).logits
    for row, logits in zip(rows, batched, strict=True):
        assert torch.allclose(logits, model(row[None]).logits[0], atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_a_zero_between_real_tokens_removes_that_token(mode):
    """A 0 in the middle of the attention mask removes the token: finite logits, equal to the sentence without
    it (it gave -inf features and NaN logits before), also under left padding."""
    model = tiny_model(embedding_mode=mode, num_labels=3)
    ids = random_ids(3, 7, 99, seed=3)
    mask = torch.tensor([[1, 0, 1, 1, 0, 1, 1], [0, 0, 1, 0, 1, 0, 1], [1, 1, 0, 0, 0, 0, 0]])
    out = model(ids, attention_mask=mask, output_hidden_states=True)
    assert torch.isfinite(out.logits).all() and all(torch.isfinite(h).all() for h in out.hidden_states)
    for row in range(3):
        compact = ids[row][mask[row].bool()][None]
        assert torch.allclose(out.logits[row], model(compact).logits[0], atol=1e-6)
    empty = model(ids[:1], attention_mask=torch.zeros_like(ids[:1])).logits
    assert torch.isfinite(empty).all()


def test_hidden_states_are_the_embeddings_and_the_convolution_layer_of_the_graph():
    model = tiny_model(num_labels=3, hidden_act="tanh")
    ids, mask = right_pad([random_ids(1, n, 99, seed=n)[0] for n in (1, 4, 6)])
    out = model(ids, attention_mask=mask, output_hidden_states=True)
    embeddings, features = out.hidden_states
    assert embeddings.shape == (3, 6, 12) and features.shape == (3, 6, 8)
    base = model.model(ids, attention_mask=mask)
    assert torch.equal(base.last_hidden_state, features)
    # the pooled features are the max of the layer over the windows made of real tokens (width 2, then 3)
    lengths = mask.sum(1)
    for row, n in enumerate(lengths.tolist()):
        windows = [max(n - 1, 1)] * 4 + [max(n - 2, 1)] * 4
        expected = torch.stack([features[row, :w, k].max() for k, w in enumerate(windows)])
        assert torch.allclose(base.pooler_output[row], expected)
        assert all(not features[row, w:, k].any() for k, w in enumerate(windows))  # not pooled: 0
    for h in out.hidden_states:
        h.retain_grad()
    out.logits.sum().backward()
    assert embeddings.grad is not None and features.grad is not None and features.grad.abs().sum() > 0


@pytest.mark.parametrize("problem_type, labels", [
    ("single_label_classification", torch.tensor([0, 3])),
    (None, torch.tensor([-1, 1])),
])
def test_labels_outside_the_classes_are_refused(problem_type, labels):
    model = tiny_model(num_labels=3, problem_type=problem_type)
    with pytest.raises(ValueError, match=r"`labels` contains (3|-1), outside the 3 classes \[0, 3\)"):
        model(random_ids(2, 5, 99), labels=labels)
    ignored = model(random_ids(2, 5, 99), labels=torch.tensor([-100, 2]))  # -100: no label
    assert torch.isfinite(ignored.loss)


def test_gradient_checkpointing_is_refused_with_a_clear_error():
    model = tiny_model()
    assert not model.supports_gradient_checkpointing
    for kwargs in ({"use_reentrant": True}, {"use_reentrant": False}):
        with pytest.raises(ValueError, match="TextCNNForSequenceClassification does not support"):
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def test_compiled_forward_has_no_graph_break_and_equals_eager():
    model = tiny_model(num_labels=3)
    ids = random_ids(3, 7, 99, seed=5)
    mask = torch.tensor([[1, 0, 1, 1, 0, 1, 1], [0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0, 0]])
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")  # fullgraph: a graph break is an error
    with torch.no_grad():
        assert torch.allclose(compiled(ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits,
                              atol=1e-6)
        assert torch.allclose(compiled(ids).logits, model(ids).logits, atol=1e-6)


def test_input_shorter_than_every_filter_and_bad_ids():
    model = tiny_model()
    assert model(torch.tensor([[5]])).logits.shape == (1, 2)
    with pytest.raises(ValueError, match="token id 99"):
        model(torch.tensor([[5, 99]]))


# --- embedding modes --------------------------------------------------------------------------------


def one_adam_step(model, ids):
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.1)
    model(ids, labels=torch.tensor([0, 1])).loss.backward()
    optimizer.step()
    model.eval()


@pytest.mark.parametrize("mode, frozen, trained", [
    ("static", ["embed_tokens"], []),
    ("non-static", [], ["embed_tokens"]),
    ("rand", [], ["embed_tokens"]),
    ("multichannel", ["static_embed_tokens"], ["embed_tokens"]),
])
def test_frozen_tables_survive_an_optimizer_step_and_a_reload(tmp_path, mode, frozen, trained):
    model = tiny_model(embedding_mode=mode)
    model.save_pretrained(tmp_path)
    reloaded = TextCNNForSequenceClassification.from_pretrained(tmp_path)
    ids = random_ids(2, 6, 99)
    for m in (model, reloaded):
        tables = {name: getattr(m.model, name).weight for name in frozen + trained}
        tables["convs.0"] = m.model.convs[0].weight
        before = {name: weight.clone() for name, weight in tables.items()}
        one_adam_step(m, ids)
        for name in frozen:
            assert not tables[name].requires_grad
            assert torch.equal(tables[name], before[name])
        for name in [*trained, "convs.0"]:
            assert not torch.equal(tables[name], before[name])


def test_init_embeddings_fills_every_channel_and_respects_the_mode():
    weight = torch.randn(99, 12)
    model = tiny_model(embedding_mode="multichannel")
    model.init_embeddings(weight)
    for table in (model.model.embed_tokens, model.model.static_embed_tokens):
        assert torch.equal(table.weight[1:], weight[1:]) and not table.weight[0].any()  # pad row 0 is zero
    with pytest.raises(ValueError, match="embedding_mode='rand'"):
        tiny_model(embedding_mode="rand").init_embeddings(weight)
    with pytest.raises(ValueError, match=r"shape \(99, 5\)"):
        tiny_model(embedding_mode="static").init_embeddings(torch.randn(99, 5))


def test_max_norm_rescales_only_the_long_class_vectors():
    model = tiny_model(classifier_max_norm=3.0)
    with torch.no_grad():
        model.classifier.weight.copy_(torch.stack([torch.full((8,), 2.0), torch.full((8,), 0.1)]))  # norms 5.66, 0.28
    model(random_ids(1, 4, 99))
    norms = model.classifier.weight.detach().norm(dim=1)
    assert norms[0].item() == pytest.approx(3.0, rel=1e-5)
    assert torch.allclose(model.classifier.weight[1], torch.full((8,), 0.1))


# --- configuration ---------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, field", [
    ({"filter_sizes": []}, "filter_sizes"),
    ({"filter_sizes": [3, 0]}, "filter_sizes"),
    ({"embedding_mode": "dynamic"}, "embedding_mode"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"classifier_dropout": 1.0}, "classifier_dropout"),
    ({"classifier_max_norm": 0}, "classifier_max_norm"),
    ({"num_filters": 0}, "num_filters"),
    ({"pad_token_id": 99}, "pad_token_id"),
])
def test_bad_config_names_field_and_value(overrides, field):
    with pytest.raises(Exception, match=re.escape(f"Invalid `{field}`={overrides[field]!r}")):
        TextCNNConfig.from_preset("tiny", **overrides)


def test_presets():
    kim = TextCNNConfig.from_preset("kim2014")
    assert (kim.filter_sizes, kim.num_filters, kim.classifier_dropout, kim.embedding_size,
            kim.classifier_max_norm) == ([3, 4, 5], 100, 0.5, 300, 3.0)
    with pytest.raises(ConfigValidationError, match="kim2014"):
        TextCNNConfig.from_preset("kim")


# --- saving and loading -----------------------------------------------------------------------------


def test_filter_sizes_given_as_a_tuple_are_saved_and_loaded_as_a_list(tmp_path):
    model = tiny_model(embedding_mode="multichannel", filter_sizes=(2, 4))
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["filter_sizes"] == [2, 4]
    loaded = TextCNNForSequenceClassification.from_pretrained(tmp_path).eval()
    assert loaded.config.filter_sizes == [2, 4] and [conv.kernel_size for conv in loaded.model.convs] == [(2,), (4,)]
    ids = random_ids(2, 5, 99)
    assert torch.equal(model(ids).logits, loaded(ids).logits)


def test_resize_token_embeddings_resizes_both_channels(tmp_path):
    model = tiny_model(embedding_mode="multichannel")
    tuned, static = (t.weight.detach().clone() for t in (model.model.embed_tokens, model.model.static_embed_tokens))
    model.resize_token_embeddings(120)
    channels = (model.model.embed_tokens, model.model.static_embed_tokens)
    assert [t.weight.shape for t in channels] == [(120, 12), (120, 12)] and model.config.vocab_size == 120
    assert torch.equal(channels[0].weight[:99], tuned) and torch.equal(channels[1].weight[:99], static)
    assert torch.equal(channels[1].weight[99:], channels[0].weight[99:])  # new words: one vector in both channels
    assert not channels[1].weight.requires_grad and channels[0].weight.requires_grad
    ids = torch.tensor([[110, 5, 119, 7]])
    logits = model(ids).logits
    model.save_pretrained(tmp_path)
    assert torch.equal(TextCNNForSequenceClassification.from_pretrained(tmp_path).eval()(ids).logits, logits)
    model.resize_token_embeddings(50)
    assert [t.num_embeddings for t in channels] == [50, 50] and channels[1].weight.shape == (50, 12)
    assert torch.equal(channels[1].weight, static[:50])
    assert model(torch.tensor([[49, 3]])).logits.shape == (1, 2)


def test_missing_weights_and_the_meta_device_give_initialised_reported_tensors(tmp_path):
    """Every parameter comes out of _init_weights: loading with missing keys (reported), and building on the meta
    device then materialising (what loading with accelerate's init_empty_weights relies on)."""
    config = TextCNNConfig.from_preset("tiny", embedding_mode="multichannel")
    model = TextCNNForSequenceClassification(config)
    model.save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    dropped = {"model.static_embed_tokens.weight", "model.convs.1.bias", "classifier.weight"}
    save_file({k: v for k, v in state.items() if k not in dropped}, tmp_path / "model.safetensors",
              metadata={"format": "pt"})
    loaded, info = TextCNNForSequenceClassification.from_pretrained(tmp_path, output_loading_info=True)
    assert set(info["missing_keys"]) == dropped
    static = loaded.model.static_embed_tokens.weight
    assert static.abs().max() <= 0.25 and static[1:].std() > 0.1 and not static[0].any() and not static.requires_grad
    assert not loaded.model.convs[1].bias.any() and 0.01 < loaded.classifier.weight.std() < 0.04
    for key in state.keys() - dropped:
        assert torch.equal(loaded.state_dict()[key], state[key])
    with torch.device("meta"):
        empty = TextCNNForSequenceClassification(config)
    empty.to_empty(device="cpu")
    empty.init_weights()
    for name, tensor in [*empty.named_parameters(), *empty.named_buffers()]:
        assert torch.isfinite(tensor).all() and tensor.abs().max() <= 0.25, name
    with init_empty_weights():
        lazy = TextCNNForSequenceClassification(config)
    lazy.load_state_dict(model.state_dict(), assign=True)
    ids = random_ids(2, 5, 99)
    assert torch.equal(lazy.eval()(ids).logits, model.eval()(ids).logits)


# --- Trainer, pipeline and the finetune script -------------------------------------------------------


@pytest.fixture(scope="module")
def word_tokenizer_folder(tmp_path_factory):
    """A lowercasing word-level tokenizer trained on the sentences of the tiny SST-2 file."""
    folder = tmp_path_factory.mktemp("tok")
    text = folder / "sentences.txt"
    text.write_text("\n".join(read_classification_file(SST2_TINY)["text"]) + "\n", encoding="utf-8")
    tokenizer = train_tokenizer([text], kind="word", vocab_size=500, min_frequency=1,
                                cleaning=CleaningConfig(lowercase=True))
    tokenizer.save_pretrained(folder)
    return folder


def test_trainer_fits_tiny_sst2_and_pipeline_matches_the_model(word_tokenizer_folder, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(word_tokenizer_folder)
    rows = read_classification_file(SST2_TINY)
    data = rows.map(lambda b: {**tokenizer(b["text"]), "label": [int(v) for v in b["label"]]},
                    batched=True, remove_columns=["text"])
    config = TextCNNConfig.from_preset("tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                       classifier_dropout=0.0, id2label={0: "negative", 1: "positive"})
    torch.manual_seed(0)
    model = TextCNNForSequenceClassification(config)
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=8, num_train_epochs=15,
                             learning_rate=3e-2, use_cpu=True, save_strategy="no", report_to="none", seed=0,
                             disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=data, processing_class=tokenizer,
                      data_collator=DataCollatorWithPadding(tokenizer))
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    assert trainer.evaluate()["eval_loss"] < 0.5 * before

    model.eval()
    classify = pipeline("text-classification", model=model, tokenizer=tokenizer)
    sentences = rows["text"][:3]
    results = classify(sentences)
    with torch.no_grad():
        enc = tokenizer(sentences, padding=True, return_tensors="pt")
        probs = model(**enc).logits.softmax(-1)
    for result, p in zip(results, probs, strict=True):
        assert result["label"] == config.id2label[int(p.argmax())]
        assert result["score"] == pytest.approx(p.max().item(), abs=1e-5)


def finetune(tmp_path: Path, tokenizer_folder: Path, *extra: str) -> dict:
    return finetune_main([
        "--task", "sequence-classification", "--model_family", "textcnn", "--preset", "tiny",
        "--tokenizer_name", str(tokenizer_folder), "--train_file", str(SST2_TINY),
        "--validation_file", str(SST2_TINY), "--max_seq_length", "32", "--num_train_epochs", "2",
        "--per_device_train_batch_size", "8", "--learning_rate", "1e-2", "--output_dir", str(tmp_path),
        "--report_to", "none", "--save_strategy", "no", "--use_cpu", "--seed", "0", "--disable_tqdm", *extra,
    ])


def test_finetune_cli_with_random_and_pretrained_embeddings(word_tokenizer_folder, tmp_path):
    metrics = finetune(tmp_path / "rand", word_tokenizer_folder)
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0
    assert AutoModelForSequenceClassification.from_pretrained(tmp_path / "rand").config.embedding_mode == "rand"

    # a word2vec text file for three words of the (lowercased) vocabulary and one that is not in it
    vectors = {"dull": [0.5] * 12, "funny": [-0.25] * 12, "film": [1.0] * 12, "zebra": [2.0] * 12}
    w2v = tmp_path / "vectors.txt"
    w2v.write_text(f"{len(vectors)} 12\n" + "".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vectors.items()))
    finetune(tmp_path / "static", word_tokenizer_folder, "--pretrained_embeddings", str(w2v),
             "--config_overrides", "embedding_mode=static")
    from transformers import AutoTokenizer

    vocab = AutoTokenizer.from_pretrained(word_tokenizer_folder).get_vocab()
    trained = AutoModelForSequenceClassification.from_pretrained(tmp_path / "static")
    table = trained.model.embed_tokens.weight
    assert "zebra" not in vocab
    for word in ("dull", "funny", "film"):  # static: still exactly the given vectors after training
        assert torch.equal(table[vocab[word]], torch.tensor(vectors[word]))
    card = (tmp_path / "static" / "README.md").read_text()
    assert "vectors.txt" in card and "Kim (2014)" in card and "filters of each width 2, 3" in card

    with pytest.raises(ValueError, match="give --pretrained_embeddings"):
        finetune(tmp_path / "x", word_tokenizer_folder, "--config_overrides", "embedding_mode=non-static")
    with pytest.raises(ValueError, match="embedding_size=12"):
        bad = tmp_path / "bad.txt"
        bad.write_text("1 3\ndull 0.1 0.2 0.3\n")
        finetune(tmp_path / "y", word_tokenizer_folder, "--pretrained_embeddings", str(bad),
                 "--config_overrides", "embedding_mode=static")
    with pytest.raises(ValueError, match="`max_seq_length`=2"):
        finetune(tmp_path / "z", word_tokenizer_folder, "--max_seq_length", "2")


def test_word_vectors_from_a_folder_or_a_word2vec_file_fill_the_vocabulary_rows(word_tokenizer_folder, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(word_tokenizer_folder)
    vectors = WordVectors(["dull", "funny"], torch.tensor([[0.5] * 12, [-0.25] * 12]))
    vectors.save(tmp_path / "folder")
    vectors.save_word2vec_format(tmp_path / "vectors.txt")
    vocab = tokenizer.get_vocab()
    for source in (tmp_path / "folder", tmp_path / "vectors.txt"):
        assert torch.equal(load_word_vectors(source).vectors, vectors.vectors)
        model = TextCNNForSequenceClassification(TextCNNConfig.from_preset(
            "tiny", vocab_size=len(tokenizer), embedding_mode="non-static"))
        coverage = initialise_embeddings(model, source, tokenizer)
        assert coverage == pytest.approx(2 / len(vocab))
        assert torch.equal(model.model.embed_tokens.weight[vocab["funny"]], vectors["funny"])
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_word_vectors(tmp_path / "missing.txt")
    from hf_seqmodels import RNNConfig, RNNForSequenceClassification

    with pytest.raises(ValueError, match="cannot be initialised from word vectors"):
        check_embedding_source(RNNForSequenceClassification(RNNConfig.from_preset("tiny")), str(tmp_path / "vectors.txt"))
