"""Configuration of the RNN / LSTM / GRU model family."""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

from .char_encoder import DEFAULT_CHAR_VOCAB, check_char_encoder_fields
from .config_utils import (
    PresetMixin,
    check_choice,
    check_positive,
    check_probability,
    check_token_id,
    invalid,
)
from .recurrent_stack import CELL_TYPES

POOLING_MODES = ("last", "mean", "max")


@strict
class RNNConfig(PresetMixin, PreTrainedConfig):
    r"""Configuration of :class:`RNNForCausalLM`, :class:`RNNForSequenceClassification` and
    :class:`RNNForTokenClassification`.

    Args:
        vocab_size: number of tokens in the vocabulary.
        cell_type: the recurrent cell, one of ``"rnn_tanh"``, ``"rnn_relu"``, ``"lstm"``, ``"gru"``.
        embedding_size: size of the token embeddings; ``None`` means ``hidden_size``.
        hidden_size: size of the recurrent state ``h_t`` (per direction).
        num_hidden_layers: number of stacked recurrent layers.
        bidirectional: add a right-to-left stack (classification and tagging heads only; a
            language model must not see the future).
        hidden_dropout_prob: dropout on the non-recurrent connections: embeddings, between
            stacked layers and before the output layer (Zaremba et al. 2014).
        tie_word_embeddings: share the language-model output matrix with the input embeddings;
            when ``embedding_size != hidden_size`` a linear projection maps ``h_t`` to the
            embedding size first.
        pooling: how the sequence classifier summarises a sentence: the final state
            (``"last"``), or the mean or max of the outputs over real tokens.
        classifier_dropout: dropout before the classification layer (``None``: hidden_dropout_prob).
        init_range: weights are initialised uniformly in ``[-init_range, init_range]`` (Zaremba
            et al. use 0.1 / 0.05 / 0.04).
        char_encoder: None (default), ``"cnn"`` or ``"lstm"``: a character-level word representation
            concatenated with the token embedding (:mod:`char_encoder`); the recurrent stack's input
            grows by its size. Generation looks each token's characters up in the model's table.
        char_vocab: the characters the character encoder knows (string or list; default: printable
            ASCII and Latin-1 letters).
        char_embedding_size, char_hidden_size, char_kernel_size, char_max_word_length: the character
            encoder's embedding size, filters (CNN) or state size per direction (LSTM), CNN window and
            characters kept per token.
    """

    model_type = "hfsm_rnn"
    PRESETS = {
        "tiny": dict(vocab_size=99, hidden_size=16, num_hidden_layers=2, embedding_size=12),
        # Zaremba, Sutskever & Vinyals (2014), "Recurrent Neural Network Regularization", PTB word level
        "zaremba-small": dict(
            vocab_size=10000, cell_type="lstm", hidden_size=200, num_hidden_layers=2,
            hidden_dropout_prob=0.0, init_range=0.1,
        ),
        "zaremba-medium": dict(
            vocab_size=10000, cell_type="lstm", hidden_size=650, num_hidden_layers=2,
            hidden_dropout_prob=0.5, init_range=0.05,
        ),
        "zaremba-large": dict(
            vocab_size=10000, cell_type="lstm", hidden_size=1500, num_hidden_layers=2,
            hidden_dropout_prob=0.65, init_range=0.04,
        ),
        # Karpathy's char-rnn default-sized character model (2 x 512 LSTM)
        "char-rnn": dict(vocab_size=128, cell_type="lstm", hidden_size=512, num_hidden_layers=2,
                         hidden_dropout_prob=0.2, init_range=0.08),
        # char-rnn's sizes with the course notes' peephole LSTM (recurrent_cells.py; a per-step loop, slower)
        "peephole-lstm": dict(vocab_size=128, cell_type="peephole_lstm", hidden_size=512, num_hidden_layers=2,
                              hidden_dropout_prob=0.2, init_range=0.08),
    }

    vocab_size: int = 10000
    cell_type: str = "lstm"
    embedding_size: int | None = None
    hidden_size: int = 256
    num_hidden_layers: int = 2
    bidirectional: bool = False
    hidden_dropout_prob: float | int = 0.0
    tie_word_embeddings: bool = False
    pooling: str = "last"
    classifier_dropout: float | int | None = None
    init_range: float = 0.1
    use_cache: bool = True
    pad_token_id: int | None = 0
    bos_token_id: int | None = 2
    eos_token_id: int | list[int] | None = 3
    char_encoder: str | None = None
    char_vocab: str | list[str] | None = None
    char_embedding_size: int = 25
    char_hidden_size: int = 25
    char_kernel_size: int = 3
    char_max_word_length: int = 20

    def __post_init__(self, **kwargs):
        if self.char_encoder is not None and self.char_vocab is None:
            self.char_vocab = DEFAULT_CHAR_VOCAB
        if self.embedding_size is None:
            self.embedding_size = self.hidden_size
        super().__post_init__(**kwargs)

    def validate_architecture(self):
        check_choice("cell_type", self.cell_type, CELL_TYPES)
        check_choice("pooling", self.pooling, POOLING_MODES)
        for field in ("vocab_size", "hidden_size", "num_hidden_layers", "embedding_size", "init_range"):
            check_positive(field, getattr(self, field))
        check_probability("hidden_dropout_prob", self.hidden_dropout_prob)
        check_probability("classifier_dropout", self.classifier_dropout)
        check_token_id("pad_token_id", self.pad_token_id, self.vocab_size)
        check_token_id("bos_token_id", self.bos_token_id, self.vocab_size)
        for eos in self.eos_token_id if isinstance(self.eos_token_id, list) else [self.eos_token_id]:
            check_token_id("eos_token_id", eos, self.vocab_size)
        check_char_encoder_fields(self)
        if self.tie_word_embeddings and self.bidirectional:
            raise invalid("tie_word_embeddings", True, "False when bidirectional=True (no LM head to tie)")


__all__ = ["RNNConfig"]
