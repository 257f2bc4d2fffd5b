"""Configuration of the BiLSTM-CRF tagger family."""

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
from .crf import AUTO_CONSTRAINTS, CRF_CONSTRAINTS, bio_allowed_transitions, labels_are_unnamed
from .recurrent_stack import CELL_TYPES


@strict
class BiLSTMCRFConfig(PresetMixin, PreTrainedConfig):
    r"""Configuration of :class:`BiLSTMCRFModel` and :class:`BiLSTMCRFForTokenClassification`.

    Args:
        vocab_size: number of tokens (words) in the vocabulary.
        embedding_size: size of the word embeddings.
        cell_type: the recurrent cell of the sentence encoder (one of the package's ``CELL_TYPES``).
        hidden_size: size of ``h_t`` per direction.
        num_hidden_layers: stacked recurrent layers.
        bidirectional: run a right-to-left stack too and concatenate (the "Bi" of BiLSTM).
        hidden_dropout_prob: dropout on the word representations, between layers and before the
            emission layer (Lample et al. use 0.5).
        use_crf: put the CRF on the emission scores; ``False`` gives the plain BiLSTM softmax tagger
            (per-token cross-entropy, per-token argmax) for comparison.
        crf_constraints: ``"auto"`` (default): BIO constraints when every label (``id2label``) is ``O``,
            ``B-<type>`` or ``I-<type>``, none for other tag sets (part-of-speech tags, transformers'
            ``LABEL_<i>`` placeholders), so any label names are accepted, as by transformers'
            token-classification configs. ``"BIO"`` forbids invalid BIO sequences (``I-X`` only after
            ``B-X``/``I-X``, never first) and requires BIO label names (a clear error otherwise; the
            unnamed ``LABEL_<i>`` placeholders give no constraints, with a warning). None: no constraints.
        untagged_token_ids: token ids that are left out of the CRF chain when no labels are given
            (the tokenizer's special tokens, e.g. ``<bos>``); None means the pad, bos and eos ids.
            ``bind_tokenizer`` sets it to the tokenizer's special ids.
        char_encoder: None, ``"cnn"`` (Ma & Hovy 2016) or ``"lstm"`` (Lample et al. 2016): a
            character-level word representation concatenated with the word embedding.
        char_vocab: the characters the character encoder knows (a string or a list of characters;
            default: printable ASCII and Latin-1 letters).
        char_embedding_size: size of a character embedding.
        char_hidden_size: CNN filters, or character-LSTM state size per direction.
        char_kernel_size: CNN window width.
        char_max_word_length: characters kept per word.
        init_range: weights are initialised uniformly in ``[-init_range, init_range]``; the CRF
            scores start at zero.
    """

    model_type = "hfsm_bilstm_crf"
    PRESETS = {
        "tiny": dict(vocab_size=99, embedding_size=12, hidden_size=16, num_hidden_layers=1,
                     char_encoder="cnn", char_embedding_size=8, char_hidden_size=8, char_max_word_length=12),
        # Lample et al. (2016), "Neural Architectures for Named Entity Recognition", LSTM-CRF: 100-d word
        # embeddings, one BiLSTM layer of 100 units per direction, a character BiLSTM of 25 units per
        # direction over 25-d character embeddings, dropout 0.5, BIO-constrained CRF
        "lample2016": dict(vocab_size=100000, embedding_size=100, hidden_size=100, num_hidden_layers=1,
                           hidden_dropout_prob=0.5, char_encoder="lstm", char_embedding_size=25,
                           char_hidden_size=25),
    }

    vocab_size: int = 10000
    embedding_size: int = 100
    cell_type: str = "lstm"
    hidden_size: int = 100
    num_hidden_layers: int = 1
    bidirectional: bool = True
    hidden_dropout_prob: float | int = 0.0
    use_crf: bool = True
    crf_constraints: str | None = AUTO_CONSTRAINTS
    untagged_token_ids: list[int] | None = None
    char_encoder: str | None = None
    char_vocab: str | list[str] | None = None
    char_embedding_size: int = 25
    char_hidden_size: int = 25
    char_kernel_size: int = 3
    char_max_word_length: int = 20
    init_range: float = 0.1
    pad_token_id: int | None = 0
    bos_token_id: int | None = 2
    eos_token_id: int | None = 3

    def __post_init__(self, **kwargs):
        if self.char_encoder is not None and self.char_vocab is None:
            self.char_vocab = DEFAULT_CHAR_VOCAB
        super().__post_init__(**kwargs)

    def validate_architecture(self):
        check_choice("cell_type", self.cell_type, CELL_TYPES)
        for field in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "init_range"):
            check_positive(field, getattr(self, field))
        check_probability("hidden_dropout_prob", self.hidden_dropout_prob)
        for field in ("pad_token_id", "bos_token_id", "eos_token_id"):
            check_token_id(field, getattr(self, field), self.vocab_size)
        for token_id in self.untagged_token_ids or []:
            check_token_id("untagged_token_ids", token_id, self.vocab_size)
        check_char_encoder_fields(self)

    def validate_labels(self):
        """``crf_constraints`` is a known choice, needs a CRF, and with ``"BIO"`` every label is a BIO tag."""
        check_choice("crf_constraints", self.crf_constraints, (None, AUTO_CONSTRAINTS, *CRF_CONSTRAINTS))
        if self.crf_constraints not in (None, AUTO_CONSTRAINTS) and not self.use_crf:
            raise invalid("crf_constraints", self.crf_constraints, "None when use_crf=False (no CRF to constrain)")
        if self.crf_constraints == "BIO" and not labels_are_unnamed(self.id2label):
            bio_allowed_transitions(self.id2label)  # raises, naming the first label that is not BIO

    def untagged_ids(self) -> list[int]:
        """The ids left out of the CRF chain when no labels are given (see ``untagged_token_ids``)."""
        if self.untagged_token_ids is not None:
            return list(self.untagged_token_ids)
        return [i for i in (self.pad_token_id, self.bos_token_id, self.eos_token_id) if i is not None]


__all__ = ["BiLSTMCRFConfig"]
