"""Linear-chain conditional random field: the tag-inference layer of the BiLSTM-CRF tagger.

Course notes (sequence labelling, the "Tag Inference" layer): given the emission scores
``f(t | i)`` of tag ``t`` at position ``i`` (the tagger's linear layer over the BiLSTM outputs), a
transition matrix ``A_{ij}`` (score of tag ``j`` following tag ``i``) and start scores ``A_{0i}``,
a tag sequence ``t_{1:n}`` of sentence ``C_{1:n}`` scores::

    S(C_{1:n}, t_{1:n}) = A_{0 t_1} + Σ_{i=1}^{n} f(t_i | i) + Σ_{i=2}^{n} A_{t_{i-1} t_i} + A_{t_n, end}

(the end scores ``A_{t_n, end}`` are Lample et al.'s (2016) addition to the notes' formula; they let the
model learn that a sentence rarely ends inside an entity). The CRF turns scores into a distribution
over all ``K^n`` tag sequences::

    p(t_{1:n} | C) = exp S(C, t_{1:n}) / Z(C),      log Z(C) = log Σ_{t'} exp S(C, t')

``log Z`` comes from the forward algorithm in log space (``α_1(j) = A_{0j} + f(j|1)``,
``α_i(j) = logsumexp_k(α_{i-1}(k) + A_{kj}) + f(j|i)``, ``log Z = logsumexp_j(α_n(j) + A_{j,end})``),
the training loss is the negative log-likelihood ``log Z - S(C, t^gold)``, and decoding is Viterbi
(the same recursion with ``max`` instead of ``logsumexp`` and back-pointers), the notes'
``t* = argmax_{t'} S(C, t')``.

**Max-marginals.** ``max_marginals`` returns, for every position ``i`` and tag ``y``, the score of the
best tag sequence that passes through ``y`` at ``i``: ``m_i(y) = α^max_i(y) + β^max_i(y)`` (forward
Viterbi scores plus the best continuation). The Viterbi path reaches the overall maximum at every
position, so ``argmax_y m_i(y)`` *is* the Viterbi tag at ``i`` (up to exact ties). The tagger returns
these as its ``logits``, which is how code that takes a per-token argmax of the logits (transformers'
token-classification pipeline, ``Trainer`` metrics) gets Viterbi decoding without knowing about the
CRF. Their softmax is not a probability of the CRF; it only orders the tags at one position.

**Constraints.** With ``constraints="BIO"`` the tags are read from ``id2label`` (``O``, ``B-TYPE``,
``I-TYPE``): ``I-X`` may only follow ``B-X`` or ``I-X`` and never starts a sentence. Labels nobody named
(transformers' ``LABEL_0``, ``LABEL_1``, ... of a config built without ``id2label``) give no constraints,
with a warning; named labels that are not BIO are an error. Forbidden
transitions and starts get the score :data:`IMPOSSIBLE` (a large negative number, finite so that
gradients stay finite) in training and in decoding alike.

**Masks.** Every method takes a ``(batch, time)`` boolean ``mask`` of the positions that belong to the
chain. The positions need not be contiguous: a masked position is skipped (the state is carried over
it), and a transition links each position to the previous *unmasked* one. A row with no unmasked
position has one empty path (``log Z = S = 0``). All loops run over time only; the batch and the tags
are vectorised.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

import torch
from torch import nn

from .recurrent_scan import max_marginals_scan, traced_as_scan

logger = logging.getLogger(__name__)

IMPOSSIBLE = -10000.0  # score of a forbidden transition or start (exp(-1e4) is 0 in float32)
CRF_CONSTRAINTS = ("BIO",)
#: ``crf_constraints`` that picks BIO constraints when every label is BIO-named, none otherwise
AUTO_CONSTRAINTS = "auto"
_BIO_LABEL = re.compile(r"^(?:O|[BI]-\S+)$")
_UNNAMED_LABEL = re.compile(r"^LABEL_\d+$")  # transformers' names for labels nobody named


def labels_are_unnamed(id2label: Mapping[int, str] | list[str]) -> bool:
    """True when every label is transformers' placeholder ``LABEL_<i>`` (a config built without ``id2label``)."""
    return all(isinstance(id2label[i], str) and _UNNAMED_LABEL.match(id2label[i]) for i in range(len(id2label)))


