"""Conversion between our BERT (``hfsm_bert``) and transformers' built-in ``Bert*`` classes, both ways.

Weights move by name (a fixed table of renamings, no pickles); the config fields have the same names.
Every head that exists in both libraries converts: ``BertModel``, ``BertForPreTraining``,
``BertForMaskedLM``, ``BertForNextSentencePrediction``, ``BertForSequenceClassification``,
``BertForTokenClassification``, ``BertForQuestionAnswering`` and ``BertForMultipleChoice``::

    import transformers
    from hf_seqmodels.convert_bert import from_transformers_bert, to_transformers_bert

    ours = from_transformers_bert(transformers.BertForPreTraining.from_pretrained("google-bert/bert-base-uncased"))
    theirs = to_transformers_bert(ours)          # a transformers.BertForPreTraining again
"""

from __future__ import annotations

import re

import transformers

from . import models
from .models.configuration_bert import BertConfig

HEADS = (
    "BertModel",
    "BertForPreTraining",
    "BertForMaskedLM",
    "BertForNextSentencePrediction",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertForQuestionAnswering",
    "BertForMultipleChoice",
)

# Fields copied as they are between the two configs (besides the labels: id2label, label2id, problem_type).
CONFIG_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
    "initializer_range", "layer_norm_eps", "pad_token_id", "classifier_dropout", "tie_word_embeddings",
)

# (our name, transformers' name) prefixes; "{i}" is a layer index. Names not listed are the same in both.
RENAMES = (
    ("embeddings.layer_norm.", "embeddings.LayerNorm."),
    ("encoder.layers.{i}.self_attn.q_proj.", "encoder.layer.{i}.attention.self.query."),
    ("encoder.layers.{i}.self_attn.k_proj.", "encoder.layer.{i}.attention.self.key."),
    ("encoder.layers.{i}.self_attn.v_proj.", "encoder.layer.{i}.attention.self.value."),
    ("encoder.layers.{i}.self_attn.out_proj.", "encoder.layer.{i}.attention.output.dense."),
    ("encoder.layers.{i}.self_attn_norm.", "encoder.layer.{i}.attention.output.LayerNorm."),
    ("encoder.layers.{i}.feed_forward.fc1.", "encoder.layer.{i}.intermediate.dense."),
    ("encoder.layers.{i}.feed_forward.fc2.", "encoder.layer.{i}.output.dense."),
    ("encoder.layers.{i}.ffn_norm.", "encoder.layer.{i}.output.LayerNorm."),
    ("mlm_head.dense.", "cls.predictions.transform.dense."),
    ("mlm_head.layer_norm.", "cls.predictions.transform.LayerNorm."),
    ("mlm_head.decoder.weight", "cls.predictions.decoder.weight"),
    ("mlm_head.decoder.bias", "cls.predictions.bias"),  # transformers ties cls.predictions.decoder.bias to it
    ("nsp_head.", "cls.seq_relationship."),
)


def _pattern(prefix: str) -> re.Pattern:
    return re.compile("^(bert\\.)?" + re.escape(prefix).replace(re.escape("{i}"), r"(?P<i>\d+)"))


def rename(name: str, to_transformers: bool) -> str:
    """Our parameter name → transformers' (or back); the ``bert.`` prefix of the heads is optional."""
    for ours, theirs in RENAMES:
        source, target = (ours, theirs) if to_transformers else (theirs, ours)
        match = _pattern(source).match(name)
        if match:
            new_prefix = (match.group(1) or "") + target.replace("{i}", match.groupdict().get("i") or "")
            return new_prefix + name[match.end():]
    return name


def _check_head(name: str) -> None:
    if name not in HEADS:
        raise ValueError(f"no conversion for {name}; convertible heads: {', '.join(HEADS)}")


def _copy_config(source, target_class, head: str, **extra):
    fields = {field: getattr(source, field) for field in CONFIG_FIELDS if hasattr(source, field)}
    labels = dict(id2label=dict(source.id2label), label2id=dict(source.label2id), problem_type=source.problem_type)
    if head == "BertForQuestionAnswering":  # two outputs (start, end) whatever the labels say
        labels = {}
    return target_class(**fields, **labels, **extra)


def from_transformers_bert(hf_model: transformers.PreTrainedModel, attn_implementation: str | None = None):
    """Our model with the weights of a transformers ``Bert*`` model (same head, same outputs).

    ``attn_implementation`` (``"eager"``/``"sdpa"``) picks our attention kernel (default: sdpa).
    """
    name = type(hf_model).__name__
    _check_head(name)
    hf_config = hf_model.config
    if getattr(hf_config, "is_decoder", False) or getattr(hf_config, "add_cross_attention", False):
        raise ValueError("only the bidirectional BERT encoder converts (is_decoder and add_cross_attention False)")
    if getattr(hf_config, "position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"position_embedding_type={hf_config.position_embedding_type!r} does not convert; "
                         "our BERT has absolute learned positions")
    if name == "BertForQuestionAnswering" and hf_config.num_labels != 2:
        raise ValueError(f"a question-answering head has 2 outputs (start, end), got num_labels={hf_config.num_labels}")
    if not isinstance(hf_config.hidden_act, str):
        raise ValueError("hidden_act must be an activation name to convert")
    extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
    config = _copy_config(hf_config, BertConfig, name, **extra)
    ours = getattr(models, name)(config)
    state = {rename(key, to_transformers=False): value for key, value in hf_model.state_dict().items()
             if not key.endswith("cls.predictions.decoder.bias")}
    ours.load_state_dict(state, strict=True)
    return ours.to(hf_model.dtype).train(hf_model.training)


def to_transformers_bert(model: models.BertPreTrainedModel, attn_implementation: str | None = None):
    """The transformers ``Bert*`` model (same head) with our model's weights."""
    name = type(model).__name__
    _check_head(name)
    extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
    config = _copy_config(model.config, transformers.BertConfig, name, **extra)
    theirs = getattr(transformers, name)(config)
    state = {}
    for key, value in model.state_dict().items():
        state[rename(key, to_transformers=True)] = value
        if key.endswith("mlm_head.decoder.bias"):
            state[key.replace("mlm_head.decoder.bias", "cls.predictions.decoder.bias")] = value
    theirs.load_state_dict(state, strict=True)
    return theirs.to(model.dtype).train(model.training)


__all__ = ["CONFIG_FIELDS", "HEADS", "RENAMES", "from_transformers_bert", "rename", "to_transformers_bert"]
