"""The generation cache of models whose memory is a fixed-size state (RNNs, the feed-forward NNLM).

``generate()`` threads the object returned as ``past_key_values`` back into the next forward
call; beam search calls :meth:`RecurrentState.reorder_cache` to follow the surviving beams.
"""

from __future__ import annotations

import torch


class RecurrentState:
    """A tuple of batch-first tensors that summarises everything a model has read so far.

    * LSTM and peephole LSTM: ``(h, c)``, each ``(batch, num_layers * num_directions, hidden_size)``.
    * RNN/GRU: ``(h,)`` with the same shape.
    * Feed-forward NNLM: ``(context_ids,)`` of shape ``(batch, context_size)``, the last
      ``n - 1`` tokens.

    ``seq_length`` counts the tokens consumed; ``generate()`` uses it to skip the part of a
    prompt that a state passed back in has already read.
    """

    is_compileable = False

    def __init__(self, tensors: tuple[torch.Tensor, ...], seq_length: int = 0):
        self.tensors = tuple(tensors)
        self.seq_length = int(seq_length)

    def __len__(self) -> int:
        return len(self.tensors)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.tensors[index]

    def __repr__(self) -> str:
        shapes = ", ".join(str(tuple(t.shape)) for t in self.tensors)
        return f"RecurrentState(tensors=[{shapes}], seq_length={self.seq_length})"

    @property
    def batch_size(self) -> int:
        return self.tensors[0].shape[0]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seq_length

    @property
    def is_linear(self) -> list[bool]:
        """Read by transformers >= 5.24, which cuts the prompt tokens a passed-in cache has already read only
        when some layer is not "linear" (its state-space caches do not count what they read). This state
        counts them (:attr:`seq_length`), so its prompt is cut like a key/value cache's."""
        return [False]

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Select the batch rows of the beams that survive a beam-search step (in place)."""
        self.tensors = tuple(t.index_select(0, beam_idx.to(t.device)) for t in self.tensors)

    def detach(self) -> RecurrentState:
        """The same state cut from the autograd graph (truncated back-propagation through time)."""
        return RecurrentState(tuple(t.detach() for t in self.tensors), self.seq_length)

    def select(self, rows: torch.Tensor | slice) -> RecurrentState:
        """The state of some batch rows only (e.g. one process's shard of the streams)."""
        return RecurrentState(tuple(t[rows] for t in self.tensors), self.seq_length)