def labels_are_bio(id2label: Mapping[int, str] | list[str]) -> bool:
    """True when every label is ``O``, ``B-<type>`` or ``I-<type>`` and at least one is not ``O``."""
    labels = [id2label[i] for i in range(len(id2label))]
    return all(isinstance(label, str) and _BIO_LABEL.match(label) for label in labels) and any(
        label != "O" for label in labels)


def resolve_constraints(constraints: str | None, id2label: Mapping[int, str] | list[str] | None) -> str | None:
    """The constraints a CRF applies: ``"auto"`` is ``"BIO"`` when the labels are BIO-named
    (:func:`labels_are_bio`) and None otherwise (other tag sets, ``LABEL_<i>`` placeholders); other values
    are returned as given."""
    if constraints != AUTO_CONSTRAINTS:
        return constraints
    return "BIO" if id2label is not None and labels_are_bio(id2label) else None


def bio_allowed_transitions(id2label: Mapping[int, str] | list[str]) -> tuple[list[bool], list[list[bool]]]:
    """The BIO (IOB2) rules as boolean lists: ``allowed_start[j]`` ``(K,)`` and ``allowed[i][j]`` ``(K, K)``,
    True when tag ``j`` may follow tag ``i``.

    ``I-X`` may follow only ``B-X`` or ``I-X``, and may not start a sentence; everything else is allowed.

    Raises:
        ValueError: a label that is not ``O``, ``B-<type>`` or ``I-<type>`` (the message names it).
    """
    labels = [id2label[i] for i in range(len(id2label))]
    for label in labels:
        if not isinstance(label, str) or not _BIO_LABEL.match(label):
            raise ValueError(
                f"Invalid label {label!r} for BIO constraints: allowed labels are 'O', 'B-<type>' and "
                f"'I-<type>' (e.g. 'B-PER', 'I-PER'); labels are {labels}. Set crf_constraints=None for "
                "tag sets that are not BIO (e.g. part-of-speech tags)."
            )
    allowed_start = [not label.startswith("I-") for label in labels]
    allowed = [[not label.startswith("I-") or previous in ("B-" + label[2:], label) for label in labels]
               for previous in labels]
    return allowed_start, allowed


