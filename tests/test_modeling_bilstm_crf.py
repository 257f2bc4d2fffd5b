"""BiLSTM-CRF tagger and character-level word representations: heads, masking, the character table, Trainer,
the token-classification pipeline, finetune.py, and the char encoder in the RNN language model (generation with
and without the cache)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from accelerate import init_empty_weights
from datasets import Dataset
from model_test_utils import random_ids, right_pad
from safetensors.torch import load_file, save_file
from transformers import (
    AutoModelForTokenClassification,
    DataCollatorForTokenClassification,
    Trainer,
    TrainingArguments,
    pipeline,
)

import hf_seqmodels  # noqa: F401  (registers the Auto classes)
from hf_seqmodels import (
    BiLSTMCRFConfig,
    BiLSTMCRFForTokenClassification,
    BiLSTMCRFModel,
    RNNConfig,
    RNNForCausalLM,
)
from hf_seqmodels.models.char_encoder import CharWordEncoder, token_surface, words_to_char_ids
from hf_seqmodels.models.config_utils import ConfigValidationError
from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.finetune.char_features import DataCollatorForCharTagging, add_char_input_ids
from hf_seqmodels.training.finetune.token_classification_data import (
    label_list,
    read_conll,
    tokenize_and_align_labels,
)

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
CONLL = Path(__file__).parent / "data" / "finetune" / "conll_tiny.txt"


def tiny_config(**overrides) -> BiLSTMCRFConfig:
    fields = dict(id2label=dict(enumerate(LABELS)), label2id={t: i for i, t in enumerate(LABELS)})
    return BiLSTMCRFConfig.from_preset("tiny", **{**fields, **overrides})


def tiny_tagger(seed: int = 0, **overrides) -> BiLSTMCRFForTokenClassification:
    torch.manual_seed(seed)
    model = BiLSTMCRFForTokenClassification(tiny_config(**overrides)).eval()
    with torch.no_grad():  # random CRF scores, so that the CRF matters in every check
        for p in model.crf.parameters() if model.crf is not None else []:
            p.normal_()
    return model


def is_valid_bio(tags: list[str]) -> bool:
    return all(not t.startswith("I-") or p in ("B-" + t[2:], t) for p, t in zip(["O"] + tags, tags, strict=False))


# --- heads -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("char_encoder", [None, "cnn", "lstm"])
@pytest.mark.parametrize("use_crf", [True, False])
def test_tagger_shapes_loss_and_backward(char_encoder, use_crf):
    model = tiny_tagger(char_encoder=char_encoder, use_crf=use_crf, crf_constraints="BIO" if use_crf else None)
    model.train()
    ids = random_ids(3, 7, 99)
    labels = torch.tensor([[-100, 1, 2, 0, 3, 4, -100]] * 3)
    out = model(ids, labels=labels)
    assert out.logits.shape == (3, 7, len(LABELS)) and out.loss.ndim == 0
    out.loss.backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "crf" not in n or use_crf)
    base = BiLSTMCRFModel(model.config)(ids)
    assert base.last_hidden_state.shape == (3, 7, 2 * model.config.hidden_size)


def test_loss_is_the_crf_likelihood_of_the_labelled_positions_only():
    """Positions labelled -100 (special tokens, continuation sub-tokens) are cut out of the CRF chain."""
    model = tiny_tagger()
    ids = random_ids(2, 6, 99)
    labels = torch.tensor([[-100, 1, -100, 2, 0, -100], [-100, 0, 3, 4, -100, -100]])
    emissions, _ = model.emissions(ids)
    loss = model(ids, labels=labels).loss
    per_row = []
    for row in range(2):
        kept = labels[row] != -100
        e, tags = emissions[row : row + 1, kept], labels[row : row + 1, kept]
        per_row.append(model.crf.neg_log_likelihood(e, tags, torch.ones_like(tags, dtype=torch.bool)))
    torch.testing.assert_close(loss, torch.cat(per_row).mean())


def test_argmax_of_logits_is_the_viterbi_path_and_valid_bio():
    model = tiny_tagger(seed=1)
    with torch.no_grad():
        model.crf.transitions.zero_()  # let the emissions push for invalid moves
        model.classifier.bias[[2, 4]] += 3.0  # I- tags everywhere
    ids = random_ids(8, 10, 99)
    tags = model.decode(ids)
    with torch.no_grad():
        logits = model(ids).logits
    assert torch.equal(logits.argmax(-1), tags)  # no untagged token among random_ids (>= 4)
    assert all(is_valid_bio([LABELS[t] for t in row]) for row in tags.tolist())
    with torch.no_grad():  # the per-token argmax of the emissions alone is not valid BIO here
        emissions, _ = model.emissions(ids)
    assert not all(is_valid_bio([LABELS[t] for t in row]) for row in emissions.argmax(-1).tolist())


def test_special_tokens_are_left_out_of_the_chain_without_labels():
    model = tiny_tagger(seed=2)
    ids = random_ids(1, 5, 99)
    with_bos = torch.cat([torch.tensor([[model.config.bos_token_id]]), ids], dim=1)
    tags = model.decode(with_bos)
    assert tags[0, 0] == -100
    assert torch.equal(model.chain_mask(with_bos)[0], torch.tensor([False] + [True] * 5))


def test_padding_never_changes_tags_or_logits():
    model = tiny_tagger(seed=3, char_encoder="lstm")
    rows = [random_ids(1, n, 99, seed=n)[0] for n in (3, 7, 5)]
    ids, mask = right_pad(rows)
    labels = torch.where(mask.bool(), 0, -100)  # every real token tagged O
    with torch.no_grad():
        batch = model(ids, attention_mask=mask)
        batch_loss = model(ids, attention_mask=mask, labels=labels).loss
        alone = [model(r.unsqueeze(0)) for r in rows]
        alone_loss = torch.stack([model(r.unsqueeze(0), labels=torch.zeros(1, len(r), dtype=torch.long)).loss
                                  for r in rows]).mean()
    for i, r in enumerate(rows):
        torch.testing.assert_close(batch.logits[i, : len(r)], alone[i].logits[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batch_loss, alone_loss, atol=1e-5, rtol=1e-5)
    assert torch.equal(model.decode(ids, mask)[mask.bool()], torch.cat([model.decode(r[None])[0] for r in rows]))


def test_plain_softmax_tagger_uses_emissions_and_token_cross_entropy():
    model = tiny_tagger(use_crf=False, crf_constraints=None)
    ids = random_ids(2, 5, 99)
    labels = torch.tensor([[-100, 1, 2, 0, 0], [0, 3, -100, 4, 0]])
    out = model(ids, labels=labels)
    emissions, _ = model.emissions(ids)
    torch.testing.assert_close(out.logits, emissions)
    expected = torch.nn.functional.cross_entropy(emissions.reshape(-1, 5), labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(out.loss, expected)


# --- configuration and labels --------------------------------------------------------------------------


@pytest.mark.parametrize("labels, bad", [(["O", "X-FOO"], "X-FOO"), (["O", "B-PER", "I-"], "I-")])
def test_labels_that_are_not_bio_fail_at_config_time_naming_the_label(labels, bad):
    with pytest.raises(ValueError, match=f"Invalid label '{bad}'.*'O', 'B-<type>'"):
        BiLSTMCRFConfig.from_preset("tiny", id2label=dict(enumerate(labels)), crf_constraints="BIO")
    config = BiLSTMCRFConfig.from_preset("tiny", id2label=dict(enumerate(labels)), crf_constraints=None)
    assert BiLSTMCRFForTokenClassification(config).crf.constraints is None


@pytest.mark.parametrize("labels, constraints", [
    (LABELS, "BIO"),                          # BIO names: constrained
    (["NOUN", "VERB", "label"], None),        # any other tag set is accepted, as by transformers' configs
    (["O", "X-FOO"], None),
    (["LABEL_0", "LABEL_1"], None),            # transformers' placeholders
])
def test_default_constraints_follow_the_label_names(tmp_path, labels, constraints):
    config = BiLSTMCRFConfig.from_preset("tiny", id2label=dict(enumerate(labels)))
    assert config.crf_constraints == "auto"
    model = BiLSTMCRFForTokenClassification(config)
    assert model.crf.constraints == constraints
    model.save_pretrained(tmp_path)
    loaded = BiLSTMCRFForTokenClassification.from_pretrained(tmp_path)
    assert (loaded.config.crf_constraints, loaded.crf.constraints) == ("auto", constraints)
    assert BiLSTMCRFConfig.from_preset("tiny", id2label=dict(enumerate(labels)), use_crf=False).crf_constraints == "auto"


@pytest.mark.parametrize("overrides, field", [
    (dict(char_encoder="gru"), "char_encoder"),
    (dict(char_vocab="abca"), "char_vocab"),
    (dict(char_hidden_size=0), "char_hidden_size"),
    (dict(use_crf=False, crf_constraints="BIO"), "crf_constraints"),
    (dict(crf_constraints="IOBES"), "crf_constraints"),
    (dict(pad_token_id=500), "pad_token_id"),
])
def test_bad_config_names_the_field(overrides, field):
    with pytest.raises(ConfigValidationError, match=f"`{field}`={overrides[field]!r}"):
        tiny_config(**overrides)


def test_gold_labels_that_break_bio_are_refused():
    model = tiny_tagger()
    with pytest.raises(ValueError, match="not valid BIO at position 2.*IOB1"):
        model(random_ids(1, 4, 99), labels=torch.tensor([[-100, 0, 2, 2]]))  # O then I-PER


def test_presets():
    lample = BiLSTMCRFConfig.from_preset("lample2016", id2label=dict(enumerate(LABELS)))
    assert (lample.embedding_size, lample.hidden_size, lample.char_encoder, lample.char_hidden_size,
            lample.hidden_dropout_prob, lample.bidirectional) == (100, 100, "lstm", 25, 0.5, True)
    assert set(BiLSTMCRFConfig.available_presets()) == {"lample2016", "tiny"}


# --- character encoder -------------------------------------------------------------------------------


@pytest.mark.parametrize("encoder_type", ["cnn", "lstm"])
def test_char_encoder_represents_unknown_words_by_their_characters(encoder_type):
    torch.manual_seed(0)
    encoder = CharWordEncoder(10, "abcdefghijklmnopqrstuvwxyz", encoder_type, 6, 5, max_word_length=8).eval()
    unk = torch.tensor([[1, 1, 1]])  # three out-of-vocabulary words: the same token id
    chars = torch.tensor([words_to_char_ids(["kovalenko", "lisbon", "lisboa"], encoder.char_vocab, 8)])
    out = encoder(unk, chars)
    assert out.shape == (1, 3, encoder.output_size)
    assert not torch.allclose(out[0, 1], out[0, 2]) and not torch.allclose(out[0, 0], out[0, 1])
    padded = torch.tensor([words_to_char_ids(["lisbon"], encoder.char_vocab, 12)])  # more padding: same vector
    torch.testing.assert_close(encoder(unk[:, :1], padded)[0, 0], out[0, 1])
    assert torch.equal(encoder(unk), torch.zeros(1, 3, encoder.output_size))  # empty table row: zeros


def test_tagger_output_follows_the_characters_of_an_unknown_word():
    model = tiny_tagger(seed=4)
    ids = torch.tensor([[7, 1, 9]])  # the middle word is <unk>
    vocab, width = model.config.char_vocab, model.config.char_max_word_length
    first = torch.tensor([words_to_char_ids(["the", "Kovalenko", "said"], vocab, width)])
    second = torch.tensor([words_to_char_ids(["the", "Lisbon", "said"], vocab, width)])
    with torch.no_grad():
        a, b = model(ids, char_input_ids=first).logits, model(ids, char_input_ids=second).logits
    assert not torch.allclose(a[0, 1], b[0, 1])
    with pytest.raises(ValueError, match="char_input_ids"):
        model(ids, char_input_ids=first[:, :2])


def test_token_character_table_comes_from_the_tokenizer(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("Marta lives in Lisbon\nthe harbour jazz festival\n", encoding="utf-8")
    tokenizer = train_tokenizer([corpus], kind="wordpiece", vocab_size=60, min_frequency=1)
    assert token_surface("##ing") == "ing" and token_surface("▁the") == "the" and token_surface("##") == "##"
    model = tiny_tagger(vocab_size=len(tokenizer))
    model.bind_tokenizer(tokenizer)
    table, vocab = model.model.char_encoder.token_chars, model.config.char_vocab
    for token, i in tokenizer.get_vocab().items():
        expected = [] if i in tokenizer.all_special_ids else [vocab.index(c) + 2 for c in token_surface(token)]
        assert table[i, : len(expected)].tolist() == expected and not table[i, len(expected):].any()
    assert tokenizer.unk_token_id not in model.config.untagged_token_ids
    assert tokenizer.bos_token_id in model.config.untagged_token_ids


# --- the transformers model contract -------------------------------------------------------------------


@pytest.mark.parametrize("char_encoder", [None, "lstm"])
def test_hidden_states_are_the_word_representations_and_every_recurrent_layer(char_encoder):
    model = tiny_tagger(char_encoder=char_encoder, num_hidden_layers=3)
    ids, mask = right_pad([random_ids(1, n, 99, seed=n)[0] for n in (3, 6)])
    out = model(ids, attention_mask=mask, output_hidden_states=True)
    width = 12 + (16 if char_encoder == "lstm" else 0)
    assert [tuple(h.shape) for h in out.hidden_states] == [(2, 6, width)] + [(2, 6, 32)] * 3
    base = model.model(ids, attention_mask=mask, output_hidden_states=True)
    assert torch.equal(base.hidden_states[-1], base.last_hidden_state)
    assert not torch.equal(out.hidden_states[1], out.hidden_states[2])
    assert all(not h[0, 3:].any() for h in out.hidden_states[1:])  # padded steps output zeros in every layer
    for h in out.hidden_states:
        h.retain_grad()
    out.logits[mask.bool()].sum().backward()
    assert all(h.grad is not None and h.grad.abs().sum() > 0 for h in out.hidden_states)


def test_labels_outside_the_tags_are_refused():
    model = tiny_tagger()
    ids = random_ids(2, 4, 99)
    for bad, value in ((torch.tensor([[0, 1, 5, 0], [0] * 4]), 5), (torch.tensor([[0, -1, 0, 0], [0] * 4]), -1)):
        for use_crf in (True, False):
            tagger = model if use_crf else tiny_tagger(use_crf=False, crf_constraints=None)
            with pytest.raises(ValueError, match=rf"`labels` contains {value}, outside the 5 classes \[0, 5\)"):
                tagger(ids, labels=bad)
    with pytest.raises(ValueError, match=r"`labels` must have shape \(2, 4\)"):
        model(ids, labels=torch.zeros(2, 3, dtype=torch.long))
    assert torch.isfinite(model(ids, labels=torch.tensor([[0, 1, -100, 0], [0] * 4])).loss)


def test_resize_token_embeddings_resizes_the_character_table(tmp_path):
    model = tiny_tagger(char_encoder="cnn")
    encoder = model.model.char_encoder
    with torch.no_grad():
        encoder.token_chars.random_(2, 20)
    table = encoder.token_chars.clone()
    model.resize_token_embeddings(120)
    assert model.model.embed_tokens.weight.shape == (120, 12) and model.config.vocab_size == 120
    assert encoder.token_chars.shape == (120, 12) and torch.equal(encoder.token_chars[:99], table)
    assert not encoder.token_chars[99:].any()  # new tokens have no characters until bind_tokenizer
    ids = torch.tensor([[110, 5, 119, 7]])
    logits = model(ids).logits
    model.save_pretrained(tmp_path)
    assert torch.equal(BiLSTMCRFForTokenClassification.from_pretrained(tmp_path).eval()(ids).logits, logits)
    model.resize_token_embeddings(50)
    assert encoder.token_chars.shape == (50, 12) and torch.equal(encoder.token_chars, table[:50])
    assert model(torch.tensor([[49, 4]])).logits.shape == (1, 2, 5)


@pytest.mark.parametrize("char_encoder", [None, "cnn", "lstm"])
def test_gradient_checkpointing_reentrant_or_not_gives_the_same_gradients(char_encoder):
    ids, labels = random_ids(2, 6, 99), torch.tensor([[0, 1, 2, 0, 3, 4], [3, 4, 0, 0, 1, 0]])
    mask = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])

    def gradients(kwargs):
        model = tiny_tagger(char_encoder=char_encoder, num_hidden_layers=2).train()
        if char_encoder is not None:  # every token spelled with some characters, so the encoder gets gradients
            spelling = torch.randint(0, 20, (99, 12), generator=torch.Generator().manual_seed(0))
            model.model.char_encoder.token_chars.copy_(spelling)
        if kwargs is not None:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        model(ids, attention_mask=mask, labels=labels).loss.backward()
        return {name: p.grad for name, p in model.named_parameters()}

    expected = gradients(None)
    assert all(g is not None and g.abs().sum() > 0 for g in expected.values())
    for reentrant in (True, False):
        got = gradients({"use_reentrant": reentrant})
        for name, grad in expected.items():
            assert got[name] is not None and torch.allclose(got[name], grad, atol=1e-6), (reentrant, name)


def test_missing_weights_and_the_meta_device_give_initialised_reported_tensors(tmp_path):
    """The character table is a buffer: built on the meta device or missing from a checkpoint it must come out
    of _init_weights (empty: no characters), like every parameter (the CRF's scores start at 0)."""
    config = tiny_config(char_encoder="lstm")
    with torch.device("meta"):
        empty = BiLSTMCRFForTokenClassification(config)
    empty.to_empty(device="cpu")
    with torch.no_grad():
        empty.model.char_encoder.token_chars.fill_(7)  # what uninitialised memory may hold
    empty.init_weights()
    assert not empty.model.char_encoder.token_chars.any()
    assert not any(p.any() for p in empty.crf.parameters())
    for name, tensor in empty.named_parameters():
        assert torch.isfinite(tensor).all() and tensor.abs().max() <= config.init_range, name
    model = tiny_tagger(char_encoder="lstm")
    with torch.no_grad():
        model.model.char_encoder.token_chars.random_(2, 20)
    model.save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    dropped = {"model.char_encoder.token_chars", "crf.transitions", "classifier.weight"}
    save_file({k: v for k, v in state.items() if k not in dropped}, tmp_path / "model.safetensors",
              metadata={"format": "pt"})
    loaded, info = BiLSTMCRFForTokenClassification.from_pretrained(tmp_path, output_loading_info=True)
    assert set(info["missing_keys"]) == dropped
    assert not loaded.model.char_encoder.token_chars.any() and not loaded.crf.transitions.any()
    assert 0 < loaded.classifier.weight.abs().max() <= config.init_range
    for key in state.keys() - dropped:
        assert torch.equal(loaded.state_dict()[key], state[key])
    with init_empty_weights():
        lazy = BiLSTMCRFForTokenClassification(config)
    lazy.load_state_dict(model.state_dict(), assign=True)
    ids = random_ids(2, 5, 99)
    assert torch.equal(lazy.eval()(ids).logits, model.eval()(ids).logits)


def test_inputs_embeds_give_the_outputs_of_the_ids():
    model = tiny_tagger(char_encoder=None)
    ids, mask = right_pad([random_ids(1, n, 99, seed=n)[0] for n in (3, 5)])
    embeds = model.get_input_embeddings()(ids)
    by_ids = model(ids, attention_mask=mask).logits
    by_embeds = model(inputs_embeds=embeds, attention_mask=mask).logits
    real = mask.bool()
    assert torch.allclose(by_embeds[real], by_ids[real], atol=1e-6)  # ids 2/3 would be untagged: none here


def test_bio_check_of_the_labels_does_not_run_when_traced():
    """The BIO check reads label values (nonzero, int): under torch.compile it must not run (no graph break from
    it), eager users still get the error."""
    model = tiny_tagger()
    ids, labels = random_ids(1, 4, 99), torch.tensor([[0, 2, 0, 0]])  # O, I-PER: not BIO
    with pytest.raises(ValueError, match="not valid BIO"):
        model(ids, labels=labels)
    forbidden = model.crf.forbidden_positions
    model.crf.forbidden_positions = lambda *args: pytest.fail("the BIO check ran while tracing")
    torch._dynamo.reset()
    try:
        loss = torch.compile(lambda: model(ids, labels=labels).loss, backend="eager")()
    finally:
        model.crf.forbidden_positions = forbidden
    assert torch.isfinite(loss)


# --- Trainer, pipeline, finetune.py --------------------------------------------------------------------


@pytest.fixture(scope="module")
def word_tokenizer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("word_tokenizer")
    words = [line.split()[0] for line in CONLL.read_text(encoding="utf-8").splitlines() if line.strip()]
    (folder / "words.txt").write_text(" ".join(words) + "\n", encoding="utf-8")
    tokenizer = train_tokenizer([folder / "words.txt"], kind="word", vocab_size=300, min_frequency=1)
    tokenizer.save_pretrained(folder)
    return folder, tokenizer


def test_trainer_then_token_classification_pipeline_decodes_with_viterbi(word_tokenizer, tmp_path):
    _, tokenizer = word_tokenizer
    data = read_conll(CONLL)
    tags = label_list(data)
    features = tokenize_and_align_labels(data, tokenizer, {t: i for i, t in enumerate(tags)}, max_length=32)
    torch.manual_seed(0)
    config = BiLSTMCRFConfig.from_preset("tiny", vocab_size=len(tokenizer), id2label=dict(enumerate(tags)),
                                         label2id={t: i for i, t in enumerate(tags)})
    model = BiLSTMCRFForTokenClassification(config)
    model.bind_tokenizer(tokenizer)
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4, num_train_epochs=15,
                             learning_rate=0.05, report_to="none", save_strategy="no", use_cpu=True,
                             disable_tqdm=True, logging_steps=1, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=features, eval_dataset=features,
                      data_collator=DataCollatorForTokenClassification(tokenizer))
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert losses[-1] < losses[0]
    assert "eval_loss" in trainer.evaluate()

    model.eval()
    sentence = "Marta Kovalenko joined Brightwater Analytics in Lisbon ."
    tagger = pipeline("token-classification", model=model, tokenizer=tokenizer)
    entities = tagger(sentence)
    encoded = tokenizer(sentence, return_tensors="pt")
    viterbi = model.decode(**encoded)[0]
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    expected = [(tok, tags[t]) for tok, t in zip(tokens, viterbi.tolist(), strict=True) if t >= 0 and tags[t] != "O"]
    assert expected and [(e["word"], e["entity"]) for e in entities] == expected
    assert is_valid_bio([tags[t] for t in viterbi.tolist() if t >= 0])
    grouped = pipeline("token-classification", model=model, tokenizer=tokenizer, aggregation_strategy="simple")
    spans = [(g["entity_group"], g["word"]) for g in grouped(sentence)]
    entities_of_words = []
    for token, tag in expected:  # valid BIO: B- opens an entity, I- continues it
        if tag.startswith("B-"):
            entities_of_words.append((tag[2:], [token]))
        else:
            entities_of_words[-1][1].append(token)
    assert spans == [(kind, " ".join(ws)) for kind, ws in entities_of_words]


