"""What every causal LM whose generation cache is a :class:`RecurrentState` shares (RNNs, the NNLM)."""

from __future__ import annotations

import torch
from transformers import GenerationMixin

from .cache_naming import cache_field, given_cache


class StatefulGenerationMixin(GenerationMixin):  # the name must end in "GenerationMixin" (can_generate)
    """``generate()`` support and the loss for language models that carry a fixed-size state.

    The state is returned as ``past_key_values`` (``cache`` from transformers 5.24, see
    :mod:`.cache_naming`); ``generate()`` passes it back, feeds only the new token and calls
    ``RecurrentState.reorder_cache`` during beam search. transformers must not build
    its key/value ``DynamicCache`` for these models, hence ``_supports_default_dynamic_cache``.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Set on each model class itself: a class attribute here would be shadowed by PreTrainedModel's
        # `_is_stateful = False`, which comes earlier in the MRO (transformers refuses assisted decoding
        # for stateful models, and our training loop carries the state between windows of them).
        cls._is_stateful = True

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False

    def prepare_inputs_for_generation(self, input_ids, next_sequence_length=None, past_key_values=None,
                                      attention_mask=None, cache=None, **kwargs):
        """The inputs of one decoding step of a decoder-only model: the tokens the state has not read yet,
        the state and the mask. transformers' generic version also builds position ids and 4-D masks, which
        these models do not use, and inspects the forward signature on every step of a custom model."""
        past_key_values = given_cache(past_key_values, cache)
        if self.config.is_encoder_decoder:
            return super().prepare_inputs_for_generation(input_ids, next_sequence_length, past_key_values,
                                                         attention_mask, **kwargs)
        if next_sequence_length is not None:
            input_ids = input_ids[:, -next_sequence_length:]
        inputs = {"input_ids": input_ids, **cache_field(past_key_values), "attention_mask": attention_mask}
        skipped = ("labels", "is_first_iteration", "inputs_embeds", "position_ids", "token_type_ids")
        inputs.update((k, v) for k, v in kwargs.items() if k not in skipped and k not in inputs)
        return inputs

    def causal_lm_loss(self, logits: torch.Tensor, labels: torch.Tensor | None, **kwargs) -> torch.Tensor | None:
        """Token cross-entropy: ``labels`` are shifted inside (token ``t`` predicts ``t + 1``), or
        ``shift_labels`` give already-aligned targets (TBPTT streams); ``-100`` is ignored. Keyword
        arguments such as Trainer's ``num_items_in_batch`` go to transformers' loss function."""
        if labels is None and kwargs.get("shift_labels") is None:
            return None
        return self.loss_function(logits, labels, vocab_size=self.config.vocab_size, **kwargs)
