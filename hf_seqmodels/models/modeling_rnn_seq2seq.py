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
from transformers import initialization as init
from transformers.modeling_outputs import ModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput
from transformers.utils.generic import can_return_tuple

from .attention_state import AttentionDecoderState, CoveragePenaltyLogitsProcessor
from .cache_continuation import continue_from_cache
from .cache_naming import CACHE_NAME, cache_field, given_cache, output_cache
from .configuration_rnn_seq2seq import RNNSeq2SeqConfig
from .input_checks import check_input_ids, check_mask_values, check_source_ids, reads_values
from .modeling_rnn import RNNPreTrainedModel
from .output_flags import output_flags, structured
from .recurrent_stack import RecurrentStack
from .rnn_attention import attention_weights, build_attention
from .source_vocabulary import SourceVocabularyMixin
from .stateful_generation import StatefulGenerationMixin
from .teacher_forcing import needs_decoder_inputs, shift_tokens_right, token_cross_entropy


@dataclass
class RNNSeq2SeqEncoderOutput(ModelOutput):
    """Output of :class:`RNNSeq2SeqEncoder`; every field is batch-first, so beam search can expand it.

    Args:
        last_hidden_state: the memory ``h_i``: ``(batch, src_len, directions * encoder_hidden_size)``,
            zero at padded positions.
        final_state: ``(batch, N, encoder_layers * directions, encoder_hidden_size)``, the final ``h`` (and
            ``c``: ``N = 2`` for the cells with a cell state, ``lstm`` and ``peephole_lstm``) of every layer
            and direction.
        hidden_states: when ``output_hidden_states``, ``encoder_layers + 1`` tensors: the embeddings
            ``(batch, src_len, embedding_size)``, then the output of each recurrent layer ``(batch, src_len,
            directions * encoder_hidden_size)`` (both directions concatenated); the last one is the memory.
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

    @torch.no_grad()
    def _init_weights(self, module):
        """Every parameter of ``module`` itself (not its children): biases of linear layers 0, the rest
        (embeddings, recurrent and peephole weights, attention and bridge matrices) uniform in
        ``[-init_range, init_range]``. It also fills tensors created on the ``meta`` device or missing from a
        checkpoint."""
        r = self.config.init_range
        for name, param in module.named_parameters(recurse=False):
            if name == "bias" and isinstance(module, nn.Linear):
                init.zeros_(param)
            else:
                init.uniform_(param, -r, r)


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

    @can_return_tuple
    def forward(self, input_ids, attention_mask=None, output_hidden_states=None, **kwargs) -> RNNSeq2SeqEncoderOutput:
        """``input_ids`` ``(batch, src_len)``; ``attention_mask`` 0 marks padding (any side).
        ``output_hidden_states`` (else ``config.output_hidden_states``): return every layer's output."""
        output_hidden_states, _ = output_flags(self.config, output_hidden_states)
        check_source_ids(input_ids, self.config)
        mask = source_mask(attention_mask, input_ids.shape)
        embeddings = self.dropout(self.embed_tokens(input_ids))  # (B, S, E)
        if output_hidden_states:  # every layer's outputs: L x (B, S, D*H_e), the last one is the memory
            memory, final, layers = self.rnn(embeddings, mask=mask, output_layers=True)
            hidden_states = (embeddings, *layers)
        else:
            (memory, final), hidden_states = self.rnn(embeddings, mask=mask), None  # (B, S, D*H_e)
        return RNNSeq2SeqEncoderOutput(
            last_hidden_state=memory,
            final_state=torch.stack(final, dim=1),  # (B, N, L*D, H_e)
            hidden_states=hidden_states,
        )


def source_mask(attention_mask: torch.Tensor | None, shape: torch.Size) -> torch.Tensor | None:
    """``attention_mask`` ``(batch, src_len)`` as bool, or None when nothing is padded."""
    if attention_mask is None:
        return None
    if tuple(attention_mask.shape) != tuple(shape):
        raise ValueError(f"`attention_mask` must have the source's shape {tuple(shape)}, got "
                         f"{tuple(attention_mask.shape)}.")
    if not reads_values():  # no value-dependent check or shortcut in a compiled/exported graph
        return attention_mask.bool()
    check_mask_values(attention_mask)
    mask = attention_mask.bool()
    if not bool(mask.any(dim=1).all()):
        raise ValueError("Every source sentence needs at least one real token (`attention_mask` row of zeros).")
    return None if bool(mask.all()) else mask


