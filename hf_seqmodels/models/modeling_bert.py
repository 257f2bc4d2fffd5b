"""BERT (Devlin et al. 2019): a bidirectional Transformer encoder pre-trained with a masked language model
and next-sentence prediction, and its fine-tuning heads.

* :class:`BertEmbeddings` – token + segment (A/B) + learned position embeddings, LayerNorm, dropout;
* :class:`BertEncoder` – ``L`` post-norm :class:`TransformerEncoderLayer` (the Transformer's layer, GELU);
* :class:`BertPooler` – :math:`\\tanh(W h_{[CLS]} + b)`, the sentence representation;
* heads: :class:`BertForPreTraining` (MLM + NSP), :class:`BertForMaskedLM`,
  :class:`BertForNextSentencePrediction`, :class:`BertForSequenceClassification`,
  :class:`BertForTokenClassification`, :class:`BertForQuestionAnswering`, :class:`BertForMultipleChoice`.

Inputs are ``[CLS] A [SEP] B [SEP]`` with ``token_type_ids`` 0 on ``[CLS] A [SEP]`` and 1 on ``B [SEP]``;
positions are ``0 .. T - 1`` (pad on the right). The weight names map one to one onto transformers'
``Bert*`` classes (``hf_seqmodels.convert_bert``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    NextSentencePredictorOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.processing_utils import Unpack
from transformers.utils import ModelOutput, TransformersKwargs
from transformers.utils.generic import can_return_tuple

from .configuration_bert import BertConfig
from .cross_entropy import summed_cross_entropy
from .feed_forward import Dropout
from .input_checks import (
    check_classification_labels,
    check_input_ids,
    check_labels,
    check_target_ids,
    current_mask,
    is_tracing,
    reads_values,
)
from .multi_head_attention import attention_implementation, bidirectional_mask
from .output_flags import output_flags, structured
from .positional_encoding import LearnedPositionalEmbedding
from .transformer_layers import TransformerEncoderLayer


class BertEmbeddings(nn.Module):
    r""":math:`\mathrm{Dropout}(\mathrm{LayerNorm}(E_{tok}[w] + E_{seg}[s] + E_{pos}[p]))`, ``(B, T)`` → ``(B, T, H)``."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = LearnedPositionalEmbedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)  # nn.Dropout with cheaper random draws on a CPU

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``input_ids`` ``(B, T)``, or ``inputs_embeds`` ``(B, T, H)`` in place of :math:`E_{tok}[w]`."""
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)  # (B, T, H)
        batch, length = inputs_embeds.shape[:2]
        if token_type_ids is None:  # one segment: sentence A
            token_type_ids = torch.zeros(batch, length, dtype=torch.long, device=inputs_embeds.device)
        x = inputs_embeds + self.token_type_embeddings(token_type_ids)  # (B, T, H)
        if position_ids is None and not is_tracing():  # 0 .. T - 1: one slice of the table, no ids to gather
            return self.dropout(self.layer_norm(x + self.position_embeddings.span(0, length)))
        if position_ids is None:
            position_ids = torch.arange(length, device=inputs_embeds.device)[None]  # (1, T)
        x = x + self.position_embeddings(position_ids)
        return self.dropout(self.layer_norm(x))


class BertEncoder(nn.Module):
    """``L`` bidirectional self-attention layers; padding keys are masked out of every attention."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(config, config.num_attention_heads, config.intermediate_size)
            for _ in range(config.num_hidden_layers)
        )

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, output_attentions: bool, output_hidden_states: bool,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutput:
        """``x`` ``(B, T, H)``, ``mask`` boolean ``(B, 1, 1, T)`` (True = may attend; or the attention
        implementation's format, see ``multi_head_attention``) or None → ``(B, T, H)``; ``L + 1`` states,
        ``L`` weights. ``kwargs`` go to the attention function."""
        hidden_states, attentions = [], []
        for layer in self.layers:
            hidden_states.append(x)
            x, weights = layer(x, attention_mask=mask, output_attentions=output_attentions, **kwargs)
            attentions.append(weights)
        return BaseModelOutput(
            last_hidden_state=x,
            hidden_states=(*hidden_states, x) if output_hidden_states else None,
            attentions=tuple(attentions) if output_attentions else None,
        )


