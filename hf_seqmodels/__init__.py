"""hf_seqmodels: the classic sequence models of NLP as first-class Hugging Face models.

Importing the package registers every model type with ``AutoConfig`` and the ``AutoModel…``
classes, so ``AutoModelForCausalLM.from_pretrained(folder)`` works for our checkpoints.
"""

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
    RecurrentState,
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
from .pipelines import QuestionAnsweringPipeline, TranslationPipeline, register_pipelines
from .registry import register_all
from .saved_folders import register_save_hooks

register_all()
register_pipelines()
register_save_hooks()

__version__ = "0.1.0"  # the one place the version is written: pyproject.toml reads it from here

__all__ = [
    "BiLSTMCRFConfig",
    "BiLSTMCRFForTokenClassification",
    "BiLSTMCRFModel",
    "BertConfig",
    "BertForMaskedLM",
    "BertForMultipleChoice",
    "BertForNextSentencePrediction",
    "BertForPreTraining",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "NNLMConfig",
    "NNLMForCausalLM",
    "NNLMModel",
    "RNNConfig",
    "RNNForCausalLM",
    "RNNForSequenceClassification",
    "RNNForTokenClassification",
    "RNNModel",
    "RNNSeq2SeqConfig",
    "RNNSeq2SeqForConditionalGeneration",
    "RNNSeq2SeqModel",
    "QuestionAnsweringPipeline",
    "RecurrentState",
    "TextCNNConfig",
    "TextCNNForSequenceClassification",
    "TextCNNModel",
    "TranslationPipeline",
    "TransformerConfig",
    "TransformerForCausalLM",
    "TransformerForConditionalGeneration",
    "TransformerLMConfig",
    "TransformerLMModel",
    "TransformerModel",
    "__version__",
]
