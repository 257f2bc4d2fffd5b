"""Configuration of BERT (Devlin et al. 2019), with transformers' ``BertConfig`` field names."""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig
from transformers.activations import ACT2FN

from .config_utils import PresetMixin, check_positive, check_probability, check_token_id, invalid


def _turc(hidden_size: int, layers: int) -> dict:
    """The compact BERTs of Turc et al. (2019): ``hidden / 64`` heads, a ``4 × hidden`` feed-forward layer."""
    return dict(hidden_size=hidden_size, num_hidden_layers=layers, num_attention_heads=hidden_size // 64,
                intermediate_size=4 * hidden_size)


@strict
class BertConfig(PresetMixin, PreTrainedConfig):
    r"""Configuration of :class:`BertModel` and its heads. The fields are those of transformers' ``BertConfig``,
    so a checkpoint converts by copying them (see ``hf_seqmodels.convert_bert``).

    Args:
        vocab_size: number of WordPiece tokens.
        hidden_size: size :math:`H` of the embeddings and of every layer's output.
        num_hidden_layers: number of encoder layers :math:`L`.
        num_attention_heads: heads :math:`A` of the self-attention; :math:`d_k = H / A`.
        intermediate_size: inner size of the feed-forward networks (:math:`4H` in the paper).
        hidden_act: activation of the feed-forward networks and of the masked-LM head (``"gelu"``).
        hidden_dropout_prob: dropout on the embeddings and on every sub-layer output (before Add & Norm).
        attention_probs_dropout_prob: dropout on the attention weights.
        max_position_embeddings: number of learned positions; longer inputs raise an error.
        type_vocab_size: number of segment ids (2: sentence A and sentence B).
        initializer_range: standard deviation of the normal initialisation of every weight matrix.
        layer_norm_eps: the epsilon of every LayerNorm.
        pad_token_id: the padding token; its embedding gets no gradient.
        classifier_dropout: dropout before the classification heads (default: ``hidden_dropout_prob``).
        mlm_logits_at_masked_positions_only: in training with masked-LM ``labels``, compute vocabulary
            logits only where the labels are not ``-100`` (what the original implementation does; much
            cheaper). The logits are then ``(num_masked, vocab_size)``; see :class:`BertForPreTraining`.
        tie_word_embeddings: the masked-LM decoder shares its weight with the token embeddings.

    The shared Transformer layers read ``dropout``, ``attention_dropout`` and ``activation_function``:
    they are aliases of ``hidden_dropout_prob``, ``attention_probs_dropout_prob`` and ``hidden_act``.
    BERT's layers are post-norm (``normalize_before`` is False) with no dropout inside the feed-forward net.
    """

    model_type = "hfsm_bert"
    attribute_map = {
        "dropout": "hidden_dropout_prob",
        "attention_dropout": "attention_probs_dropout_prob",
        "activation_function": "hidden_act",
    }
    normalize_before = False  # read by the shared layers; not a field: BERT is always post-norm
    activation_dropout = 0.0
    PRESETS = {
        "tiny": dict(vocab_size=99, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=32, max_position_embeddings=64),
        # Devlin et al. (2019), section 3: BERT-BASE (L=12, H=768, A=12) and BERT-LARGE (L=24, H=1024, A=16)
        "bert-base": dict(),
        "bert-large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
        # Turc et al. (2019), "Well-Read Students Learn Better": the compact models
        "bert-tiny": _turc(128, 2),
        "bert-mini": _turc(256, 4),
        "bert-small": _turc(512, 4),
        "bert-medium": _turc(512, 8),
    }

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float | int = 0.1
    attention_probs_dropout_prob: float | int = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int | None = 0
    classifier_dropout: float | int | None = None
    mlm_logits_at_masked_positions_only: bool = False
    tie_word_embeddings: bool = True

    def validate_bert(self):
        """Sizes are positive and ``hidden_size`` divides into ``num_attention_heads`` heads."""
        for field in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                      "max_position_embeddings", "type_vocab_size", "initializer_range", "layer_norm_eps"):
            check_positive(field, getattr(self, field))
        if self.hidden_size % self.num_attention_heads:
            raise invalid("num_attention_heads", self.num_attention_heads,
                          f"a divisor of hidden_size={self.hidden_size} (d_k = hidden_size / heads)")
        if self.hidden_act not in ACT2FN:
            raise invalid("hidden_act", self.hidden_act, "a name in transformers' ACT2FN ('gelu', 'relu'...)")
        for field in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
            check_probability(field, getattr(self, field))
        check_token_id("pad_token_id", self.pad_token_id, self.vocab_size)


__all__ = ["BertConfig"]
