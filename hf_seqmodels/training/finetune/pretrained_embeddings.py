"""Start a model's input embeddings from word vectors (word2vec text format or a saved :class:`WordVectors`
folder), as fine-tuning's ``--pretrained_embeddings`` does for TextCNN (Kim 2014's static, non-static and
multichannel modes)."""

from __future__ import annotations

import logging
from pathlib import Path

from ...embeddings.keyed_vectors import WordVectors

logger = logging.getLogger(__name__)


def load_word_vectors(path: str | Path) -> WordVectors:
    """A :class:`WordVectors` folder (``WordVectors.save``) or a word2vec text file (``.txt``/``.vec``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"--pretrained_embeddings {path}: no such file or folder.")
    return WordVectors.load(path) if path.is_dir() else WordVectors.load_word2vec_format(path)


def check_embedding_source(model, pretrained_embeddings: str | None) -> None:
    """Refuse a model whose ``embedding_mode`` asks for pretrained vectors when none are given, and vectors
    for a model that cannot take them, before any training starts."""
    mode = getattr(model.config, "embedding_mode", None)
    if pretrained_embeddings is None:
        if mode not in (None, "rand"):
            raise ValueError(f"embedding_mode={mode!r} starts from pretrained word vectors: give "
                             f"--pretrained_embeddings, or use embedding_mode=rand for random embeddings.")
        return
    if not hasattr(model, "init_embeddings"):
        raise ValueError(f"--pretrained_embeddings: {type(model).__name__} cannot be initialised from word vectors "
                         f"(the textcnn family can).")


def initialise_embeddings(model, path: str | Path, tokenizer, seed: int = 0) -> float:
    """Copy the vectors of ``path`` into ``model`` (``model.init_embeddings``) for ``tokenizer``'s vocabulary;
    tokens without a vector get ``U(-init_range, init_range)`` rows. Returns the vocabulary coverage."""
    vectors = load_word_vectors(path)
    config = model.config
    if vectors.vector_size != config.embedding_size:
        raise ValueError(f"--pretrained_embeddings {path} holds {vectors.vector_size}-dimensional vectors but the "
                         f"model has embedding_size={config.embedding_size}: set embedding_size={vectors.vector_size} "
                         f"(--config_overrides).")
    vocab = tokenizer.get_vocab()
    matrix = vectors.embedding_matrix_for_vocab(vocab, init_range=getattr(config, "init_range", 0.25),
                                                padding_idx=tokenizer.pad_token_id, seed=seed)
    if matrix.shape[0] != config.vocab_size:
        raise ValueError(f"The tokenizer has {matrix.shape[0]} token ids but the model vocab_size={config.vocab_size}.")
    model.init_embeddings(matrix)
    coverage = vectors.vocab_coverage(vocab)
    logger.info("Input embeddings initialised from %s (%d-d, %.1f%% of the vocabulary found).", path,
                vectors.vector_size, 100 * coverage)
    return coverage


__all__ = ["check_embedding_source", "initialise_embeddings", "load_word_vectors"]