class BertPooler(nn.Module):
    r""":math:`\tanh(W h_{[CLS]} + b)`: the first token's final state, ``(B, T, H)`` → ``(B, H)``."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden_states[:, 0]))


class BertMLMHead(nn.Module):
    r"""Masked-LM head: :math:`\mathrm{LayerNorm}(\mathrm{act}(h W_t + b_t)) E^\top + b`, ``(..., H)`` → ``(..., V)``.

    ``decoder.weight`` is tied to the token embeddings :math:`E`; ``decoder.bias`` is the output-only bias.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACT2FN[config.hidden_act]
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.layer_norm(self.activation(self.dense(hidden_states))))


class BertPreTrainedModel(PreTrainedModel):
    config_class = BertConfig
    config: BertConfig
    base_model_prefix = "bert"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    # attention goes through transformers' ALL_ATTENTION_FUNCTIONS with the masks masking_utils builds for each
    # implementation, and the forward's keyword arguments reach it
    _supports_sdpa = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    # not BertEmbeddings: accelerate's FSDP2 puts the word embeddings (tied to the MLM decoder) in a unit of
    # their own, which fails when a wrapped BertEmbeddings has already sharded them
    _no_split_modules = ["TransformerEncoderLayer"]
    # the Trainer scales the losses for gradient accumulation: most are batch means (the masked-LM loss also
    # takes ``num_items_in_batch`` when a caller passes it)
    accepts_loss_kwargs = False
    _can_compile_fullgraph = True  # value-reading input checks run in eager mode only

    def _init_weights(self, module: nn.Module) -> None:
        """transformers' BERT initialisation: N(0, initializer_range) weights, zero biases and padding row,
        LayerNorm (1, 0). The shared layers' ``AddNorm`` is a LayerNorm under another name, which the generic
        rule (by class name) would skip, leaving uninitialised memory after a meta-device build."""
        if isinstance(module, nn.LayerNorm):
            if module.weight is not None:
                init.ones_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        else:
            super()._init_weights(module)


def check_segments(token_type_ids: torch.Tensor, shape: torch.Size, type_vocab_size: int) -> None:
    """Shape check always; the range check reads values, so it runs only where :func:`reads_values`."""
    if token_type_ids.shape != shape:
        raise ValueError(f"`token_type_ids` must have the shape (batch, length) of the inputs {tuple(shape)}, "
                         f"got {tuple(token_type_ids.shape)}.")
    if not reads_values():
        return
    low, high = (int(v) for v in torch.aminmax(token_type_ids))
    if low < 0 or high >= type_vocab_size:
        raise ValueError(f"`token_type_ids` holds segment id {low if low < 0 else high}, outside "
                         f"[0, type_vocab_size={type_vocab_size}) (0 = sentence A, 1 = sentence B).")


def token_shape(input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, config: BertConfig) -> torch.Size:
    """``(B, T)`` of the one token input given: ``input_ids`` (checked against the vocabulary) or
    ``inputs_embeds`` ``(B, T, H)``."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("give exactly one of `input_ids` (B, T) and `inputs_embeds` (B, T, hidden_size), got "
                         + ("both" if input_ids is not None else "neither"))
    if input_ids is not None:
        check_input_ids(input_ids, config.vocab_size)
        return input_ids.shape
    if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != config.hidden_size:
        raise ValueError(f"`inputs_embeds` must have shape (batch, length, hidden_size={config.hidden_size}), "
                         f"got {tuple(inputs_embeds.shape)}")
    return inputs_embeds.shape[:2]


class BertModel(BertPreTrainedModel):
    """Embeddings, encoder and (``add_pooling_layer``) pooler; the base of every head."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPooling:
        """
        Args:
            input_ids: ``(B, T)``, at most ``max_position_embeddings`` tokens.
            attention_mask: ``(B, T)``, 1 for tokens, 0 for padding.
            token_type_ids: ``(B, T)`` segment ids in ``[0, type_vocab_size)`` (default: all 0).
            position_ids: ``(B | 1, T)`` (default: ``0 .. T - 1``).
            inputs_embeds: ``(B, T, H)`` token vectors in place of ``input_ids`` (exactly one of the two).
            kwargs: passed on to the attention function.

        Returns:
            ``last_hidden_state`` ``(B, T, H)``, ``pooler_output`` ``(B, H)`` (None without pooler),
            ``hidden_states`` (``L + 1`` × ``(B, T, H)``), ``attentions`` (``L`` × ``(B, A, T, T)``).
        """
        output_hidden_states, output_attentions = output_flags(self.config, output_hidden_states, output_attentions)
        shape = token_shape(input_ids, inputs_embeds, self.config)  # (B, T)
        if token_type_ids is not None:
            check_segments(token_type_ids, shape, self.config.type_vocab_size)
        tokens = input_ids if input_ids is not None else inputs_embeds[..., 0]  # only its shape (B, T) is read
        mask = current_mask(attention_mask, tokens)  # (B, T) bool, or None
        x = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)  # (B, T, H)
        implementation = attention_implementation(self.config, output_attentions)
        keys = bidirectional_mask(self.config, implementation, x, mask)  # e.g. (B, 1, 1, T) bool, or None
        out = self.encoder(x, keys, output_attentions, output_hidden_states, **kwargs)
        return BaseModelOutputWithPooling(
            last_hidden_state=out.last_hidden_state,
            pooler_output=self.pooler(out.last_hidden_state) if self.pooler is not None else None,
            hidden_states=out.hidden_states,
            attentions=out.attentions,
        )


