"""Configuration of the RNN encoder-decoder with attention (Bahdanau et al. 2015; Luong et al. 2015)."""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

from .config_utils import (
    PresetMixin,
    check_choice,
    check_positive,
    check_probability,
    check_token_id,
    invalid,
)
from .recurrent_stack import CELL_TYPES, has_cell_state
from .rnn_attention import ATTENTION_SCORES
from .source_vocabulary import validate_source_vocabulary

ATTENTION_WIRINGS = ("bahdanau", "luong")
BRIDGES = ("dense", "copy", "zeros")


@strict
class RNNSeq2SeqConfig(PresetMixin, PreTrainedConfig):
    r"""Configuration of :class:`RNNSeq2SeqModel` and :class:`RNNSeq2SeqForConditionalGeneration`.

    Args:
        vocab_size: size of the target vocabulary (decoder embeddings, output layer, ``generate()``), which
            is also the source's unless ``source_vocab_size`` is given.
        source_vocab_size: size of the source vocabulary (the encoder's embeddings) when the source has a
            tokenizer of its own; ``None``: source and target share ``vocab_size``. ``resize_token_embeddings``
            resizes the target side (and the source side only when shared); ``resize_source_token_embeddings``
            the source side.
        encoder_cell_type, decoder_cell_type: ``"rnn_tanh"``, ``"rnn_relu"``, ``"lstm"``, ``"gru"`` or
            ``"peephole_lstm"`` (the course notes' peephole LSTM, stepped in Python: slower).
        embedding_size: size of the source and target embeddings; ``None`` means ``hidden_size``.
        hidden_size: size of the decoder state ``s_t``.
        encoder_hidden_size: size of the encoder state per direction; ``None`` means ``hidden_size``.
            The encoder memory ``h_i`` has ``(2 if bidirectional_encoder else 1) * encoder_hidden_size``.
        encoder_layers, decoder_layers: number of stacked recurrent layers.
        bidirectional_encoder: read the source in both directions (Bahdanau's RNNsearch).
        bridge: initial decoder state from the encoder's final states (all layers, both directions):
            ``"dense"`` ``s_0 = tanh(W_b [final states] + b_b)`` per state tensor (Bahdanau's
            ``s_0 = tanh(W_s h_1)``, learned); ``"copy"`` the final states themselves (Luong; needs equal
            layer counts, state sizes and cell families); ``"zeros"``.
        attention_score: the score ``e_{t,i}`` of decoder state ``s`` against memory ``h_i``:
            ``"additive"`` ``v_a^T tanh(W_a s + U_a h_i)`` (Bahdanau), ``"dot"`` ``s^T h_i``,
            ``"general"`` ``s^T W_a h_i``, ``"concat"`` ``v_a^T tanh(W_a [s; h_i])`` (Luong), or
            ``"none"``: no attention, the source reaches the decoder only through the bridge.
        attention_wiring: ``"bahdanau"``: score with ``s_{t-1}``, feed ``c_t`` into the recurrent input,
            predict from ``[s_t; c_t]``; ``"luong"``: score with ``s_t``, predict from the attentional
            state ``h̃_t = tanh(W_c [c_t; s_t])``. Ignored when ``attention_score="none"``.
        attention_hidden_size: size of ``v_a`` for the additive and concat scores (``None``: hidden_size).
        input_feeding: Luong wiring only: feed ``h̃_{t-1}`` into the next recurrent input.
        hidden_dropout_prob: dropout on embeddings, between stacked layers and before the output layer.
        tie_word_embeddings: share the output matrix with the decoder input embeddings (the output
            vector is projected to ``embedding_size`` first when the sizes differ).
        label_smoothing: label smoothing of the cross-entropy loss (0 = none).
        init_range: weights are initialised uniformly in ``[-init_range, init_range]``.
    """

    model_type = "hfsm_rnn_seq2seq"
    ENCODER_DECODER_TYING_FIELDS = ()  # no option ties the encoder's embeddings to the decoder's
    attribute_map = {"num_hidden_layers": "decoder_layers"}
    _LUONG = dict(
        vocab_size=50000, embedding_size=1000, hidden_size=1000, encoder_layers=4, decoder_layers=4,
        bidirectional_encoder=False, bridge="copy", attention_wiring="luong", input_feeding=True,
        hidden_dropout_prob=0.2, init_range=0.1,
    )
    PRESETS = {
        "tiny": dict(vocab_size=99, hidden_size=16, embedding_size=12, encoder_layers=2, decoder_layers=2),
        # Bahdanau, Cho & Bengio (2015), RNNsearch: bidirectional GRU encoder, 620-d embeddings, 1000 units
        "rnnsearch": dict(
            vocab_size=30000, encoder_cell_type="gru", decoder_cell_type="gru", embedding_size=620,
            hidden_size=1000, attention_hidden_size=1000, bidirectional_encoder=True, bridge="dense",
            attention_score="additive", attention_wiring="bahdanau", init_range=0.01,
        ),
        # Luong, Pham & Manning (2015), global attention: 4 x 1000 LSTM, input feeding, dropout 0.2
        "luong-dot": dict(_LUONG, attention_score="dot"),
        "luong-general": dict(_LUONG, attention_score="general"),
        "luong-concat": dict(_LUONG, attention_score="concat"),
    }

    vocab_size: int = 10000
    source_vocab_size: int | None = None
    encoder_cell_type: str = "lstm"
    decoder_cell_type: str = "lstm"
    embedding_size: int | None = None
    hidden_size: int = 256
    encoder_hidden_size: int | None = None
    encoder_layers: int = 1
    decoder_layers: int = 1
    bidirectional_encoder: bool = True
    bridge: str = "dense"
    attention_score: str = "additive"
    attention_wiring: str = "bahdanau"
    attention_hidden_size: int | None = None
    input_feeding: bool = False
    hidden_dropout_prob: float | int = 0.0
    tie_word_embeddings: bool = False
    label_smoothing: float | int = 0.0
    init_range: float = 0.1
    use_cache: bool = True
    is_encoder_decoder: bool = True
    pad_token_id: int | None = 0
    bos_token_id: int | None = 2
    eos_token_id: int | list[int] | None = 3
    decoder_start_token_id: int | None = 2

    def __post_init__(self, **kwargs):
        validate_source_vocabulary(self)  # a plain ValueError at construction, before the validators
        self.embedding_size = self.embedding_size or self.hidden_size
        self.encoder_hidden_size = self.encoder_hidden_size or self.hidden_size
        self.attention_hidden_size = self.attention_hidden_size or self.hidden_size
        super().__post_init__(**kwargs)

    @property
    def memory_size(self) -> int:
        """Size of the encoder outputs ``h_i`` the decoder attends to."""
        return (2 if self.bidirectional_encoder else 1) * self.encoder_hidden_size

    def validate_architecture(self):
        check_choice("encoder_cell_type", self.encoder_cell_type, CELL_TYPES)
        check_choice("decoder_cell_type", self.decoder_cell_type, CELL_TYPES)
        check_choice("bridge", self.bridge, BRIDGES)
        check_choice("attention_score", self.attention_score, ATTENTION_SCORES)
        check_choice("attention_wiring", self.attention_wiring, ATTENTION_WIRINGS)
        for field in ("vocab_size", "embedding_size", "hidden_size", "encoder_hidden_size", "encoder_layers",
                      "decoder_layers", "attention_hidden_size", "init_range"):
            check_positive(field, getattr(self, field))
        check_probability("hidden_dropout_prob", self.hidden_dropout_prob)
        check_probability("label_smoothing", self.label_smoothing)
        for field in ("pad_token_id", "bos_token_id", "decoder_start_token_id"):
            check_token_id(field, getattr(self, field), self.vocab_size)
        for eos in self.eos_token_id if isinstance(self.eos_token_id, list) else [self.eos_token_id]:
            check_token_id("eos_token_id", eos, self.vocab_size)

    def validate_source_vocabulary(self):
        """A separate source vocabulary (``source_vocab_size``) excludes shared encoder-decoder embeddings."""
        validate_source_vocabulary(self)

    def validate_attention(self):
        """The attention score fits the state sizes, input feeding has a Luong attention, and the decoder sees the source."""
        if self.attention_score == "dot" and self.memory_size != self.hidden_size:
            raise invalid("attention_score", "dot", f"'general' or 'additive' when the encoder memory size "
                          f"({self.memory_size}) differs from hidden_size ({self.hidden_size})")
        if self.input_feeding and (self.attention_wiring != "luong" or self.attention_score == "none"):
            raise invalid("input_feeding", True, "False unless attention_wiring='luong' with an attention score")
        if self.attention_score == "none" and self.bridge == "zeros":
            raise invalid("bridge", "zeros", "'dense' or 'copy' when attention_score='none' (the decoder "
                          "would never see the source)")

    def validate_bridge(self):
        """``bridge="copy"`` only between stacks of the same layers, state size and cell-state kind."""
        if self.bridge != "copy":
            return
        same_family = has_cell_state(self.encoder_cell_type) == has_cell_state(self.decoder_cell_type)
        if not (same_family and self.encoder_layers == self.decoder_layers and self.memory_size == self.hidden_size):
            raise invalid("bridge", "copy", "'dense' or 'zeros' unless encoder and decoder have the same layers, "
                          "state size (directions x encoder_hidden_size = hidden_size) and both or neither with a "
                          "cell state (lstm, peephole_lstm)")


__all__ = ["RNNSeq2SeqConfig"]
