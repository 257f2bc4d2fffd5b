"""Every model family of the package, and its registration with the transformers Auto classes.

Each family is one :class:`~hf_seqmodels.families.Family` of ``FAMILY_DESCRIPTIONS``: its configuration
class, the model class for each Auto class, its tiny config, how to make inputs and labels for each head, and
its capabilities; ``FAMILIES`` is the ``{config class: {Auto class: model class}}`` view of them.
:func:`register_all` (run by ``import hf_seqmodels``) registers them locally, marks every
class for the Hub (so ``save_pretrained`` copies the code) and gives each config class the
``auto_map`` of *all* heads of its family, so that ``trust_remote_code=True`` finds any head.
"""

from __future__ import annotations

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForNextSentencePrediction,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from .families import Capabilities, Family, bert_inputs, seq2seq_inputs, sequence_inputs, tagger_inputs
from .models import (
    BertConfig,
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForNextSentencePrediction,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    BiLSTMCRFConfig,
    BiLSTMCRFForTokenClassification,
    BiLSTMCRFModel,
    NNLMConfig,
    NNLMForCausalLM,
    NNLMModel,
    RNNConfig,
    RNNForCausalLM,
    RNNForSequenceClassification,
    RNNForTokenClassification,
    RNNModel,
    RNNSeq2SeqConfig,
    RNNSeq2SeqForConditionalGeneration,
    RNNSeq2SeqModel,
    TextCNNConfig,
    TextCNNForSequenceClassification,
    TextCNNModel,
    TransformerConfig,
    TransformerForCausalLM,
    TransformerForConditionalGeneration,
    TransformerLMConfig,
    TransformerLMModel,
    TransformerModel,
)


def _recurrent_layers(config) -> dict[str, int]:
    return {"hidden_states": config.num_hidden_layers + 1}


def _seq2seq_stacks(config) -> dict[str, int]:
    return {"encoder_hidden_states": config.encoder_layers + 1, "decoder_hidden_states": config.decoder_layers + 1}


def _transformer_attentions(config) -> dict[str, int]:
    return {"encoder_attentions": config.encoder_layers, "decoder_attentions": config.decoder_layers,
            "cross_attentions": config.decoder_layers}