def base_output(bert: BertModel, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                output_attentions, output_hidden_states, **kwargs) -> BaseModelOutputWithPooling:
    """What a head reads from its base model: the structured output whatever ``return_dict`` says (the tuple
    form is for the outermost call only); ``None`` flags fall back to the shared config. ``kwargs`` (the head's
    own) go on to the attention function."""
    return structured(bert, input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                      position_ids=position_ids, inputs_embeds=inputs_embeds, output_attentions=output_attentions,
                      output_hidden_states=output_hidden_states, **kwargs)


def masked_lm_logits_and_loss(
    head: BertMLMHead, hidden: torch.Tensor, labels: torch.Tensor | None, masked_only: bool,
    num_items_in_batch: torch.Tensor | int | None = None, positions: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Vocabulary logits and the mean cross-entropy over labels that are not ``-100`` (the sum divided by
    ``num_items_in_batch`` when given: the label count of a whole accumulated batch).

    ``masked_only`` (needs ``labels``) runs the head on the labelled positions only: logits
    ``(N, V)`` for the ``N`` labels ``!= -100`` in row-major order (``labels[labels != -100]``);
    otherwise ``(B, T, V)``. Either way the cross-entropy (in float32) is computed on the ``N`` labelled rows
    only, not on every position's logits: with 15 % of the tokens masked that skips the float32 copy, the
    log-softmax and its backward of 85 % of a ``(B, T, V)`` tensor (the same loss and gradients).

    ``positions`` ``(N',)`` (original BERT's ``masked_lm_positions``, flattened: indices into the ``B * T``
    row-major positions) names the rows instead: every labelled position, in any order, and optionally
    unlabelled ones (label ``-100``, no loss) that pad ``N'`` to a size that recurs. Logits ``(N', V)``. The
    rows are gathered, not found, so nothing is read back from the device and the shapes do not depend on the
    labels' values (a GPU step without a wait; one compiled graph per ``N'``).
    """
    if positions is not None and labels is None:
        raise ValueError("`masked_lm_positions` needs the masked-LM `labels`: the loss is read at those positions.")
    if labels is None:
        return head(hidden), None
    labels = labels.to(hidden.device)
    check_target_ids(labels, head.decoder.out_features)
    if positions is not None:
        flat_labels = labels.flatten()
        positions = check_masked_lm_positions(positions.to(hidden.device), flat_labels)
        logits = head(hidden.flatten(0, 1).index_select(0, positions))  # (N', V)
        flat_logits, flat_labels = logits, flat_labels.index_select(0, positions)
    elif masked_only:
        selected = labels != -100  # (B, T)
        logits = head(hidden[selected])  # (N, V)
        flat_logits, flat_labels = logits, labels[selected]
    else:
        logits = head(hidden)  # (B, T, V)
        flat_logits, flat_labels = logits.flatten(0, 1), labels.flatten()
        if reads_values():  # the loss reads the labelled rows only (a data-dependent shape: eager mode)
            selected = flat_labels != -100  # (B T,)
            flat_logits, flat_labels = flat_logits[selected], flat_labels[selected]  # (N, V), (N,)
    loss = summed_cross_entropy(flat_logits, flat_labels)
    count = (flat_labels != -100).sum() if num_items_in_batch is None else num_items_in_batch
    loss = loss / torch.as_tensor(count, device=loss.device)
    return logits, loss


def check_masked_lm_positions(positions: torch.Tensor, flat_labels: torch.Tensor) -> torch.Tensor:
    """``positions`` as :func:`masked_lm_logits_and_loss` takes them: a 1-D integer tensor (shape checks always);
    where :func:`reads_values`, each inside ``[0, B * T)``, none twice and every labelled position among them."""
    if positions.dim() != 1 or positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise ValueError(f"`masked_lm_positions` must be a 1-D tensor of integer positions (indices into the "
                         f"flattened (batch, length) labels), got shape {tuple(positions.shape)}, {positions.dtype}.")
    if reads_values() and positions.numel() > 0:
        size = flat_labels.numel()
        low, high = (int(v) for v in torch.aminmax(positions))
        if low < 0 or high >= size:
            raise ValueError(f"`masked_lm_positions` holds {low if low < 0 else high}, outside the {size} "
                             "positions of the labels (batch x length, row-major).")
        chosen = torch.zeros(size, dtype=torch.long, device=positions.device).index_add_(
            0, positions, torch.ones_like(positions))
        if bool((chosen > 1).any()):
            raise ValueError("`masked_lm_positions` names a position twice: its loss would count twice.")
        if bool(((flat_labels != -100) & (chosen == 0)).any()):
            raise ValueError("`masked_lm_positions` leaves out labelled positions (labels != -100): it must name "
                             "every one of them.")
    return positions


def resolve_masked_only(config: BertConfig, masked_positions_only: bool | None, labels) -> bool:
    if masked_positions_only and labels is None:
        raise ValueError("`masked_positions_only=True` needs masked-LM `labels`: they mark the masked positions.")
    if masked_positions_only is None:  # the config flag applies in training, when labels are given
        masked_positions_only = config.mlm_logits_at_masked_positions_only and labels is not None
    return masked_positions_only


@dataclass
class BertForPreTrainingOutput(ModelOutput):
    """Output of :class:`BertForPreTraining`.

    Args:
        loss: ``()`` masked-LM loss + next-sentence loss (the terms whose labels were given).
        mlm_loss: ``()`` mean cross-entropy over the masked positions.
        nsp_loss: ``()`` mean cross-entropy of the IsNext / NotNext decision.
        prediction_logits: ``(B, T, V)``, or ``(N, V)`` at the ``N`` masked positions (``labels != -100``,
            row-major) with ``masked_positions_only``, or ``(N', V)`` at ``masked_lm_positions``.
        seq_relationship_logits: ``(B, 2)``; class 0 = B follows A (IsNext), 1 = B is random (NotNext).
        hidden_states: ``L + 1`` × ``(B, T, H)``. attentions: ``L`` × ``(B, A, T, T)``.
    """

    loss: torch.Tensor | None = None
    prediction_logits: torch.Tensor | None = None
    seq_relationship_logits: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class BertForPreTraining(BertPreTrainedModel):
    """BERT's pre-training: masked-LM head on every position and next-sentence head on the pooled [CLS].

    ``masked_positions_only=True`` (or ``config.mlm_logits_at_masked_positions_only`` when ``labels`` are
    given) computes vocabulary logits only where ``labels != -100``: same loss, far less work.
    """

    _tied_weights_keys = {"mlm_head.decoder.weight": "bert.embeddings.word_embeddings.weight"}

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config)
        self.mlm_head = BertMLMHead(config)
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def get_output_embeddings(self):
        """The masked-LM decoder (tied to the word embeddings unless ``tie_word_embeddings=False``)."""
        return self.mlm_head.decoder

    def set_output_embeddings(self, new_embeddings):
        self.mlm_head.decoder = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        next_sentence_label: torch.LongTensor | None = None,
        masked_positions_only: bool | None = None,
        masked_lm_positions: torch.LongTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> BertForPreTrainingOutput:
        """``labels`` ``(B, T)``: original ids at masked positions, ``-100`` elsewhere; ``next_sentence_label``
        ``(B,)``: 0 IsNext, 1 NotNext; ``masked_lm_positions`` ``(N',)``: the flattened positions to predict, as
        original BERT's data gives them (see :func:`masked_lm_logits_and_loss`; a GPU step then waits for
        nothing). Other inputs as in :class:`BertModel`."""
        masked_only = resolve_masked_only(self.config, masked_positions_only, labels)
        out = base_output(self.bert, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                          output_attentions, output_hidden_states, **kwargs)
        prediction_logits, mlm_loss = masked_lm_logits_and_loss(self.mlm_head, out.last_hidden_state, labels,
                                                                masked_only, kwargs.get("num_items_in_batch"),
                                                                masked_lm_positions)
        seq_relationship_logits = self.nsp_head(out.pooler_output)  # (B, 2)
        nsp_loss = None
        if next_sentence_label is not None:
            target = next_sentence_label.view(-1).to(seq_relationship_logits.device)
            check_labels(target, seq_relationship_logits, name="next_sentence_label")
            nsp_loss = nn.functional.cross_entropy(seq_relationship_logits.float(), target)
        terms = [term for term in (mlm_loss, nsp_loss) if term is not None]
        return BertForPreTrainingOutput(
            loss=sum(terms) if terms else None, prediction_logits=prediction_logits,
            seq_relationship_logits=seq_relationship_logits, mlm_loss=mlm_loss, nsp_loss=nsp_loss,
            hidden_states=out.hidden_states, attentions=out.attentions,
        )


class BertForMaskedLM(BertPreTrainedModel):
    """The masked-LM head alone (no pooler): ``logits`` ``(B, T, V)``, or ``(N, V)`` at the labelled
    positions with ``masked_positions_only`` (see :class:`BertForPreTraining`). Used by ``fill-mask``.
    The loss is the mean over the labelled positions, or their sum over a ``num_items_in_batch`` keyword."""

    _tied_weights_keys = {"mlm_head.decoder.weight": "bert.embeddings.word_embeddings.weight"}

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.mlm_head = BertMLMHead(config)
        self.post_init()

    def get_output_embeddings(self):
        """The masked-LM decoder (tied to the word embeddings unless ``tie_word_embeddings=False``)."""
        return self.mlm_head.decoder

    def set_output_embeddings(self, new_embeddings):
        self.mlm_head.decoder = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        masked_positions_only: bool | None = None,
        masked_lm_positions: torch.LongTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> MaskedLMOutput:
        masked_only = resolve_masked_only(self.config, masked_positions_only, labels)
        out = base_output(self.bert, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                          output_attentions, output_hidden_states, **kwargs)
        logits, loss = masked_lm_logits_and_loss(self.mlm_head, out.last_hidden_state, labels, masked_only,
                                                 kwargs.get("num_items_in_batch"), masked_lm_positions)
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states, attentions=out.attentions)


class BertForNextSentencePrediction(BertPreTrainedModel):
    """IsNext (0) / NotNext (1) from the pooled [CLS]: ``logits`` ``(B, 2)``."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config)
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> NextSentencePredictorOutput:
        out = base_output(self.bert, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                          output_attentions, output_hidden_states, **kwargs)
        logits = self.nsp_head(out.pooler_output)  # (B, 2)
        loss = None
        if labels is not None:
            check_labels(labels.view(-1), logits)
            loss = nn.functional.cross_entropy(logits.float(), labels.view(-1).to(logits.device))
        return NextSentencePredictorOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                           attentions=out.attentions)


