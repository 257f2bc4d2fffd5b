"""Model code of every family, in one flat folder.

``save_pretrained`` copies a model's modules and their single-dot sibling imports next to the
weights, so everything here imports only torch, transformers, the standard library and siblings
(``from .recurrent_stack import ...``). Shared building blocks live here as sibling modules:

* ``recurrent_stack.py`` – the fused RNN/LSTM/GRU stack with padding handling; ``recurrent_cells.py`` – the
  peephole LSTM it runs by a per-step loop (``cell_type="peephole_lstm"``);
* ``tree_lstm.py`` – the child-sum Tree-LSTM (Tai et al. 2015) over batches of trees, level by level;
* ``state_cache.py`` – the recurrent generation cache and its beam reordering;
* ``rnn_attention.py`` – Bahdanau and Luong attention scores; ``attention_state.py`` – the
  attention decoder's generation cache and the coverage penalty of beam search;
* ``stateful_generation.py`` – generate() support and the LM loss of models whose cache is a state;
* ``cache_naming.py`` – the cache's name where models meet transformers (``past_key_values`` up to 5.23,
  ``cache`` from 5.24): every model takes either and returns the installed version's;
* ``multi_head_attention.py``, ``positional_encoding.py``, ``feed_forward.py`` – the attention, position
  and feed-forward blocks of the Transformer family (and BERT); ``transformer_layers.py`` – its layers,
  whose encoder layer is also BERT's (``configuration_bert.py``, ``modeling_bert.py``);
* ``teacher_forcing.py`` – decoder inputs and the label-smoothed token loss of the encoder-decoders;
* ``configuration_textcnn.py``, ``modeling_textcnn.py`` – TextCNN (Kim 2014), filters over word vectors;
* ``configuration_bilstm_crf.py``, ``modeling_bilstm_crf.py`` – the BiLSTM-CRF tagger; ``crf.py`` – its
  linear-chain CRF; ``char_encoder.py`` – character-level word representations (tagger and RNN LMs);
* ``config_utils.py`` – presets and config validation; ``input_checks.py`` – input validation.
"""

from .attention_state import AttentionDecoderState
from .configuration_bert import BertConfig
from .configuration_bilstm_crf import BiLSTMCRFConfig
from .configuration_nnlm import NNLMConfig
from .configuration_rnn import RNNConfig
from .configuration_rnn_seq2seq import RNNSeq2SeqConfig
from .configuration_textcnn import TextCNNConfig
from .configuration_transformer import TransformerConfig, TransformerLMConfig
from .crf import LinearChainCRF
from .modeling_bert import (
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForNextSentencePrediction,
    BertForPreTraining,
    BertForPreTrainingOutput,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    BertPreTrainedModel,
)
from .modeling_bilstm_crf import BiLSTMCRFForTokenClassification, BiLSTMCRFModel, BiLSTMCRFPreTrainedModel
from .modeling_nnlm import NNLMForCausalLM, NNLMModel, NNLMPreTrainedModel
from .modeling_rnn import (
    RNNForCausalLM,
    RNNForSequenceClassification,
    RNNForTokenClassification,
    RNNModel,
    RNNPreTrainedModel,
)
from .modeling_rnn_seq2seq import (
    RNNSeq2SeqForConditionalGeneration,
    RNNSeq2SeqModel,
    RNNSeq2SeqPreTrainedModel,
)
from .modeling_textcnn import (
    TextCNNForSequenceClassification,
    TextCNNModel,
    TextCNNModelOutput,
    TextCNNPreTrainedModel,
)
from .modeling_transformer import (
    TransformerForCausalLM,
    TransformerForConditionalGeneration,
    TransformerLMModel,
    TransformerModel,
    TransformerPreTrainedModel,
)
from .multi_head_attention import MultiHeadAttention
from .recurrent_cells import PeepholeLSTM, PeepholeLSTMCell
from .recurrent_stack import RecurrentStack
from .state_cache import RecurrentState
from .tree_lstm import ChildSumTreeLSTM, ChildSumTreeLSTMCell

__all__ = [
    "BiLSTMCRFConfig",
    "BiLSTMCRFForTokenClassification",
    "BiLSTMCRFModel",
    "BiLSTMCRFPreTrainedModel",
    "LinearChainCRF",
    "BertConfig",
    "BertForMaskedLM",
    "BertForMultipleChoice",
    "BertForNextSentencePrediction",
    "BertForPreTraining",
    "BertForPreTrainingOutput",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "BertPreTrainedModel",
    "NNLMConfig",
    "NNLMForCausalLM",
    "NNLMModel",
    "NNLMPreTrainedModel",
    "RNNConfig",
    "RNNForCausalLM",
    "RNNForSequenceClassification",
    "RNNForTokenClassification",
    "RNNModel",
    "RNNPreTrainedModel",
    "RNNSeq2SeqConfig",
    "RNNSeq2SeqForConditionalGeneration",
    "RNNSeq2SeqModel",
    "RNNSeq2SeqPreTrainedModel",
    "AttentionDecoderState",
    "RecurrentStack",
    "PeepholeLSTM",
    "PeepholeLSTMCell",
    "ChildSumTreeLSTM",
    "ChildSumTreeLSTMCell",
    "RecurrentState",
    "MultiHeadAttention",
    "TextCNNConfig",
    "TextCNNForSequenceClassification",
    "TextCNNModel",
    "TextCNNModelOutput",
    "TextCNNPreTrainedModel",
    "TransformerConfig",
    "TransformerForCausalLM",
    "TransformerForConditionalGeneration",
    "TransformerLMConfig",
    "TransformerLMModel",
    "TransformerModel",
    "TransformerPreTrainedModel",
]