FAMILY_DESCRIPTIONS: tuple[Family, ...] = (
    Family(
        name="bilstm_crf", config_class=BiLSTMCRFConfig,
        heads={AutoModel: BiLSTMCRFModel, AutoModelForTokenClassification: BiLSTMCRFForTokenClassification},
        make_inputs=tagger_inputs, hidden_states=_recurrent_layers,
        tiny_overrides={"id2label": {0: "O", 1: "B-X", 2: "I-X"}},
        capabilities=Capabilities(inputs_embeds=True, num_items_in_batch=False),
    ),
    Family(
        name="nnlm", config_class=NNLMConfig,
        heads={AutoModel: NNLMModel, AutoModelForCausalLM: NNLMForCausalLM},
        make_inputs=sequence_inputs, hidden_states=lambda config: {"hidden_states": 2},  # x = [C(w)...], tanh layer
        common_properties=("vocab_size", "hidden_size"),
        capabilities=Capabilities(stateful_cache=True, inputs_embeds=True, gradient_checkpointing=False),
    ),
    Family(
        name="rnn", config_class=RNNConfig,
        heads={
            AutoModel: RNNModel,
            AutoModelForCausalLM: RNNForCausalLM,
            AutoModelForSequenceClassification: RNNForSequenceClassification,
            AutoModelForTokenClassification: RNNForTokenClassification,
        },
        make_inputs=sequence_inputs, hidden_states=_recurrent_layers,
        capabilities=Capabilities(stateful_cache=True, inputs_embeds=True, tied_embeddings=True),
    ),
    Family(
        name="rnn_seq2seq", config_class=RNNSeq2SeqConfig,
        heads={AutoModel: RNNSeq2SeqModel, AutoModelForSeq2SeqLM: RNNSeq2SeqForConditionalGeneration},
        make_inputs=seq2seq_inputs, hidden_states=_seq2seq_stacks,
        attentions=lambda config: {"cross_attentions": 1},  # the decoder's alignment over the source
        capabilities=Capabilities(is_encoder_decoder=True, stateful_cache=True, tied_embeddings=True),
    ),
    Family(
        name="transformer", config_class=TransformerConfig,
        heads={AutoModel: TransformerModel, AutoModelForSeq2SeqLM: TransformerForConditionalGeneration},
        make_inputs=seq2seq_inputs, hidden_states=_seq2seq_stacks, attentions=_transformer_attentions,
        common_properties=("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"),
        capabilities=Capabilities(is_encoder_decoder=True, static_cache=True, inputs_embeds=True, sdpa=True,
                                  tied_embeddings=True),
    ),
    Family(
        name="transformer_lm", config_class=TransformerLMConfig,
        heads={AutoModel: TransformerLMModel, AutoModelForCausalLM: TransformerForCausalLM},
        make_inputs=sequence_inputs,
        hidden_states=lambda config: {"hidden_states": config.decoder_layers + 1},
        attentions=lambda config: {"attentions": config.decoder_layers},
        common_properties=("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"),
        capabilities=Capabilities(static_cache=True, inputs_embeds=True, sdpa=True, tied_embeddings=True),
    ),
    Family(
        name="bert", config_class=BertConfig,
        heads={
            AutoModel: BertModel,
            AutoModelForPreTraining: BertForPreTraining,
            AutoModelForMaskedLM: BertForMaskedLM,
            AutoModelForNextSentencePrediction: BertForNextSentencePrediction,
            AutoModelForSequenceClassification: BertForSequenceClassification,
            AutoModelForTokenClassification: BertForTokenClassification,
            AutoModelForQuestionAnswering: BertForQuestionAnswering,
            AutoModelForMultipleChoice: BertForMultipleChoice,
        },
        make_inputs=bert_inputs,
        hidden_states=lambda config: {"hidden_states": config.num_hidden_layers + 1},
        attentions=lambda config: {"attentions": config.num_hidden_layers},
        common_properties=("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"),
        capabilities=Capabilities(static_cache=True, inputs_embeds=True, sdpa=True, tied_embeddings=True),
    ),
    Family(
        name="textcnn", config_class=TextCNNConfig,
        heads={AutoModel: TextCNNModel, AutoModelForSequenceClassification: TextCNNForSequenceClassification},
        make_inputs=sequence_inputs, hidden_states=lambda config: {"hidden_states": 2},  # word vectors, features
        common_properties=("vocab_size",),
        capabilities=Capabilities(gradient_checkpointing=False, mask_removes_tokens=True),
    ),
)

#: ``{config class: {Auto class: model class}}``, the Auto-class view of :data:`FAMILY_DESCRIPTIONS`.
FAMILIES = {family.config_class: dict(family.heads) for family in FAMILY_DESCRIPTIONS}


def family_of(config_or_class) -> Family:
    """The :class:`Family` of a config, a config class or a model class of the package."""
    for family in FAMILY_DESCRIPTIONS:
        classes = (family.config_class, *family.heads.values())
        if config_or_class in classes or type(config_or_class) is family.config_class:
            return family
    raise ValueError(f"{config_or_class!r} belongs to no family of the package; families: "
                     f"{[f.name for f in FAMILY_DESCRIPTIONS]}")


_registered = False


def auto_map_for(config_class) -> dict[str, str]:
    """``{"AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XForCausalLM", ...}``."""
    def ref(cls):
        return f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"

    auto_map = {"AutoConfig": ref(config_class)}
    for auto_class, model_class in FAMILIES[config_class].items():
        auto_map[auto_class.__name__] = ref(model_class)
    return auto_map


def register_all() -> None:
    global _registered
    if _registered:
        return
    for config_class, heads in FAMILIES.items():
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        config_class.register_for_auto_class()
        config_class.AUTO_MAP = auto_map_for(config_class)
        for auto_class, model_class in heads.items():
            auto_class.register(config_class, model_class, exist_ok=True)
            model_class.register_for_auto_class(auto_class.__name__)
    _registered = True
