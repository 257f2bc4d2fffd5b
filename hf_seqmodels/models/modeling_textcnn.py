r"""TextCNN (Kim 2014): filters of several widths over word vectors, max-over-time pooling, dropout, softmax.

For a sentence ``x_1 … x_n`` (``x_i ∈ R^d``) and one filter ``w ∈ R^{h×d}`` of width ``h``
(course notes 001, "卷积神经网络详解"):

.. math::

    c_i = f(w \cdot x_{i:i+h-1} + b), \quad i = 1 … n-h+1  \qquad \text{(one feature per window)}

    \hat c = \max_i c_i  \qquad \text{(max-over-time pooling)}

    z = [\hat c^{(1)}; … ; \hat c^{(m)}], \quad y = W_{fc}\, \mathrm{Dropout}(z) + b_{fc}, \quad
    p = \mathrm{softmax}(y)

with ``m = len(filter_sizes) * num_filters`` filters and ``f`` = ReLU. In the multichannel mode each filter
sees a frozen and a fine-tuned copy of the vectors and the results are added:
``c_i = f(w·x^{static}_{i:i+h-1} + w·x^{tuned}_{i:i+h-1} + b) = f(w·(x^{static} + x^{tuned})_{i:i+h-1} + b)``.

**Masked positions are removed.** The sentence is the sequence of its real tokens (attention_mask 1), in
their order: the model moves them to the front of the row before embedding them, so padding on either side
never changes a result, and a 0 *between* real tokens removes that token (the output equals that of the
input without it). Only windows made of real tokens enter the max. A sentence shorter than a filter gets
one window: its tokens followed by zero vectors (the inputs are padded inside the model, so no input is too
short). A row without any real token gets that one window of zero vectors (its features are ``f(b)``).

**Layers.** TextCNN has one hidden layer, the convolution (all filter widths side by side):
``hidden_states = (embeddings, features)``, where ``embeddings`` ``(batch, time, embedding_size)`` is the
filter input and ``features`` ``(batch, time, len(filter_sizes) * num_filters)`` holds at position ``t`` the
``c_t`` of the window that starts at ``t``, for every width (grouped by width in the order of
``config.filter_sizes``), and 0 where that window is not pooled. Both are laid out over the real tokens
moved to the front. ``features`` is also ``last_hidden_state``, and ``pooler_output`` is its max over the
pooled windows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import ModelOutput, SequenceClassifierOutput
from transformers.utils.generic import can_return_tuple

from .configuration_textcnn import TextCNNConfig
from .input_checks import check_classification_labels, check_input_ids, current_mask
from .library_internals import is_hf_initialized
from .output_flags import output_flags, structured

ACTIVATIONS = {"relu": F.relu, "tanh": torch.tanh}


@dataclass
class TextCNNModelOutput(ModelOutput):
    """Output of :class:`TextCNNModel` (module docstring: what a position and a layer are).

    Args:
        last_hidden_state: ``(batch, time, len(filter_sizes) * num_filters)`` the convolution layer's features
            ``c_t`` of the window starting at each (real-token) position, 0 where that window is not pooled.
        pooler_output: ``(batch, len(filter_sizes) * num_filters)`` the max-pooled features ``z``, grouped by
            filter width in the order of ``config.filter_sizes``.
        feature_maps: when ``output_hidden_states``, one ``(batch, num_filters, time)`` view of
            ``last_hidden_state`` per filter width (the ``Conv1d`` layout).
        hidden_states: when ``output_hidden_states``, ``(embeddings, last_hidden_state)``: the
            ``(batch, time, embedding_size)`` filter input (channels summed, zero at masked positions) and the
            convolution layer's output. Tensors of the graph: ``retain_grad()`` works on them.
    """

    last_hidden_state: torch.FloatTensor | None = None
    pooler_output: torch.FloatTensor | None = None
    feature_maps: tuple[torch.FloatTensor, ...] | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


def real_tokens_first(input_ids: torch.LongTensor, mask: torch.Tensor) -> tuple[torch.LongTensor, torch.Tensor]:
    """Move each row's real tokens (``mask`` True) to the front, in their order: ``(ids, mask)`` ``(B, T)``,
    the mask now True on a prefix of every row. Masked positions anywhere (left, right, between tokens) are
    thereby removed from the sentence. The stable partition is scattered by counting (real token: its rank
    among the real ones; padding: after all of them), not sorted: ONNX has no stable sort."""
    real = mask.long()
    destination = torch.where(mask, real.cumsum(1) - 1, real.sum(1, keepdim=True) + (1 - real).cumsum(1) - 1)  # (B, T)
    return input_ids.scatter(1, destination, input_ids), mask.scatter(1, destination, mask)


def pooled_windows(lengths_mask: torch.Tensor, width: int) -> torch.Tensor:
    """Which windows of ``width`` tokens enter the max-over-time pooling.

    Args:
        lengths_mask: ``(batch, time)`` bool, True on a prefix of each row (the real tokens), extended by at
            least ``width - 1`` False columns on the right.

    Returns:
        ``(batch, time - width + 1)`` bool: windows made only of real tokens; for a sentence shorter than
        ``width`` (an empty one too), the single window that starts at position 0.
    """
    full = lengths_mask.unfold(1, width, 1).all(dim=-1)  # (B, W)
    short = lengths_mask.sum(dim=1, keepdim=True) < width  # (B, 1)
    first = torch.arange(full.shape[1], device=full.device) == 0  # (W,)
    return full | (short & first)


class TextCNNPreTrainedModel(PreTrainedModel):
    config_class = TextCNNConfig
    config: TextCNNConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _no_split_modules = []
    # one convolution layer, so there is nothing to recompute layer by layer: gradient_checkpointing_enable()
    # raises "... does not support activation checkpointing"
    supports_gradient_checkpointing = False
    _can_compile_fullgraph = True

    @torch.no_grad()
    def _init_weights(self, module):
        """Embeddings ``U(-init_range, init_range)`` (Kim's random vectors) with a zero padding row; filters and
        output layer ``N(0, initializer_range)``, zero biases."""
        if isinstance(module, nn.Embedding):
            init.uniform_(module.weight, -self.config.init_range, self.config.init_range)
            if module.padding_idx is not None and not is_hf_initialized(module.weight):
                init.zeros_(module.weight[module.padding_idx])
        else:
            super()._init_weights(module)

    def tie_weights(self, *args, **kwargs):
        """Nothing is tied; this runs at the end of ``from_pretrained``, which replaces every parameter by a new
        trainable one, so the frozen embedding tables are frozen again here."""
        super().tie_weights(*args, **kwargs)
        for module in self.modules():
            if isinstance(module, TextCNNModel):
                for table in module.frozen_embeddings():
                    table.weight.requires_grad_(False)

    def _resize_token_embeddings(self, new_num_tokens, pad_to_multiple_of=None, mean_resizing=True):
        """transformers' resizing of ``embed_tokens``, and the multichannel mode's frozen channel with it: its new
        rows start as copies of the tuned channel's new rows (both channels start from the same vectors)."""
        embeddings = super()._resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        static = self.base_model.static_embed_tokens
        if static is not None and static.num_embeddings != embeddings.num_embeddings:
            old_rows, new_rows = static.num_embeddings, embeddings.num_embeddings
            with torch.no_grad():
                weight = embeddings.weight.new_empty(new_rows, static.embedding_dim)
                keep = min(old_rows, new_rows)
                weight[:keep] = static.weight[:keep]
                weight[keep:] = embeddings.weight[keep:]
            static.weight = nn.Parameter(weight, requires_grad=False)
            static.num_embeddings = new_rows
        return embeddings


class TextCNNModel(TextCNNPreTrainedModel):
    """Embeddings (one or two channels), one ``Conv1d`` per filter width, max-over-time pooling.

    ``embed_tokens`` is the fine-tuned channel (frozen in the static mode); the multichannel mode adds the
    frozen ``static_embed_tokens``.
    """

    def __init__(self, config: TextCNNConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id)
        self.static_embed_tokens = (
            nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id)
            if config.embedding_mode == "multichannel" else None
        )
        self.convs = nn.ModuleList(
            nn.Conv1d(config.embedding_size, config.num_filters, kernel_size=width) for width in config.filter_sizes
        )
        self.activation = ACTIVATIONS[config.hidden_act]
        self.post_init()
        self.tie_weights()

    def frozen_embeddings(self) -> list[nn.Embedding]:
        """The embedding tables no optimizer may change: ``embed_tokens`` (static) or the static channel."""
        if self.config.embedding_mode == "static":
            return [self.embed_tokens]
        return [self.static_embed_tokens] if self.static_embed_tokens is not None else []

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    @torch.no_grad()
    def init_embeddings(self, weight: torch.Tensor) -> None:
        """Copy pretrained vectors ``weight`` ``(vocab_size, embedding_size)`` into every embedding channel.

        Row ``pad_token_id`` is set to zero. The mode decides what training does with them afterwards
        (static: frozen; non-static: fine-tuned; multichannel: one copy of each).
        """
        mode = self.config.embedding_mode
        if mode == "rand":
            raise ValueError("init_embeddings: embedding_mode='rand' means randomly initialised embeddings (CNN-rand);"
                             " use 'static', 'non-static' or 'multichannel' to start from pretrained vectors.")
        expected = (self.config.vocab_size, self.config.embedding_size)
        if tuple(weight.shape) != expected:
            raise ValueError(f"init_embeddings: `weight` has shape {tuple(weight.shape)}, expected (vocab_size, "
                             f"embedding_size) = {expected}.")
        for table in (self.embed_tokens, self.static_embed_tokens):
            if table is not None:
                table.weight.copy_(weight)
                if table.padding_idx is not None:
                    table.weight[table.padding_idx] = 0.0

    def embed(self, input_ids: torch.LongTensor) -> torch.Tensor:
        """``(batch, time, embedding_size)`` filter input: the channel(s) summed; frozen tables get no gradient."""
        tuned = self.embed_tokens(input_ids)
        if self.config.embedding_mode == "static":
            return tuned.detach()
        if self.static_embed_tokens is not None:
            return tuned + self.static_embed_tokens(input_ids).detach()
        return tuned

    def convolve(self, embeddings: torch.Tensor, real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The convolution layer over ``embeddings`` ``(B, T, E)`` whose real tokens ``real`` ``(B, T)`` form a
        prefix of each row.

        Returns:
            ``(features, pooled)``: ``features`` ``(B, T, len(filter_sizes) * F)``, ``c_t`` of the window starting
            at ``t`` (0 where that window is not pooled) and the pooling mask ``pooled`` of the same shape.
        """
        time = embeddings.shape[1]
        extra = max(self.config.filter_sizes) - 1  # so every sentence has a window of every width
        x = F.pad(embeddings, (0, 0, 0, extra)).transpose(1, 2)  # (B, E, T + extra)
        real = F.pad(real, (0, extra))  # (B, T + extra)
        maps, masks = [], []
        for width, conv in zip(self.config.filter_sizes, self.convs, strict=True):
            # every pooled window starts at a real token, so the first T windows hold all of them
            maps.append(self.activation(conv(x))[:, :, :time])  # (B, F, T)
            masks.append(pooled_windows(real, width)[:, :time].unsqueeze(1).expand_as(maps[-1]))  # (B, F, T)
        pooled = torch.cat(masks, dim=1).transpose(1, 2)  # (B, T, len(filter_sizes) * F)
        features = torch.cat(maps, dim=1).transpose(1, 2) * pooled  # (B, T, len(filter_sizes) * F)
        return features, pooled

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> TextCNNModelOutput:
        """
        Args:
            input_ids: ``(batch, time)`` token ids; any ``time >= 1`` (shorter than a filter is fine).
            attention_mask: ``(batch, time)``, 0 at positions that are not part of the sentence (padding on
                either side, or tokens to remove in between); they never change the output.
            output_hidden_states: return ``hidden_states`` and ``feature_maps`` (default:
                ``config.output_hidden_states``).
        """
        output_hidden_states, _ = output_flags(self.config, output_hidden_states)
        check_input_ids(input_ids, self.config.vocab_size)
        mask = current_mask(attention_mask, input_ids)
        if mask is None:
            real = torch.ones_like(input_ids, dtype=torch.bool)  # (B, T)
        else:
            input_ids, real = real_tokens_first(input_ids, mask)  # (B, T), real tokens first
        embeddings = self.embed(input_ids) * real.unsqueeze(-1)  # (B, T, E), zero at masked positions
        features, pooled = self.convolve(embeddings, real)  # (B, T, N)
        z = features.masked_fill(~pooled, float("-inf")).max(dim=1).values  # (B, N): every row pools a window
        maps = features.transpose(1, 2).split(self.config.num_filters, dim=1)  # per width (B, F, T)
        return TextCNNModelOutput(
            last_hidden_state=features,
            pooler_output=z,
            feature_maps=maps if output_hidden_states else None,
            hidden_states=(embeddings, features) if output_hidden_states else None,
        )


class TextCNNForSequenceClassification(TextCNNPreTrainedModel):
    """Sentence classifier: pooled features → dropout → linear → ``num_labels`` scores ``(batch, num_labels)``.

    Loss: cross-entropy for integer labels; MSE (regression) when ``num_labels == 1``; binary cross-entropy for
    float multi-hot labels (multi-label), or as ``config.problem_type`` says. With ``classifier_max_norm`` the
    output layer's class vectors are projected onto the ball ``||w||_2 <= s`` before each use (Kim's l2
    constraint, applied in place like ``nn.Embedding(max_norm=...)``), so a gradient step is always followed
    by the projection before the weights are used again.
    """

    accepts_loss_kwargs = False  # the loss is a per-sentence mean; Trainer must scale it itself

    def __init__(self, config: TextCNNConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = TextCNNModel(config)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.num_features, config.num_labels)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def init_embeddings(self, weight: torch.Tensor) -> None:
        """Start from pretrained word vectors: see :meth:`TextCNNModel.init_embeddings`."""
        self.model.init_embeddings(weight)

    @torch.no_grad()
    def apply_max_norm(self) -> None:
        """Rescale every row ``w`` of the output layer with ``||w||_2 > s`` to ``||w||_2 = s``."""
        if self.config.classifier_max_norm is not None:
            self.classifier.weight.renorm_(p=2, dim=0, maxnorm=self.config.classifier_max_norm)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput:
        """
        Args:
            labels: ``(batch,)`` class ids in ``[0, num_labels)`` (-100: no label), ``(batch,)`` or
                ``(batch, 1)`` floats for regression, ``(batch, num_labels)`` multi-hot floats for multi-label
                classification (``config.problem_type``, inferred as transformers does when unset).

        Returns:
            ``SequenceClassifierOutput``: ``logits`` ``(batch, num_labels)``, ``loss`` when ``labels`` are given,
            ``hidden_states`` as :class:`TextCNNModel`'s.
        """
        out = structured(self.model, input_ids, attention_mask=attention_mask,
                         output_hidden_states=output_hidden_states)
        self.apply_max_norm()
        logits = self.classifier(self.dropout(out.pooler_output))  # (B, num_labels)
        loss = None
        if labels is not None:
            check_classification_labels(labels, logits, self.config)
            loss = self.loss_function(labels, logits, self.config)
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


__all__ = [
    "TextCNNForSequenceClassification",
    "TextCNNModel",
    "TextCNNModelOutput",
    "TextCNNPreTrainedModel",
]
