"""Configurations of the Transformer (Vaswani et al. 2017): the encoder-decoder and the decoder-only LM."""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig
from transformers.activations import ACT2FN

from .config_utils import (
    PresetMixin,
    check_choice,
    check_positive,
    check_probability,
    check_token_id,
    invalid,
)
from .positional_encoding import POSITION_EMBEDDING_TYPES
from .source_vocabulary import validate_source_vocabulary


@strict
class TransformerConfigBase(PresetMixin, PreTrainedConfig):
    r"""Fields shared by :class:`TransformerConfig` and :class:`TransformerLMConfig` (the decoder side).

    Args:
        vocab_size: number of tokens (source and target share one vocabulary).
        d_model: size of every layer's input and output, :math:`d_{model}` (alias ``hidden_size``).
        decoder_layers: number of decoder layers :math:`N`.
        decoder_attention_heads: heads :math:`h` of the decoder's attention; :math:`d_k = d_{model} / h`.
        decoder_ffn_dim: inner size :math:`d_{ff}` of the decoder's feed-forward networks.
        activation_function: the feed-forward activation (``"relu"`` in the paper, ``"gelu"``...).
        dropout: :math:`P_{drop}` on every sub-layer output (before Add & Norm) and on the sum of the
            embeddings and positional encodings.
        attention_dropout: dropout on the attention weights.
        activation_dropout: dropout inside the feed-forward network, after the activation.
        position_embedding_type: ``"sinusoidal"`` (the paper's fixed encoding) or ``"learned"``.
        max_position_embeddings: the number of learned positions (unused by the sinusoids).
        scale_embedding: multiply the token embeddings by :math:`\sqrt{d_{model}}` (section 3.4).
        normalize_before: pre-norm, ``x + Sublayer(LayerNorm(x))`` with a final LayerNorm after each
            stack, instead of the paper's post-norm ``LayerNorm(x + Sublayer(x))``.
        layer_norm_eps: the epsilon of every LayerNorm.
        bias: additive biases in the attention and feed-forward linear maps and in the LayerNorms (``False``:
            weights only, as GPT-2-shaped models without biases such as nanoGPT's; fewer tensors to update).
        label_smoothing: :math:`\epsilon_{ls}` of the training loss (0.1 in the paper).
        tie_word_embeddings: the pre-softmax linear map shares its weights with the target embeddings.
    """

    vocab_size: int = 37000
    d_model: int = 512
    decoder_layers: int = 6
    decoder_attention_heads: int = 8
    decoder_ffn_dim: int = 2048
    activation_function: str = "relu"
    dropout: float | int = 0.1
    attention_dropout: float | int = 0.0
    activation_dropout: float | int = 0.0
    position_embedding_type: str = "sinusoidal"
    max_position_embeddings: int = 1024
    scale_embedding: bool = True
    normalize_before: bool = False
    layer_norm_eps: float = 1e-5
    bias: bool = True
    label_smoothing: float | int = 0.0
    tie_word_embeddings: bool = True
    use_cache: bool = True
    pad_token_id: int | None = 0
    bos_token_id: int | None = 2
    eos_token_id: int | list[int] | None = 3

    def check_stack(self, prefix: str, layers: int, heads: int, ffn_dim: int) -> None:
        for field, value in ((f"{prefix}_layers", layers), (f"{prefix}_attention_heads", heads),
                             (f"{prefix}_ffn_dim", ffn_dim)):
            check_positive(field, value)
        if self.d_model % heads:
            raise invalid(f"{prefix}_attention_heads", heads, f"a divisor of d_model={self.d_model} (d_k = d_model / heads)")

    def validate_transformer(self):
        for field in ("vocab_size", "d_model", "max_position_embeddings", "layer_norm_eps"):
            check_positive(field, getattr(self, field))
        self.check_stack("decoder", self.decoder_layers, self.decoder_attention_heads, self.decoder_ffn_dim)
        check_choice("position_embedding_type", self.position_embedding_type, POSITION_EMBEDDING_TYPES)
        if self.position_embedding_type == "sinusoidal" and self.d_model % 2:
            raise invalid("d_model", self.d_model, "an even number with sinusoidal position encodings")
        if self.activation_function not in ACT2FN:
            raise invalid("activation_function", self.activation_function, "a name in transformers' ACT2FN ('relu', 'gelu'...)")
        for field in ("dropout", "attention_dropout", "activation_dropout", "label_smoothing"):
            check_probability(field, getattr(self, field))
        for field in ("pad_token_id", "bos_token_id"):
            check_token_id(field, getattr(self, field), self.vocab_size)
        for eos in self.eos_token_id if isinstance(self.eos_token_id, list) else [self.eos_token_id]:
            check_token_id("eos_token_id", eos, self.vocab_size)


