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

Padding never changes a sentence's features: only windows made of real tokens (attention_mask 1) enter the
max. A sentence shorter than a filter gets one window: its tokens followed by zero vectors (the inputs are
padded inside the model, so no input is too short).
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
from .input_checks import check_input_ids, current_mask

ACTIVATIONS = {"relu": F.relu, "tanh": torch.tanh}


@dataclass
class TextCNNModelOutput(ModelOutput):
    """Output of :class:`TextCNNModel`.

    Args:
        pooler_output: ``(batch, len(filter_sizes) * num_filters)`` the max-pooled features ``z``, grouped by
            filter width in the order of ``config.filter_sizes``.
        feature_maps: when ``output_hidden_states``, one ``(batch, num_filters, windows)`` tensor ``c`` per
            filter width (before pooling; windows that are not pooled hold ``-inf``).
        hidden_states: when ``output_hidden_states``, ``(embeddings,)``: the ``(batch, time, embedding_size)``
            input of the filters (channels summed, padded positions zero).
    """

    pooler_output: torch.FloatTensor | None = None
    feature_maps: tuple[torch.FloatTensor, ...] | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


def pooled_windows(lengths_mask: torch.Tensor, width: int) -> torch.Tensor:
    """Which windows of ``width`` tokens enter the max-over-time pooling.

    Args:
        lengths_mask: ``(batch, time)`` bool, True at real tokens, already extended by at least
            ``width - 1`` False columns on the right.

    Returns:
        ``(batch, time - width + 1)`` bool: windows made only of real tokens; for a sentence shorter than
        ``width``, the single window that starts at its first token.
    """
    full = lengths_mask.unfold(1, width, 1).all(dim=-1)  # (B, W)
    lengths = lengths_mask.sum(dim=1)  # (B,)
    first = lengths_mask.int().argmax(dim=1)  # (B,) first real position (0 for an empty row)
    starts = torch.arange(full.shape[1], device=full.device)
    short = (lengths < width).unsqueeze(1) & (starts.unsqueeze(0) == first.unsqueeze(1))  # (B, W)
    return full | short


class TextCNNPreTrainedModel(PreTrainedModel):
    config_class = TextCNNConfig
    config: TextCNNConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _no_split_modules = []

    @torch.no_grad()
    def _init_weights(self, module):
        """Embeddings ``U(-init_range, init_range)`` (Kim's random vectors) with a zero padding row; filters and
        output layer ``N(0, initializer_range)``, zero biases."""
        if isinstance(module, nn.Embedding):
            init.uniform_(module.weight, -self.config.init_range, self.config.init_range)
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
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
            attention_mask: ``(batch, time)``, 0 at padding; padding never changes the output.
        """
        check_input_ids(input_ids, self.config.vocab_size)
        mask = current_mask(attention_mask, input_ids)
        real = torch.ones_like(input_ids, dtype=torch.bool) if mask is None else mask  # (B, T)
        embeddings = self.embed(input_ids) * real.unsqueeze(-1)  # (B, T, E), zero at padding
        extra = max(self.config.filter_sizes) - 1  # so every sentence has a window of every width
        x = F.pad(embeddings, (0, 0, 0, extra)).transpose(1, 2)  # (B, E, T + extra)
        real = F.pad(real, (0, extra))  # (B, T + extra)
        pooled, maps = [], []
        for width, conv in zip(self.config.filter_sizes, self.convs, strict=True):
            c = self.activation(conv(x))  # (B, F, T + extra - width + 1)
            c = c.masked_fill(~pooled_windows(real, width).unsqueeze(1), float("-inf"))
            pooled.append(c.max(dim=-1).values)  # (B, F)
            maps.append(c)
        return TextCNNModelOutput(
            pooler_output=torch.cat(pooled, dim=-1),  # (B, len(filter_sizes) * F)
            feature_maps=tuple(maps) if output_hidden_states else None,
            hidden_states=(embeddings,) if output_hidden_states else None,
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
        """Returns ``logits`` ``(batch, num_labels)`` (and ``loss`` when ``labels`` are given)."""
        out = self.model(input_ids, attention_mask=attention_mask, output_hidden_states=output_hidden_states)
        self.apply_max_norm()
        logits = self.classifier(self.dropout(out.pooler_output))  # (B, num_labels)
        loss = self.loss_function(labels, logits, self.config) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


__all__ = [
    "TextCNNForSequenceClassification",
    "TextCNNModel",
    "TextCNNModelOutput",
    "TextCNNPreTrainedModel",
]
