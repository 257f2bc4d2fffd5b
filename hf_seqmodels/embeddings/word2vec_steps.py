"""word2vec.c's stochastic-gradient steps, one prediction after another, compiled with numba.

:func:`train_run` walks a run of kept words (the centres of one chunk, in corpus order) exactly as word2vec.c's
training thread does: for each centre, skip-gram makes one prediction per context word (the context word's
input vector predicts the centre), CBOW one (the mean of the context words' input vectors predicts it), and each
prediction moves the output rows it scores and then the input rows it read. Everything random (subsampling,
the dynamic windows, the noise words) is drawn beforehand with array operations (:mod:`.word2vec`), so this loop
is deterministic given its arrays and does nothing but the arithmetic: per prediction, a dot product and two
``axpy`` updates per output row, over ``D``-float rows that stay in cache.

The compiled function releases the GIL (``nogil``): several Python threads train chunks at once on the shared
matrices without locks (Hogwild, as word2vec.c's and gensim's threads do). ``fastmath`` lets the compiler
vectorise the dot products' sums (their order of additions differs from a plain loop's by rounding only).
"""

from __future__ import annotations

import math

import numba
import numpy as np

MAX_EXP = 6.0  # word2vec.c: hierarchical-softmax nodes scored outside (-MAX_EXP, MAX_EXP) are not updated
SIGMOID_BINS = 1024
# sigma at SIGMOID_BINS + 1 points evenly spaced over [-MAX_EXP, MAX_EXP], read with linear interpolation by
# _sigmoid (as word2vec.c's expTable, which it reads without interpolation): error below 2e-6, and a quarter of
# the time of an exp call, which is a tenth of a step's
SIGMOID_TABLE = (1.0 / (1.0 + np.exp(-np.linspace(-MAX_EXP, MAX_EXP, SIGMOID_BINS + 1)))).astype(np.float32)


@numba.njit(nogil=True, fastmath=True, cache=True, inline="always")
def _sigmoid(f: float) -> float:
    """sigma(f) in float32: interpolated from SIGMOID_TABLE inside (-MAX_EXP, MAX_EXP), computed beyond."""
    if f <= -MAX_EXP or f >= MAX_EXP:
        return np.float32(1.0) / (np.float32(1.0) + np.exp(-f))
    x = (f + np.float32(MAX_EXP)) * np.float32(SIGMOID_BINS / (2 * MAX_EXP))
    k = min(int(x), SIGMOID_BINS - 1)  # x rounds to SIGMOID_BINS for f just below MAX_EXP
    return SIGMOID_TABLE[k] + (x - np.float32(k)) * (SIGMOID_TABLE[k + 1] - SIGMOID_TABLE[k])


@numba.njit(nogil=True, fastmath=True, cache=True)
def _logistic_step(h: np.ndarray, u: np.ndarray, label: float, lr: float, error: np.ndarray, clip: bool,
                   with_loss: bool) -> float:
    """One binary logistic prediction of ``label`` from ``h`` with output row ``u`` (both ``(D,)``):
    ``g = lr (label - sigma(u.h))``, ``error += g u``, ``u += g h``; with ``clip`` (hierarchical softmax) no step
    when ``|u.h| >= MAX_EXP``. Returns the prediction's loss ``-log sigma(+-u.h)`` when ``with_loss``, else 0."""
    f = np.float32(0.0)
    for d in range(h.shape[0]):
        f += h[d] * u[d]
    loss = 0.0
    if with_loss:
        z = f if label > 0.5 else -f  # -log sigma(z), computed stably
        loss = math.log1p(math.exp(-abs(z))) + max(-z, 0.0)
    if clip and (f <= -MAX_EXP or f >= MAX_EXP):
        return loss
    g = lr * (label - _sigmoid(f))  # float32 throughout
    for d in range(h.shape[0]):
        error[d] += g * u[d]
        u[d] += g * h[d]
    return loss


