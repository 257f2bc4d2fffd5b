"""The generation cache of attention decoders, and the coverage penalty that reads it during beam search."""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

from .library_internals import tensor_version
from .state_cache import RecurrentState


class AttentionDecoderState(RecurrentState):
    """What an attention decoder carries from one target token to the next.

    * ``tensors``: the recurrent state, ``(h, c)`` or ``(h,)``, each ``(batch, num_layers, hidden_size)``;
    * ``input_feed``: Luong's attentional state ``h̃_{t-1}`` ``(batch, hidden_size)``, or None;
    * ``coverage``: the attention summed over the target so far ``Σ_j α_{j,i}`` ``(batch, src_len)``;
    * ``attention``: the latest step's weights ``α_{t,i}`` ``(batch, src_len)``;
    * ``source_mask``: ``(batch, src_len)`` bool, True at real source tokens; None when nothing is padded;
    * the attention's projection of the encoder outputs (``U_a h_j`` for Bahdanau), kept with the
      encoder-output tensor it was computed from (:meth:`attention_keys`), so that decoding computes it
      once per source batch instead of once per step. Beam search does not reorder it: like the encoder
      outputs it is the same for every beam of a sentence.

    Like transformers' ``DynamicCache``, the model fills and updates the object it is given in place
    (an empty one from :meth:`empty` included), so whoever holds it, such as
    :class:`CoveragePenaltyLogitsProcessor`, sees every step. ``reorder_cache`` follows beam search.
    """

    def __init__(self, tensors=(), seq_length=0, input_feed=None, coverage=None, attention=None, source_mask=None):
        super().__init__(tensors, seq_length)
        self.input_feed = input_feed
        self.coverage = coverage
        self.attention = attention
        self.source_mask = source_mask
        self._keys: tuple[torch.Tensor, int, torch.Tensor] | None = None  # (memory, its version, keys)

    def attention_keys(self, memory: torch.Tensor) -> torch.Tensor | None:
        """The keys stored by :meth:`store_attention_keys` for this very ``memory`` tensor (same object,
        unchanged since), else None."""
        if self._keys is not None and self._keys[0] is memory and self._keys[1] == tensor_version(memory):
            return self._keys[2]
        return None

    def store_attention_keys(self, memory: torch.Tensor, keys: torch.Tensor) -> None:
        self._keys = (memory, tensor_version(memory), keys)

    @classmethod
    def empty(cls) -> AttentionDecoderState:
        """A state for ``generate(past_key_values=...)`` that the first forward call fills."""
        return cls()

    @property
    def is_empty(self) -> bool:
        return not self.tensors

    def add_tokens(self, tensors, input_feed, attention: torch.Tensor | None, source_mask, num_tokens: int) -> None:
        """Store the state after ``num_tokens`` more target tokens; ``attention`` is ``(batch, num_tokens, src_len)``."""
        if attention is not None:
            added = attention.sum(dim=1)  # (B, S)
            self.coverage = added if self.coverage is None else self.coverage + added
            self.attention = attention[:, -1]
        self.tensors, self.input_feed, self.source_mask = tuple(tensors), input_feed, source_mask
        self.seq_length += num_tokens

    # --- the operations transformers' generation machinery calls on a cache -------------------------------
    # RecurrentState (a transformers Cache) applies reorder_cache / batch_repeat_interleave / batch_select_indices
    # to the recurrent tensors through `_rows`; the decoder's other batch-first tensors follow here.

    @property
    def is_croppable(self) -> bool:
        """False: the decoder state is updated in place and records no past states to roll back to."""
        return False

    def _rows(self, pick) -> None:
        super()._rows(pick)
        for name in ("input_feed", "coverage", "attention", "source_mask"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, pick(value))

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Repeat every row ``repeats`` times in place (``(B, ...)`` -> ``(B * repeats, ...)``), as transformers
        expands a batch for beams or several returned sequences. The stored attention keys are dropped: they
        belong to the unexpanded encoder outputs. (Beam search's ``reorder_cache`` keeps them: every beam of a
        sentence attends to the same encoder outputs.)"""
        super().batch_repeat_interleave(repeats)
        self._keys = None

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the rows ``indices`` in place; the stored attention keys are dropped."""
        super().batch_select_indices(indices)
        self._keys = None

    def activate_past_recording(self) -> None:
        """Nothing is recorded (see :attr:`is_croppable`): :meth:`crop` keeps refusing rollbacks."""

    def crop(self, tokens_to_remove: int) -> None:
        """transformers' rollback (assisted decoding): ``crop(0)`` keeps the state; removing tokens raises a
        ValueError, since a recurrent decoder state cannot forget a token it read."""
        if tokens_to_remove != 0:
            raise ValueError(
                f"Cannot crop an {type(self).__name__} by {tokens_to_remove} (it has read {self.seq_length} tokens): "
                "a recurrent decoder state summarises every token it read and cannot forget some of them, so "
                "assisted/speculative decoding that rolls back the cache is not supported with this model."
            )

    def reset(self) -> None:
        """Empty the state (the next forward call starts from the encoder's final states)."""
        super().reset()
        self.input_feed = self.coverage = self.attention = self.source_mask = None
        self._keys = None