class BertClassifierBase(BertPreTrainedModel):
    """BERT, dropout (``classifier_dropout``, default ``hidden_dropout_prob``) and a linear layer
    ``H`` → ``num_outputs``; the body of the fine-tuning heads."""

    add_pooling_layer = True

    def __init__(self, config: BertConfig, num_outputs: int):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=self.add_pooling_layer)
        p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, num_outputs)
        self.post_init()


class BertForSequenceClassification(BertClassifierBase):
    """A label for a sentence or a sentence pair from the pooled [CLS]: ``logits`` ``(B, num_labels)``.

    Loss: cross-entropy for integer labels ``(B,)``; MSE (regression) when ``num_labels == 1``; binary
    cross-entropy for float multi-hot labels ``(B, num_labels)`` (multi-label), or as ``config.problem_type``.
    """

    def __init__(self, config: BertConfig):
        super().__init__(config, config.num_labels)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput:
        out = base_output(self.bert, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                          output_attentions, output_hidden_states, **kwargs)
        logits = self.classifier(self.dropout(out.pooler_output))  # (B, num_labels)
        check_classification_labels(labels, logits, self.config)
        loss = self.loss_function(labels, logits, self.config) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                        attentions=out.attentions)


class BertForTokenClassification(BertClassifierBase):
    """A label per token (tagging, NER): ``logits`` ``(B, T, num_labels)``; labels ``-100`` are ignored."""

    add_pooling_layer = False

    def __init__(self, config: BertConfig):
        super().__init__(config, config.num_labels)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> TokenClassifierOutput:
        out = base_output(self.bert, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                          output_attentions, output_hidden_states, **kwargs)
        logits = self.classifier(self.dropout(out.last_hidden_state))  # (B, T, num_labels)
        check_labels(labels, logits)
        loss = self.loss_function(logits, labels, self.config) if labels is not None else None
        return TokenClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                     attentions=out.attentions)


