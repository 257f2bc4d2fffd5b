"""The child-sum Tree-LSTM (Tai, Socher & Manning 2015), as in the course notes (Child-Sum Tree LSTM).

A node ``j`` with children ``C(j)`` reads its input ``x_j`` and its children's states::

    h̃_j  = Σ_{k ∈ C(j)} h_k
    i_j  = σ(W_i x_j + U_i h̃_j + b_i)
    f_jk = σ(W_f x_j + U_f h_k + b_f)            one forget gate per child k ∈ C(j)
    u_j  = tanh(W_u x_j + U_u h̃_j + b_u)          (the notes' c̃_j)
    o_j  = σ(W_o x_j + U_o h̃_j + b_o)
    c_j  = i_j ⊙ u_j + Σ_{k ∈ C(j)} f_jk ⊙ c_k
    h_j  = o_j ⊙ tanh(c_j)

A leaf has ``h̃_j = 0`` and no forget gate. On a chain (each node's only child is the previous word)
this is the sequential LSTM with the same weights. :class:`ChildSumTreeLSTM` runs a batch of trees
level by level, deepest nodes first: the nodes of one depth are one batched cell step, and their
``h_k`` and ``f_jk ⊙ c_k`` are scatter-added into their parents.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn


class ChildSumTreeLSTMCell(nn.Module):
    """The node update of the child-sum Tree-LSTM (module docstring).

    ``input_proj`` holds ``W_i, W_f, W_u, W_o`` and ``b`` (rows in that order, the order of
    ``nn.LSTM``'s ``i, f, g, o``), ``hidden_iuo`` holds ``U_i, U_u, U_o`` and ``hidden_f`` holds ``U_f``.
    """

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.input_proj = nn.Linear(input_size, 4 * hidden_size)  # W x + b for i, f, u, o
        self.hidden_iuo = nn.Linear(hidden_size, 3 * hidden_size, bias=False)  # U_i, U_u, U_o
        self.hidden_f = nn.Linear(hidden_size, hidden_size, bias=False)  # U_f

    def forget_gates(self, wx_f: torch.Tensor, child_h: torch.Tensor) -> torch.Tensor:
        """``f_jk = σ(W_f x_j + b_f + U_f h_k)`` from the parent's ``W_f x_j + b_f`` and the child's ``h_k``
        (matching leading shapes ``(..., hidden)``)."""
        return torch.sigmoid(wx_f + self.hidden_f(child_h))

    def node_state(
        self, wx: torch.Tensor, h_sum: torch.Tensor, fc_sum: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(h_j, c_j)`` from ``W x_j + b`` ``(n, 4H)``, ``h̃_j`` ``(n, H)`` and ``Σ_k f_jk ⊙ c_k`` ``(n, H)``."""
        wx_i, _, wx_u, wx_o = wx.chunk(4, dim=-1)
        uh_i, uh_u, uh_o = self.hidden_iuo(h_sum).chunk(3, dim=-1)
        i = torch.sigmoid(wx_i + uh_i)
        u = torch.tanh(wx_u + uh_u)
        o = torch.sigmoid(wx_o + uh_o)
        c = i * u + fc_sum
        return o * torch.tanh(c), c

    def forward(
        self,
        x: torch.Tensor,
        child_h: torch.Tensor,
        child_c: torch.Tensor,
        child_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Update ``n`` nodes from their children, given padded to ``K`` per node.

        Args:
            x: ``(n, input_size)``; child_h, child_c: ``(n, K, hidden)``.
            child_mask: ``(n, K)`` bool, True at real children (None: all real; ``K = 0`` for leaves).

        Returns:
            ``(h_j, c_j)``, each ``(n, hidden)``.
        """
        wx = self.input_proj(x)  # (n, 4H)
        keep = child_h.new_ones(child_h.shape[:2]) if child_mask is None else child_mask.to(child_h.dtype)
        keep = keep.unsqueeze(-1)  # (n, K, 1)
        wx_f = wx[:, self.hidden_size : 2 * self.hidden_size].unsqueeze(1)  # (n, 1, H)
        f = self.forget_gates(wx_f, child_h)  # (n, K, H)
        return self.node_state(wx, (child_h * keep).sum(dim=1), (f * child_c * keep).sum(dim=1))


class TreeLSTMOutput(NamedTuple):
    """Output of :class:`ChildSumTreeLSTM`: per-node ``h``/``c`` ``(batch, num_nodes, hidden)`` (zero at
    padded nodes) and the root's ``root_h``/``root_c`` ``(batch, hidden)``."""

    h: torch.Tensor
    c: torch.Tensor
    root_h: torch.Tensor
    root_c: torch.Tensor


class ChildSumTreeLSTM(nn.Module):
    """Runs :class:`ChildSumTreeLSTMCell` over a batch of trees given by parent pointers.

    Tree ``b`` has nodes ``0 .. num_nodes - 1``; ``parents[b, n]`` is the index of node ``n``'s parent
    in the same tree, ``-1`` for the one root. Nodes may come in any order (e.g. word order for a
    dependency tree). All nodes of one depth, over the whole batch, are updated by one cell call.
    """

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.cell = ChildSumTreeLSTMCell(input_size, hidden_size)

    def forward(
        self, inputs: torch.Tensor, parents: torch.Tensor, node_mask: torch.Tensor | None = None
    ) -> TreeLSTMOutput:
        """
        Args:
            inputs: ``(batch, num_nodes, input_size)`` node inputs ``x_j`` (e.g. word embeddings).
            parents: ``(batch, num_nodes)`` long, parent index or ``-1`` at the root.
            node_mask: ``(batch, num_nodes)`` bool, True at real nodes (trees of different sizes
                padded to one ``num_nodes``); None: all nodes are real.
        """
        batch, num_nodes, _ = inputs.shape
        if node_mask is None:
            node_mask = torch.ones(batch, num_nodes, dtype=torch.bool, device=inputs.device)
        node_mask = node_mask.to(device=inputs.device, dtype=torch.bool)
        parents = parents.to(inputs.device)
        depth = tree_depths(parents, node_mask)  # (B, N), -1 at padding
        # flatten the batch: node n of tree b is row b * N + n
        flat_depth = depth.flatten()
        flat_parent = torch.where(parents >= 0, parents + num_nodes * torch.arange(batch, device=inputs.device)[:, None],
                                  -1).flatten()
        wx = self.cell.input_proj(inputs.flatten(0, 1))  # (B*N, 4H)
        wx_f = wx[:, self.hidden_size : 2 * self.hidden_size]
        h_sum = wx.new_zeros(batch * num_nodes, self.hidden_size)  # Σ_k h_k per parent
        fc_sum = wx.new_zeros(batch * num_nodes, self.hidden_size)  # Σ_k f_jk ⊙ c_k per parent
        done_nodes, done_h, done_c = [], [], []
        for level in range(int(flat_depth.max()), -1, -1):
            nodes = (flat_depth == level).nonzero().squeeze(1)  # (n,)
            h, c = self.cell.node_state(wx[nodes], h_sum[nodes], fc_sum[nodes])  # (n, H) each
            if level > 0:
                parent = flat_parent[nodes]
                f = self.cell.forget_gates(wx_f[parent], h)  # f_jk for every child k of this level
                h_sum = h_sum.index_add(0, parent, h)
                fc_sum = fc_sum.index_add(0, parent, f * c)
            done_nodes.append(nodes)
            done_h.append(h)
            done_c.append(c)
        order = torch.cat(done_nodes)
        h_all = wx.new_zeros(batch * num_nodes, self.hidden_size).index_copy(0, order, torch.cat(done_h))
        c_all = wx.new_zeros(batch * num_nodes, self.hidden_size).index_copy(0, order, torch.cat(done_c))
        h_all, c_all = h_all.view(batch, num_nodes, -1), c_all.view(batch, num_nodes, -1)
        root = (depth == 0).float().argmax(dim=1)  # (B,)
        rows = torch.arange(batch, device=inputs.device)
        return TreeLSTMOutput(h_all, c_all, h_all[rows, root], c_all[rows, root])


def tree_depths(parents: torch.Tensor, node_mask: torch.Tensor) -> torch.Tensor:
    """Depth of every node (root 0) of trees given by parent pointers; ``-1`` at padded nodes.

    Raises ValueError unless every tree has exactly one root, every real node's parent is a real node
    of its tree, and the parent pointers have no cycle.
    """
    batch, num_nodes = parents.shape
    real_parents = parents[node_mask]
    if bool(((real_parents < -1) | (real_parents >= num_nodes)).any()):
        raise ValueError(f"`parents` must hold node indices in [0, {num_nodes}) or -1 for the root, got "
                         f"{sorted(set(real_parents.tolist()))}.")
    roots = ((parents == -1) & node_mask).sum(dim=1)
    if bool((roots != 1).any()):
        raise ValueError(f"Every tree needs exactly one root (parent -1); root counts per tree: {roots.tolist()}.")
    safe = parents.clamp(min=0)
    if bool((node_mask & (parents >= 0) & ~node_mask.gather(1, safe)).any()):
        raise ValueError("A real node's parent is a padded node (`node_mask` False).")
    is_root = (parents == -1) | ~node_mask  # padded nodes take no part
    depth = torch.zeros_like(parents)
    for _ in range(num_nodes):  # depth(n) = depth(parent(n)) + 1: correct up to depth k after k rounds
        new = torch.where(is_root, 0, depth.gather(1, safe) + 1)
        if torch.equal(new, depth):
            break
        depth = new
    else:
        raise ValueError("`parents` contains a cycle: some nodes never reach the root.")
    return torch.where(node_mask, depth, -1)


__all__ = ["ChildSumTreeLSTM", "ChildSumTreeLSTMCell", "TreeLSTMOutput", "tree_depths"]
