"""The Transformer of "Attention Is All You Need" (Vaswani et al. 2017): encoder-decoder and decoder-only.

* :class:`TransformerEncoder` – embeddings, then ``N`` × (self-attention, feed-forward);
* :class:`TransformerDecoder` – embeddings, then ``N`` × (masked self-attention, encoder-decoder attention,
  feed-forward); without the encoder-decoder attention it is the GPT-style decoder-only stack;
* :class:`TransformerModel`, :class:`TransformerForConditionalGeneration` (the translation model: final
  linear + softmax over the target vocabulary), :class:`TransformerLMModel` (the decoder-only stack as a base
  model) and :class:`TransformerForCausalLM`.

The layers are in ``transformer_layers.py``, attention in ``multi_head_attention.py``. During generation
the decoder's self-attention keys and values grow in a ``DynamicCache``; the encoder-decoder attention
projects the encoder output once into the ``EncoderDecoderCache``'s cross-attention cache.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    CausalLMOutputWithPast,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs
from transformers.utils.generic import can_return_tuple

from .cache_continuation import continue_from_cache
from .cache_naming import cache_field, given_cache, output_cache
from .configuration_transformer import TransformerConfig, TransformerConfigBase, TransformerLMConfig
from .feed_forward import Dropout
from .input_checks import check_input_ids, check_mask_values, check_source_ids, current_mask, is_tracing
from .library_internals import mark_not_initialized
from .multi_head_attention import attention_implementation, bidirectional_mask, causal_mask
from .output_flags import output_flags, structured
from .positional_encoding import build_positional_encoding, position_ids_from_mask
from .source_vocabulary import SourceVocabularyMixin
from .teacher_forcing import needs_decoder_inputs, next_token_labels, shift_tokens_right, token_cross_entropy
from .transformer_layers import TransformerDecoderLayer, TransformerEncoderLayer


class TransformerEmbeddings(nn.Module):
    r"""Input of a stack: :math:`\mathrm{Dropout}(E[w] \cdot \sqrt{d_{model}} + PE(pos))` (sections 3.4, 3.5).

    ``embed_tokens`` is passed in, so the encoder and decoder can share one matrix. ``inputs_embeds``
    replaces the lookup :math:`E[w]` (the output of ``get_input_embeddings()``; the scale still applies).
    """

    def __init__(self, config: TransformerConfigBase, embed_tokens: nn.Embedding):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_positions = build_positional_encoding(
            config.position_embedding_type, config.d_model, config.max_position_embeddings
        )
        self.dropout = Dropout(config.dropout)  # torch's nn.Dropout with cheaper random draws on a CPU

    def forward(
        self, input_ids: torch.LongTensor | None, position_ids: torch.LongTensor | None,
        inputs_embeds: torch.Tensor | None = None, first_position: int = 0,
    ) -> torch.Tensor:
        """``position_ids`` ``(B | 1, T)``, or None for the consecutive positions ``first_position ..
        first_position + T - 1`` of every row (read as one slice of the position table, eager mode)."""
        tokens = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds  # (B, T, d)
        if self.scale != 1.0:  # scale_embedding=False multiplies by nothing: no element-wise pass either way
            tokens = tokens * self.scale
        if position_ids is None:
            positions = self.embed_positions.span(first_position, tokens.shape[1], tokens.device)  # (1, T, d)
        else:
            positions = self.embed_positions(position_ids)  # (B | 1, T, d)
        x = tokens + positions.to(tokens.dtype)  # (B, T, d)
        return self.dropout(x) if self.dropout.p and self.training else x


def final_norm(config: TransformerConfigBase) -> nn.LayerNorm | None:
    """Pre-norm stacks end with a LayerNorm (their last sub-layer output is not normalised); post-norm ones don't."""
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias) if config.normalize_before else None