def span_loss(logits: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the answer boundary ``positions`` ``(B,)`` (or ``(B, 1)``) under ``logits`` ``(B, T)``.

    As transformers' BERT: positions are clamped to ``[0, T]`` and ``T`` (a position outside the input, e.g.
    an answer cut off by the window) is ignored. A batch where every position is ignored has loss 0 (with no
    gradient to the logits' values), not the NaN of an empty mean.
    """
    length = logits.shape[1]
    positions = positions.reshape(-1).to(logits.device).clamp(0, length)  # (B,); `length` = ignored
    total = nn.functional.cross_entropy(logits.float(), positions, ignore_index=length, reduction="sum")
    return total / (positions != length).sum().clamp(min=1)


class BertForQuestionAnswering(BertPreTrainedModel):
    r"""Extractive QA (SQuAD): :math:`P(\text{start} = i) = \mathrm{softmax}_i(S \cdot h_i)`, the same with
    :math:`E` for the end; input ``[CLS] question [SEP] context [SEP]``. ``start_logits``/``end_logits``
    ``(B, T)``; the loss is the mean of the start and end cross-entropies (positions outside the input
    are ignored)."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)  # the start vector S and the end vector E
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        start_positions: torch.LongTensor | None = None,
        end_positions: torch.LongTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> QuestionAnsweringModelOutput:
        out = base_output(self.bert, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                          output_attentions, output_hidden_states, **kwargs)
        start_logits, end_logits = self.qa_outputs(out.last_hidden_state).unbind(-1)  # (B, T) each
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = (span_loss(start_logits, start_positions) + span_loss(end_logits, end_positions)) / 2
        return QuestionAnsweringModelOutput(loss=loss, start_logits=start_logits.contiguous(),
                                            end_logits=end_logits.contiguous(), hidden_states=out.hidden_states,
                                            attentions=out.attentions)


class BertForMultipleChoice(BertClassifierBase):
    """Scores each of ``C`` choices (``[CLS] context [SEP] choice [SEP]``) with one linear map of its
    pooled [CLS]; inputs ``(B, C, T)``, ``logits`` ``(B, C)``, labels ``(B,)`` the right choice."""

    def __init__(self, config: BertConfig):
        super().__init__(config, 1)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> MultipleChoiceModelOutput:
        tokens = input_ids if input_ids is not None else inputs_embeds
        if tokens is None or tokens.dim() != (3 if input_ids is not None else 4):
            shape = None if tokens is None else tuple(tokens.shape)
            raise ValueError("multiple choice needs `input_ids` of shape (batch, choices, length) or `inputs_embeds` "
                             f"(batch, choices, length, hidden_size), got {shape}")
        num_choices = tokens.shape[1]

        def flat(t, dims=3):  # (B, C, T, ...) -> (B * C, T, ...)
            return t.flatten(0, 1) if t is not None and t.dim() == dims else t

        out = base_output(self.bert, flat(input_ids), flat(attention_mask), flat(token_type_ids),
                          flat(position_ids), flat(inputs_embeds, 4), output_attentions, output_hidden_states,
                          **kwargs)
        logits = self.classifier(self.dropout(out.pooler_output)).view(-1, num_choices)  # (B, C)
        loss = None
        if labels is not None:
            check_labels(labels.view(-1), logits)
            loss = nn.functional.cross_entropy(logits.float(), labels.view(-1).to(logits.device))
        return MultipleChoiceModelOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                         attentions=out.attentions)


__all__ = [
    "BertForMaskedLM",
    "BertForMultipleChoice",
    "BertForNextSentencePrediction",
    "BertForPreTraining",
    "BertForPreTrainingOutput",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "BertPreTrainedModel",
]