@numba.njit(nogil=True, fastmath=True, cache=True)
def _predict(h: np.ndarray, outputs: np.ndarray, word: int, lr: float, error: np.ndarray, noise: np.ndarray,
             path_nodes: np.ndarray, path_labels: np.ndarray, path_lengths: np.ndarray, hierarchical: bool,
             with_loss: bool) -> float:
    """The output-layer step of one prediction of ``word`` from ``h``: the nodes of its Huffman path
    (hierarchical softmax) or the word itself then each noise word in ``noise (K,)``, a noise word equal to the
    target skipped (negative sampling). Adds ``sum g u`` to ``error``; returns the summed loss."""
    loss = 0.0
    if hierarchical:
        for k in range(path_lengths[word]):
            loss += _logistic_step(h, outputs[path_nodes[word, k]], path_labels[word, k], lr, error, True, with_loss)
    else:
        loss += _logistic_step(h, outputs[word], np.float32(1.0), lr, error, False, with_loss)
        for k in range(noise.shape[0]):
            if noise[k] != word:
                loss += _logistic_step(h, outputs[noise[k]], np.float32(0.0), lr, error, False, with_loss)
    return loss


@numba.njit(nogil=True, fastmath=True, cache=True)
def train_run(inputs: np.ndarray, outputs: np.ndarray, ids: np.ndarray, lo: np.ndarray, counts: np.ndarray,
              rates: np.ndarray, noise: np.ndarray, path_nodes: np.ndarray, path_labels: np.ndarray,
              path_lengths: np.ndarray, skipgram: bool, hierarchical: bool, loss_centres: int) -> tuple[float, int]:
    """Train on the centres of one run of kept words, in order; returns the summed loss of the predictions of
    the first ``loss_centres`` centres and their number.

    ``inputs (V, D)`` and ``outputs (V or V - 1, D)`` float32, updated in place; ``ids (K,)`` the run's word ids;
    centre ``i``'s context is ``ids[i + lo[i] : i + lo[i] + counts[i] + 1]`` without ``ids[i]`` (``lo[i] <= 0``;
    ``counts[i] == 0``: no prediction); ``rates (K,)`` its learning rate; ``noise (P, negative)`` the noise words
    of the ``P`` predictions in order (skip-gram: one per (centre, context word) pair; CBOW: one per centre
    with context; unused, ``(0, 0)``, with hierarchical softmax); ``path_nodes (V, L)`` int32, ``path_labels
    (V, L)`` (``1 - d_j``) and ``path_lengths (V,)`` each word's Huffman path.
    """
    dim = inputs.shape[1]
    error = np.empty(dim, dtype=np.float32)
    mean = np.empty(dim, dtype=np.float32)
    none = np.empty(0, dtype=noise.dtype)
    loss, predictions, p = 0.0, 0, 0
    for i in range(ids.shape[0]):
        if counts[i] == 0:
            continue
        word, lr, with_loss = ids[i], rates[i], i < loss_centres
        start, stop = i + lo[i], i + lo[i] + counts[i] + 1
        if skipgram:  # each context word alone predicts the centre, then takes its error
            for j in range(start, stop):
                if j == i:
                    continue
                row = inputs[ids[j]]
                error[:] = 0.0
                loss += _predict(row, outputs, word, lr, error, none if hierarchical else noise[p], path_nodes,
                                 path_labels, path_lengths, hierarchical, with_loss)
                p += 1
                predictions += with_loss
                for d in range(dim):
                    row[d] += error[d]
        else:  # the mean of the context words predicts the centre; each of them takes the whole error
            mean[:] = 0.0
            for j in range(start, stop):
                if j != i:
                    row = inputs[ids[j]]
                    for d in range(dim):
                        mean[d] += row[d]
            scale = np.float32(1.0 / counts[i])
            for d in range(dim):
                mean[d] *= scale
            error[:] = 0.0
            loss += _predict(mean, outputs, word, lr, error, none if hierarchical else noise[p], path_nodes,
                             path_labels, path_lengths, hierarchical, with_loss)
            p += 1
            predictions += with_loss
            for j in range(start, stop):
                if j != i:
                    row = inputs[ids[j]]
                    for d in range(dim):
                        row[d] += error[d]
    return loss, predictions