def ids_or_embeds(input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, prefix: str = "") -> torch.Tensor:
    """The one of ``input_ids`` ``(B, T)`` / ``inputs_embeds`` ``(B, T, d)`` that was given (exactly one must be)."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError(f"Give exactly one of `{prefix}input_ids` and `{prefix}inputs_embeds` "
                         f"(got {'both' if input_ids is not None else 'neither'}).")
    if inputs_embeds is not None and inputs_embeds.dim() != 3:
        raise ValueError(f"`{prefix}inputs_embeds` must have shape (batch_size, sequence_length, d_model), "
                         f"got {tuple(inputs_embeds.shape)}.")
    return input_ids if input_ids is not None else inputs_embeds


def consecutive_or_counted(
    padding: torch.Tensor | None, past: int | torch.Tensor, length: int, device: torch.device
) -> torch.LongTensor | None:
    """The position ids of ``length`` new tokens after ``past`` cached ones (:func:`position_ids_from_mask`),
    or None in eager mode when there is no padding and ``past`` is a number: the positions are then
    ``past .. past + length - 1`` for every row, which :class:`TransformerEmbeddings` reads as one slice."""
    if padding is None and isinstance(past, int) and not is_tracing():
        return None
    return position_ids_from_mask(padding, past, length, device)


def cache_lengths(cache: Cache | None, length: int) -> tuple[int | torch.Tensor, int]:
    """``(past, keys)``: the number of cached positions (a 0-d tensor for a static cache, so that a traced
    graph does not read it) and the number of keys the self-attention sees after adding ``length`` new ones
    (``past + length``, or a static cache's fixed size, whose unfilled slots the causal mask hides)."""
    if cache is None:
        return 0, length
    return cache.get_seq_length(), cache.get_mask_sizes(length, 0)[0]


class TransformerEncoder(nn.Module):
    """``N`` encoder layers over the embedded source; padding is masked out of every attention."""

    def __init__(self, config: TransformerConfig, embed_tokens: nn.Embedding):
        super().__init__()
        self.config = config
        self.embeddings = TransformerEmbeddings(config, embed_tokens)
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(config, config.encoder_attention_heads, config.encoder_ffn_dim)
            for _ in range(config.encoder_layers)
        )
        self.final_norm = final_norm(config)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutput:
        """``input_ids`` ``(B, S)`` (or ``inputs_embeds`` ``(B, S, d_model)``), ``attention_mask`` ``(B, S)``
        (0 = padding); ``kwargs`` go to the attention function. Returns ``last_hidden_state`` ``(B, S, d_model)``,
        ``hidden_states`` (``N + 1`` tensors: the embeddings and every layer's output) and ``attentions``
        (``N`` × ``(B, H, S, S)``)."""
        kwargs.pop("return_dict", None)  # generate() asks the encoder for its ModelOutput, the only form it returns
        output_hidden_states, output_attentions = output_flags(self.config, output_hidden_states, output_attentions)
        source = ids_or_embeds(input_ids, inputs_embeds)
        if input_ids is not None:
            check_source_ids(input_ids, self.config)
        mask = current_mask(attention_mask, source)
        length = source.shape[1]
        positions = consecutive_or_counted(mask, 0, length, source.device)
        x = self.embeddings(input_ids, positions, inputs_embeds)  # (B, S, d)
        implementation = attention_implementation(self.config, output_attentions)
        padding = bidirectional_mask(self.config, implementation, x, mask)  # e.g. (B, 1, 1, S), or None
        hidden_states, attentions = [], []
        for layer in self.layers:
            hidden_states.append(x)
            x, weights = layer(x, padding, output_attentions=output_attentions, **kwargs)
            attentions.append(weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return BaseModelOutput(
            last_hidden_state=x,
            hidden_states=(*hidden_states, x) if output_hidden_states else None,
            attentions=tuple(attentions) if output_attentions else None,
        )


class DecoderStack:
    """``N`` decoder layers over the embedded target prefix, with the causal mask (position ``t`` sees
    positions ``<= t`` only). ``cross_attention=False`` gives the decoder-only language model.

    The modules and the forward of the stack, shared by :class:`TransformerDecoder` (a module inside the
    encoder-decoder) and :class:`TransformerLMModel` (the decoder-only base model): the same attribute names
    (``embeddings``, ``layers``, ``final_norm``), hence the same state-dict keys.

    The cache may be a ``DynamicCache`` (keys grow by concatenation) or a ``StaticCache`` (fixed-size
    buffers written in place, for ``torch.compile``; ``generate(cache_implementation="static")``); an
    encoder-decoder wraps two of them in an ``EncoderDecoderCache``.
    """

    def build_stack(self, config: TransformerConfigBase, embed_tokens: nn.Embedding, cross_attention: bool) -> None:
        """Create the stack's modules on ``self`` (an ``nn.Module`` whose ``__init__`` has run)."""
        self.config = config
        self.cross_attention = cross_attention
        self.embeddings = TransformerEmbeddings(config, embed_tokens)
        self.layers = nn.ModuleList(
            TransformerDecoderLayer(config, config.decoder_attention_heads, config.decoder_ffn_dim, i, cross_attention)
            for i in range(config.decoder_layers)
        )
        self.final_norm = final_norm(config)

    def new_cache(self) -> Cache:
        return EncoderDecoderCache(DynamicCache(), DynamicCache()) if self.cross_attention else DynamicCache()

    def checkpointing(self) -> bool:
        """Whether the layers run under gradient checkpointing now (which drops their cache)."""
        return self.training and torch.is_grad_enabled() and any(layer.gradient_checkpointing for layer in self.layers)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: Cache | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """
        Args:
            input_ids: ``(B, T)`` the newest target tokens (all of them without a cache); or ``inputs_embeds``
                ``(B, T, d_model)``.
            attention_mask: ``(B, past + T)``, 0 = padding (left padding of decoder-only prompts); or a prepared
                4-D mask ``(B | 1, 1, T, keys)`` (boolean or additive, or flex attention's ``BlockMask``, as
                ``generate`` builds for a static cache), used as it is.
            encoder_hidden_states: ``(B, S, d_model)``; encoder_attention_mask ``(B, S)``.
            past_key_values: the cache of earlier steps, extended in place (or ``cache``, the name transformers
                >= 5.24 uses and returns it under).
            position_ids: ``(B | 1, T)``; default: counted from the 2-D ``attention_mask`` (padding does not
                shift positions), else ``past .. past + T - 1``.
            kwargs: passed on to the attention functions.

        Returns:
            ``last_hidden_state`` ``(B, T, d_model)``, ``past_key_values``, ``hidden_states`` (``N + 1`` ×
            ``(B, T, d_model)``), ``attentions`` (``N`` × ``(B, H, T, keys)``), ``cross_attentions``
            (``N`` × ``(B, H, T, S)``).
        """
        output_hidden_states, output_attentions = output_flags(self.config, output_hidden_states, output_attentions)
        target = ids_or_embeds(input_ids, inputs_embeds)
        if input_ids is not None:
            check_input_ids(input_ids, self.config.vocab_size, "decoder_input_ids" if self.cross_attention else "input_ids")
        if self.cross_attention and encoder_hidden_states is None:
            raise ValueError("the encoder-decoder's decoder needs `encoder_hidden_states` (the encoder output)")
        if use_cache is None:  # a training forward reads no cache: building one would copy every key and value
            use_cache = self.config.use_cache and not (self.training and torch.is_grad_enabled())
        past_key_values = given_cache(past_key_values, cache)
        if self.checkpointing():  # the checkpointed layers would not fill the cache
            use_cache, past_key_values = False, None
        if use_cache and past_key_values is None:
            past_key_values = self.new_cache()
        batch, length = target.shape[:2]
        past, key_length = cache_lengths(past_key_values, length)
        padding = attention_mask if attention_mask is None or len(attention_mask.shape) == 2 else None
        if padding is not None and not is_tracing():
            if padding.shape != (batch, int(past) + length):
                raise ValueError(f"`attention_mask` must have shape (batch, past + new tokens) = "
                                 f"{(batch, int(past) + length)}, got {tuple(padding.shape)}")
            check_mask_values(padding)
        if position_ids is None:
            position_ids = consecutive_or_counted(padding, past, length, target.device)
        x = self.embeddings(input_ids, position_ids, inputs_embeds, first_position=past)  # (B, T, d)
        implementation = attention_implementation(self.config, output_attentions)
        self_mask = attention_mask if padding is None and attention_mask is not None else causal_mask(
            self.config, implementation, x, padding, past_key_values, past, key_length)
        cross_mask = None
        if self.cross_attention:
            source_mask = current_mask(encoder_attention_mask, encoder_hidden_states)
            cross_mask = bidirectional_mask(self.config, implementation, x, source_mask, encoder_hidden_states)
        hidden_states, self_attentions, cross_attentions = [], [], []
        layer_cache = cache_field(past_key_values)  # {installed name: the cache}
        for layer in self.layers:
            hidden_states.append(x)
            x, self_weights, cross_weights = layer(  # tensors positional: see TransformerDecoderLayer.forward
                x, self_mask, encoder_hidden_states, cross_mask, **layer_cache,
                output_attentions=output_attentions, **kwargs,
            )
            self_attentions.append(self_weights)
            cross_attentions.append(cross_weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=x,
            **cache_field(past_key_values if use_cache else None),
            hidden_states=(*hidden_states, x) if output_hidden_states else None,
            attentions=tuple(self_attentions) if output_attentions else None,
            cross_attentions=tuple(cross_attentions) if output_attentions and self.cross_attention else None,
        )


class TransformerDecoder(DecoderStack, nn.Module):
    """The decoder stack as a module of :class:`TransformerModel` (see :class:`DecoderStack`)."""

    def __init__(self, config: TransformerConfigBase, embed_tokens: nn.Embedding, cross_attention: bool):
        super().__init__()
        self.build_stack(config, embed_tokens, cross_attention)


class TransformerPreTrainedModel(PreTrainedModel):
    config_class = TransformerConfig
    config: TransformerConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    # attention goes through transformers' ALL_ATTENTION_FUNCTIONS with the masks masking_utils builds for each
    # implementation, and the forward's keyword arguments reach it
    _supports_sdpa = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    # no value-dependent branch, no `.item()` on a traced path: forward and static-cache decoding compile whole
    _can_compile_fullgraph = True
    _no_split_modules = ["TransformerEncoderLayer", "TransformerDecoderLayer"]

    def mark_tied_weights_as_initialized(self, loading_info):
        """transformers marks every tied target initialised before loading the rest. A target that is the same
        parameter as its source (the encoder-decoder's shared embedding module) marked the source too, so a
        checkpoint without it left it on the meta device and out of ``missing_keys``: such sources are
        reported missing and initialised like any other weight."""
        unloaded = {source for source in self.all_tied_weights_keys.values() if source in loading_info.missing_keys}
        super().mark_tied_weights_as_initialized(loading_info)
        for source in unloaded:
            mark_not_initialized(self.get_parameter(source))
            loading_info.missing_keys.add(source)

    @torch.no_grad()
    def _init_weights(self, module):
        """Xavier-uniform linear maps with zero biases (as in the reference implementations), embeddings
        from ``N(0, 1/d_model)`` so that the scaled embeddings have unit variance, LayerNorms (also the
        Add & Norm sub-layers, whose class name does not say LayerNorm) at (1, 0)."""
        if isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=self.config.d_model**-0.5)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        else:
            super()._init_weights(module)


