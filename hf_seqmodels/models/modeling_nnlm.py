"""The feed-forward neural probabilistic language model of Bengio et al. (2003)."""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.utils.generic import can_return_tuple

from .cache_naming import cache_field, given_cache
from .configuration_nnlm import NNLMConfig
from .input_checks import check_input_ids, current_mask
from .output_flags import output_flags
from .state_cache import RecurrentState
from .stateful_generation import StatefulGenerationMixin


class NNLMPreTrainedModel(PreTrainedModel):
    config_class = NNLMConfig
    config: NNLMConfig
    base_model_prefix = "nnlm"
    main_input_name = "input_ids"

    @torch.no_grad()
    def _init_weights(self, module):
        """Every weight uniform in ``[-init_range, init_range]``, every bias zero (also on the meta device and for
        weights missing from a checkpoint)."""
        r = self.config.init_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            init.uniform_(module.weight, -r, r)
            if getattr(module, "bias", None) is not None:
                init.zeros_(module.bias)


class NNLMModel(NNLMPreTrainedModel):
    """The body of the NNLM: the table ``C`` and the tanh layer, ``h_t = tanh(d + H x_t)`` with
    ``x_t = [C(w_{t-n+1}); …; C(w_{t-1})]``.

    The window of the last ``n - 1`` tokens is the model's state: it is returned as the cache (a
    :class:`RecurrentState` holding ``(batch, n - 1)`` ids, or their embeddings ``(batch, n - 1, embedding_size)``
    once the model has read ``inputs_embeds``), so a forward pass over any number of new tokens continues exactly
    where the previous one stopped.
    """

    def __init__(self, config: NNLMConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.embedding_size)  # C
        self.hidden = nn.Linear(config.context_size * config.embedding_size, config.hidden_size)  # H, d
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    @property
    def context_fill_id(self) -> int:
        """The id read before the first token and at padded positions: the pad id (0 if unset)."""
        return self.config.pad_token_id if self.config.pad_token_id is not None else 0

    def initial_context(self, batch_size: int, device: torch.device) -> torch.LongTensor:
        """The context before the first token: ``(batch, n - 1)`` copies of ``context_fill_id``."""
        return torch.full((batch_size, self.config.context_size), self.context_fill_id, dtype=torch.long, device=device)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values: RecurrentState | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: RecurrentState | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPast:
        """
        Args:
            input_ids: ``(batch, time)``; or ``inputs_embeds`` ``(batch, time, embedding_size)``, rows of ``C``
                (or any vectors) instead of ids.
            attention_mask: 0 at padding; padded tokens are read as the pad id, the same token that
                fills the context before a sequence starts, so left padding never changes a result.
            past_key_values: the last ``n - 1`` tokens of earlier calls (None: the initial context); also
                accepted as ``cache``, the name transformers >= 5.24 uses.

        Returns:
            ``last_hidden_state`` ``tanh(d + H x)`` ``(batch, time, hidden_size)``, the new context as the cache
            (``past_key_values`` before transformers 5.24) and, with ``output_hidden_states``, ``(x, tanh(d + H x))``
            with ``x`` ``(batch, time, context_size * embedding_size)``.
        """
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        output_hidden_states, _ = output_flags(self.config, output_hidden_states)
        x, h, state = self.encode(input_ids, attention_mask, given_cache(past_key_values, cache), inputs_embeds)
        return BaseModelOutputWithPast(last_hidden_state=h, **cache_field(state if use_cache else None),
                                       hidden_states=(x, h) if output_hidden_states else None)

    def encode(self, input_ids: torch.LongTensor | None, attention_mask: torch.Tensor | None = None,
               past_key_values: RecurrentState | None = None, inputs_embeds: torch.FloatTensor | None = None,
               ) -> tuple[torch.Tensor, torch.Tensor, RecurrentState]:
        """:meth:`forward` as plain values: ``(x (B, T, (n-1) * m), h (B, T, h), state)``, ``state`` the
        :class:`RecurrentState` after the last token. The language-model head calls it directly, since its
        direct connections read ``x``."""
        tokens = self._tokens(input_ids, inputs_embeds, attention_mask)  # (B, T) ids or (B, T, m) vectors
        batch, time = tokens.shape[:2]
        n_ctx = self.config.context_size
        context = RecurrentState.continued(past_key_values, batch, type(self).__name__)
        context = self.initial_context(batch, tokens.device) if context is None else context[0]
        if tokens.dim() == 3 or context.dim() == 3:  # vectors: the context is kept as vectors from now on
            tokens, context = (t if t.dim() == 3 else self.embed_tokens(t) for t in (tokens, context))
        stream = torch.cat([context, tokens], dim=1)  # (B, n-1 + T) or (B, n-1 + T, m)
        x = self._windows(stream, time).reshape(batch, time, -1)  # (B, T, (n-1) * m)
        h = torch.tanh(self.hidden(x))  # (B, T, h)
        record = past_key_values is not None and past_key_values.record_past
        steps = [(stream[:, t + 1 : t + 1 + n_ctx],) for t in range(time)] if record else None
        return x, h, RecurrentState.after(past_key_values, (stream[:, -n_ctx:],), time, steps)

    def _tokens(self, input_ids, inputs_embeds, attention_mask) -> torch.Tensor:
        """The new tokens, ids ``(B, T)`` or vectors ``(B, T, m)``, with padded positions replaced by the
        context fill token."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
        if inputs_embeds is None:
            check_input_ids(input_ids, self.config.vocab_size)
            mask = current_mask(attention_mask, input_ids)
            return input_ids if mask is None else input_ids.masked_fill(~mask, self.context_fill_id)
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != self.config.embedding_size:
            raise ValueError(f"`inputs_embeds` must have shape (batch_size, sequence_length, embedding_size="
                             f"{self.config.embedding_size}), got {tuple(inputs_embeds.shape)}.")
        mask = current_mask(attention_mask, inputs_embeds[..., 0])
        if mask is None:
            return inputs_embeds
        return torch.where(mask[..., None], inputs_embeds, self.embed_tokens.weight[self.context_fill_id])

    def _windows(self, stream: torch.Tensor, time: int) -> torch.Tensor:
        """The ``n - 1`` tokens ending at each of the last ``time`` positions: ``(B, T, n-1)`` ids looked up in
        ``C``, or vectors, either way ``(B, T, n-1, m)``."""
        n_ctx = self.config.context_size
        if stream.dim() == 2:
            return self.embed_tokens(stream.unfold(1, n_ctx, 1)[:, 1:])  # (B, T, n-1, m)
        return stream.unfold(1, n_ctx, 1)[:, 1:].transpose(-1, -2)  # (B, T, m, n-1) -> (B, T, n-1, m)


class NNLMForCausalLM(NNLMPreTrainedModel, StatefulGenerationMixin):
    """``P(w_t | w_{t-n+1..t-1}) = softmax(b + W x + U tanh(d + H x))``, ``x = [C(w_{t-n+1}); …; C(w_{t-1})]``.

    :class:`NNLMModel` (``self.nnlm``) computes ``x`` and ``tanh(d + H x)`` and carries the window of the last
    ``n - 1`` tokens as its state (the cache), so a forward pass over any number of new tokens continues
    exactly where the previous one stopped. This is what lets ``generate()`` feed one token per step and still
    give every step its full context, and what lets training read contiguous streams without losing context at
    batch boundaries. The head adds the output layer ``U, b`` and the direct connections ``W``.

    ``hidden_states`` (``output_hidden_states``): ``(x, tanh(d + H x))``, the concatenated context embeddings
    ``(batch, time, context_size * embedding_size)`` and the hidden layer ``(batch, time, hidden_size)``.
    Checkpoints saved before the base model existed (keys ``embed_tokens.*``, ``hidden.*``) load unchanged:
    transformers adds the ``nnlm.`` prefix to the keys of the body.
    """

    #: the decoding graphs ``hf_seqmodels.export`` writes for it (a builder of ``export/step_graphs.py``)
    export_graphs = "recurrent_lm"

    def __init__(self, config: NNLMConfig):
        super().__init__(config)
        n_inputs = config.context_size * config.embedding_size
        self.nnlm = NNLMModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)  # U, b
        self.direct = nn.Linear(n_inputs, config.vocab_size, bias=False) if config.direct_connections else None  # W
        self.post_init()

    def get_input_embeddings(self):
        return self.nnlm.embed_tokens

    def set_input_embeddings(self, value):
        self.nnlm.embed_tokens = value

    def get_output_embeddings(self):
        """The output layer ``U`` (and ``b``): hidden state to vocabulary scores."""
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, mean_resizing=True):
        """transformers' resize of ``C`` and of the output layer ``U, b``, plus the direct connections ``W``
        (one row per output token): new rows are the mean of the old ones (``mean_resizing``), else drawn as at
        initialisation."""
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if self.direct is not None and self.direct.out_features != embeddings.num_embeddings:
            old, rows = self.direct.weight.data, embeddings.num_embeddings
            new = old[:rows].clone() if rows <= old.shape[0] else torch.cat([old, old.new_empty(rows - old.shape[0], old.shape[1])])
            if rows > old.shape[0]:
                added = new[old.shape[0]:]
                if mean_resizing:
                    added.copy_(old.mean(dim=0, keepdim=True).expand_as(added))
                else:
                    added.uniform_(-self.config.init_range, self.config.init_range)
            self.direct.weight = nn.Parameter(new, requires_grad=self.direct.weight.requires_grad)
            self.direct.out_features = rows
        return embeddings

    @property
    def context_fill_id(self) -> int:
        """The id read before the first token and at padded positions (see :class:`NNLMModel`)."""
        return self.nnlm.context_fill_id

    def initial_context(self, batch_size: int, device: torch.device) -> torch.LongTensor:
        """The context before the first token: ``(batch, n - 1)`` copies of ``context_fill_id``."""
        return self.nnlm.initial_context(batch_size, device)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values: RecurrentState | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: RecurrentState | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        """
        Args:
            input_ids, attention_mask, past_key_values (or ``cache``), inputs_embeds: as :meth:`NNLMModel.forward`.
            labels: shifted inside like every causal LM; ``shift_labels`` (already aligned) take their place.

        Returns:
            ``logits`` ``(batch, time, vocab_size)``, the new context as ``past_key_values`` (``cache``
            with transformers >= 5.24) and, with ``output_hidden_states``, ``(x, tanh(d + H x))``.
        """
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        output_hidden_states, _ = output_flags(self.config, output_hidden_states)
        x, h, state = self.nnlm.encode(input_ids, attention_mask, given_cache(past_key_values, cache), inputs_embeds)
        logits = self.lm_head(self.dropout(h))  # (B, T, V)
        if self.direct is not None:
            logits = logits + self.direct(x)
        loss = self.causal_lm_loss(logits, labels, **kwargs)
        return CausalLMOutputWithPast(loss=loss, logits=logits, **cache_field(state if use_cache else None),
                                      hidden_states=(x, h) if output_hidden_states else None)


__all__ = ["NNLMPreTrainedModel", "NNLMModel", "NNLMForCausalLM"]
