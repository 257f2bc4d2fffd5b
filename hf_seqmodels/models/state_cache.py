"""The generation cache of models whose memory is a fixed-size state (RNNs, the feed-forward NNLM).

:class:`RecurrentState` is a transformers ``Cache``: ``generate()`` threads the object returned as
``past_key_values`` (``cache`` from transformers 5.24) back into the next forward call and the generation
machinery's cache operations work on it:

* ``reorder_cache(beam_idx)`` (beam search), ``batch_repeat_interleave(n)``, ``batch_select_indices(idx)``:
  in place, on the batch rows of every tensor;
* ``get_seq_length()``: the number of tokens read, so ``generate()`` feeds a state passed back in only the
  tokens it has not read;
* ``crop(-k)``: a recurrent state summarises its whole prefix and cannot be rolled back from the summary.
  It can be rolled back only to a length whose state was recorded: after ``activate_past_recording()``,
  every state the models produce keeps the state after each token it read (this is how an RNN or NNLM
  serves as the draft model of assisted decoding, see ``StatefulGenerationMixin``). Any other crop raises
  a ValueError that says so.

The models never update a state in place: a forward call returns a new one (:meth:`RecurrentState.advanced`),
so a state can be reused, e.g. to continue the same prefix twice.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache

StateTensors = tuple[torch.Tensor, ...]


class RecurrentState(Cache):
    """A tuple of batch-first tensors that summarises everything a model has read so far.

    * LSTM and peephole LSTM: ``(h, c)``, each ``(batch, num_layers * num_directions, hidden_size)``.
    * RNN/GRU: ``(h,)`` with the same shape.
    * Feed-forward NNLM: ``(context,)``, the last ``n - 1`` tokens: ids ``(batch, context_size)``, or their
      embeddings ``(batch, context_size, embedding_size)`` once the model has read ``inputs_embeds``.

    An empty state (``tensors == ()``, :meth:`empty`) is the state before the first token: the models read
    it as their initial state. ``seq_length`` counts the tokens consumed; ``generate()`` uses it to skip
    the part of a prompt that a state passed back in has already read. ``len(state)`` and ``state[i]`` are
    the number of tensors and the ``i``-th tensor.
    """

    def __init__(self, tensors: StateTensors = (), seq_length: int = 0):
        super().__init__(layers=[])
        self.tensors = tuple(tensors)
        # a symbolic length (torch.export) stays symbolic: int() would fix the traced length to the example's
        self.seq_length = seq_length if isinstance(seq_length, torch.SymInt) else int(seq_length)
        self.record_past = False
        self._past: dict[int, StateTensors] = {}  # seq_length -> tensors, while recording

    @classmethod
    def empty(cls) -> RecurrentState:
        """The state before the first token (the models fill it with their initial state)."""
        return cls()

    # --- the tuple of tensors ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.tensors)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.tensors[index]

    def __iter__(self):
        return iter(self.tensors)

    def __repr__(self) -> str:
        shapes = ", ".join(str(tuple(t.shape)) for t in self.tensors)
        return f"{type(self).__name__}(tensors=[{shapes}], seq_length={self.seq_length})"

    @property
    def batch_size(self) -> int:
        """Rows of the state, ``-1`` while it is empty (as transformers' caches before their first update)."""
        return self.tensors[0].shape[0] if self.tensors else -1

    def initial_or(self, batch_size: int) -> StateTensors | None:
        """The tensors to continue from, None for an empty state (the model's initial state); a ValueError
        when the state has another number of rows than the input."""
        if not self.tensors:
            return None
        if self.batch_size != batch_size:
            raise ValueError(
                f"`past_key_values` holds a state of {self.batch_size} rows but the input has {batch_size}. "
                f"Pass the state of the same sequences (for beams or returned sequences, repeat its rows with "
                f"`state.batch_repeat_interleave(n)`)."
            )
        return self.tensors

    # --- what the models call --------------------------------------------------------------------------

    @staticmethod
    def continued(cache: Cache | None, batch_size: int, model: str) -> StateTensors | None:
        """:meth:`initial_or` of the cache a ``model`` (its class name) was given, None without one. A key/value
        cache (``DynamicCache``, ``StaticCache``...), such as the export wrappers of transformers pass, cannot
        hold a recurrent state: a ValueError says so."""
        if cache is None:
            return None
        if not isinstance(cache, RecurrentState):
            raise ValueError(
                f"{model} got a {type(cache).__name__} as its cache, but its memory is a RecurrentState (a fixed-size "
                "state after the last token read), not per-token attention keys and values: a key/value cache cannot "
                "hold it, so transformers' key/value-cache export wrappers (export_with_dynamic_cache, "
                "TorchExportableModuleWithStaticCache) do not apply to this model. Pass no cache or the RecurrentState "
                "the model returned; hf_seqmodels.export.export_generation exports its decoding step with the state "
                "as an input and an output."
            )
        return cache.initial_or(batch_size)

    def advanced(self, tensors: StateTensors, num_tokens: int, steps: list[StateTensors] | None = None) -> RecurrentState:
        """A new state after ``num_tokens`` more tokens, ending in ``tensors``. While recording, ``steps`` are
        the states after each of those tokens (the last one is ``tensors``); without them only the final state
        is recorded."""
        state = RecurrentState(tensors, self.seq_length + num_tokens)
        if self.record_past:
            state.record_past = True
            state._past = dict(self._past)
            if steps is not None:
                state._past.update((self.seq_length + i + 1, tuple(s)) for i, s in enumerate(steps))
            state._past[state.seq_length] = state.tensors
        return state

    @staticmethod
    def after(past: RecurrentState | None, tensors: StateTensors, num_tokens: int,
              steps: list[StateTensors] | None = None) -> RecurrentState:
        """:meth:`advanced` of ``past``, or a fresh state when there is none."""
        return RecurrentState(tensors, num_tokens) if past is None else past.advanced(tensors, num_tokens, steps)

    def detach(self) -> RecurrentState:
        """The same state cut from the autograd graph (truncated back-propagation through time)."""
        return RecurrentState(tuple(t.detach() for t in self.tensors), self.seq_length)

    def select(self, rows: torch.Tensor | slice) -> RecurrentState:
        """The state of some batch rows only (e.g. one process's shard of the streams)."""
        return RecurrentState(tuple(t[rows] for t in self.tensors), self.seq_length)

    # --- transformers' Cache interface ------------------------------------------------------------------

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seq_length

    def get_max_length(self, layer_idx: int | None = None) -> int:
        return -1  # no limit: the state has no sequence axis

    def update(self, *args, **kwargs):
        raise ValueError(
            f"{type(self).__name__} holds a fixed-size recurrent state, not per-token keys and values: it cannot "
            "serve as an attention model's cache. Pass it only to the recurrent model that returned it."
        )

    def has_previous_state(self, layer_idx: int | None = None, state_idx: int | None = None) -> bool:
        return bool(self.tensors)

    @property
    def is_compileable(self) -> bool:
        """False: each forward call returns a new state (no static addresses); generate does not auto-compile."""
        return False

    @property
    def is_initialized(self) -> bool:
        return bool(self.tensors)

    @property
    def is_croppable(self) -> bool:
        """Whether :meth:`crop` can roll the state back: only while past states are recorded."""
        return self.record_past

    @property
    def is_linear(self) -> list[bool]:
        """Read by transformers >= 5.24, which cuts the prompt tokens a passed-in cache has already read only
        when some layer is not "linear" (its state-space caches do not count what they read). This state
        counts them (:attr:`seq_length`), so its prompt is cut like a key/value cache's."""
        return [False]

    @property
    def is_sliding(self) -> list[bool]:
        return [False]

    @property
    def is_dummy(self) -> list[bool]:
        return [False]

    def _rows(self, pick) -> None:
        """Apply ``pick(tensor) -> tensor`` to the batch rows of the state and of every recorded state."""
        self.tensors = tuple(pick(t) for t in self.tensors)
        self._past = {length: tuple(pick(t) for t in ts) for length, ts in self._past.items()}
        if self.record_past:
            self._past[self.seq_length] = self.tensors

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Select the batch rows of the beams that survive a beam-search step (in place)."""
        self._rows(lambda t: t.index_select(0, beam_idx.to(t.device)))

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Repeat each row ``repeats`` times, as ``generate()`` expands its inputs for beams (in place)."""
        self._rows(lambda t: t.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the rows ``indices`` (in place)."""
        self._rows(lambda t: t[indices.to(t.device) if isinstance(indices, torch.Tensor) else indices])

    def reset(self) -> None:
        """Back to the state before the first token."""
        self.tensors, self.seq_length = (), 0
        self._past = {0: ()} if self.record_past else {}

    def activate_past_recording(self) -> None:
        """Keep the state after every token read from now on, so that :meth:`crop` can roll back to it."""
        self.record_past = True
        self._past[self.seq_length] = self.tensors

    def is_recording_past(self, layer_idx: int = 0) -> bool:
        return self.record_past

    def crop(self, tokens_to_remove: int) -> None:
        """Roll the state back by ``-tokens_to_remove`` tokens (transformers' convention: a negative count; 0
        does nothing). Possible only to a length whose state was recorded (:meth:`activate_past_recording`
        before those tokens were read); otherwise a ValueError, as a recurrent state cannot be un-read."""
        if tokens_to_remove > 0:
            raise ValueError(
                f"`crop` takes a negative number of tokens to remove (transformers' convention), got "
                f"{tokens_to_remove}."
            )
        if tokens_to_remove == 0:
            return
        target = self.seq_length + tokens_to_remove
        if target not in self._past:
            recorded = sorted(self._past) if self._past else "none (past recording is off)"
            raise ValueError(
                f"Cannot crop the recurrent state from {self.seq_length} to {target} tokens: a recurrent state "
                f"summarises its whole prefix and cannot be rolled back, except to a length whose state was recorded "
                f"with `activate_past_recording()` before those tokens were read. Recorded lengths: {recorded}."
            )
        self.tensors, self.seq_length = self._past[target], target
        self._past = {length: ts for length, ts in self._past.items() if length <= target}
