"""RNN encoder-decoder with attention: Bahdanau et al. (2015) and Luong et al. (2015).

The encoder is the fused :class:`RecurrentStack` over the whole source; its outputs ``h_i`` (the
memory) stay batch-first. A bridge turns its final states into the decoder's initial state ``s_0``.
The decoder wires an attention score (:mod:`rnn_attention`) in one of two ways::

    bahdanau   c_t = attend(score(s_{t-1}, h)),  s_t = RNN(s_{t-1}, [E y_{t-1}; c_t]),  o_t = [s_t; c_t]
    luong      s_t = RNN(s_{t-1}, [E y_{t-1}; h̃_{t-1}]?),  c_t = attend(score(s_t, h)),
               o_t = h̃_t = tanh(W_c [c_t; s_t])                    (h̃_{t-1} only with input feeding)
    none       s_t = RNN(s_{t-1}, E y_{t-1}),  o_t = s_t           (the source enters through s_0 only)

and ``p(y_t | y_<t, x) = softmax(W_o o_t + b_o)``. Luong without input feeding and ``none`` run the
decoder's fused kernel over the whole target; the other wirings step through time with the same module.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import LogitsProcessorList
from transformers.modeling_outputs import ModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput
from transformers.utils.generic import can_return_tuple

from .attention_state import AttentionDecoderState, CoveragePenaltyLogitsProcessor
from .cache_naming import cache_field, given_cache, output_cache
from .configuration_rnn_seq2seq import RNNSeq2SeqConfig
from .input_checks import check_input_ids, check_source_ids
from .modeling_rnn import RNNPreTrainedModel
from .recurrent_stack import RecurrentStack
from .rnn_attention import attend, build_attention
from .source_vocabulary import SourceVocabularyMixin
from .stateful_generation import StatefulGenerationMixin
from .teacher_forcing import shift_tokens_right, token_cross_entropy


@dataclass
class RNNSeq2SeqEncoderOutput(ModelOutput):
    """Output of :class:`RNNSeq2SeqEncoder`; every field is batch-first, so beam search can expand it.

    Args:
        last_hidden_state: the memory ``h_i``: ``(batch, src_len, directions * encoder_hidden_size)``,
            zero at padded positions.
        final_state: ``(batch, N, encoder_layers * directions, encoder_hidden_size)``, the final ``h`` (and
            ``c``: ``N = 2`` for the cells with a cell state, ``lstm`` and ``peephole_lstm``) of every layer
            and direction.
        hidden_states: ``(embeddings, memory)`` when ``output_hidden_states``.
    """

    last_hidden_state: torch.FloatTensor | None = None
    final_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


class RNNSeq2SeqPreTrainedModel(RNNPreTrainedModel):
    """Shares the RNN family's uniform ``[-init_range, init_range]`` initialisation."""

    config_class = RNNSeq2SeqConfig
    config: RNNSeq2SeqConfig
    # the recurrent stacks, not the encoder and decoder: those hold the embeddings, which accelerate's FSDP2
    # puts in a unit of their own
    _no_split_modules = ["RecurrentStack"]


