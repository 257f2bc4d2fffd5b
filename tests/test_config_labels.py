"""Every config writes ``id2label`` and ``label2id`` together and keeps them inverse of each other, as
transformers' text- and token-classification example scripts read both."""

from __future__ import annotations

import json

import pytest
from transformers import AutoConfig

import hf_seqmodels  # noqa: F401  (registers the model types)
from hf_seqmodels.models.config_utils import ConfigValidationError

MODEL_TYPES = ("hfsm_bert", "hfsm_bilstm_crf", "hfsm_nnlm", "hfsm_rnn", "hfsm_rnn_seq2seq", "hfsm_textcnn",
               "hfsm_transformer", "hfsm_transformer_lm")
CONFIG_CLASSES = [type(AutoConfig.for_model(model_type)) for model_type in MODEL_TYPES]


@pytest.mark.parametrize("config_class", CONFIG_CLASSES, ids=lambda cls: cls.__name__)
def test_id2label_alone_gives_label2id_in_memory_and_on_disk(config_class, tmp_path):
    config = config_class.from_preset("tiny", id2label={0: "O", 1: "B-PER", 2: "I-PER"})
    assert config.label2id == {"O": 0, "B-PER": 1, "I-PER": 2}
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["label2id"] == {"O": 0, "B-PER": 1, "I-PER": 2}
    assert saved["id2label"] == {"0": "O", "1": "B-PER", "2": "I-PER"}
    reloaded = config_class.from_pretrained(tmp_path)
    assert reloaded.id2label == {0: "O", 1: "B-PER", 2: "I-PER"}
    assert reloaded.label2id == config.label2id and reloaded.num_labels == 3


@pytest.mark.parametrize("config_class", CONFIG_CLASSES, ids=lambda cls: cls.__name__)
def test_label2id_alone_gives_id2label(config_class):
    config = config_class.from_preset("tiny", label2id={"O": 0, "B-PER": 1, "I-PER": 2})
    assert config.id2label == {0: "O", 1: "B-PER", 2: "I-PER"}
    assert config.num_labels == 3


def test_num_labels_alone_gives_both_default_maps():
    config_class = CONFIG_CLASSES[0]
    config = config_class.from_preset("tiny", num_labels=3)
    assert config.label2id == {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2}
    assert config.id2label == {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}


def test_disagreeing_maps_and_duplicate_names_are_refused():
    config_class = CONFIG_CLASSES[0]
    with pytest.raises(ConfigValidationError, match="label2id"):
        config_class.from_preset("tiny", id2label={0: "A", 1: "B"}, label2id={"A": 1, "B": 0})
    with pytest.raises(ConfigValidationError, match="id2label"):
        config_class.from_preset("tiny", id2label={0: "A", 1: "A"})


def test_a_consistent_label2id_is_kept_as_given():
    config_class = CONFIG_CLASSES[0]
    config = config_class.from_preset("tiny", id2label={0: "O", 1: "B-PER"}, label2id={"O": "0", "B-PER": "1"})
    assert config.label2id == {"O": "0", "B-PER": "1"}
