"""Beam search in numpy, with the rules of transformers' ``generate(num_beams=K)`` (its vectorised
``_beam_search``), so that the exported models' beams equal eager ones (``do_sample=False``, no logits processor).

Per source row ``b`` there are ``K`` running beams. At each step the ``keep = max(2, 1 + n_eos) * K`` best
continuations ``(beam, token)`` by accumulated log-probability are taken; those that end in ``<eos>`` (or reach
``max_length``) and rank among the first ``K`` become finished hypotheses, scored ``log P / gen_len **
length_penalty``; the best ``K`` others keep running. Decoding stops when no running beam can beat the worst
finished one (``early_stopping=False``: judged at the current length), when every hypothesis slot is full
(``early_stopping=True``), or at ``max_length``.
"""

from __future__ import annotations

import numpy as np

NEG = np.float32(-1.0e9)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """``(N, V)`` logits -> log-probabilities, in float32."""
    logits = logits.astype(np.float32)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _gather(array: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``array[b, index[b, j], ...]`` for ``array`` ``(B, K, ...)`` and ``index`` ``(B, J)``."""
    index = index.reshape(*index.shape, *([1] * (array.ndim - 2)))
    return np.take_along_axis(array, index, axis=1)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices ``(B, k)`` of the ``k`` highest scores of each row, best first."""
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


class BeamSearch:
    """The bookkeeping of beam search over ``prefix`` ``(B * K, P)`` (each row repeated ``K`` times).

    Call :meth:`step` with the log-probabilities ``(B * K, V)`` of the running beams; it returns the rows of
    the decoding state to keep ``(B * K,)`` (reorder the cache with them), the tokens to feed next ``(B * K,)``
    and whether the search is over. :meth:`result` gives the best hypothesis per row ``(B, P + n)``.
    """

    def __init__(self, prefix: np.ndarray, num_beams: int, eos_token_id: list[int], pad_token_id: int | None,
                 max_length: int, length_penalty: float = 1.0, early_stopping: bool = False):
        flat, self.prompt_len = prefix.shape
        self.K, self.B = num_beams, flat // num_beams
        self.eos, self.max_length = np.asarray(eos_token_id, dtype=np.int64), max_length
        self.length_penalty, self.early_stopping = length_penalty, early_stopping
        fill = (pad_token_id or eos_token_id[0]) if eos_token_id else -1  # transformers' filler of short beams
        self.running = np.full((self.B, self.K, max_length), fill, dtype=np.int64)
        self.running[:, :, : self.prompt_len] = prefix.reshape(self.B, self.K, -1)
        self.sequences = self.running.copy()
        self.running_scores = np.zeros((self.B, self.K), dtype=np.float32)
        self.running_scores[:, 1:] = NEG  # all beams start equal: only the first one may expand
        self.scores = np.full((self.B, self.K), NEG, dtype=np.float32)
        self.finished = np.zeros((self.B, self.K), dtype=bool)
        self.improvable = np.ones((self.B, 1), dtype=bool)
        self.running_rows = np.full((self.B, self.K, max_length - self.prompt_len), -1, dtype=np.int64)
        self.rows = self.running_rows.copy()
        self.cur_len = self.prompt_len

    def step(self, log_probs: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """One step from the running beams' next-token log-probabilities ``(B * K, V)``."""
        B, K, t = self.B, self.K, self.cur_len
        vocab = log_probs.shape[-1]
        total = (log_probs.reshape(B, K, vocab) + self.running_scores[:, :, None]).reshape(B, K * vocab)
        keep = max(2, 1 + len(self.eos)) * K
        best = _top(total, keep)  # (B, keep)
        top_scores = np.take_along_axis(total, best, axis=1)
        beam, token = best // vocab, best % vocab
        candidates = _gather(self.running, beam).copy()
        candidates[:, :, t] = token
        candidate_rows = _gather(self.running_rows, beam).copy()
        candidate_rows[:, :, t - self.prompt_len] = beam + np.arange(B)[:, None] * K
        stops = np.isin(token, self.eos) | (t + 1 >= self.max_length)  # (B, keep)

        running_scores = top_scores + stops.astype(np.float32) * NEG
        chosen = _top(running_scores, K)
        self.running, self.running_scores = _gather(candidates, chosen), _gather(running_scores, chosen)
        self.running_rows = _gather(candidate_rows, chosen)
        self._add_finished(candidates, top_scores, candidate_rows, stops)

        reorder = self.running_rows[:, :, t - self.prompt_len].reshape(-1)
        self.cur_len = t + 1
        self._update_improvable()
        open_slots = not (self.finished.all() and self.early_stopping is True)
        over = not (self.improvable.any() and open_slots and not stops.all())
        return reorder, self.running[:, :, t].reshape(-1), over

    def _add_finished(self, candidates, top_scores, candidate_rows, stops) -> None:
        """Merge the candidates that just ended (among the first ``K``) into the ``K`` best finished ones."""
        just_finished = stops & (np.arange(stops.shape[1]) < self.K)[None, :]
        scores = top_scores / np.float32((self.cur_len + 1 - self.prompt_len) ** self.length_penalty)
        full = self.finished.all(axis=-1, keepdims=True) & (self.early_stopping is True)
        scores = scores + full * NEG + (~self.improvable) * NEG + (~just_finished) * NEG
        merged_scores = np.concatenate([self.scores, scores.astype(np.float32)], axis=1)
        chosen = _top(merged_scores, self.K)
        self.sequences = _gather(np.concatenate([self.sequences, candidates], axis=1), chosen)
        self.scores = _gather(merged_scores, chosen)
        self.rows = _gather(np.concatenate([self.rows, candidate_rows], axis=1), chosen)
        self.finished = _gather(np.concatenate([self.finished, just_finished], axis=1), chosen)

    def _update_improvable(self) -> None:
        """Whether a running beam could still beat the worst finished hypothesis (judged at the current length)."""
        best_running = self.running_scores[:, :1] / np.float32((self.cur_len - self.prompt_len) ** self.length_penalty)
        worst = np.where(self.finished, self.scores.min(axis=1, keepdims=True), NEG)
        self.improvable = self.improvable & (best_running > worst).any(axis=-1, keepdims=True)

    def result(self) -> np.ndarray:
        """The best hypothesis of each row, ``(B, P + n)``, shorter ones filled as transformers fills them."""
        generated = int((self.rows[:, 0] >= 0).sum(axis=1).max())
        return self.sequences[:, 0, : self.prompt_len + generated]