def check_right_padded(decoder_attention_mask: torch.Tensor | None) -> None:
    """The recurrent decoder reads the target left to right, so padding after the real tokens (right padding,
    what ``DataCollatorForSeq2Seq`` and ``generate`` give) never changes a real position and the mask needs no
    further use; padding before them would feed pad tokens into the state and is refused (eager mode only)."""
    if decoder_attention_mask is None or not reads_values():
        return
    check_mask_values(decoder_attention_mask, "decoder_attention_mask")
    mask = decoder_attention_mask.bool()
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        raise ValueError("`decoder_attention_mask` has a 0 before a 1: the RNN decoder reads the target left to "
                         "right and takes right padding only (pad after the real tokens).")


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


@dataclass
class DecoderOutput:
    """What :class:`AttentionDecoder` returns for ``T`` target tokens.

    Args:
        outputs: ``o_t`` ``(B, T, output_size)``.
        weights: the attention ``α`` ``(B, 1, T, S)`` (one head), None without attention.
        state: the recurrent state after the last token, tensors ``(B, L, H)``.
        input_feed: ``h̃_T`` ``(B, H)`` (Luong wiring with input feeding), else None.
        hidden_states: with ``output_hidden_states``, the target embeddings ``(B, T, E)`` and the output of each
            recurrent layer ``(B, T, H)`` (``L + 1`` tensors), else None.
    """

    outputs: torch.Tensor
    weights: torch.Tensor | None
    state: tuple[torch.Tensor, ...]
    input_feed: torch.Tensor | None
    hidden_states: tuple[torch.Tensor, ...] | None


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

    def forward(self, input_ids, memory, mask, state, input_feed, keys, output_hidden_states=False) -> DecoderOutput:
        """Decode ``input_ids`` ``(B, T)`` from ``state`` (tensors ``(B, L, H)``).

        Args:
            memory: ``(B, S, M)`` encoder outputs; mask: ``(B, S)`` bool or None.
            input_feed: ``h̃_{t-1}`` ``(B, H)`` (Luong wiring with input feeding only).
            keys: ``self.attention.prepare(memory)`` (None without attention); the caller keeps it across steps.
            output_hidden_states: also return the output of every layer (the stack then runs layer by layer).

        The outputs ``o_t`` are computed from the returned attention weights and layer outputs, so those are
        tensors of the graph (a user can ``retain_grad()`` on them).
        """
        inputs = self.dropout(self.embed_tokens(input_ids))  # (B, T, E)
        run = _run_by_layer if output_hidden_states else _run_top
        if self.wiring == "none" or (self.wiring == "luong" and not self.input_feeding):
            layers, state = run(self.rnn, inputs, state)  # fused over the whole target: L x (B, T, H)
            weights = None if self.wiring == "none" else self._weights(layers[-1], keys, mask)
        else:
            steps = []
            for t in range(inputs.shape[1]):
                x_t = inputs[:, t : t + 1]  # (B, 1, E)
                if self.wiring == "bahdanau":
                    weights = self._weights(state[0][:, -1:], keys, mask)  # scored with s_{t-1} (top layer)
                    layers, state = run(self.rnn, torch.cat([x_t, weights[:, 0] @ memory], dim=-1), state)
                else:
                    layers, state = run(self.rnn, torch.cat([x_t, input_feed.unsqueeze(1)], dim=-1), state)
                    weights = self._weights(layers[-1], keys, mask)
                    input_feed = self._output(layers[-1], weights, memory).squeeze(1)
                steps.append((weights, *layers))
            weights, *layers = (torch.cat(parts, dim=-2) for parts in zip(*steps, strict=True))
        return DecoderOutput(
            outputs=self._output(layers[-1], weights, memory),
            weights=weights,
            state=state,
            input_feed=input_feed if self.input_feeding else None,
            hidden_states=(inputs, *layers) if output_hidden_states else None,
        )

    def _weights(self, query, keys, mask):
        """``α`` ``(B, 1, T, S)`` of the top-layer states ``query`` ``(B, T, H)``."""
        return attention_weights(self.attention(query, keys), mask).unsqueeze(1)

    def _output(self, top, weights, memory):
        """``o_t`` from the top-layer states ``(B, T, H)`` and ``α`` ``(B, 1, T, S)``: ``s_t`` (no attention),
        ``[s_t; c_t]`` (Bahdanau) or ``h̃_t = tanh(W_c [c_t; s_t])`` (Luong), with ``c_t = Σ_i α_{t,i} h_i``."""
        if self.wiring == "none":
            return top
        context = weights[:, 0] @ memory  # (B, T, M)
        if self.wiring == "bahdanau":
            return torch.cat([top, context], dim=-1)
        return torch.tanh(self.combine(torch.cat([context, top], dim=-1)))