def coverage_penalty(coverage: torch.Tensor, source_mask: torch.Tensor | None) -> torch.Tensor:
    """Wu et al. (2016), eq. 14 without β: ``Σ_i log(min(Σ_j α_{j,i}, 1))`` over real source positions.

    ``coverage`` ``(batch, src_len)`` -> ``(batch,)``, always <= 0: source words that received less than
    a full unit of attention are penalised.
    """
    tiny = torch.finfo(coverage.dtype).tiny  # log(0) is undefined; a softmax weight can underflow to 0
    logs = coverage.clamp(min=tiny, max=1.0).log()
    if source_mask is not None:
        logs = logs.masked_fill(~source_mask, 0.0)
    return logs.sum(dim=-1)


class CoveragePenaltyLogitsProcessor(LogitsProcessor):
    """Adds Wu et al.'s coverage penalty ``β Σ_i log(min(Σ_j α_{j,i}, 1))`` to beam-search scores.

    Beam search accumulates what processors add to the log-probabilities, so at step ``t`` every
    continuation of a hypothesis gets the *change* of the penalty, ``cp(coverage_t) - cp(coverage_{t-1})``;
    the sum over a hypothesis is the penalty of its final coverage. The attention of step ``t`` is the
    one used to predict token ``t``, hence the same for all tokens of a hypothesis: the penalty ranks
    hypotheses, never the tokens of one. transformers divides the accumulated score by
    ``length ** length_penalty`` at the end; with ``length_penalty=0`` the final score is exactly
    ``log P(Y|X) + β cp(X; Y)``.

    Args:
        state: the :class:`AttentionDecoderState` that the model updates in place (pass it to
            ``generate`` as ``past_key_values``; ``RNNSeq2SeqForConditionalGeneration.generate(
            coverage_penalty=β)`` does both).
        beta: the weight ``β`` (Wu et al. use 0.2).
    """

    def __init__(self, state: AttentionDecoderState, beta: float):
        if beta < 0:
            raise ValueError(f"Invalid `coverage_penalty`={beta!r}: expected a weight >= 0.")
        self.state = state
        self.beta = beta

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        state = self.state
        if state.coverage is None:
            raise ValueError("The coverage penalty needs a model with attention that fills the given state.")
        change = coverage_penalty(state.coverage, state.source_mask)  # (B*beams,)
        if state.seq_length > 1:  # before the first step the penalty is not defined (log 0), not subtracted
            change = change - coverage_penalty(state.coverage - state.attention, state.source_mask)
        return scores + self.beta * change.unsqueeze(-1).to(scores.dtype)
