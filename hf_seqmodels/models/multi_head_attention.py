"""Multi-head scaled dot-product attention, shared by every attention-based family (Transformer, BERT).

The product itself goes through transformers' attention interface (``ALL_ATTENTION_FUNCTIONS``), so
``attn_implementation="eager"`` runs :func:`eager_attention_forward` below, ``"sdpa"`` torch's fused kernel
and ``"flex_attention"`` torch's flex attention, with the same result; a function registered with
``AttentionInterface.register`` runs as well. The keyword arguments of a model's ``forward`` reach the
function unchanged.

Each implementation reads the mask it expects (:func:`bidirectional_mask`, :func:`causal_mask`). Eager, sdpa
and registered functions get a boolean mask (True = may attend) built by :func:`attention_mask` from small
tensors by broadcasting, or an additive float tensor (:func:`attention_bias`); both have shape
``(batch | 1, 1, query_len, key_len)``. A causal self-attention over ``T`` queries and the same ``T`` keys
needs no mask at all: the module's ``is_causal`` lets the kernel apply it (``is_causal`` of torch's sdpa).
The other implementations with a mask function in transformers' ``masking_utils`` (flex attention's
``BlockMask``) get the mask that ``create_causal_mask`` / ``create_bidirectional_mask`` build for them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.masking_utils import (
    ALL_MASK_ATTENTION_FUNCTIONS,
    create_bidirectional_mask,
    create_causal_mask,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs

from .feed_forward import dropout as drop
from .input_checks import is_tracing, reads_values


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    r""":math:`\mathrm{Attention}(Q, K, V) = \mathrm{softmax}(Q K^\top / \sqrt{d_k} + M)\, V` (the eager path).

    ``query`` ``(B, H, T, d_k)``, ``key``/``value`` ``(B, H, S, d_k)``. ``attention_mask`` ``M`` is additive
    (float) or boolean (True = may attend), broadcastable to ``(B, H, T, S)``; without one, ``is_causal`` (else
    ``module.is_causal``) hides the future of ``T == S`` queries, as torch's sdpa does. A query that may attend
    to no key gets zero weights, as in torch's sdpa. Returns the output ``(B, T, H, d_k)`` and the weights
    ``(B, H, T, S)``.
    """
    scores = torch.matmul(query, key.transpose(-2, -1)) * scaling  # (B, H, T, S)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", False)
    if attention_mask is None and causal and query.shape[2] > 1:
        attention_mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()  # (T, S)
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1).masked_fill(~attention_mask, 0.0)  # rows with no key: all 0
    else:
        weights = (scores if attention_mask is None else scores + attention_mask).softmax(dim=-1)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value)  # (B, H, T, d_k)
    return output.transpose(1, 2).contiguous(), weights  # (B, T, H, d_k)


#: the bmm path serves queries x keys up to this size (its score matrix is materialised, unlike the fused kernel's)
BMM_ATTENTION_MAX_SCORES = 512 * 512


def bmm_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: None,
    scaling: float,
    dropout: float = 0.0,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The same attention as :func:`eager_attention_forward` without a mask (the causal one aside), in
    three batched kernels: :math:`S = \mathrm{baddbmm}(M_{causal}, Q, K^\top, \alpha=1/\sqrt{d_k})`, softmax
    (and dropout), :math:`S V`. In bfloat16 on a CPU (``--bf16`` training) these run about twice as fast as
    torch's fused sdpa kernels for short sequences (forward and backward, ``T = 128``, ``d_k = 64``: the CPU
    flash kernel gains nothing from bfloat16 and its backward is slower than in float32), and they also serve
    attention dropout, which sends sdpa to its slower unfused path.

    ``query`` ``(B, H, T, d_k)``, ``key``/``value`` ``(B, H, S, d_k)``. Returns ``(B, T, H, d_k)`` and the
    weights ``(B, H, T, S)``.
    """
    batch, heads, length, head_dim = query.shape
    keys = key.shape[2]
    causal = (is_causal if is_causal is not None else getattr(module, "is_causal", False)) and length > 1
    bias = torch.zeros(length, keys, dtype=query.dtype, device=query.device)  # (T, S), added to the scores
    if causal:  # query i sees keys j <= i, as sdpa's is_causal
        future = torch.ones(length, keys, dtype=torch.bool, device=query.device).triu(1)
        bias = bias.masked_fill(future, float("-inf"))
    scores = torch.baddbmm(
        bias.expand(batch * heads, length, keys), query.reshape(batch * heads, length, head_dim),
        key.reshape(batch * heads, keys, head_dim).transpose(1, 2), alpha=scaling,
    )  # (B * H, T, S)
    weights = drop(scores.softmax(dim=-1), dropout, module.training)  # torch's dropout, cheaper draws (CPU)
    output = torch.bmm(weights, value.reshape(batch * heads, keys, head_dim))  # (B * H, T, d_k)
    return output.view(batch, heads, length, head_dim).transpose(1, 2), weights.view(batch, heads, length, keys)