def _run_top(stack: RecurrentStack, inputs, state):
    """The stack's top-layer outputs as a one-element list, and its final state (the form of :func:`_run_by_layer`)."""
    outputs, state = stack(inputs, state)
    return [outputs], state


def _run_by_layer(stack: RecurrentStack, inputs, state):
    """The outputs of every layer of the stack, ``L`` tensors ``(B, T, H)``, and its final state."""
    _, state, layers = stack(inputs, state, output_layers=True)
    return list(layers), state


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
        """The decoder's token embeddings (the encoder's when they are shared)."""
        return self.decoder.embed_tokens

    def set_decoder_input_embeddings(self, value):
        """Replace the decoder's token embeddings."""
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
        decoder_attention_mask: torch.Tensor | None = None,
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
            output_attentions, output_hidden_states: the keyword, else ``config.output_attentions`` /
                ``config.output_hidden_states``.

        Returns:
            ``Seq2SeqModelOutput``: ``last_hidden_state`` ``o_t`` ``(batch, tgt_len, output_size)``,
            ``cross_attentions`` ``(α,)`` with ``α`` ``(batch, 1, tgt_len, src_len)`` (one layer, one head)
            when ``output_attentions``, ``encoder_last_hidden_state`` the memory; with ``output_hidden_states``
            ``encoder_hidden_states`` (source embeddings and the output of each encoder layer, directions
            concatenated: ``encoder_layers + 1`` tensors) and ``decoder_hidden_states`` (target embeddings and
            the output ``s_t`` of each decoder layer: ``decoder_layers + 1`` tensors).
        """
        output_hidden_states, output_attentions = output_flags(self.config, output_hidden_states, output_attentions)
        if encoder_outputs is None:
            encoder_outputs = structured(self.encoder, input_ids, attention_mask,
                                         output_hidden_states=output_hidden_states)
        elif not isinstance(encoder_outputs, RNNSeq2SeqEncoderOutput):  # a tuple, as return_dict=False gives it
            encoder_outputs = RNNSeq2SeqEncoderOutput(*encoder_outputs)
        memory = encoder_outputs.last_hidden_state  # (B, S, M)
        mask = source_mask(attention_mask, memory.shape[:2])
        if decoder_input_ids is None:  # the source alone: the encoder's states (feature extraction)
            return Seq2SeqModelOutput(encoder_last_hidden_state=memory,
                                      encoder_hidden_states=encoder_outputs.hidden_states if output_hidden_states else None)
        check_input_ids(decoder_input_ids, self.config.vocab_size, "decoder_input_ids")
        check_right_padded(decoder_attention_mask)
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        past_key_values = given_cache(past_key_values, cache)
        if past_key_values is not None and not isinstance(past_key_values, AttentionDecoderState):
            raise ValueError(f"`past_key_values`/`cache` must be the AttentionDecoderState this model returns (or "
                             f"AttentionDecoderState.empty()), got {type(past_key_values).__name__}.")
        if past_key_values is None or past_key_values.is_empty:
            state, feed = self.bridge(encoder_outputs.final_state), None
            if self.decoder.input_feeding:
                feed = memory.new_zeros(memory.shape[0], self.config.hidden_size)  # h̃_0 = 0
        else:  # a ValueError when the state has another number of rows than the batch
            state, feed = past_key_values.initial_or(memory.shape[0]), past_key_values.input_feed
        keys = None  # the attention's projection of the memory: once per source batch when decoding with a cache
        if self.decoder.attention is not None:
            keys = past_key_values.attention_keys(memory) if past_key_values is not None else None
            if keys is None:
                keys = self.decoder.attention.prepare(memory)
        decoded = self.decoder(decoder_input_ids, memory, mask, state, feed, keys, output_hidden_states)
        new_cache = None
        if use_cache:
            new_cache = past_key_values if past_key_values is not None else AttentionDecoderState()
            weights = decoded.weights[:, 0] if decoded.weights is not None else None  # (B, T, S)
            new_cache.add_tokens(decoded.state, decoded.input_feed, weights, mask, decoder_input_ids.shape[1])
            if keys is not None:
                new_cache.store_attention_keys(memory, keys)
        return Seq2SeqModelOutput(
            last_hidden_state=decoded.outputs,
            **cache_field(new_cache),
            decoder_hidden_states=decoded.hidden_states,
            cross_attentions=(decoded.weights,) if output_attentions and decoded.weights is not None else None,
            encoder_last_hidden_state=memory,
            encoder_hidden_states=encoder_outputs.hidden_states if output_hidden_states else None,
        )


class RNNSeq2SeqForConditionalGeneration(SourceVocabularyMixin, RNNSeq2SeqPreTrainedModel, StatefulGenerationMixin):
    """Translation model ``p(y_t | y_<t, x) = softmax(W_o o_t + b_o)`` with greedy, sampling and beam search.

    With ``tie_word_embeddings`` ``W_o`` is the decoder's input embedding matrix; ``o_t`` is first
    projected to ``embedding_size`` when the sizes differ. The output layer covers the target vocabulary
    (``vocab_size``); the encoder reads ``source_vocab_size`` ids when the source has its own vocabulary
    (``resize_token_embeddings`` resizes the target side, ``resize_source_token_embeddings`` the source side).
    """

    _tied_weights_keys = {"lm_head.weight": "model.decoder.embed_tokens.weight"}
    #: the decoding graphs ``hf_seqmodels.export`` writes for it (a builder of ``export/step_graphs.py``)
    export_graphs = "rnn_seq2seq"

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
        """The decoder's token embeddings (the encoder's when they are shared)."""
        return self.model.get_decoder_input_embeddings()

    def set_decoder_input_embeddings(self, value):
        """Replace the decoder's token embeddings."""
        self.model.set_decoder_input_embeddings(value)

    def get_output_embeddings(self):
        """The output layer: decoder state to target vocabulary scores."""
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
        decoder_attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        """Arguments as :meth:`RNNSeq2SeqModel.forward`, plus ``labels`` ``(batch, tgt_len)``: the target
        ids, ``-100`` ignored; ``decoder_input_ids`` default to them shifted right (teacher forcing).
        Returns ``logits`` ``(batch, tgt_len, vocab_size)`` and the cross-entropy ``loss`` (with
        ``config.label_smoothing``)."""
        needs_decoder_inputs(decoder_input_ids, labels=labels)
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)
        out = structured(
            self.model, input_ids, attention_mask, decoder_input_ids, encoder_outputs, cache=given_cache(past_key_values, cache),
            use_cache=use_cache, output_attentions=output_attentions, output_hidden_states=output_hidden_states,
            decoder_attention_mask=decoder_attention_mask,
        )
        hidden = self.dropout(out.last_hidden_state)
        if self.output_projection is not None:
            hidden = self.output_projection(hidden)
        logits = self.lm_head(hidden)  # (B, T, V)
        loss = None
        if labels is not None:
            loss = token_cross_entropy(logits, labels, self.config.label_smoothing, kwargs.get("num_items_in_batch"))
        return Seq2SeqLMOutput(
            loss=loss, logits=logits, **cache_field(output_cache(out)), decoder_hidden_states=out.decoder_hidden_states,
            cross_attentions=out.cross_attentions, encoder_last_hidden_state=out.encoder_last_hidden_state,
            encoder_hidden_states=out.encoder_hidden_states,
        )

    def _prepare_cache_for_generation(self, generation_config, model_kwargs, *args, **kwargs):
        """As a draft model of assisted decoding the causal LMs' mixin starts from a recording RecurrentState;
        this decoder needs its own state (whose ``crop`` refuses rollbacks with a clear error)."""
        super()._prepare_cache_for_generation(generation_config, model_kwargs, *args, **kwargs)
        state = model_kwargs.get(CACHE_NAME)
        if state is not None and not isinstance(state, AttentionDecoderState) and not state.get_seq_length():
            model_kwargs[CACHE_NAME] = AttentionDecoderState.empty()

    def prepare_inputs_for_generation(self, input_ids, next_sequence_length=None, past_key_values=None,
                                      attention_mask=None, cache=None, **kwargs):
        """transformers' inputs of one decoding step, plus continuing from a state passed to ``generate``.

        With a state that has read ``n`` target tokens and ``decoder_input_ids`` ``(batch, m)``, ``m > n``, the
        first step feeds only the ``m - n`` tokens the state has not read (transformers cuts them only when a
        decoder attention mask tells it the length); ``m <= n`` means only the new tokens were given. A state of
        ``batch`` rows is repeated for beams or several returned sequences (``batch * k`` rows of ids).
        """
        state = given_cache(past_key_values, cache)
        if state is not None and not state.is_empty:
            next_sequence_length = continue_from_cache(state, input_ids, next_sequence_length)
        return super().prepare_inputs_for_generation(input_ids, next_sequence_length, attention_mask=attention_mask,
                                                     cache=state, **kwargs)

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
