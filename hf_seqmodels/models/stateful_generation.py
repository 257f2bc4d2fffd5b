"""What every causal LM whose generation cache is a :class:`RecurrentState` shares (RNNs, the NNLM)."""

from __future__ import annotations

import torch
from transformers import GenerationMixin

from .cache_naming import CACHE_NAME, cache_field, given_cache
from .input_checks import check_target_ids
from .state_cache import RecurrentState


def is_stateful(model: torch.nn.Module) -> bool:
    """True for models whose generation cache is a fixed-size state carried from step to step (the RNNs, the
    NNLM: :class:`StatefulGenerationMixin` sets transformers' ``_is_stateful``); False for key/value caches."""
    return bool(getattr(model, "_is_stateful", False))


class StatefulGenerationMixin(GenerationMixin):  # the name must end in "GenerationMixin" (can_generate)
    """``generate()`` support and the loss for language models that carry a fixed-size state.

    The state is returned as ``past_key_values`` (``cache`` from transformers 5.24, see
    :mod:`.cache_naming`); ``generate()`` passes it back, feeds only the new token and calls
    ``RecurrentState.reorder_cache`` during beam search. transformers must not build
    its key/value ``DynamicCache`` for these models, hence ``_supports_default_dynamic_cache``.

    Assisted decoding: transformers refuses a stateful *target* model (``ValueError: assisted generation is not
    supported with stateful models``: verifying draft tokens needs a cache that un-reads rejected tokens). As the
    *assistant* (draft) model they work: when ``generate`` runs as an assistant, the state records the state
    after every token (``RecurrentState.activate_past_recording``), so the draft tokens the target rejects are
    rolled back exactly with ``crop``.
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

    def _prepare_cache_for_generation(self, generation_config, model_kwargs, *args, **kwargs):
        """transformers builds no cache for these models; as a draft model of assisted decoding, start from an
        empty state that records every step, so the rejected draft tokens can be cropped."""
        super()._prepare_cache_for_generation(generation_config, model_kwargs, *args, **kwargs)
        if (getattr(generation_config, "is_assistant", False) and generation_config.use_cache is not False
                and model_kwargs.get(CACHE_NAME) is None):
            state = RecurrentState.empty()
            state.activate_past_recording()
            model_kwargs[CACHE_NAME] = state

    def prepare_inputs_for_generation(self, input_ids, next_sequence_length=None, past_key_values=None,
                                      attention_mask=None, inputs_embeds=None, is_first_iteration=False,
                                      cache=None, **kwargs):
        """The inputs of one decoding step of a decoder-only model: the tokens the state has not read yet
        (``inputs_embeds`` instead on the first step when generation starts from embeddings), the state and the
        mask. transformers' generic version also builds position ids and 4-D masks, which these models do not
        use, and inspects the forward signature on every step of a custom model."""
        past_key_values = given_cache(past_key_values, cache)
        if self.config.is_encoder_decoder:
            return super().prepare_inputs_for_generation(
                input_ids, next_sequence_length, past_key_values, attention_mask, inputs_embeds=inputs_embeds,
                is_first_iteration=is_first_iteration, **kwargs)
        if inputs_embeds is not None and is_first_iteration:
            if next_sequence_length is not None:
                inputs_embeds = inputs_embeds[:, -next_sequence_length:]
            inputs = {"input_ids": None, "inputs_embeds": inputs_embeds}
        else:
            if next_sequence_length is not None:
                input_ids = input_ids[:, -next_sequence_length:]
            inputs = {"input_ids": input_ids}
        inputs.update(cache_field(past_key_values), attention_mask=attention_mask)
        skipped = ("labels", "position_ids", "token_type_ids")
        inputs.update((k, v) for k, v in kwargs.items() if k not in skipped and k not in inputs)
        return inputs

    def causal_lm_loss(self, logits: torch.Tensor, labels: torch.Tensor | None, **kwargs) -> torch.Tensor | None:
        """Token cross-entropy as transformers' ``ForCausalLMLoss``: ``labels`` are shifted inside (token ``t``
        predicts ``t + 1``); ``shift_labels``, when given, are already-aligned targets and take the place of
        ``labels`` (sequence-parallel training, TBPTT streams), also when ``labels`` are given too; ``-100`` is
        ignored. Keyword arguments such as Trainer's ``num_items_in_batch`` go to transformers' loss function."""
        if labels is None and kwargs.get("shift_labels") is None:
            return None
        check_target_ids(labels, self.config.vocab_size)
        check_target_ids(kwargs.get("shift_labels"), self.config.vocab_size, "shift_labels")
        return self.loss_function(logits, labels, vocab_size=self.config.vocab_size, **kwargs)