class TransformerModel(SourceVocabularyMixin, TransformerPreTrainedModel):
    """Encoder and decoder, without the output layer. With ``share_encoder_decoder_embeddings`` both stacks
    use one embedding module (``encoder.embeddings.embed_tokens``; one module rather than two tied weights,
    so that FSDP's wrapping of the input embeddings keeps the decoder's use in the same group). With separate
    vocabularies the encoder's matrix has ``source_vocab_size`` rows and the decoder's ``vocab_size`` (see
    :class:`SourceVocabularyMixin` for what ``resize_token_embeddings`` resizes)."""

    def __init__(self, config: TransformerConfig):
        super().__init__(config)
        source_vocab_size = config.source_vocab_size if config.source_vocab_size is not None else config.vocab_size
        source_embeddings = nn.Embedding(source_vocab_size, config.d_model)
        shared = config.share_encoder_decoder_embeddings
        target_embeddings = source_embeddings if shared else nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = TransformerEncoder(config, source_embeddings)
        self.decoder = TransformerDecoder(config, target_embeddings, cross_attention=True)
        if shared:  # the two names of one weight: save_pretrained writes the encoder's only
            self._tied_weights_keys = {"decoder.embeddings.embed_tokens.weight": "encoder.embeddings.embed_tokens.weight"}
        self.post_init()

    def get_input_embeddings(self):
        return self.encoder.embeddings.embed_tokens

    def set_input_embeddings(self, value):
        self.encoder.embeddings.embed_tokens = value
        if self.config.share_encoder_decoder_embeddings:
            self.decoder.embeddings.embed_tokens = value

    def get_decoder_input_embeddings(self):
        """The decoder's token embeddings (the encoder's when they are shared)."""
        return self.decoder.embeddings.embed_tokens

    def set_decoder_input_embeddings(self, value):
        """Replace the decoder's token embeddings."""
        self.decoder.embeddings.embed_tokens = value
        if self.config.share_encoder_decoder_embeddings:
            self.encoder.embeddings.embed_tokens = value

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        past_key_values: Cache | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        decoder_position_ids: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqModelOutput:
        """``input_ids`` ``(B, S)`` source (or ``inputs_embeds`` ``(B, S, d_model)``), ``decoder_input_ids``
        ``(B, T)`` target prefix (or ``decoder_inputs_embeds``); ``encoder_outputs`` (from an earlier call or
        ``generate``) skips the encoder. Shapes as in the two stacks' docs."""
        output_hidden_states, output_attentions = output_flags(self.config, output_hidden_states, output_attentions)
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids, attention_mask, output_attentions, output_hidden_states,
                                           inputs_embeds=inputs_embeds, **kwargs)
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        if decoder_input_ids is None and decoder_inputs_embeds is None:  # the source alone: the encoder's states
            return Seq2SeqModelOutput(encoder_last_hidden_state=encoder_outputs.last_hidden_state,
                                      encoder_hidden_states=encoder_outputs.hidden_states,
                                      encoder_attentions=encoder_outputs.attentions)
        decoder_outputs = self.decoder(
            decoder_input_ids, attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state, encoder_attention_mask=attention_mask,
            cache=given_cache(past_key_values, cache), use_cache=use_cache,
            output_attentions=output_attentions, output_hidden_states=output_hidden_states,
            position_ids=decoder_position_ids, inputs_embeds=decoder_inputs_embeds, **kwargs,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            **cache_field(output_cache(decoder_outputs)),
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


class TransformerForConditionalGeneration(SourceVocabularyMixin, TransformerPreTrainedModel, GenerationMixin):
    r"""The translation model: :math:`p(y_t \mid y_{<t}, x) = \mathrm{softmax}(h_t W_{out})`, :math:`h_t` the
    decoder output. ``tie_word_embeddings`` shares :math:`W_{out}` with the target embeddings; with
    ``share_encoder_decoder_embeddings`` too, one matrix serves all three (the paper's setting). The output
    layer covers the target vocabulary (``vocab_size``); with separate vocabularies the encoder reads
    ``source_vocab_size`` ids (``resize_token_embeddings`` resizes the target side,
    ``resize_source_token_embeddings`` the source side)."""

    _tied_weights_keys = {"lm_head.weight": "model.decoder.embeddings.embed_tokens.weight"}
    #: the decoding graphs ``hf_seqmodels.export`` writes for it (a builder of ``export/step_graphs.py``)
    export_graphs = "transformer_seq2seq"

    def __init__(self, config: TransformerConfig):
        super().__init__(config)
        self.model = TransformerModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.share_encoder_decoder_embeddings:
            self._tied_weights_keys = {"lm_head.weight": "model.encoder.embeddings.embed_tokens.weight"}
        self.post_init()

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.model.set_input_embeddings(value)

    def get_decoder_input_embeddings(self):
        """The decoder's token embeddings (the encoder's when they are shared)."""
        return self.model.get_decoder_input_embeddings()

    def set_decoder_input_embeddings(self, value):
        """Replace the decoder's token embeddings."""
        self.model.set_decoder_input_embeddings(value)

    def get_output_embeddings(self):
        """The output layer: final hidden states to vocabulary scores."""
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    def prepare_decoder_input_ids_from_labels(self, labels: torch.LongTensor) -> torch.LongTensor:
        """Teacher forcing's decoder input: ``labels`` shifted right behind ``decoder_start_token_id``."""
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    @staticmethod
    def _reorder_cache(past_key_values: Cache, beam_idx: torch.LongTensor) -> Cache:
        """Beam search: keep the self-attention keys and values of the beams in ``beam_idx`` ``(B * beams,)``.

        The cross-attention keys and values are projections of the encoder output, which ``generate``
        repeats for every beam of a source, and a beam never moves to another source: reordering them
        would copy ``2 * layers`` tensors ``(B * beams, H, S, d_k)`` per step and change nothing.
        """
        if isinstance(past_key_values, EncoderDecoderCache):
            past_key_values.self_attention_cache.reorder_cache(beam_idx)
        else:
            past_key_values.reorder_cache(beam_idx)
        return past_key_values

    def prepare_inputs_for_generation(self, input_ids, next_sequence_length=None, past_key_values=None,
                                      attention_mask=None, cache=None, **kwargs):
        """transformers' inputs of one decoding step; continuing from a cache passed to ``generate`` with the
        full decoder prefix, the first step reads only the tokens the cache has not seen
        (:func:`continue_from_cache`)."""
        cache = given_cache(past_key_values, cache)
        next_sequence_length = continue_from_cache(cache, input_ids, next_sequence_length)
        return super().prepare_inputs_for_generation(input_ids, next_sequence_length, cache, attention_mask,
                                                     **kwargs)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        past_key_values: Cache | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        decoder_position_ids: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqLMOutput:
        """
        Args:
            labels: ``(B, T)`` target tokens, ``-100`` ignored. Without ``decoder_input_ids`` the decoder
                reads the labels shifted right behind ``decoder_start_token_id`` (teacher forcing).

        Returns:
            ``Seq2SeqLMOutput``: ``loss`` (label-smoothed with ``config.label_smoothing``), ``logits``
            ``(B, T, vocab_size)`` and the fields of :class:`TransformerModel`.
        """
        needs_decoder_inputs(decoder_input_ids, decoder_inputs_embeds, labels)
        if labels is not None and decoder_input_ids is None and decoder_inputs_embeds is None:
            decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        out = structured(
            self.model, input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask, encoder_outputs=encoder_outputs,
            cache=given_cache(past_key_values, cache), use_cache=use_cache,
            output_attentions=output_attentions, output_hidden_states=output_hidden_states,
            inputs_embeds=inputs_embeds, decoder_inputs_embeds=decoder_inputs_embeds,
            decoder_position_ids=decoder_position_ids, **kwargs,
        )
        logits = self.lm_head(out.last_hidden_state)  # (B, T, V)
        loss = None
        if labels is not None:
            loss = token_cross_entropy(logits, labels, self.config.label_smoothing, num_items_in_batch)
        return Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            **cache_field(output_cache(out)),
            decoder_hidden_states=out.decoder_hidden_states,
            decoder_attentions=out.decoder_attentions,
            cross_attentions=out.cross_attentions,
            encoder_last_hidden_state=out.encoder_last_hidden_state,
            encoder_hidden_states=out.encoder_hidden_states,
            encoder_attentions=out.encoder_attentions,
        )


