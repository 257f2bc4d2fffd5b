"""Character-level word representations, concatenated with the word embeddings.

Course notes (LSTM applications, "character-level word embeddings"): the characters of each word go
through a character encoder that picks up prefixes, suffixes and capitalisation, and its output is
concatenated with the word's own embedding before the sentence-level LSTM::

    x_t = [ e_word(w_t) ; c(w_t) ]

Two encoders of the characters ``ch_1 .. ch_L`` of a word (embedded as ``u_1 .. u_L``):

* ``"cnn"`` (Ma & Hovy 2016): a convolution of width ``k`` over the character embeddings, then the
  maximum over the characters: ``c_f = max_l (W_f · [u_{l-k/2} .. u_{l+k/2}] + b_f)``, one value per
  filter ``f`` (``char_hidden_size`` filters);
* ``"lstm"`` (Lample et al. 2016): a bidirectional LSTM (the package's :class:`RecurrentStack`) over the
  characters; ``c = [h→_L ; h←_1]``, the final states of both directions (``2 * char_hidden_size``).

**Where the characters come from.** Every model with a character encoder stores a table
``token_chars`` ``(vocab_size, char_max_word_length)`` of character ids, one row per token of the
vocabulary (saved with the weights). ``model.bind_tokenizer(tokenizer)`` (:func:`fill_char_tables`) fills it from the
tokenizer's vocabulary (WordPiece's ``##`` and SentencePiece's ``▁`` markers removed, special tokens
empty); the character vocabulary itself is a config field (``char_vocab``, a string or a list of
characters), so a copy loaded with ``trust_remote_code=True`` builds the same embedding table.
Character id 0 is padding and 1 stands for characters outside ``char_vocab``.

With only token ids (e.g. the token-classification pipeline, or ``generate()``), a word that is
unknown to the word vocabulary is the unknown token, and the table gives it the (empty) characters of
``<unk>``. To give such words their own characters, pass ``char_input_ids`` ``(batch, time,
char_max_word_length)``, made from the words with :func:`words_to_char_ids` (e.g. by a data collator);
they replace the table lookup.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence

import torch
from torch import nn

from .config_utils import check_choice, check_positive, invalid
from .recurrent_stack import RecurrentStack

CHAR_ENCODER_TYPES = ("cnn", "lstm")
CHAR_PAD_ID, CHAR_UNK_ID = 0, 1
# printable ASCII without the whitespace controls, then the Latin-1 letters (accented Latin)
DEFAULT_CHAR_VOCAB = string.printable[:95] + "".join(chr(c) for c in range(0xC0, 0x100) if c not in (0xD7, 0xF7))
_SUBWORD_MARKERS = ("##", "▁", "Ġ")


def check_char_encoder_fields(config) -> None:
    """Validate the character-encoder fields a config declares (``char_encoder``, ``char_vocab``,
    ``char_embedding_size``, ``char_hidden_size``, ``char_kernel_size``, ``char_max_word_length``)."""
    if config.char_encoder is None:
        return
    check_choice("char_encoder", config.char_encoder, (None, *CHAR_ENCODER_TYPES))
    for field in ("char_embedding_size", "char_hidden_size", "char_kernel_size", "char_max_word_length"):
        check_positive(field, getattr(config, field))
    vocab = list(config.char_vocab or "")
    if not vocab or any(not isinstance(c, str) or len(c) != 1 for c in vocab) or len(set(vocab)) != len(vocab):
        raise invalid("char_vocab", config.char_vocab, "a non-empty string or list of distinct single characters")


def char_output_size(config) -> int:
    """Size of ``c(w)``: 0 without a character encoder."""
    if config.char_encoder is None:
        return 0
    return config.char_hidden_size * (2 if config.char_encoder == "lstm" else 1)


def words_to_char_ids(words: Iterable[str], char_vocab: Sequence[str], max_word_length: int) -> list[list[int]]:
    """Character ids of each word, truncated and right-padded with 0 to ``max_word_length``."""
    index = {c: i + 2 for i, c in enumerate(char_vocab)}
    rows = []
    for word in words:
        ids = [index.get(c, CHAR_UNK_ID) for c in word[:max_word_length]]
        rows.append(ids + [CHAR_PAD_ID] * (max_word_length - len(ids)))
    return rows


def token_surface(token: str) -> str:
    """The characters a vocabulary entry stands for: ``"##ing"`` → ``"ing"``, ``"▁the"`` → ``"the"``."""
    for marker in _SUBWORD_MARKERS:
        if token.startswith(marker) and len(token) > len(marker):
            return token[len(marker):]
    return token


class CharWordEncoder(nn.Module):
    """Character-level word encoder: ``(batch, time)`` token ids (or explicit character ids) →
    ``(batch, time, output_size)``.

    Args:
        vocab_size: rows of the ``token_chars`` table.
        char_vocab: the characters (ids 2, 3, ... in this order).
        encoder_type: ``"cnn"`` or ``"lstm"``.
        embedding_size: size of a character embedding.
        hidden_size: CNN filters, or LSTM state size per direction.
        kernel_size: CNN window width (odd widths keep every character centred; an even width pads one more
            position on the right, so every width keeps one output per character).
        max_word_length: characters kept per word.
    """

    def __init__(self, vocab_size: int, char_vocab: Sequence[str], encoder_type: str, embedding_size: int,
                 hidden_size: int, kernel_size: int = 3, max_word_length: int = 20):
        super().__init__()
        self.char_vocab = list(char_vocab)
        self.encoder_type = encoder_type
        self.max_word_length = max_word_length
        self.char_embeddings = nn.Embedding(len(self.char_vocab) + 2, embedding_size, padding_idx=CHAR_PAD_ID)
        if encoder_type == "cnn":
            self.conv = nn.Conv1d(embedding_size, hidden_size, kernel_size, padding="same")
            self.output_size = hidden_size
        else:
            self.lstm = RecurrentStack("lstm", embedding_size, hidden_size, num_layers=1, bidirectional=True)
            self.output_size = 2 * hidden_size
        self.register_buffer("token_chars", torch.zeros(vocab_size, max_word_length, dtype=torch.long))

    @torch.no_grad()
    def fill_token_characters(self, tokenizer) -> None:
        """Fill ``token_chars`` from the tokenizer's vocabulary (special tokens get no characters)."""
        special = set(tokenizer.all_special_ids)
        table = torch.zeros_like(self.token_chars, device="cpu")
        for token, token_id in tokenizer.get_vocab().items():
            if token_id < table.shape[0] and token_id not in special:
                ids = words_to_char_ids([token_surface(token)], self.char_vocab, self.max_word_length)[0]
                table[token_id] = torch.tensor(ids)
        self.token_chars.copy_(table)

    def forward(self, input_ids: torch.LongTensor, char_input_ids: torch.LongTensor | None = None) -> torch.Tensor:
        chars = char_input_ids if char_input_ids is not None else self.token_chars[input_ids]  # (B, T, L)
        batch, time, length = chars.shape
        chars = chars.reshape(batch * time, length)  # (N, L): one row per word
        char_mask = chars != CHAR_PAD_ID
        embedded = self.char_embeddings(chars)  # (N, L, E)
        if self.encoder_type == "cnn":
            features = self.conv(embedded.transpose(1, 2)).transpose(1, 2)  # (N, L, H)
            features = features.masked_fill(~char_mask.unsqueeze(2), torch.finfo(features.dtype).min)
            words = features.max(dim=1).values  # (N, H): max over the characters
        else:
            _, (h, _) = self.lstm(embedded, None, char_mask)
            words = RecurrentStack.last_layer_state(h, 2)  # (N, 2H): [h→_L ; h←_1]
        words = words.masked_fill(~char_mask.any(dim=1, keepdim=True), 0.0)  # words without characters: 0
        return words.reshape(batch, time, self.output_size)


