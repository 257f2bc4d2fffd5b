"""BiLSTM-CRF tagger (Huang et al. 2015; Lample et al. 2016), the course notes' "RNN + CRF".

Layers, bottom to top (course notes, sequence labelling):

1. word representation ``x_t = [e_word(w_t) ; c(w_t)]``: the word embedding, optionally concatenated
   with a character-level encoding (:mod:`char_encoder`), then dropout;
2. the package's :class:`RecurrentStack`, bidirectional: ``h_t = [h→_t ; h←_t]``;
3. dropout and a linear layer to the emission scores ``f(y | t) = W h_t + b`` (one per tag);
4. the tag-inference layer: a :class:`LinearChainCRF` (forward algorithm for the loss, Viterbi for
   decoding); with ``use_crf=False`` a per-token softmax instead.

**Which positions the CRF sees.** The CRF chain links consecutive *tagged* positions:

* with ``labels``, the positions whose label is not ``-100``. Special tokens and the continuation
  sub-tokens of a word carry ``-100`` (see ``training/token_classification_data.py``), so they are
  masked out of the chain: a transition goes from one labelled word straight to the next, and the
  loss is the exact CRF negative log-likelihood of the word-level tag sequence;
* without labels (e.g. the pipeline), the positions whose ``attention_mask`` is 1 and whose token is
  not in ``config.untagged_token_ids`` (the special tokens). With a word-level tokenizer (one token
  per word, as in Lample et al.) both rules pick the same positions. With a sub-word tokenizer the
  continuation pieces are in the chain at prediction time but not in training; train with
  ``label_all_subwords`` (every piece labelled) to keep the two the same.

**Logits.** ``logits`` are the CRF's max-marginals (``LinearChainCRF.max_marginals``): at every chain
position the argmax is the Viterbi tag, so the token-classification pipeline and ``Trainer`` metrics,
which take a per-token argmax, decode with Viterbi. Positions outside the chain hold the emission
scores. ``decode()`` returns the Viterbi tags directly.

**The transformers contract.** ``hidden_states`` are the word representations (after dropout) and the
outputs of every recurrent layer; ``output_hidden_states`` and ``return_dict`` come from the config unless
given; ``resize_token_embeddings`` resizes the per-token character table too (new tokens have no characters
until ``bind_tokenizer``); activation checkpointing (re-entrant or not) recomputes the recurrent stacks.
Labels are checked (shape, tag ids in ``[0, num_labels)`` or -100, BIO validity) in eager mode; under
``torch.compile`` the value checks are skipped, the CRF traces as one graph, and the graph breaks are
those of the recurrent stack (the fused LSTM kernel and ``pack_padded_sequence`` with a padding mask).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutput, TokenClassifierOutput
from transformers.utils.generic import can_return_tuple

from .char_encoder import fill_char_tables
from .configuration_bilstm_crf import BiLSTMCRFConfig
from .crf import LinearChainCRF
from .input_checks import check_labels, reads_values
from .modeling_rnn import RNNModel, RNNPreTrainedModel
from .output_flags import structured

IGNORE_INDEX = -100


class BiLSTMCRFPreTrainedModel(RNNPreTrainedModel):
    """The recurrent family's initialisation (uniform in ``[-init_range, init_range]``, biases of linear
    layers 0) under this family's config; the CRF's scores start at 0."""

    config_class = BiLSTMCRFConfig
    config: BiLSTMCRFConfig

    @torch.no_grad()
    def _init_weights(self, module):
        if isinstance(module, LinearChainCRF):
            for param in module.parameters(recurse=False):
                init.zeros_(param)
        else:
            super()._init_weights(module)

    def bind_tokenizer(self, tokenizer) -> None:
        """Copy what the model needs to know about its tokenizer: the characters of every token (for the
        character encoder) and the special-token ids, which are never tagged (``<unk>`` is a word)."""
        self.config.untagged_token_ids = sorted(set(tokenizer.all_special_ids) - {tokenizer.unk_token_id})
        fill_char_tables(self, tokenizer)


class BiLSTMCRFModel(RNNModel):
    """Word (and character) representations and the bidirectional recurrent stack: the recurrent family's
    body (:class:`modeling_rnn.RNNModel`) under this family's config, without a generation state."""

    config_class = BiLSTMCRFConfig
    config: BiLSTMCRFConfig

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        char_input_ids: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        """
        Args:
            input_ids: ``(batch, time)`` token ids (or ``inputs_embeds`` ``(batch, time, embedding_size)``;
                with a character encoder, ``char_input_ids`` then too).
            attention_mask: ``(batch, time)``, 0 at padding (which never changes the outputs of real tokens).
            char_input_ids: ``(batch, time, max_word_length)`` character ids of each word
                (:func:`char_encoder.words_to_char_ids`); default: looked up from the token ids.
            output_hidden_states: return the stack's input and every recurrent layer's outputs (default:
                ``config.output_hidden_states``).

        Returns:
            ``BaseModelOutput`` with ``last_hidden_state`` ``(batch, time, D * hidden_size)`` and, with
            ``output_hidden_states``, ``hidden_states``: the word representations ``(batch, time, embedding_size
            [+ char size])`` (after dropout), then the outputs of each of the ``num_hidden_layers`` layers
            ``(batch, time, D * hidden_size)``, tensors of the graph.
        """
        shape = input_ids.shape if input_ids is not None else None
        if char_input_ids is not None and shape is not None and char_input_ids.shape[:2] != shape:
            raise ValueError(f"`char_input_ids` must have shape (batch, time, max_word_length) with (batch, time) = "
                             f"{tuple(shape)} of input_ids, got {tuple(char_input_ids.shape)}.")
        out = structured(super().forward, input_ids, attention_mask, use_cache=False,
                         output_hidden_states=output_hidden_states, char_input_ids=char_input_ids,
                         inputs_embeds=inputs_embeds)
        return BaseModelOutput(last_hidden_state=out.last_hidden_state, hidden_states=out.hidden_states)


