"""Registration of every model family with the transformers Auto classes.

Each family is one entry of ``FAMILIES``: its configuration class and the head for each Auto
class. :func:`register_all` (run by ``import hf_seqmodels``) registers them locally, marks every
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
    TransformerModel,
)

FAMILIES = {
    BiLSTMCRFConfig: {AutoModel: BiLSTMCRFModel, AutoModelForTokenClassification: BiLSTMCRFForTokenClassification},
    NNLMConfig: {AutoModelForCausalLM: NNLMForCausalLM},
    RNNConfig: {
        AutoModel: RNNModel,
        AutoModelForCausalLM: RNNForCausalLM,
        AutoModelForSequenceClassification: RNNForSequenceClassification,
        AutoModelForTokenClassification: RNNForTokenClassification,
    },
    RNNSeq2SeqConfig: {AutoModel: RNNSeq2SeqModel, AutoModelForSeq2SeqLM: RNNSeq2SeqForConditionalGeneration},
    TransformerConfig: {AutoModel: TransformerModel, AutoModelForSeq2SeqLM: TransformerForConditionalGeneration},
    TransformerLMConfig: {AutoModelForCausalLM: TransformerForCausalLM},
    BertConfig: {
        AutoModel: BertModel,
        AutoModelForPreTraining: BertForPreTraining,
        AutoModelForMaskedLM: BertForMaskedLM,
        AutoModelForNextSentencePrediction: BertForNextSentencePrediction,
        AutoModelForSequenceClassification: BertForSequenceClassification,
        AutoModelForTokenClassification: BertForTokenClassification,
        AutoModelForQuestionAnswering: BertForQuestionAnswering,
        AutoModelForMultipleChoice: BertForMultipleChoice,
    },
    TextCNNConfig: {AutoModel: TextCNNModel, AutoModelForSequenceClassification: TextCNNForSequenceClassification},
}

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