@strict
class TransformerConfig(TransformerConfigBase):
    r"""Configuration of :class:`TransformerModel` and :class:`TransformerForConditionalGeneration`.

    Adds the encoder's sizes to :class:`TransformerConfigBase` (whose fields are the decoder's):

    Args:
        encoder_layers: number of encoder layers :math:`N`.
        encoder_attention_heads: heads of the encoder's self-attention.
        encoder_ffn_dim: inner size of the encoder's feed-forward networks.
        source_vocab_size: size of the source vocabulary (the encoder's embeddings) when the source has a
            tokenizer of its own; ``None``: source and target share ``vocab_size``, which is always the
            target vocabulary (decoder embeddings, output layer, ``generate()``). Separate vocabularies need
            ``share_encoder_decoder_embeddings=False``. ``resize_token_embeddings`` resizes the target side
            (and the source side only when shared); ``resize_source_token_embeddings`` the source side.
        share_encoder_decoder_embeddings: one embedding matrix for source and target tokens (one shared
            vocabulary only). With ``tie_word_embeddings`` as well, it is also the output matrix: the paper's
            three-way tying.
        decoder_start_token_id: the first decoder input (default: the BOS token).
    """

    model_type = "hfsm_transformer"
    ENCODER_DECODER_TYING_FIELDS = ("share_encoder_decoder_embeddings",)
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "encoder_attention_heads",
        "num_hidden_layers": "encoder_layers",
    }
    PRESETS = {
        "tiny": dict(vocab_size=99, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64),
        # "Attention Is All You Need", Table 3: base and big models (WMT14 EN-DE, 37k shared BPE vocabulary)
        "transformer-base": dict(label_smoothing=0.1),
        "transformer-big": dict(d_model=1024, encoder_attention_heads=16, decoder_attention_heads=16,
                                encoder_ffn_dim=4096, decoder_ffn_dim=4096, dropout=0.3, label_smoothing=0.1),
        # a small Transformer for Multi30k (29,000 pairs): 3 + 3 layers of width 256 with 4 heads, the strong
        # dropout of the low-resource recipes (fairseq's IWSLT model: 0.3) and the paper's label smoothing
        "transformer-multi30k": dict(d_model=256, encoder_layers=3, decoder_layers=3, encoder_attention_heads=4,
                                     decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024,
                                     dropout=0.3, attention_dropout=0.1, label_smoothing=0.1),
    }

    encoder_layers: int = 6
    encoder_attention_heads: int = 8
    encoder_ffn_dim: int = 2048
    source_vocab_size: int | None = None
    share_encoder_decoder_embeddings: bool = True
    decoder_start_token_id: int | None = None
    is_encoder_decoder: bool = True

    def __post_init__(self, **kwargs):
        validate_source_vocabulary(self)  # a plain ValueError at construction, before the validators
        if self.decoder_start_token_id is None:
            self.decoder_start_token_id = self.bos_token_id
        super().__post_init__(**kwargs)

    def validate_encoder(self):
        """The encoder stack's sizes are valid and ``decoder_start_token_id`` lies in the vocabulary."""
        self.check_stack("encoder", self.encoder_layers, self.encoder_attention_heads, self.encoder_ffn_dim)
        check_token_id("decoder_start_token_id", self.decoder_start_token_id, self.vocab_size)

    def validate_source_vocabulary(self):
        """A separate source vocabulary (``source_vocab_size``) excludes shared encoder-decoder embeddings."""
        validate_source_vocabulary(self)


@strict
class TransformerLMConfig(TransformerConfigBase):
    r"""Configuration of :class:`TransformerForCausalLM`, the decoder-only (GPT-style) Transformer: the
    decoder stack without encoder-decoder attention. The HF names ``hidden_size``, ``num_hidden_layers``,
    ``num_attention_heads`` and ``intermediate_size`` map to ``d_model`` and the ``decoder_*`` fields.
    """

    model_type = "hfsm_transformer_lm"
    attribute_map = {
        "hidden_size": "d_model",
        "num_hidden_layers": "decoder_layers",
        "num_attention_heads": "decoder_attention_heads",
        "intermediate_size": "decoder_ffn_dim",
    }
    PRESETS = {
        "tiny": dict(vocab_size=99, d_model=16, decoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=32,
                     max_position_embeddings=64),
        # the decoder of transformer-base as a language model
        "transformer-base": dict(),
        # nanoGPT's CPU configuration for Tiny Shakespeare characters (Karpathy's README): a GPT-2-shaped
        # decoder (pre-norm, GELU, learned positions, no embedding scaling, no biases, no dropout), 4 layers,
        # 4 heads, width 128, 64 characters of context; the vocabulary comes from the tokenizer
        "nanogpt-cpu": dict(vocab_size=65, d_model=128, decoder_layers=4, decoder_attention_heads=4,
                            decoder_ffn_dim=512, max_position_embeddings=64, normalize_before=True,
                            activation_function="gelu", position_embedding_type="learned", scale_embedding=False,
                            bias=False, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0),
        # nanoGPT's GPU configuration for Tiny Shakespeare characters (config/train_shakespeare_char.py): the
        # same GPT shape, 6 layers, 6 heads, width 384, 256 characters of context, dropout 0.2
        "nanogpt-shakespeare-char": dict(vocab_size=65, d_model=384, decoder_layers=6, decoder_attention_heads=6,
                                         decoder_ffn_dim=1536, max_position_embeddings=256, normalize_before=True,
                                         activation_function="gelu", position_embedding_type="learned",
                                         scale_embedding=False, bias=False, dropout=0.2, attention_dropout=0.2,
                                         activation_dropout=0.0),
        # Radford et al. (2018), GPT: 12 post-norm layers, learned positions, GELU, 512 tokens of context
        "gpt-1": dict(vocab_size=40478, d_model=768, decoder_layers=12, decoder_attention_heads=12,
                      decoder_ffn_dim=3072, activation_function="gelu", position_embedding_type="learned",
                      max_position_embeddings=512, attention_dropout=0.1, scale_embedding=False),
    }


__all__ = ["TransformerConfig", "TransformerConfigBase", "TransformerLMConfig"]