class BiLSTMCRFForTokenClassification(BiLSTMCRFPreTrainedModel):
    """BiLSTM emissions + CRF: the loss is the CRF negative log-likelihood (mean over sentences), the
    ``logits`` the max-marginals whose per-token argmax is the Viterbi path (module docstring)."""

    accepts_loss_kwargs = False  # the loss is a per-sentence mean; Trainer must scale it itself

    def __init__(self, config: BiLSTMCRFConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = BiLSTMCRFModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(self.model.encoder.output_size, config.num_labels)
        self.crf = LinearChainCRF(config.num_labels, config.id2label, config.crf_constraints) if config.use_crf else None
        self.post_init()

    def chain_mask(self, input_ids, attention_mask=None, labels=None, shape=None) -> torch.Tensor:
        """``(batch, time)`` bool: the positions the CRF links (labelled ones, else tagged real tokens).
        Without ``input_ids`` (``inputs_embeds`` given) every real token is tagged; ``shape`` is then
        ``(batch, time)``."""
        if attention_mask is not None:
            mask = attention_mask[:, -(shape or input_ids.shape)[1]:].bool()
        elif input_ids is not None:
            mask = torch.ones_like(input_ids, dtype=torch.bool)
        else:
            mask = torch.ones(shape, dtype=torch.bool, device=labels.device if labels is not None else None)
        if labels is not None:
            return mask & (labels != IGNORE_INDEX)
        if input_ids is None:
            return mask
        untagged = torch.tensor(self.config.untagged_ids(), dtype=input_ids.dtype, device=input_ids.device)
        return mask & ~(input_ids.unsqueeze(-1) == untagged).any(-1)  # isin without searchsorted (ONNX has none)

    def emissions(self, input_ids, attention_mask=None, char_input_ids=None, output_hidden_states=None,
                  inputs_embeds=None):
        """``(emission scores (batch, time, num_labels), encoder output)``; the encoder output is structured
        whatever ``return_dict`` the user asked for."""
        out = structured(self.model, input_ids, attention_mask=attention_mask, char_input_ids=char_input_ids,
                         output_hidden_states=output_hidden_states, inputs_embeds=inputs_embeds)
        return self.classifier(self.dropout(out.last_hidden_state)), out  # (B, T, K)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        char_input_ids: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        **kwargs,
    ) -> TokenClassifierOutput:
        """
        Args:
            labels: ``(batch, time)`` tag ids in ``[0, num_labels)``, ``-100`` at positions without a tag
                (special tokens, continuation sub-tokens, padding): they are left out of the CRF chain.

        Returns:
            ``TokenClassifierOutput``: ``loss`` (CRF NLL, mean over sentences; token cross-entropy with
            ``use_crf=False``), ``logits`` ``(batch, time, num_labels)`` (max-marginals; the emission
            scores with ``use_crf=False``) and ``hidden_states`` as :class:`BiLSTMCRFModel`'s.
        """
        emissions, out = self.emissions(input_ids, attention_mask, char_input_ids, output_hidden_states, inputs_embeds)
        if labels is not None:
            check_tag_ids(labels, emissions)
        if self.crf is None:
            loss = self.loss_function(emissions, labels, self.config) if labels is not None else None
            return TokenClassifierOutput(loss=loss, logits=emissions, hidden_states=out.hidden_states)
        mask = self.chain_mask(input_ids, attention_mask, labels, shape=emissions.shape[:2])
        loss = None
        if labels is not None:
            self.check_labels(labels, mask)
            loss = self.crf(emissions, labels, mask)
        logits = self.crf.max_marginals(emissions, mask)
        return TokenClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)

    def check_labels(self, labels: torch.LongTensor, mask: torch.Tensor) -> None:
        """Refuse gold tag sequences the CRF's constraints forbid: their loss would be about 10^4 (the
        :data:`crf.IMPOSSIBLE` score) and swamp training. Eager mode only (it reads tensor values)."""
        if self.crf.constraints is None or not reads_values():
            return
        forbidden = self.crf.forbidden_positions(labels, mask)
        if bool(forbidden.any()):
            row, t = (int(i) for i in forbidden.nonzero()[0])
            kept = labels[row][mask[row]].tolist()
            tags = [self.config.id2label[i] for i in kept]
            raise ValueError(
                f"labels of row {row} are not valid BIO at position {t} ({tags}): 'I-X' must follow 'B-X' or "
                "'I-X' and cannot start a sentence. Convert IOB1 data to IOB2 (an entity starts with 'B-'), "
                "or set crf_constraints=None."
            )

    @torch.no_grad()
    def decode(self, input_ids, attention_mask=None, char_input_ids=None) -> torch.LongTensor:
        """Viterbi tag ids ``(batch, time)``, ``-100`` outside the chain (padding and untagged tokens);
        per-token argmax with ``use_crf=False``."""
        emissions, _ = self.emissions(input_ids, attention_mask, char_input_ids)
        mask = self.chain_mask(input_ids, attention_mask)
        if self.crf is None:
            return emissions.argmax(-1).masked_fill(~mask, IGNORE_INDEX)
        return self.crf.viterbi_decode(emissions, mask)[0]


def check_tag_ids(labels: torch.Tensor, emissions: torch.Tensor) -> None:
    """``labels`` must be integer tag ids ``(batch, time)`` like the input, each in ``[0, num_labels)`` or -100
    (:func:`check_labels`; the value check runs in eager mode only)."""
    if labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise ValueError(f"`labels` must hold integer tag ids, got dtype {labels.dtype}.")
    check_labels(labels, emissions)


__all__ = ["BiLSTMCRFForTokenClassification", "BiLSTMCRFModel", "BiLSTMCRFPreTrainedModel"]
