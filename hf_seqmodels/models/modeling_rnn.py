"""RNN / LSTM / GRU models: language model, sentence classifier and token tagger.

All three heads share :class:`RNNModel`: embeddings (optionally concatenated with a character-level
word encoding, :mod:`char_encoder`) and :class:`RecurrentStack`. The recurrent state is the generation cache (:class:`RecurrentState`), so ``generate()`` runs greedy search,
sampling and beam search by feeding one token at a time to the fused kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import (
    CausalLMOutputWithPast,
    ModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils.generic import can_return_tuple

from .cache_naming import cache_field, given_cache
from .char_encoder import CharWordEncoder, build_char_encoder, char_output_size, embed_words, fill_char_tables
from .config_utils import invalid
from .configuration_rnn import RNNConfig
from .input_checks import check_classification_labels, check_input_ids, check_labels, current_mask
from .output_flags import output_flags, structured
from .recurrent_stack import RecurrentStack
from .state_cache import RecurrentState
from .stateful_generation import StatefulGenerationMixin


@dataclass
class RNNModelOutput(ModelOutput):
    """Output of :class:`RNNModel`.

    Args:
        last_hidden_state: ``(batch, time, num_directions * hidden_size)`` outputs of the top layer
            (zero at padded positions).
        cache: the final :class:`RecurrentState`, when ``use_cache`` (also readable as ``past_key_values``).
        final_state: the top layer's final ``h``, directions concatenated: ``(batch, D * hidden_size)``.
        hidden_states: when ``output_hidden_states``: the stack's input (embeddings after dropout,
            ``(batch, time, embedding_size [+ char size])``) and the outputs of each of the ``num_hidden_layers``
            layers ``(batch, time, D * hidden_size)``; the last one is ``last_hidden_state``.
    """

    last_hidden_state: torch.FloatTensor | None = None
    cache: RecurrentState | None = None
    final_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None

    @property
    def past_key_values(self) -> RecurrentState | None:
        """``cache`` under the name transformers used before 5.24."""
        return self.cache


class RNNPreTrainedModel(PreTrainedModel):
    config_class = RNNConfig
    config: RNNConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _no_split_modules = ["RecurrentStack"]
    supports_gradient_checkpointing = True  # each RecurrentStack is recomputed in the backward pass

    @torch.no_grad()
    def _init_weights(self, module):
        """Uniform initialisation in ``[-init_range, init_range]`` (Zaremba et al. 2014), zero biases of linear
        and convolution layers, and an empty character table (no characters for any token until
        :meth:`bind_tokenizer`). Every parameter and buffer is set, so a model built on the meta device or
        loaded with missing weights is fully initialised."""
        r = self.config.init_range
        if isinstance(module, (nn.Linear, nn.Embedding, nn.Conv1d, nn.RNNBase)):
            for name, param in module.named_parameters(recurse=False):
                if name.startswith("bias") and isinstance(module, (nn.Linear, nn.Conv1d)):
                    init.zeros_(param)
                else:
                    init.uniform_(param, -r, r)
        elif isinstance(module, CharWordEncoder):
            init.zeros_(module.token_chars)

    def bind_tokenizer(self, tokenizer) -> None:
        """Fill the character encoder's table of each token's characters from ``tokenizer`` (a no-op
        without a character encoder)."""
        fill_char_tables(self, tokenizer)

    def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, mean_resizing=True):
        """transformers' resize (input embeddings, output layer with its bias, tied or not), plus the
        character encoder's per-token character table: new tokens have no characters until
        :meth:`bind_tokenizer`."""
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        for module in self.modules():
            if isinstance(module, CharWordEncoder):
                module.token_chars = resize_rows(module.token_chars, embeddings.num_embeddings, fill=0)
        return embeddings


def resize_rows(table: torch.Tensor, rows: int, fill: float | torch.Tensor = 0) -> torch.Tensor:
    """``table`` with its first axis cut or extended to ``rows``; new rows hold ``fill``."""
    if rows <= table.shape[0]:
        return table[:rows].clone()
    extra = table.new_empty((rows - table.shape[0], *table.shape[1:]))
    extra[:] = fill
    return torch.cat([table, extra])


class RNNModel(RNNPreTrainedModel):
    """Token embeddings (optionally ``[e_word ; c(w)]`` with characters), dropout and the recurrent
    stack; the body of every RNN head."""

    def __init__(self, config: RNNConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.embedding_size)
        self.char_encoder = build_char_encoder(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.encoder = RecurrentStack(
            config.cell_type,
            input_size=config.embedding_size + char_output_size(config),
            hidden_size=config.hidden_size,
            num_layers=config.num_hidden_layers,
            bidirectional=config.bidirectional,
            dropout=config.hidden_dropout_prob,
        )
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values: RecurrentState | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        char_input_ids: torch.LongTensor | None = None,
        cache: RecurrentState | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        **kwargs,
    ) -> RNNModelOutput:
        """
        Args:
            input_ids: ``(batch, time)`` token ids (or ``inputs_embeds`` instead).
            attention_mask: ``(batch, time)`` or, during generation, ``(batch, past + time)``;
                0 marks padding, which never changes the state.
            past_key_values: state from an earlier call to continue from (None: zeros); also accepted as
                ``cache``, the name transformers >= 5.24 uses.
            output_hidden_states: return the embeddings and every layer's outputs (default:
                ``config.output_hidden_states``).
            char_input_ids: ``(batch, time, max_word_length)`` character ids of each token, for a model
                with a character encoder (default: looked up from the token ids).
            inputs_embeds: ``(batch, time, embedding_size)`` word vectors instead of ``input_ids``.
        """
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        output_hidden_states, _ = output_flags(self.config, output_hidden_states)
        outputs, state, hidden_states = self.encode(
            input_ids, attention_mask, given_cache(past_key_values, cache), char_input_ids, inputs_embeds,
            output_hidden_states)
        return RNNModelOutput(
            last_hidden_state=outputs,
            cache=state if use_cache else None,
            final_state=RecurrentStack.last_layer_state(state.tensors[0], self.encoder.num_directions),
            hidden_states=hidden_states,
        )

    def encode(self, input_ids: torch.LongTensor | None, attention_mask: torch.Tensor | None = None,
               past_key_values: RecurrentState | None = None, char_input_ids: torch.LongTensor | None = None,
               inputs_embeds: torch.FloatTensor | None = None, output_hidden_states: bool = False,
               ) -> tuple[torch.Tensor, RecurrentState, tuple[torch.Tensor, ...] | None]:
        """:meth:`forward` as plain values: ``(outputs (B, T, D*H), state, hidden_states or None)``, ``state`` the
        :class:`RecurrentState` after the last token. The language-model head calls it directly: on every
        decoding step that saves an output object and the final-state summary, which it does not use."""
        words = self._embed(input_ids, char_input_ids, inputs_embeds)  # (B, T, E + C)
        batch, time = words.shape[:2]
        mask = current_mask(attention_mask, words[..., 0])
        embeddings = self.dropout(words) if self.training else words  # nn.Dropout is the identity in eval
        initial = RecurrentState.continued(past_key_values, batch, type(self).__name__)
        if past_key_values is not None and past_key_values.record_past and time > 1:
            outputs, final, layers, steps = self._read_token_by_token(embeddings, initial, mask, output_hidden_states)
        else:
            outputs, final, *layers = self.encoder(embeddings, initial, mask, output_layers=output_hidden_states)
            layers, steps = (layers[0] if layers else None), None
        state = RecurrentState.after(past_key_values, final, time, steps)
        return outputs, state, ((embeddings, *layers) if output_hidden_states else None)

    def _embed(self, input_ids, char_input_ids, inputs_embeds) -> torch.Tensor:
        """``x_t``: the word vectors (looked up, or ``inputs_embeds``) with the character encoding if any."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
        if inputs_embeds is None:
            check_input_ids(input_ids, self.config.vocab_size)
            return embed_words(self.embed_tokens, self.char_encoder, input_ids, char_input_ids)
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != self.config.embedding_size:
            raise ValueError(f"`inputs_embeds` must have shape (batch_size, sequence_length, embedding_size="
                             f"{self.config.embedding_size}), got {tuple(inputs_embeds.shape)}.")
        if self.char_encoder is None:
            return inputs_embeds
        if char_input_ids is None:
            raise ValueError("With a character encoder (config.char_encoder), `inputs_embeds` need `char_input_ids`: "
                             "the characters cannot be looked up without token ids.")
        return torch.cat([inputs_embeds, self.char_encoder(None, char_input_ids)], dim=-1)

    def _read_token_by_token(self, embeddings, state, mask, output_layers: bool):
        """The stack over one token at a time, keeping the state after each (a recording state, assisted
        decoding's draft model). Returns outputs, final state, per-layer outputs (or None) and the step states."""
        outputs, layers, steps = [], [], []
        for t in range(embeddings.shape[1]):
            step_mask = None if mask is None else mask[:, t : t + 1]
            out, state, *per_layer = self.encoder(embeddings[:, t : t + 1], state, step_mask, output_layers=output_layers)
            outputs.append(out)
            layers.append(per_layer[0] if per_layer else ())
            steps.append(state)
        layer_outputs = tuple(torch.cat(parts, dim=1) for parts in zip(*layers, strict=True)) if output_layers else None
        return torch.cat(outputs, dim=1), state, layer_outputs, steps


