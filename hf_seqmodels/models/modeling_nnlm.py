"""The feed-forward neural probabilistic language model of Bengio et al. (2003)."""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.utils.generic import can_return_tuple

from .cache_naming import cache_field, given_cache
from .configuration_nnlm import NNLMConfig
from .input_checks import check_input_ids, current_mask
from .state_cache import RecurrentState
from .stateful_generation import StatefulGenerationMixin


class NNLMPreTrainedModel(PreTrainedModel):
    config_class = NNLMConfig
    config: NNLMConfig
    base_model_prefix = "nnlm"
    main_input_name = "input_ids"

    @torch.no_grad()
    def _init_weights(self, module):
        r = self.config.init_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            init.uniform_(module.weight, -r, r)
            if getattr(module, "bias", None) is not None:
                init.zeros_(module.bias)


class NNLMForCausalLM(NNLMPreTrainedModel, StatefulGenerationMixin):
    """``P(w_t | w_{t-n+1..t-1}) = softmax(b + W x + U tanh(d + H x))``, ``x = [C(w_{t-n+1}); …; C(w_{t-1})]``.

    The window of the last ``n - 1`` tokens is the model's state: it is returned as
    ``past_key_values`` (a :class:`RecurrentState` holding ``(batch, n - 1)`` ids), so a forward pass
    over any number of new tokens continues exactly where the previous one stopped. This is what
    lets ``generate()`` feed one token per step and still give every step its full context, and what
    lets training read contiguous streams without losing context at batch boundaries.
    """

    def __init__(self, config: NNLMConfig):
        super().__init__(config)
        n_inputs = config.context_size * config.embedding_size
        self.embed_tokens = nn.Embedding(config.vocab_size, config.embedding_size)  # C
        self.hidden = nn.Linear(n_inputs, config.hidden_size)  # H, d
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)  # U, b
        self.direct = nn.Linear(n_inputs, config.vocab_size, bias=False) if config.direct_connections else None  # W
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

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
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        cache: RecurrentState | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        """
        Args:
            input_ids: ``(batch, time)``.
            attention_mask: 0 at padding; padded tokens are read as the pad id, the same token that
                fills the context before a sequence starts, so left padding never changes a result.
            past_key_values: the last ``n - 1`` ids of earlier calls (None: the initial context); also
                accepted as ``cache``, the name transformers >= 5.24 uses.
            labels: shifted inside like every causal LM; or give ``shift_labels``.

        Returns:
            ``logits`` ``(batch, time, vocab_size)`` and the new context as ``past_key_values`` (``cache``
            with transformers >= 5.24).
        """
        past_key_values = given_cache(past_key_values, cache)
        check_input_ids(input_ids, self.config.vocab_size)
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        batch, time = input_ids.shape
        n_ctx = self.config.context_size
        mask = current_mask(attention_mask, input_ids)
        if mask is not None:
            input_ids = input_ids.masked_fill(~mask, self.context_fill_id)
        context = past_key_values[0] if past_key_values is not None else self.initial_context(batch, input_ids.device)
        stream = torch.cat([context, input_ids], dim=1)  # (B, n-1 + T)
        windows = stream.unfold(1, n_ctx, 1)[:, 1:]  # (B, T, n-1): the n-1 tokens ending at each position
        x = self.embed_tokens(windows).reshape(batch, time, -1)  # (B, T, (n-1) * m)
        h = self.dropout(torch.tanh(self.hidden(x)))  # (B, T, h)
        logits = self.lm_head(h)  # (B, T, V)
        if self.direct is not None:
            logits = logits + self.direct(x)
        loss = self.causal_lm_loss(logits, labels, **kwargs)
        seen = 0 if past_key_values is None else past_key_values.seq_length
        state = RecurrentState((stream[:, -n_ctx:],), seen + time) if use_cache else None
        return CausalLMOutputWithPast(loss=loss, logits=logits, **cache_field(state))


__all__ = ["NNLMPreTrainedModel", "NNLMForCausalLM"]
