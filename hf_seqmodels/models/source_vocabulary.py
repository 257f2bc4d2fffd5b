"""Separate source and target vocabularies of the encoder-decoders (RNN with attention, Transformer).

``config.vocab_size`` is the target vocabulary: the decoder's embeddings, the output layer and
``generate()`` use it. ``config.source_vocab_size`` is the encoder's vocabulary when the source has a
tokenizer of its own, or None when one vocabulary serves both sides (then the encoder uses ``vocab_size``).
Token ``i`` of the source and token ``i`` of the target are unrelated words with separate vocabularies,
so nothing may tie the encoder's embeddings to the decoder's.

This module is copied next to the model code by ``save_pretrained`` (remote code): it imports only siblings.
"""

from __future__ import annotations

from .config_utils import check_positive, invalid


def validate_source_vocabulary(config) -> None:
    """Config-time check: a positive ``source_vocab_size``, and none of the config's
    ``ENCODER_DECODER_TYING_FIELDS`` (the options that share encoder and decoder embeddings) switched on
    when the vocabularies are separate."""
    if config.source_vocab_size is None:
        return
    check_positive("source_vocab_size", config.source_vocab_size)
    for field in config.ENCODER_DECODER_TYING_FIELDS:
        if getattr(config, field):
            raise invalid(field, getattr(config, field),
                          f"False with separate source and target vocabularies (source_vocab_size="
                          f"{config.source_vocab_size}, vocab_size={config.vocab_size}): tying the encoder's "
                          f"embeddings to the decoder's needs one shared vocabulary (source_vocab_size=None)")


class SourceVocabularyMixin:
    """``resize_token_embeddings`` and ``resize_source_token_embeddings`` for an encoder-decoder with
    ``get_input_embeddings`` (the encoder's) and ``get_decoder_input_embeddings`` (the decoder's).

    * ``resize_token_embeddings(n)`` resizes the **target** vocabulary, ``config.vocab_size``: the decoder's
      embeddings and the output layer, and the encoder's embeddings too when the vocabulary is shared
      (``source_vocab_size=None``). It returns the decoder's embeddings.
    * ``resize_source_token_embeddings(n)`` resizes only the encoder's embeddings and sets
      ``config.source_vocab_size``; it needs separate vocabularies.
    """

    def _resize_token_embeddings(self, new_num_tokens, pad_to_multiple_of=None, mean_resizing=True):
        source, target = self.get_input_embeddings(), self.get_decoder_input_embeddings()
        new_target = self._get_resized_embeddings(target, new_num_tokens, pad_to_multiple_of, mean_resizing)
        size = new_target.num_embeddings
        if self.config.source_vocab_size is None:  # one vocabulary: the encoder follows
            shared = source is target
            self.set_input_embeddings(
                new_target if shared else self._get_resized_embeddings(source, size, mean_resizing=mean_resizing))
        self.set_decoder_input_embeddings(new_target)
        head = self.get_output_embeddings()
        if head is not None:
            self.set_output_embeddings(self._get_resized_lm_head(head, size, mean_resizing=mean_resizing))
        return new_target

    def resize_source_token_embeddings(self, new_num_tokens: int, pad_to_multiple_of: int | None = None,
                                       mean_resizing: bool = True):
        """Resize the encoder's embeddings to ``new_num_tokens`` rows and set ``config.source_vocab_size``."""
        if self.config.source_vocab_size is None:
            raise ValueError("resize_source_token_embeddings needs separate source and target vocabularies, but "
                             "config.source_vocab_size=None (one shared vocabulary): use resize_token_embeddings.")
        embeddings = self._get_resized_embeddings(self.get_input_embeddings(), new_num_tokens, pad_to_multiple_of,
                                                  mean_resizing)
        self.set_input_embeddings(embeddings)
        self.config.source_vocab_size = embeddings.num_embeddings
        return embeddings


__all__ = ["SourceVocabularyMixin", "validate_source_vocabulary"]