def test_unknown_words_get_their_characters_from_the_text(word_tokenizer):
    _, tokenizer = word_tokenizer
    config = tiny_config(vocab_size=len(tokenizer))
    examples = Dataset.from_dict({"tokens": [["Marta", "visited", "Zyxwvu"], ["Lisbon"]], "tags": [["O"] * 3, ["O"]]})
    features = tokenize_and_align_labels(examples, tokenizer, {"O": 0}, max_length=16)
    features = add_char_input_ids(features, examples, tokenizer, config, max_length=16)
    assert tokenizer.convert_ids_to_tokens(features[0]["input_ids"])[-1] == "<unk>"
    width = config.char_max_word_length
    expected = words_to_char_ids(["", "Marta", "visited", "Zyxwvu"], config.char_vocab, width)  # <bos> has none
    assert features[0]["char_input_ids"] == expected
    batch = DataCollatorForCharTagging(tokenizer)([features[0], features[1]])
    assert batch["char_input_ids"].shape == (2, 4, width) and not batch["char_input_ids"][1, 2:].any()
    model = BiLSTMCRFForTokenClassification(config).eval()
    model.bind_tokenizer(tokenizer)
    table_chars = model.model.char_encoder.token_chars[batch["input_ids"]]
    known = batch["input_ids"] != tokenizer.unk_token_id  # known words: the text gives what the table holds
    assert torch.equal(batch["char_input_ids"][known], table_chars[known])
    assert not table_chars[0, 3].any() and batch["char_input_ids"][0, 3].any()


