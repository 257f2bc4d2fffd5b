"""Word embeddings trained without a neural language model (course notes 001): word2vec (CBOW and
skip-gram, negative sampling or hierarchical softmax), GloVe and the count-based SVD baseline.

* :mod:`.vocabulary` – the one vocabulary of all three (counts, ``min_count``, subsampling, noise);
* :mod:`.huffman` – the Huffman tree of hierarchical softmax;
* :mod:`.cooccurrence` – windowed co-occurrence counts (GloVe, SVD);
* :mod:`.word2vec`, :mod:`.glove`, :mod:`.svd` – the trainers;
* :mod:`.keyed_vectors` – :class:`WordVectors`, the one result type: queries, analogy accuracy,
  safetensors and word2vec-format export, initial input embeddings for our models.
"""

from .cooccurrence import CooccurrenceMatrix, count_cooccurrences
from .glove import GloVeConfig, GloVeTrainer, train_glove
from .huffman import HuffmanTree, build_huffman_tree
from .keyed_vectors import AnalogyResult, WordPairResult, WordVectors
from .svd import SVDConfig, train_svd
from .vocabulary import EncodedCorpus, Vocabulary
from .word2vec import Word2VecConfig, Word2VecTrainer, train_word2vec

__all__ = [
    "AnalogyResult",
    "CooccurrenceMatrix",
    "EncodedCorpus",
    "GloVeConfig",
    "GloVeTrainer",
    "HuffmanTree",
    "SVDConfig",
    "Vocabulary",
    "Word2VecConfig",
    "Word2VecTrainer",
    "WordPairResult",
    "WordVectors",
    "build_huffman_tree",
    "count_cooccurrences",
    "train_glove",
    "train_svd",
    "train_word2vec",
]