def unmasked_sdpa_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """torch's fused ``scaled_dot_product_attention`` called directly for an attention without a mask (its
    ``is_causal`` hides the future of ``T > 1`` queries of a causal module): what transformers' sdpa function
    does in that case, without its per-call checks for masks, grouped keys and tracing. ``query``
    ``(B, H, T, d_k)``, ``key``/``value`` ``(B, H, S, d_k)``; returns ``(B, T, H, d_k)`` (a transposed view:
    the caller's reshape copies it once) and None."""
    causal = getattr(module, "is_causal", False) and query.shape[2] > 1
    output = nn.functional.scaled_dot_product_attention(query, key, value, dropout_p=dropout, is_causal=causal,
                                                        scale=scaling)  # (B, H, T, d_k)
    return output.transpose(1, 2), None


def attention_function(implementation: str, query: torch.Tensor, key: torch.Tensor, attention_mask) -> Callable:
    """The kernel of ``implementation`` (transformers' attention interface), except for an unmasked sdpa
    attention in eager mode: in bfloat16 on a CPU over at most :data:`BMM_ATTENTION_MAX_SCORES` query-key pairs
    it runs :func:`bmm_attention` (the same product, faster there), otherwise :func:`unmasked_sdpa_attention`
    (torch's kernel without the interface's per-call work). Traced graphs keep transformers' function."""
    if implementation == "sdpa" and attention_mask is None and not is_tracing():
        if (query.dtype == torch.bfloat16 and query.device.type == "cpu"
                and query.shape[2] * key.shape[2] <= BMM_ATTENTION_MAX_SCORES):
            return bmm_attention
        return unmasked_sdpa_attention
    return ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)


def attention_implementation(config, output_attentions: bool) -> str:
    """The attention function a forward runs, and whose mask format it builds: ``config._attn_implementation``,
    or ``"eager"`` when the weights are asked for (``output_attentions``), which only the eager function returns."""
    return "eager" if output_attentions else config._attn_implementation


def uses_transformers_masks(implementation: str) -> bool:
    """Whether transformers' ``masking_utils`` builds the masks of ``implementation`` (flex attention's
    ``BlockMask``, say) rather than :func:`attention_mask`, whose boolean masks eager, sdpa and registered
    functions without a mask function of their own read."""
    return implementation not in ("eager", "sdpa") and implementation in ALL_MASK_ATTENTION_FUNCTIONS


def bidirectional_mask(
    config, implementation: str, queries: torch.Tensor, key_padding_mask: torch.Tensor | None,
    keys: torch.Tensor | None = None,
):
    """The mask of an attention without causality: ``queries`` ``(B, T, d)`` over themselves, or over ``keys``
    ``(B, S, d)`` (cross-attention: the encoder output); ``key_padding_mask`` ``(B, S)``, 0 = padding, or None.
    In the format of ``implementation`` (see the module's doc); None when nothing is hidden."""
    if uses_transformers_masks(implementation):
        return create_bidirectional_mask(config, queries, key_padding_mask, encoder_hidden_states=keys)
    key_length = queries.shape[1] if keys is None else keys.shape[1]
    return attention_mask(key_padding_mask, queries.shape[1], key_length, causal=False)


def causal_mask(
    config, implementation: str, queries: torch.Tensor, key_padding_mask: torch.Tensor | None, cache: Cache | None,
    query_offset: int | torch.Tensor, key_length: int,
):
    """The mask of a causal self-attention of ``queries`` ``(B, T, d)`` at positions ``query_offset ..``
    over ``key_length`` keys (``cache``'s and their own); ``key_padding_mask`` ``(B, past + T)`` or None. In
    the format of ``implementation``; None when the kernel's ``is_causal`` suffices."""
    if uses_transformers_masks(implementation):
        if isinstance(cache, EncoderDecoderCache):
            cache = cache.self_attention_cache
        return create_causal_mask(config, queries, key_padding_mask, cache)
    return attention_mask(key_padding_mask, queries.shape[1], key_length, causal=True, query_offset=query_offset,
                          device=queries.device)