class RNNForCausalLM(RNNPreTrainedModel, StatefulGenerationMixin):
    """RNN language model: ``p(w_t | w_<t) = softmax(W_o h_t + b_o)``.

    With ``tie_word_embeddings`` the output matrix is the embedding matrix; if the sizes differ,
    ``h_t`` is first projected to the embedding size.
    """

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    #: the decoding graphs ``hf_seqmodels.export`` writes for it (a builder of ``export/step_graphs.py``)
    export_graphs = "recurrent_lm"

    def __init__(self, config: RNNConfig):
        if config.bidirectional:
            raise invalid("bidirectional", True, "False for a causal language model (it would see the future)")
        super().__init__(config)
        self.model = RNNModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        needs_projection = config.tie_word_embeddings and config.embedding_size != config.hidden_size
        self.output_projection = (
            nn.Linear(config.hidden_size, config.embedding_size, bias=False) if needs_projection else None
        )
        out_size = config.embedding_size if needs_projection else config.hidden_size
        self.lm_head = nn.Linear(out_size, config.vocab_size)
        self.post_init()

    def get_output_embeddings(self):
        """The output layer: hidden state (or its projection) to vocabulary scores."""
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values: RecurrentState | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        char_input_ids: torch.LongTensor | None = None,
        cache: RecurrentState | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        """
        Args:
            labels: ``(batch, time)``; shifted inside (token ``t`` predicts ``t+1``), ``-100`` ignored.
                ``shift_labels`` (already aligned targets, e.g. TBPTT streams or sequence parallelism) take
                their place when given.
            inputs_embeds: ``(batch, time, embedding_size)`` word vectors instead of ``input_ids`` (also
                ``generate(inputs_embeds=...)``).

        Returns:
            ``CausalLMOutputWithPast`` with ``logits`` ``(batch, time, vocab_size)``, the state
            as ``past_key_values`` (``cache`` with transformers >= 5.24; ``past_key_values`` can be passed under
            either name) and, with ``output_hidden_states``, the embeddings and every layer's outputs.
        """
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        output_hidden_states, _ = output_flags(self.config, output_hidden_states)
        outputs, state, hidden_states = self.model.encode(
            input_ids, attention_mask, given_cache(past_key_values, cache), char_input_ids, inputs_embeds,
            output_hidden_states)
        hidden = self.dropout(outputs) if self.training else outputs
        if self.output_projection is not None:
            hidden = self.output_projection(hidden)
        logits = self.lm_head(hidden)  # (B, T, V)
        loss = self.causal_lm_loss(logits, labels, **kwargs)
        return CausalLMOutputWithPast(
            loss=loss, logits=logits, **cache_field(state if use_cache else None), hidden_states=hidden_states,
        )