def build_char_encoder(config) -> CharWordEncoder | None:
    """The config's character encoder, or None when ``config.char_encoder`` is None."""
    if config.char_encoder is None:
        return None
    return CharWordEncoder(config.vocab_size, config.char_vocab, config.char_encoder, config.char_embedding_size,
                           config.char_hidden_size, config.char_kernel_size, config.char_max_word_length)


def fill_char_tables(model: nn.Module, tokenizer) -> None:
    """Fill the ``token_chars`` table of every character encoder in ``model`` from ``tokenizer``."""
    for module in model.modules():
        if isinstance(module, CharWordEncoder):
            module.fill_token_characters(tokenizer)


def embed_words(embed_tokens: nn.Embedding, char_encoder: CharWordEncoder | None, input_ids: torch.LongTensor,
                char_input_ids: torch.LongTensor | None = None) -> torch.Tensor:
    """``x_t = [e_word(w_t) ; c(w_t)]`` ``(batch, time, embedding_size + char size)``; just the word
    embeddings without a character encoder."""
    words = embed_tokens(input_ids)  # (B, T, E)
    if char_encoder is None:
        if char_input_ids is not None:
            raise ValueError("char_input_ids were given but the model has no character encoder "
                             "(config.char_encoder is None).")
        return words
    return torch.cat([words, char_encoder(input_ids, char_input_ids)], dim=-1)


__all__ = [
    "CHAR_ENCODER_TYPES",
    "DEFAULT_CHAR_VOCAB",
    "CharWordEncoder",
    "build_char_encoder",
    "char_output_size",
    "check_char_encoder_fields",
    "embed_words",
    "fill_char_tables",
    "token_surface",
    "words_to_char_ids",
]