def attention_bias(
    key_padding_mask: torch.Tensor | None,
    query_length: int,
    key_length: int,
    causal: bool,
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor | None:
    """The additive mask ``M``: 0 where query ``i`` may attend to key ``j``, the lowest float elsewhere.

    ``key_padding_mask`` ``(B, S)`` has 1 for real keys and 0 for padding. ``causal`` hides the future:
    the ``T`` queries are the last ``T`` of the ``S`` positions (earlier ones come from the cache), so
    query ``i`` sees keys ``j <= S - T + i``. Returns ``(B | 1, 1, T, S)``, or None when nothing is hidden
    (no padding, and one query or no causal mask): the kernels then run without a mask, which is the
    common case of every decoding step over unpadded sources. When tracing (``torch.compile``, export)
    a given padding mask is always kept: whether it hides anything depends on its values.
    """
    allowed = None
    if key_padding_mask is not None and (not reads_values() or not bool(key_padding_mask.all())):
        allowed = key_padding_mask[:, None, None, :].bool()  # (B, 1, 1, S)
    if causal and query_length > 1:
        allowed = causal_allowed(query_length, key_length, key_length - query_length, device, allowed)
    if allowed is None:
        return None
    bias = torch.zeros(allowed.shape, dtype=dtype, device=device)
    return bias.masked_fill(~allowed, torch.finfo(dtype).min)


def causal_allowed(
    query_length: int, key_length: int, query_offset: int | torch.Tensor, device: torch.device,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(B | 1, 1, T, S)`` boolean: query ``i`` (at position ``query_offset + i``) may see key ``j`` iff
    ``j <= query_offset + i``, and'ed with ``allowed`` when given. Built by comparing two ``arange`` ranges, so
    ``query_offset`` may be a 0-d tensor (a static cache's length) without reading its value."""
    query_positions = torch.arange(query_length, device=device) + query_offset  # (T,)
    causal = torch.arange(key_length, device=device)[None, :] <= query_positions[:, None]  # (T, S)
    return causal[None, None] if allowed is None else allowed & causal


def attention_mask(
    key_padding_mask: torch.Tensor | None,
    query_length: int,
    key_length: int,
    causal: bool,
    query_offset: int | torch.Tensor = 0,
    device: torch.device | None = None,
) -> torch.Tensor | None:
    """The boolean mask (True = may attend) ``(B | 1, 1, T, S)`` of an attention, or None when none is needed.

    ``key_padding_mask`` ``(B, L)``, 1 for real keys and 0 for padding, covers the first ``L <= S`` keys
    (a static cache has ``S`` slots of which the later ones are not filled yet; the causal mask hides them).
    ``causal``: the ``T`` queries sit at positions ``query_offset .. query_offset + T - 1``. None is returned
    when nothing is hidden, or when the only thing hidden is the future of ``T == S`` queries starting at 0,
    which the module's ``is_causal`` applies without a mask. ``device``: where the causal part is built. In eager mode an all-ones padding mask counts as
    none; when tracing it is kept, so the graph does not depend on its values.
    """
    padding = None
    if key_padding_mask is not None and (not reads_values() or not bool(key_padding_mask.all())):
        padding = key_padding_mask.bool()
        if padding.shape[-1] < key_length:  # the unfilled slots of a static cache (hidden by the causal mask)
            padding = nn.functional.pad(padding, (0, key_length - padding.shape[-1]), value=True)
        padding = padding[:, None, None, :]  # (B, 1, 1, S)
    plain_causal = isinstance(query_offset, int) and query_offset == 0 and query_length == key_length
    if not causal or (padding is None and plain_causal):
        return padding
    if padding is None and query_length == 1 and isinstance(query_offset, int) and query_offset == key_length - 1:
        return None  # one new token that sees every key
    return causal_allowed(query_length, key_length, query_offset, device, padding)


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention (Vaswani et al. 2017, section 3.2.2):

    .. math::
        \mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h) W^O, \quad
        \mathrm{head}_i = \mathrm{Attention}(Q W_i^Q, K W_i^K, V W_i^V)

    with :math:`d_k = d_{model} / h`. Self-attention takes queries, keys and values from
    ``hidden_states``; cross-attention takes keys and values from ``key_value_states`` (the encoder output).

    ``config._attn_implementation`` picks the kernel. With a cache, self-attention appends the new keys
    and values to ``past_key_values`` at ``layer_idx``; cross-attention projects the encoder output once
    and reads it back from ``EncoderDecoderCache.cross_attention_cache`` at every later step.
    """

    def __init__(self, config, hidden_size: int, num_heads: int, dropout: float, layer_idx: int | None = None,
                 is_causal: bool = False):
        super().__init__()
        # masked self-attention of a decoder: without an explicit mask the kernel hides the future itself
        self.is_causal = is_causal
        if hidden_size % num_heads:
            raise ValueError(f"hidden size {hidden_size} is not divisible by the number of heads {num_heads}")
        self.config = config
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads  # d_k = d_v = d_model / h
        self.scaling = self.head_dim**-0.5  # 1 / sqrt(d_k)
        self.dropout = dropout
        self.layer_idx = layer_idx
        bias = getattr(config, "bias", True)  # the Transformer's config may drop the biases; BERT keeps them
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=bias)  # W^Q for all heads at once
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=bias)  # W^K
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=bias)  # W^V
        self.out_proj = nn.Linear(hidden_size, hidden_size, bias=bias)  # W^O

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, d)`` -> ``(B, H, T, d_k)``: one slice of the last dimension per head."""
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, d_k)

    def keys_and_values(self, states, past_key_values, cross: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values ``(B, H, S, d_k)`` of ``states``, appended to the layer's cache when there is one;
        cross-attention projects the encoder output once, then reads the cache."""
        if isinstance(past_key_values, EncoderDecoderCache):
            if cross and past_key_values.is_updated.get(self.layer_idx):
                layer = past_key_values.cross_attention_cache.layers[self.layer_idx]
                return layer.keys, layer.values  # projected once, at the first decoding step
            cache = past_key_values.cross_attention_cache if cross else past_key_values.self_attention_cache
        else:
            cache = past_key_values
        key, value = self.split_heads(self.k_proj(states)), self.split_heads(self.v_proj(states))  # (B, H, S, d_k)
        if cross and cache is not None:
            # read at every later step: store them contiguous, not as transposed views of the projections
            # (torch's CPU sdpa kernel reads strided keys and values more slowly)
            key, value = key.contiguous(), value.contiguous()
        if cache is not None:
            key, value = cache.update(key, value, self.layer_idx)  # self-attention: (B, H, past + S, d_k)
            if cross:
                past_key_values.is_updated[self.layer_idx] = True
        return key, value

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        output_attentions: bool = False,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """
        Args:
            hidden_states: queries' source ``(B, T, d_model)``.
            key_value_states: keys' and values' source ``(B, S, d_model)`` for cross-attention.
            attention_mask: boolean (True = may attend, see :func:`attention_mask`) or additive (see
                :func:`attention_bias`) mask broadcastable to ``(B, H, T, S)``, or None (then ``is_causal``
                alone hides the future of a causal self-attention, inside the kernel: no ``T × T`` tensor).
            past_key_values: a ``Cache`` (self-attention only) or an ``EncoderDecoderCache``.
            output_attentions: also return the weights; sdpa does not compute them, so such a call
                runs the eager function (the same numbers; :func:`attention_implementation`).
            kwargs: passed on to the attention function (``kernel_options`` of flex attention, say).

        Returns:
            The output ``(B, T, d_model)`` and the weights ``(B, H, T, S)`` or None.
        """
        cross = key_value_states is not None
        query = self.split_heads(self.q_proj(hidden_states))  # (B, H, T, d_k)
        states = key_value_states if cross else hidden_states
        key, value = self.keys_and_values(states, past_key_values, cross)  # (B, H, S, d_k)
        implementation = attention_implementation(self.config, output_attentions)
        attend = attention_function(implementation, query, key, attention_mask)
        output, weights = attend(
            self, query, key, value, attention_mask,
            scaling=self.scaling, dropout=self.dropout if self.training else 0.0, **kwargs,
        )  # (B, T, H, d_k)
        output = self.out_proj(output.reshape(*hidden_states.shape[:-1], -1))  # concat heads: (B, T, d_model)
        return output, weights if output_attentions else None