def pool_outputs(outputs: torch.Tensor, final_state: torch.Tensor, mask: torch.Tensor | None, mode: str):
    """Summarise ``outputs`` ``(B, T, F)`` into ``(B, F)``: final state, or mean/max over real tokens."""
    if mode == "last":
        return final_state
    if mask is None:
        return outputs.mean(dim=1) if mode == "mean" else outputs.max(dim=1).values
    mask = mask.unsqueeze(-1)  # (B, T, 1)
    if mode == "mean":
        return (outputs * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    return outputs.masked_fill(~mask, torch.finfo(outputs.dtype).min).max(dim=1).values


class RNNClassifierBase(RNNPreTrainedModel):
    """The body shared by the sentence classifier and the tagger: :class:`RNNModel`, dropout and a
    linear layer from the (bidirectional) outputs to ``num_labels`` scores."""

    def __init__(self, config: RNNConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = RNNModel(config)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(self.model.encoder.output_size, config.num_labels)
        self.post_init()

    def encode(self, input_ids, attention_mask, output_hidden_states, char_input_ids=None,
               inputs_embeds=None) -> RNNModelOutput:
        """The base model's output, structured whatever ``return_dict`` the user asked for."""
        return structured(self.model, input_ids, attention_mask=attention_mask, use_cache=False,
                          output_hidden_states=output_hidden_states, char_input_ids=char_input_ids,
                          inputs_embeds=inputs_embeds)


class RNNForSequenceClassification(RNNClassifierBase):
    """Many-to-one classifier: pooled recurrent outputs → dropout → linear → ``num_labels`` scores.

    ``num_labels == 1`` is regression (MSE); float multi-hot labels select multi-label (BCE).
    """

    accepts_loss_kwargs = False  # the loss is a per-sentence mean; Trainer must scale it itself

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        char_input_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput:
        """Returns ``logits`` ``(batch, num_labels)``; padding (attention_mask 0) never changes them."""
        out = self.encode(input_ids, attention_mask, output_hidden_states, char_input_ids, inputs_embeds)
        mask = current_mask(attention_mask, out.last_hidden_state[..., 0])
        pooled = pool_outputs(out.last_hidden_state, out.final_state, mask, self.config.pooling)
        logits = self.classifier(self.dropout(pooled))  # (B, num_labels)
        check_classification_labels(labels, logits, self.config)
        loss = self.loss_function(labels, logits, self.config) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


class RNNForTokenClassification(RNNClassifierBase):
    """Many-to-many tagger: one label per token from the (bidirectional, stacked) outputs."""

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        char_input_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        **kwargs,
    ) -> TokenClassifierOutput:
        """Returns ``logits`` ``(batch, time, num_labels)``; labels ``-100`` are ignored."""
        out = self.encode(input_ids, attention_mask, output_hidden_states, char_input_ids, inputs_embeds)
        logits = self.classifier(self.dropout(out.last_hidden_state))  # (B, T, num_labels)
        check_labels(labels, logits)
        loss = self.loss_function(logits, labels, self.config, **kwargs) if labels is not None else None
        return TokenClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


__all__ = [
    "RNNPreTrainedModel",
    "RNNModel",
    "RNNForCausalLM",
    "RNNClassifierBase",
    "RNNForSequenceClassification",
    "RNNForTokenClassification",
]
