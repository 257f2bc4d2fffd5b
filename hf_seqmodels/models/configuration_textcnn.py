"""Configuration of the TextCNN family (Kim 2014, "Convolutional Neural Networks for Sentence Classification")."""

from __future__ import annotations

from dataclasses import field

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

EMBEDDING_MODES = ("rand", "static", "non-static", "multichannel")
ACTIVATIONS = ("relu", "tanh")


@strict
class TextCNNConfig(PresetMixin, PreTrainedConfig):
    r"""Configuration of :class:`TextCNNModel` and :class:`TextCNNForSequenceClassification`.

    Args:
        vocab_size: number of tokens in the vocabulary (a word-level tokenizer's).
        embedding_size: size ``d`` of the word vectors (300 for the GoogleNews word2vec vectors).
        filter_sizes: window widths ``h`` of the filters, e.g. ``[3, 4, 5]``: one group of
            ``num_filters`` filters ``w ∈ R^{h×d}`` per width.
        num_filters: filters (feature maps) per width; the sentence vector has
            ``len(filter_sizes) * num_filters`` features.
        hidden_act: the non-linearity ``f`` of ``c_i = f(w · x_{i:i+h-1} + b)``: ``"relu"`` (Kim) or ``"tanh"``.
        embedding_mode: Kim's four variants.

            * ``"rand"`` – embeddings initialised at random and learned (CNN-rand);
            * ``"static"`` – initialised from pretrained vectors (:meth:`init_embeddings`) and kept frozen;
            * ``"non-static"`` – initialised from pretrained vectors and fine-tuned;
            * ``"multichannel"`` – two channels initialised from the same vectors, one frozen and one
              fine-tuned; each filter is applied to both and the results are added.
        classifier_dropout: dropout on the pooled sentence vector before the output layer (Kim: 0.5).
        classifier_max_norm: Kim's l2 constraint ``s``: after a gradient step, every class's weight
            vector of the output layer with ``||w||_2 > s`` is rescaled to ``||w||_2 = s`` (Kim: 3).
            ``None`` turns it off.
        init_range: randomly initialised embeddings are drawn from ``U(-init_range, init_range)``
            (Kim's code uses 0.25 for words without a pretrained vector).
        initializer_range: standard deviation of the normal initialisation of filters and output layer.
        pad_token_id: the padding token; its embedding row is zero and receives no gradient.
    """

    model_type = "hfsm_textcnn"
    PRESETS = {
        "tiny": dict(vocab_size=99, embedding_size=12, filter_sizes=[2, 3], num_filters=4),
        # Kim (2014), section 3.1: windows 3, 4, 5 with 100 feature maps each, dropout 0.5, l2 constraint 3,
        # 300-dimensional word2vec vectors (CNN-rand when the embeddings are not initialised from vectors)
        "kim2014": dict(
            vocab_size=20000, embedding_size=300, filter_sizes=[3, 4, 5], num_filters=100,
            classifier_dropout=0.5, classifier_max_norm=3.0,
        ),
    }
    # with config_utils.FIELD_RANGES, the shared ones
    FIELD_RANGES = dict.fromkeys(("num_filters", "filter_sizes", "classifier_max_norm"), "positive")

    vocab_size: int = 10000
    embedding_size: int = 300
    filter_sizes: list[int] | tuple[int, ...] = field(default_factory=lambda: [3, 4, 5])
    num_filters: int = 100
    hidden_act: str = "relu"
    embedding_mode: str = "rand"
    classifier_dropout: float | int = 0.5
    classifier_max_norm: float | int | None = None
    init_range: float = 0.25
    initializer_range: float = 0.02
    pad_token_id: int | None = 0
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None

    def __post_init__(self, **kwargs):
        if isinstance(self.filter_sizes, tuple):
            self.filter_sizes = list(self.filter_sizes)
        super().__post_init__(**kwargs)

    @property
    def num_features(self) -> int:
        """Size of the pooled sentence vector: ``len(filter_sizes) * num_filters``."""
        return len(self.filter_sizes) * self.num_filters

    def validate_architecture(self):
        check_choice("embedding_mode", self.embedding_mode, EMBEDDING_MODES)
        check_choice("hidden_act", self.hidden_act, ACTIVATIONS)
        if not self.filter_sizes:
            raise invalid("filter_sizes", self.filter_sizes, "a non-empty list of window widths, e.g. [3, 4, 5]")
        for width in self.filter_sizes:
            if isinstance(width, bool) or not isinstance(width, int) or width < 1:
                raise invalid("filter_sizes", self.filter_sizes, "positive integer window widths, e.g. [3, 4, 5]")
        for name in ("vocab_size", "embedding_size", "num_filters", "init_range", "initializer_range"):
            check_positive(name, getattr(self, name))
        check_probability("classifier_dropout", self.classifier_dropout)
        if self.classifier_max_norm is not None:
            check_positive("classifier_max_norm", self.classifier_max_norm)
        check_token_id("pad_token_id", self.pad_token_id, self.vocab_size)


__all__ = ["TextCNNConfig"]
