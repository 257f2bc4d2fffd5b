"""The Huffman tree of hierarchical softmax (Mikolov et al. 2013; course notes 001, §9).

The ``V`` words are the leaves; the ``V - 1`` inner nodes each hold an output vector
:math:`u_n`. A word's *path* is the list of inner nodes from the root to its leaf and its *code*
the list of turns (bit :math:`d_k \\in \\{0, 1\\}`) taken at each of them, so that

.. math::  P(w \\mid h) = \\prod_k \\sigma\\big((1 - 2 d_k)\\, u_{n_k}^\\top h\\big),

one binary logistic decision per node: :math:`O(\\log V)` instead of :math:`O(V)`. Merging the two
lightest subtrees first gives frequent words the short codes.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from itertools import count as counter

import numpy as np
import torch

from ..models.config_utils import invalid


@dataclass
class HuffmanTree:
    """Codes and inner-node paths of every word.

    ``codes[w]`` and ``points[w]`` have the same length (the word's depth); inner nodes are
    numbered ``0 .. V-2`` with the root last (``V - 2``).
    """

    codes: list[list[int]]
    points: list[list[int]]

    @property
    def num_inner_nodes(self) -> int:
        return len(self.codes) - 1

    def padded(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per word, padded to the deepest leaf ``L``: ``points (V, L)`` long, ``codes (V, L)`` float
        and ``mask (V, L)`` float (1 on real path entries, 0 on padding)."""
        depth = max(len(c) for c in self.codes)
        points = torch.zeros(len(self.codes), depth, dtype=torch.long)
        codes = torch.zeros(len(self.codes), depth)
        mask = torch.zeros(len(self.codes), depth)
        for w, (code, point) in enumerate(zip(self.codes, self.points, strict=True)):
            points[w, : len(point)] = torch.tensor(point, dtype=torch.long)
            codes[w, : len(code)] = torch.tensor(code, dtype=torch.float32)
            mask[w, : len(code)] = 1.0
        return points, codes, mask


def build_huffman_tree(counts: np.ndarray | list[int]) -> HuffmanTree:
    """Huffman tree over word ``counts`` (``counts[w]`` for word id ``w``); needs at least 2 words.

    At each merge the lighter subtree gets bit 0 and the heavier bit 1 (ties broken by creation
    order, so the result is deterministic).
    """
    counts = [int(c) for c in counts]
    if len(counts) < 2:
        raise invalid("counts", counts, "counts of at least 2 words (a tree needs one decision)")
    if min(counts) < 0:
        raise invalid("counts", min(counts), "non-negative word counts")
    vocab_size = len(counts)
    tie = counter()
    heap = [(c, next(tie), w) for w, c in enumerate(counts)]  # node ids: words 0..V-1, inner V..2V-2
    heapq.heapify(heap)
    parent = [0] * (2 * vocab_size - 1)
    bit = [0] * (2 * vocab_size - 1)
    next_node = vocab_size
    while len(heap) > 1:
        c0, _, n0 = heapq.heappop(heap)
        c1, _, n1 = heapq.heappop(heap)
        parent[n0], bit[n0] = next_node, 0
        parent[n1], bit[n1] = next_node, 1
        heapq.heappush(heap, (c0 + c1, next(tie), next_node))
        next_node += 1
    root = 2 * vocab_size - 2
    codes, points = [], []
    for w in range(vocab_size):
        code, point, node = [], [], w
        while node != root:
            code.append(bit[node])
            node = parent[node]
            point.append(node - vocab_size)  # inner node index 0..V-2
        codes.append(code[::-1])
        points.append(point[::-1])
    return HuffmanTree(codes=codes, points=points)