class TransformerLMModel(DecoderStack, TransformerPreTrainedModel):
    """The decoder-only (GPT-style) Transformer without its output layer: embeddings, ``N`` × (masked
    self-attention, feed-forward) and, pre-norm, a final LayerNorm; the body of :class:`TransformerForCausalLM`
    (its ``model``). ``forward`` is :meth:`DecoderStack.forward`: ``last_hidden_state`` ``(B, T, d_model)``,
    the ``DynamicCache`` (or the static cache it was given), ``hidden_states`` (``N + 1``) and ``attentions``
    (``N`` × ``(B, H, T, past + T)``)."""

    config_class = TransformerLMConfig
    config: TransformerLMConfig
    _no_split_modules = ["TransformerDecoderLayer"]

    def __init__(self, config: TransformerLMConfig):
        super().__init__(config)
        self.build_stack(config, nn.Embedding(config.vocab_size, config.d_model), cross_attention=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.embed_tokens

    def set_input_embeddings(self, value):
        self.embeddings.embed_tokens = value

    forward = can_return_tuple(DecoderStack.forward)


class TransformerForCausalLM(TransformerPreTrainedModel, GenerationMixin):
    r"""Decoder-only (GPT-style) language model: :class:`TransformerLMModel` (``model``), then
    :math:`p(w_t \mid w_{<t}) = \mathrm{softmax}(h_t W_{out})`, with :math:`W_{out}` tied to the embeddings
    when ``tie_word_embeddings``. The cache is a ``DynamicCache`` of the self-attention keys and values."""

    config_class = TransformerLMConfig
    config: TransformerLMConfig
    _no_split_modules = ["TransformerDecoderLayer"]  # no encoder: FSDP's layer wrapping must find every name
    _tied_weights_keys = {"lm_head.weight": "model.embeddings.embed_tokens.weight"}
    #: the decoding graphs ``hf_seqmodels.export`` writes for it (a builder of ``export/step_graphs.py``)
    export_graphs = "transformer_lm"

    def __init__(self, config: TransformerLMConfig):
        super().__init__(config)
        self.model = TransformerLMModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.model.set_input_embeddings(value)

    def get_output_embeddings(self):
        """The output layer: final hidden states to vocabulary scores."""
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        cache: Cache | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        """
        Args:
            input_ids: ``(B, T)``; with ``past_key_values`` (or ``cache``, the name of transformers >= 5.24),
                only the tokens after the cached ones.
            attention_mask: ``(B, past + T)``, 0 = padding (left-pad prompts for batched generation).
            position_ids: ``(B | 1, T)``, default: counted from ``attention_mask`` (``generate`` passes them).
            inputs_embeds: ``(B, T, d_model)`` instead of ``input_ids`` (``get_input_embeddings()(ids)`` gives
                the same result as ``ids``).
            labels: ``(B, T)``, shifted inside (token ``t`` predicts ``t + 1``), ``-100`` ignored.
            shift_labels: (keyword, through ``**kwargs`` as in transformers' causal LMs, so that ``Trainer``'s
                ``label_names`` stay ``['labels']``) ``(B, T)`` already-aligned targets (token ``t`` predicts
                ``shift_labels[:, t]``), as sequence-parallel training passes them; they take precedence over
                ``labels``.

        Returns:
            ``CausalLMOutputWithPast``: ``loss``, ``logits`` ``(B, T, vocab_size)``, the ``DynamicCache``,
            ``hidden_states`` (``N + 1`` × ``(B, T, d_model)``) and ``attentions`` (``N`` × ``(B, H, T, past + T)``).
        """
        out = structured(
            self.model, input_ids, attention_mask=attention_mask, cache=given_cache(past_key_values, cache),
            use_cache=use_cache, position_ids=position_ids, inputs_embeds=inputs_embeds,
            output_attentions=output_attentions, output_hidden_states=output_hidden_states, **kwargs,
        )
        logits = self.lm_head(out.last_hidden_state)  # (B, T, V)
        loss, smoothing, shift_labels = None, self.config.label_smoothing, kwargs.get("shift_labels")
        if shift_labels is not None:
            loss = token_cross_entropy(logits, shift_labels, smoothing, num_items_in_batch)
        elif labels is not None:
            loss = token_cross_entropy(logits, next_token_labels(labels), smoothing, num_items_in_batch)
        return CausalLMOutputWithPast(
            loss=loss, logits=logits, **cache_field(output_cache(out)),
            hidden_states=out.hidden_states, attentions=out.attentions,
        )


__all__ = [
    "TransformerDecoder",
    "TransformerEncoder",
    "TransformerForCausalLM",
    "TransformerForConditionalGeneration",
    "TransformerLMModel",
    "TransformerModel",
    "TransformerPreTrainedModel",
]
