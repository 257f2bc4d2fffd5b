"""The encoder and decoder layers of the Transformer, shared by the encoder-decoder, the decoder-only
language model and (the encoder layer) BERT.

Every sub-layer (attention or feed-forward) sits in a residual connection with layer normalisation,
:class:`AddNorm`: after the sum as in the paper (post-norm), or before the sub-layer (pre-norm).
Layers read ``hidden_size``, ``dropout``, ``attention_dropout``, ``activation_dropout``,
``activation_function``, ``normalize_before``, ``layer_norm_eps`` and (when the config has it) ``bias``.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.cache_utils import Cache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs

from .cache_naming import given_cache
from .feed_forward import Dropout, PositionwiseFeedForward
from .multi_head_attention import MultiHeadAttention


class AddNorm(nn.LayerNorm):
    r"""Residual connection and layer normalisation around a sub-layer ("Add & Norm").

    Post-norm (the paper): :math:`\mathrm{LayerNorm}(x + \mathrm{Dropout}(\mathrm{Sublayer}(x)))`.
    Pre-norm: :math:`x + \mathrm{Dropout}(\mathrm{Sublayer}(\mathrm{LayerNorm}(x)))`.
    Use as ``x = add_norm(x, sublayer(add_norm.sublayer_input(x)))``.
    """

    def __init__(self, hidden_size: int, dropout: float, normalize_before: bool, eps: float, bias: bool = True):
        super().__init__(hidden_size, eps=eps, bias=bias)
        self.dropout = Dropout(dropout)  # nn.Dropout with cheaper random draws on a CPU (feed_forward.dropout)
        self.normalize_before = normalize_before

    def sublayer_input(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) if self.normalize_before else x

    def forward(self, x: torch.Tensor, sublayer_output: torch.Tensor) -> torch.Tensor:
        if self.training and self.dropout.p > 0:  # the identity otherwise: no call
            sublayer_output = self.dropout(sublayer_output)
        if self.normalize_before:
            return x + sublayer_output
        if x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # Post-norm under CPU autocast: the sum and the LayerNorm in the autocast dtype. torch's CPU
            # LayerNorm computes its statistics in float32 whatever its input, so the stream between sub-layers,
            # a LayerNorm's output, is bfloat16, as the matrix products read it: no float32 sum, no conversion
            # of every sub-layer's input and of its gradient (the pre-norm stream stays float32: it accumulates).
            dtype = torch.get_autocast_dtype("cpu")
            x, sublayer_output = x.to(dtype), sublayer_output.to(dtype)
        return super().forward(x + sublayer_output)


def add_norm(config) -> AddNorm:
    return AddNorm(config.hidden_size, config.dropout, config.normalize_before, config.layer_norm_eps,
                   getattr(config, "bias", True))


def feed_forward(config, ffn_dim: int) -> PositionwiseFeedForward:
    return PositionwiseFeedForward(config.hidden_size, ffn_dim, config.activation_function,
                                   config.activation_dropout, getattr(config, "bias", True))


class TransformerEncoderLayer(GradientCheckpointingLayer):
    """Multi-head self-attention, then the position-wise feed-forward network, each with Add & Norm."""

    def __init__(self, config, num_heads: int, ffn_dim: int):
        super().__init__()
        self.self_attn = MultiHeadAttention(config, config.hidden_size, num_heads, config.attention_dropout)
        self.self_attn_norm = add_norm(config)
        self.feed_forward = feed_forward(config, ffn_dim)
        self.ffn_norm = add_norm(config)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, output_attentions: bool = False,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``hidden_states`` ``(B, S, d_model)``, ``attention_mask`` ``(B, 1, 1, S)`` (or the attention
        implementation's format) → ``(B, S, d_model)``, weights. ``kwargs`` go to the attention function."""
        x = hidden_states
        attended, weights = self.self_attn(
            self.self_attn_norm.sublayer_input(x), attention_mask=attention_mask, output_attentions=output_attentions,
            **kwargs,
        )
        x = self.self_attn_norm(x, attended)
        x = self.ffn_norm(x, self.feed_forward(self.ffn_norm.sublayer_input(x)))
        return x, weights


class TransformerDecoderLayer(GradientCheckpointingLayer):
    """Masked multi-head self-attention, encoder-decoder attention (queries from the decoder, keys and
    values from the encoder output) and the feed-forward network, each with Add & Norm.

    ``cross_attention=False`` drops the middle sub-layer: the decoder-only (GPT-style) layer.
    """

    def __init__(self, config, num_heads: int, ffn_dim: int, layer_idx: int, cross_attention: bool):
        super().__init__()
        d, p = config.hidden_size, config.attention_dropout
        self.self_attn = MultiHeadAttention(config, d, num_heads, p, layer_idx, is_causal=True)
        self.self_attn_norm = add_norm(config)
        self.cross_attn = MultiHeadAttention(config, d, num_heads, p, layer_idx) if cross_attention else None
        self.cross_attn_norm = add_norm(config) if cross_attention else None
        self.feed_forward = feed_forward(config, ffn_dim)
        self.ffn_norm = add_norm(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        output_attentions: bool = False,
        cache: Cache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """
        Args:
            hidden_states: ``(B, T, d_model)``, the ``T`` newest target positions.
            attention_mask: causal + padding mask ``(B | 1, 1, T, keys)`` (boolean or additive; ``keys`` is
                ``past + T``, or a static cache's size), or None for the plain causal mask of ``T`` queries
                over themselves.
            encoder_hidden_states: encoder output ``(B, S, d_model)`` (enc-dec only). Pass it, and every
                tensor that needs a gradient, positionally: reentrant gradient checkpointing treats only
                positional arguments as inputs of the checkpointed layer.
            encoder_attention_mask: source padding mask ``(B, 1, 1, S)``.
            past_key_values: the cache this layer extends; the stack passes it under transformers' name
                (``cache`` from 5.24), the argument its gradient checkpointing drops while training.
            kwargs: passed on to both attention functions.

        Returns:
            ``(B, T, d_model)``, self-attention weights ``(B, H, T, past + T)`` and cross-attention
            weights ``(B, H, T, S)`` (None unless ``output_attentions``).
        """
        past_key_values = given_cache(past_key_values, cache)
        x = hidden_states
        attended, self_weights = self.self_attn(
            self.self_attn_norm.sublayer_input(x), attention_mask=attention_mask,
            past_key_values=past_key_values, output_attentions=output_attentions, **kwargs,
        )
        x = self.self_attn_norm(x, attended)
        cross_weights = None
        if self.cross_attn is not None:
            attended, cross_weights = self.cross_attn(
                self.cross_attn_norm.sublayer_input(x), key_value_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask, past_key_values=past_key_values,
                output_attentions=output_attentions, **kwargs,
            )
            x = self.cross_attn_norm(x, attended)
        x = self.ffn_norm(x, self.feed_forward(self.ffn_norm.sublayer_input(x)))
        return x, self_weights, cross_weights