def test_finetune_cli_trains_the_tagger_from_a_preset(word_tokenizer, tmp_path):
    from hf_seqmodels.training.finetune.cli import main

    folder, _ = word_tokenizer
    out = tmp_path / "ner"
    metrics = main(["--task", "token-classification", "--model_family", "bilstm_crf", "--preset", "tiny",
                    "--config_overrides", "char_encoder=lstm", "--tokenizer_name", str(folder),
                    "--train_file", str(CONLL), "--validation_file", str(CONLL), "--max_seq_length", "32",
                    "--num_train_epochs", "15", "--learning_rate", "0.05", "--per_device_train_batch_size", "4",
                    "--output_dir", str(out), "--report_to", "none", "--save_strategy", "no", "--use_cpu",
                    "--seed", "0", "--disable_tqdm"])
    # evaluated on its training sentences: the tagger must have learned them (entity F1 from hfsm_seqeval)
    assert metrics["eval_overall_f1"] > 0.5, metrics
    model = AutoModelForTokenClassification.from_pretrained(out)
    assert isinstance(model, BiLSTMCRFForTokenClassification) and model.config.char_encoder == "lstm"
    assert model.model.char_encoder.token_chars.any()  # the table was filled from the tokenizer


# --- the character encoder in the RNN language model -----------------------------------------------------


@pytest.mark.parametrize("char_encoder", ["cnn", "lstm"])
def test_rnn_language_model_with_chars_generates_the_same_with_and_without_cache(char_encoder):
    torch.manual_seed(0)
    model = RNNForCausalLM(RNNConfig.from_preset("tiny", char_encoder=char_encoder, char_hidden_size=6)).eval()
    with torch.no_grad():
        model.model.char_encoder.token_chars.random_(0, 30)
    ids = random_ids(2, 4, 99)
    out = model(ids, labels=ids)
    assert out.logits.shape == (2, 4, 99) and torch.isfinite(out.loss)
    kw = dict(max_new_tokens=6, min_new_tokens=6)
    for extra in (dict(do_sample=False), dict(num_beams=3, num_return_sequences=2)):
        assert torch.equal(model.generate(ids, **kw, **extra), model.generate(ids, **kw, **extra, use_cache=False))


def test_rnn_config_without_chars_is_unchanged():
    config = RNNConfig.from_preset("tiny")
    assert config.char_encoder is None and config.char_vocab is None
    model = RNNForCausalLM(config)
    assert model.model.char_encoder is None and not any("char" in n for n, _ in model.named_parameters())
    assert model.model.encoder.rnn.input_size == config.embedding_size