class LinearChainCRF(nn.Module):
    """Linear-chain CRF over ``num_tags`` tags with learned start, end and transition scores.

    Args:
        num_tags: ``K``, the number of tags.
        id2label: the tag names (needed for ``constraints``).
        constraints: ``"BIO"`` to forbid invalid BIO sequences, ``"auto"`` for BIO constraints when the tag
            names are all BIO (:func:`resolve_constraints`), or None.

    Parameters: ``start_transitions`` ``(K,)`` (the notes' ``A_{0i}``), ``transitions`` ``(K, K)``
    (``A_{ij}``: from tag ``i`` to tag ``j``) and ``end_transitions`` ``(K,)``.
    """

    def __init__(self, num_tags: int, id2label: Mapping[int, str] | None = None, constraints: str | None = None):
        super().__init__()
        self.num_tags = num_tags
        self.start_transitions = nn.Parameter(torch.zeros(num_tags))
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))
        self.end_transitions = nn.Parameter(torch.zeros(num_tags))
        constraints = resolve_constraints(constraints, id2label)
        if constraints == "BIO" and id2label is not None and labels_are_unnamed(id2label):
            logger.warning("constraints='BIO' but the %d labels are unnamed (LABEL_0, ...): no transition is "
                           "forbidden. Give id2label the tag names (O, B-PER, I-PER, ...).", num_tags)
            constraints = None
        if constraints is None:
            allowed_start, allowed = [True] * num_tags, [[True] * num_tags for _ in range(num_tags)]
        elif constraints == "BIO":
            if id2label is None or len(id2label) != num_tags:
                raise ValueError(f"constraints='BIO' needs the {num_tags} tag names in id2label, got {id2label!r}.")
            allowed_start, allowed = bio_allowed_transitions(id2label)
        else:
            raise ValueError(f"Invalid `constraints`={constraints!r}: expected None, {AUTO_CONSTRAINTS!r} or one of "
                             f"{CRF_CONSTRAINTS}.")
        # derived from the labels, so neither parameters nor saved buffers: kept as Python lists (models are
        # built on the meta device when loaded) and made into tensors on the parameters' device when used
        self.constraints = constraints
        self._allowed_start = allowed_start
        self._allowed = allowed

    def allowed_masks(self, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(allowed_start (K,), allowed (K, K))`` boolean tensors: True where a start / transition is allowed."""
        return (torch.tensor(self._allowed_start, dtype=torch.bool, device=device),
                torch.tensor(self._allowed, dtype=torch.bool, device=device))

    def scores(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(start (K,), transitions (K, K), end (K,))`` with forbidden entries set to :data:`IMPOSSIBLE`."""
        allowed_start, allowed = self.allowed_masks(self.transitions.device)
        start = self.start_transitions.masked_fill(~allowed_start, IMPOSSIBLE)
        transitions = self.transitions.masked_fill(~allowed, IMPOSSIBLE)
        return start, transitions, self.end_transitions

    # ------------------------------------------------------------------------------ the recursions

    def _forward_scan(self, emissions: torch.Tensor, mask: torch.Tensor, use_max: bool):
        """α recursion with ``logsumexp`` (forward algorithm) or ``max`` (Viterbi).

        Returns ``(alphas, back_pointers, seen)``: ``alphas`` ``(B, T, K)`` the α of each position (carried
        over masked ones), ``back_pointers`` ``(B, T, K)`` the best previous tag (identity at masked and
        first positions; None for ``logsumexp``) and ``seen`` ``(B,)`` whether a row has any position.
        """
        start, transitions, _ = self.scores()
        batch, time, num_tags = emissions.shape
        alpha = emissions.new_zeros(batch, num_tags)
        seen = torch.zeros(batch, dtype=torch.bool, device=emissions.device)
        identity = torch.arange(num_tags, device=emissions.device).expand(batch, num_tags)
        alphas, pointers = [], []
        for t in range(time):
            scores = alpha.unsqueeze(2) + transitions  # (B, K_prev, K_next)
            if use_max:
                best, pointer = scores.max(dim=1)  # (B, K)
            else:
                best = torch.logsumexp(scores, dim=1)
            step = torch.where(seen.unsqueeze(1), best, start) + emissions[:, t]
            on = mask[:, t]
            alpha = torch.where(on.unsqueeze(1), step, alpha)
            if use_max:
                pointers.append(torch.where((on & seen).unsqueeze(1), pointer, identity))
            seen = seen | on
            alphas.append(alpha)
        return torch.stack(alphas, dim=1), torch.stack(pointers, dim=1) if use_max else None, seen

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``log Z`` by the forward algorithm: ``(batch,)``.

        Args:
            emissions: ``(batch, time, K)`` scores ``f(t | i)``.
            mask: ``(batch, time)`` bool, True at the positions of the chain.
        """
        mask = mask.bool()
        alphas, _, seen = self._forward_scan(emissions, mask, use_max=False)
        log_z = torch.logsumexp(alphas[:, -1] + self.scores()[2], dim=1)
        return torch.where(seen, log_z, torch.zeros_like(log_z))

    @staticmethod
    def _chain_first(tags: torch.LongTensor, mask: torch.Tensor) -> tuple[torch.LongTensor, torch.Tensor, torch.Tensor]:
        """Move each row's chain positions to the front, in order (so consecutive columns are linked).

        Returns ``(order, tags, mask)``: the gather index ``(B, T)``, the moved tags (0 at padding) and the
        moved mask, now right-padded."""
        order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # (B, T)
        mask = mask.gather(1, order)
        return order, tags.gather(1, order).masked_fill(~mask, 0), mask

    def path_score(self, emissions: torch.Tensor, tags: torch.LongTensor, mask: torch.Tensor) -> torch.Tensor:
        """``S(C, t)`` of the given tag sequences: ``(batch,)``. ``tags`` ``(batch, time)`` is read only
        where ``mask`` is True (anything, e.g. -100, elsewhere)."""
        start, transitions, end = self.scores()
        order, tags, mask = self._chain_first(tags, mask.bool())
        emitted = emissions.gather(1, order.unsqueeze(2).expand_as(emissions)).gather(2, tags.unsqueeze(2)).squeeze(2)
        zero = emitted.new_zeros(())
        score = torch.where(mask, emitted, zero).sum(dim=1)  # Σ f(t_i | i)
        links = transitions[tags[:, :-1], tags[:, 1:]]  # (B, T-1): A_{t_{i-1} t_i}
        score = score + torch.where(mask[:, 1:], links, zero).sum(dim=1)
        length = mask.sum(dim=1)
        last = tags.gather(1, (length - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        ends = start[tags[:, 0]] + end[last]  # A_{0 t_1} + A_{t_n, end}
        return score + torch.where(length > 0, ends, zero)

    def forbidden_positions(self, tags: torch.LongTensor, mask: torch.Tensor) -> torch.Tensor:
        """``(batch, time)`` bool: True where ``tags`` makes a forbidden start or transition (e.g. ``O → I-PER``
        under BIO constraints; IOB1 data has these, IOB2 never)."""
        allowed_start, allowed = self.allowed_masks(tags.device)
        mask = mask.bool()
        order, moved, moved_mask = self._chain_first(tags, mask)
        ok = torch.cat([allowed_start[moved[:, :1]], allowed[moved[:, :-1], moved[:, 1:]]], dim=1)  # (B, T)
        forbidden = moved_mask & ~ok
        return torch.zeros_like(mask).scatter(1, order, forbidden)  # back to the original positions

    def neg_log_likelihood(self, emissions: torch.Tensor, tags: torch.LongTensor, mask: torch.Tensor) -> torch.Tensor:
        """``log Z - S(C, t^gold)`` per sequence: ``(batch,)``, zero for rows without positions."""
        return self.log_partition(emissions, mask) - self.path_score(emissions, tags, mask)

    def viterbi_decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> tuple[torch.LongTensor, torch.Tensor]:
        """The best tag sequence of each row.

        Returns:
            ``(tags, scores)``: ``tags`` ``(batch, time)`` with ``-100`` at masked positions, and the best
            path scores ``(batch,)``.
        """
        mask = mask.bool()
        alphas, pointers, seen = self._forward_scan(emissions, mask, use_max=True)
        final = alphas[:, -1] + self.scores()[2]  # (B, K)
        best_score, current = final.max(dim=1)
        tags = []
        for t in range(emissions.shape[1] - 1, -1, -1):  # back-pointers are the identity at masked positions
            tags.append(current)
            current = pointers[:, t].gather(1, current.unsqueeze(1)).squeeze(1)
        tags = torch.stack(tags[::-1], dim=1).masked_fill(~mask, -100)
        return tags, torch.where(seen, best_score, torch.zeros_like(best_score))

    def max_marginals(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``m_i(y)``: the score of the best sequence with tag ``y`` at position ``i``, ``(batch, time, K)``.

        ``m_i(y) = α^max_i(y) + β^max_i(y)``, where ``β^max_i(y)`` is the best score of the rest of the
        sequence after tag ``y`` at ``i`` (transitions, later emissions and the end score). The argmax
        over ``y`` is the Viterbi tag. Masked positions hold their ``emissions`` unchanged. Exported, the
        recursions run as a scan over time (:func:`recurrent_scan.max_marginals_scan`).
        """
        mask = mask.bool()
        if traced_as_scan(self):
            return max_marginals_scan(*self.scores(), emissions, mask)
        alphas, _, _ = self._forward_scan(emissions, mask, use_max=True)
        _, transitions, end = self.scores()
        beta = end.expand(emissions.shape[0], -1)  # (B, K): continuation after the last position
        betas = []
        for t in range(emissions.shape[1] - 1, -1, -1):
            betas.append(beta)
            # best continuation from each tag i of the previous position: max_j A_ij + f(j|t) + β_t(j)
            step = (transitions + (emissions[:, t] + beta).unsqueeze(1)).max(dim=2).values  # (B, K)
            beta = torch.where(mask[:, t].unsqueeze(1), step, beta)
        betas = torch.stack(betas[::-1], dim=1)  # (B, T, K)
        return torch.where(mask.unsqueeze(2), alphas + betas, emissions)

    def forward(self, emissions: torch.Tensor, tags: torch.LongTensor, mask: torch.Tensor) -> torch.Tensor:
        """The mean negative log-likelihood over the batch (a scalar)."""
        return self.neg_log_likelihood(emissions, tags, mask).mean()


__all__ = ["AUTO_CONSTRAINTS", "CRF_CONSTRAINTS", "IMPOSSIBLE", "LinearChainCRF", "bio_allowed_transitions",
           "labels_are_bio", "labels_are_unnamed", "resolve_constraints"]