class RNNSeq2SeqEncoder(nn.Module):
    """Source embeddings (``config.source_vocab_size`` rows, or ``vocab_size`` when the vocabulary is
    shared), dropout and the (bidirectional, stacked) recurrent stack."""

    def __init__(self, config: RNNSeq2SeqConfig):
        super().__init__()
        self.config = config
        source_vocab_size = config.source_vocab_size if config.source_vocab_size is not None else config.vocab_size
        self.embed_tokens = nn.Embedding(source_vocab_size, config.embedding_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.rnn = RecurrentStack(
            config.encoder_cell_type, config.embedding_size, config.encoder_hidden_size,
            num_layers=config.encoder_layers, bidirectional=config.bidirectional_encoder,
            dropout=config.hidden_dropout_prob,
        )

    def forward(self, input_ids, attention_mask=None, output_hidden_states=None, **kwargs) -> RNNSeq2SeqEncoderOutput:
        """``input_ids`` ``(batch, src_len)``; ``attention_mask`` 0 marks padding (any side)."""
        check_source_ids(input_ids, self.config)
        mask = source_mask(attention_mask, input_ids.shape)
        embeddings = self.dropout(self.embed_tokens(input_ids))  # (B, S, E)
        memory, final = self.rnn(embeddings, mask=mask)  # (B, S, D*H_e)
        return RNNSeq2SeqEncoderOutput(
            last_hidden_state=memory,
            final_state=torch.stack(final, dim=1),  # (B, N, L*D, H_e)
            hidden_states=(embeddings, memory) if output_hidden_states else None,
        )


def source_mask(attention_mask: torch.Tensor | None, shape: torch.Size) -> torch.Tensor | None:
    """``attention_mask`` ``(batch, src_len)`` as bool, or None when nothing is padded."""
    if attention_mask is None:
        return None
    if tuple(attention_mask.shape) != tuple(shape):
        raise ValueError(f"`attention_mask` must have the source's shape {tuple(shape)}, got "
                         f"{tuple(attention_mask.shape)}.")
    mask = attention_mask.bool()
    if not bool(mask.any(dim=1).all()):
        raise ValueError("Every source sentence needs at least one real token (`attention_mask` row of zeros).")
    return None if bool(mask.all()) else mask


class Bridge(nn.Module):
    """The decoder's initial state from the encoder's final states (``config.bridge``).

    Decoder state tensor ``k`` (``h``, then ``c`` for an LSTM) is made from the encoder's tensor ``k``,
    or from its ``h`` when the encoder has no cell state: ``"dense"``: ``tanh(W_b [all layers and
    directions] + b_b)``; ``"copy"``: the tensors themselves, directions concatenated per layer.
    """

    def __init__(self, config: RNNSeq2SeqConfig, num_decoder_states: int):
        super().__init__()
        self.mode = config.bridge
        self.shape = (config.decoder_layers, config.hidden_size)
        self.num_decoder_states = num_decoder_states
        if self.mode == "dense":
            directions = 2 if config.bidirectional_encoder else 1
            in_size = config.encoder_layers * directions * config.encoder_hidden_size
            out_size = config.decoder_layers * config.hidden_size
            self.dense = nn.ModuleList(nn.Linear(in_size, out_size) for _ in range(num_decoder_states))

    def forward(self, final_state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``final_state`` ``(B, N_enc, L_enc * D, H_enc)`` -> tensors ``(B, decoder_layers, hidden_size)``."""
        batch = final_state.shape[0]
        if self.mode == "zeros":
            zeros = final_state.new_zeros(batch, *self.shape)
            return tuple(zeros for _ in range(self.num_decoder_states))
        sources = [final_state[:, min(k, final_state.shape[1] - 1)] for k in range(self.num_decoder_states)]
        if self.mode == "copy":  # (B, L * D, H_e), layer-major -> (B, L, D * H_e)
            return tuple(s.reshape(batch, *self.shape) for s in sources)
        return tuple(
            torch.tanh(dense(s.flatten(1))).view(batch, *self.shape) for dense, s in zip(self.dense, sources, strict=True)
        )


class AttentionDecoder(nn.Module):
    """Target embeddings, the decoder's recurrent stack and its attention, wired as in the module docstring."""

    def __init__(self, config: RNNSeq2SeqConfig):
        super().__init__()
        hidden, memory = config.hidden_size, config.memory_size
        self.wiring = "none" if config.attention_score == "none" else config.attention_wiring
        self.input_feeding = config.input_feeding
        feed_size = {"bahdanau": memory, "luong": hidden if config.input_feeding else 0, "none": 0}[self.wiring]
        self.embed_tokens = nn.Embedding(config.vocab_size, config.embedding_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.rnn = RecurrentStack(config.decoder_cell_type, config.embedding_size + feed_size, hidden,
                                  num_layers=config.decoder_layers, dropout=config.hidden_dropout_prob)
        self.attention = build_attention(config.attention_score, hidden, memory, config.attention_hidden_size)
        if self.wiring == "luong":
            self.combine = nn.Linear(memory + hidden, hidden, bias=False)  # W_c
        self.output_size = hidden + memory if self.wiring == "bahdanau" else hidden

    def forward(self, input_ids, memory, mask, state, input_feed, keys):
        """Decode ``input_ids`` ``(B, T)`` from ``state`` (tensors ``(B, L, H)``).

        Args:
            memory: ``(B, S, M)`` encoder outputs; mask: ``(B, S)`` bool or None.
            input_feed: ``h̃_{t-1}`` ``(B, H)`` (Luong wiring with input feeding only).
            keys: ``self.attention.prepare(memory)`` (None without attention); the caller keeps it across steps.

        Returns:
            outputs ``o_t`` ``(B, T, output_size)``, attention weights ``(B, T, S)`` (None without
            attention), the new state and the new input feed.
        """
        inputs = self.dropout(self.embed_tokens(input_ids))  # (B, T, E)
        if self.wiring == "none":
            outputs, state = self.rnn(inputs, state)
            return outputs, None, state, None
        if self.wiring == "luong" and not self.input_feeding:
            top, state = self.rnn(inputs, state)  # fused over the whole target: (B, T, H)
            outputs, weights = self._attentional_state(top, keys, memory, mask)
            return outputs, weights, state, None
        steps = []
        for t in range(inputs.shape[1]):
            x_t = inputs[:, t : t + 1]  # (B, 1, E)
            if self.wiring == "bahdanau":
                context, weights = attend(self.attention(state[0][:, -1:], keys), memory, mask)  # s_{t-1}: top layer
                top, state = self.rnn(torch.cat([x_t, context], dim=-1), state)  # (B, 1, H)
                steps.append((torch.cat([top, context], dim=-1), weights))
            else:
                top, state = self.rnn(torch.cat([x_t, input_feed.unsqueeze(1)], dim=-1), state)
                output, weights = self._attentional_state(top, keys, memory, mask)
                input_feed = output.squeeze(1)
                steps.append((output, weights))
        outputs, weights = (torch.cat(parts, dim=1) for parts in zip(*steps, strict=True))
        return outputs, weights, state, input_feed

    def _attentional_state(self, top, keys, memory, mask):
        """Luong: ``h̃_t = tanh(W_c [c_t; s_t])`` for top-layer states ``(B, T, H)``; returns it and ``α``."""
        context, weights = attend(self.attention(top, keys), memory, mask)  # (B, T, M), (B, T, S)
        return torch.tanh(self.combine(torch.cat([context, top], dim=-1))), weights


class RNNSeq2SeqModel(SourceVocabularyMixin, RNNSeq2SeqPreTrainedModel):
    """Encoder, bridge and attention decoder; returns the decoder outputs ``o_t`` before the vocabulary layer.

    ``get_input_embeddings`` is the encoder's (source) matrix, ``get_decoder_input_embeddings`` the decoder's;
    see :class:`SourceVocabularyMixin` for what ``resize_token_embeddings`` resizes.
    """

    def __init__(self, config: RNNSeq2SeqConfig):
        super().__init__(config)
        self.encoder = RNNSeq2SeqEncoder(config)
        self.decoder = AttentionDecoder(config)
        self.bridge = Bridge(config, self.decoder.rnn.num_state_tensors)
        self.post_init()

    def get_input_embeddings(self):
        return self.encoder.embed_tokens

    def set_input_embeddings(self, value):
        self.encoder.embed_tokens = value

    def get_decoder_input_embeddings(self):
        return self.decoder.embed_tokens

    def set_decoder_input_embeddings(self, value):
        self.decoder.embed_tokens = value

    def get_encoder(self, modality=None):
        return self.encoder

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        encoder_outputs: RNNSeq2SeqEncoderOutput | None = None,
        past_key_values: AttentionDecoderState | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: AttentionDecoderState | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        """
        Args:
            input_ids: ``(batch, src_len)`` source ids; attention_mask: ``(batch, src_len)``, 0 at padding.
            decoder_input_ids: ``(batch, tgt_len)`` target ids starting with ``decoder_start_token_id``
                (only the new ones when continuing from ``past_key_values``).
            encoder_outputs: reuse an earlier :class:`RNNSeq2SeqEncoderOutput` instead of ``input_ids``.
            past_key_values: an :class:`AttentionDecoderState` to continue from; it is updated in place. Also
                accepted as ``cache``, the name transformers >= 5.24 uses (and returns it under).

        Returns:
            ``Seq2SeqModelOutput``: ``last_hidden_state`` ``o_t`` ``(batch, tgt_len, output_size)``,
            ``cross_attentions`` ``(α,)`` with ``α`` ``(batch, 1, tgt_len, src_len)`` (one layer, one head)
            when ``output_attentions``, ``encoder_last_hidden_state`` the memory.
        """
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids, attention_mask, output_hidden_states=output_hidden_states)
        memory = encoder_outputs.last_hidden_state  # (B, S, M)
        mask = source_mask(attention_mask, memory.shape[:2])
        check_input_ids(decoder_input_ids, self.config.vocab_size, "decoder_input_ids")
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        past_key_values = given_cache(past_key_values, cache)
        if past_key_values is None or past_key_values.is_empty:
            state, feed = self.bridge(encoder_outputs.final_state), None
            if self.decoder.input_feeding:
                feed = memory.new_zeros(memory.shape[0], self.config.hidden_size)  # h̃_0 = 0
        else:
            state, feed = past_key_values.tensors, past_key_values.input_feed
        keys = None  # the attention's projection of the memory: once per source batch when decoding with a cache
        if self.decoder.attention is not None:
            keys = past_key_values.attention_keys(memory) if past_key_values is not None else None
            if keys is None:
                keys = self.decoder.attention.prepare(memory)
        outputs, weights, state, feed = self.decoder(decoder_input_ids, memory, mask, state, feed, keys)
        new_cache = None
        if use_cache:
            new_cache = past_key_values if past_key_values is not None else AttentionDecoderState()
            new_cache.update(state, feed, weights, mask, decoder_input_ids.shape[1])
            if keys is not None:
                new_cache.store_attention_keys(memory, keys)
        return Seq2SeqModelOutput(
            last_hidden_state=outputs,
            **cache_field(new_cache),
            cross_attentions=(weights.unsqueeze(1),) if output_attentions and weights is not None else None,
            encoder_last_hidden_state=memory,
            encoder_hidden_states=encoder_outputs.hidden_states,
        )


class RNNSeq2SeqForConditionalGeneration(SourceVocabularyMixin, RNNSeq2SeqPreTrainedModel, StatefulGenerationMixin):
    """Translation model ``p(y_t | y_<t, x) = softmax(W_o o_t + b_o)`` with greedy, sampling and beam search.

    With ``tie_word_embeddings`` ``W_o`` is the decoder's input embedding matrix; ``o_t`` is first
    projected to ``embedding_size`` when the sizes differ. The output layer covers the target vocabulary
    (``vocab_size``); the encoder reads ``source_vocab_size`` ids when the source has its own vocabulary
    (``resize_token_embeddings`` resizes the target side, ``resize_source_token_embeddings`` the source side).
    """

    _tied_weights_keys = {"lm_head.weight": "model.decoder.embed_tokens.weight"}

    def __init__(self, config: RNNSeq2SeqConfig):
        super().__init__(config)
        self.model = RNNSeq2SeqModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        out_size = self.model.decoder.output_size
        needs_projection = config.tie_word_embeddings and out_size != config.embedding_size
        self.output_projection = nn.Linear(out_size, config.embedding_size, bias=False) if needs_projection else None
        self.lm_head = nn.Linear(config.embedding_size if needs_projection else out_size, config.vocab_size)
        self.post_init()

    def get_encoder(self, modality=None):
        return self.model.encoder

    def get_decoder_input_embeddings(self):
        return self.model.get_decoder_input_embeddings()

    def set_decoder_input_embeddings(self, value):
        self.model.set_decoder_input_embeddings(value)

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        encoder_outputs: RNNSeq2SeqEncoderOutput | None = None,
        past_key_values: AttentionDecoderState | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: AttentionDecoderState | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        """Arguments as :meth:`RNNSeq2SeqModel.forward`, plus ``labels`` ``(batch, tgt_len)``: the target
        ids, ``-100`` ignored; ``decoder_input_ids`` default to them shifted right (teacher forcing).
        Returns ``logits`` ``(batch, tgt_len, vocab_size)`` and the cross-entropy ``loss`` (with
        ``config.label_smoothing``)."""
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)
        out = self.model(
            input_ids, attention_mask, decoder_input_ids, encoder_outputs, given_cache(past_key_values, cache),
            use_cache=use_cache, output_attentions=output_attentions, output_hidden_states=output_hidden_states,
        )
        hidden = self.dropout(out.last_hidden_state)
        if self.output_projection is not None:
            hidden = self.output_projection(hidden)
        logits = self.lm_head(hidden)  # (B, T, V)
        loss = None
        if labels is not None:
            loss = token_cross_entropy(logits, labels, self.config.label_smoothing, kwargs.get("num_items_in_batch"))
        return Seq2SeqLMOutput(
            loss=loss, logits=logits, **cache_field(output_cache(out)), cross_attentions=out.cross_attentions,
            encoder_last_hidden_state=out.encoder_last_hidden_state, encoder_hidden_states=out.encoder_hidden_states,
        )

    def generate(self, inputs=None, generation_config=None, logits_processor=None, coverage_penalty: float = 0.0,
                 **kwargs):
        """transformers' ``generate`` plus ``coverage_penalty=β``: Wu et al.'s (2016) coverage penalty
        ``β Σ_i log(min(Σ_j α_{j,i}, 1))`` in beam search (see :class:`CoveragePenaltyLogitsProcessor`)."""
        if coverage_penalty:
            num_beams = kwargs.get("num_beams", (generation_config or self.generation_config).num_beams) or 1
            if num_beams < 2 or self.config.attention_score == "none":
                raise ValueError(f"`coverage_penalty`={coverage_penalty!r} needs beam search (num_beams > 1, got "
                                 f"{num_beams}) and attention (attention_score={self.config.attention_score!r}).")
            if given_cache(kwargs.get("past_key_values"), kwargs.get("cache")) is not None or \
                    kwargs.get("use_cache") is False:
                raise ValueError("`coverage_penalty` reads the decoder state: pass neither a cache "
                                 "(`past_key_values`/`cache`) nor `use_cache=False`.")
            state = AttentionDecoderState.empty()
            processor = CoveragePenaltyLogitsProcessor(state, coverage_penalty)
            logits_processor = LogitsProcessorList([*(logits_processor or []), processor])
            kwargs.pop("past_key_values", None)
            kwargs.pop("cache", None)
            kwargs.update(cache_field(state))
        return super().generate(inputs, generation_config, logits_processor, **kwargs)


__all__ = [
    "RNNSeq2SeqPreTrainedModel",
    "RNNSeq2SeqEncoder",
    "AttentionDecoder",
    "RNNSeq2SeqModel",
    "RNNSeq2SeqForConditionalGeneration",
]
