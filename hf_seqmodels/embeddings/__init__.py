"""Word embeddings trained without a neural language model: word2vec, GloVe and the count-based SVD
baseline (course notes 001), sharing one vocabulary (:mod:`.vocabulary`) and one result type,
:class:`WordVectors` (:mod:`.keyed_vectors`: queries, analogy accuracy, safetensors and word2vec-format
export, initial input embeddings for our models).
"""

from .keyed_vectors import AnalogyResult, WordVectors

__all__ = ["AnalogyResult", "WordVectors"]
