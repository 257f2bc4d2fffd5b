"""Training text for the tokenizer trainers, read as a stream with bounded memory and guarded input.

The ``tokenizers`` trainers keep every training sequence they are given whole while they count it, so
one pathological line decides their memory and time: a single 8 MB line makes the Unigram trainer
crash, the BPE and WordPiece trainers run for minutes, and the character trainer allocate gigabytes.
This module hands them text that is safe to count:

* files are read line by line with :meth:`io.TextIOBase.readline` limited to ``max_line_length + 1``
  characters, so no line is ever held longer than the limit; a longer line is refused with a message
  naming the file, the line number, its length and the limit (``long_lines="error"``, the default) or
  cut into pieces of at most ``max_line_length`` characters, after the last whitespace when there is
  one (``long_lines="split"``);
* a file that is empty (0 bytes or only whitespace), binary (holds a NUL byte) or not UTF-8 is refused
  with a message naming the file and the byte offset of the first bad byte;
* ``max_train_bytes`` caps the UTF-8 bytes read from all sources together (files first, then the
  dataset column), for sampling a prefix of a corpus too large to train on whole;
* a :class:`TextFile` with ``max_chars`` is read only up to that character (the training part of a file
  whose end is held out for validation), so a training script trains on the user's file itself, never on
  a copy, and every message names that file and its line.

Byte offsets are found only when something is wrong, by scanning the file again in 1 MiB blocks, so the
normal path reads each file once.
"""

from __future__ import annotations

import codecs
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["DEFAULT_MAX_LINE_LENGTH", "LONG_LINE_POLICIES", "CorpusLimits", "TextFile", "check_training_file",
           "read_corpus"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_LINE_LENGTH = 100_000  # characters; a long paragraph is ~1,000, a whole book chapter ~50,000
LONG_LINE_POLICIES = ("error", "split")
_SCAN_BLOCK = 1 << 20  # bytes read at a time when locating a bad byte
_NEWLINES = ("\n", "\r")


@dataclass(frozen=True)
class CorpusLimits:
    """How much text to read and how long one line may be.

    Attributes:
        max_train_bytes: stop after this many UTF-8 bytes of text (all files and the dataset together);
            ``None`` reads everything.
        max_line_length: the longest line (or dataset row), in characters, handed to a trainer.
        long_lines: ``"error"`` refuses a longer line; ``"split"`` cuts it into pieces of at most
            ``max_line_length`` characters, after the last whitespace of each piece when it has one.
    """

    max_train_bytes: int | None = None
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH
    long_lines: str = "error"

    def __post_init__(self) -> None:
        if self.max_train_bytes is not None and not _is_positive_int(self.max_train_bytes):
            raise ValueError(f"max_train_bytes={self.max_train_bytes!r} must be None or an integer >= 1.")
        if not _is_positive_int(self.max_line_length):
            raise ValueError(f"max_line_length={self.max_line_length!r} must be an integer >= 1 (characters).")
        if self.long_lines not in LONG_LINE_POLICIES:
            raise ValueError(
                f"long_lines={self.long_lines!r} is not supported; allowed values: "
                f"{', '.join(repr(p) for p in LONG_LINE_POLICIES)}."
            )


@dataclass(frozen=True)
class TextFile:
    """A training file, whole or only its first ``max_chars`` characters (a line is cut there).

    Attributes:
        path: the file.
        max_chars: read up to this many characters (``None``: the whole file; 0 is refused as an empty text).
    """

    path: str | os.PathLike
    max_chars: int | None = None

    def __post_init__(self) -> None:
        if self.max_chars is not None and not (_is_positive_int(self.max_chars) or self.max_chars == 0):
            raise ValueError(f"max_chars={self.max_chars!r} must be None or an integer >= 0 (characters).")


def as_text_file(source: str | os.PathLike | TextFile) -> TextFile:
    """``source`` as a :class:`TextFile` (a path is the whole file)."""
    return source if isinstance(source, TextFile) else TextFile(source)


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


# --------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------


def check_training_file(path: Path) -> None:
    """Refuse, before any training starts, a path that is missing, not a file, or 0 bytes long."""
    if not path.exists():
        raise FileNotFoundError(f"Training file not found: {str(path)!r}")
    if not path.is_file():
        raise ValueError(f"Training file {str(path)!r} is not a regular file.")
    if path.stat().st_size == 0:
        raise ValueError(f"Training file {str(path)!r} is empty (0 bytes).")


def _iter_file(path: Path, limits: CorpusLimits, max_chars: int | None = None) -> Iterator[str]:
    """The lines of ``path`` (newlines kept), guarded as the module docstring describes; with ``max_chars``
    only the file's first ``max_chars`` characters (the last line read is cut there)."""
    limit = limits.max_line_length
    has_text = False
    number = 0
    left = max_chars
    with open(path, encoding="utf-8", newline="") as handle:
        try:
            while (left is None or left > 0) and (line := handle.readline(limit + 1)):
                number += 1
                if "\x00" in line:
                    raise _binary_file_error(path)
                if len(line) > limit and not line.endswith(_NEWLINES):
                    pieces = _long_line(line, handle, path, number, limits)
                else:
                    pieces = iter([line])
                for piece in pieces:
                    if left is not None:
                        piece, left = piece[:left], left - len(piece[:left])
                    has_text = has_text or not piece.isspace()
                    if piece:
                        yield piece
                    if left == 0:
                        break
        except UnicodeDecodeError as error:
            raise _not_utf8_error(path) from error
    if not has_text:
        part = f"its first {max_chars:,} characters hold" if max_chars is not None else "it holds"
        raise ValueError(f"Training file {str(path)!r} is empty: {part} only whitespace ({number} lines).")


def _long_line(start: str, handle: IO[str], path: Path, number: int, limits: CorpusLimits) -> Iterator[str]:
    """A line longer than the limit, whose first ``limit + 1`` characters are ``start``: refused, or cut."""
    if limits.long_lines == "error":
        length = len(start) + _rest_of_line_length(handle)
        raise ValueError(
            f"Training file {str(path)!r}, line {number}: {length:,} characters, longer than "
            f"max_line_length={limits.max_line_length:,}. Break the text into lines, raise max_line_length, "
            "or pass long_lines='split' (--long_lines split) to cut such lines into pieces."
        )
    yield from _split_line(start, handle, limits.max_line_length)


def _rest_of_line_length(handle: IO[str]) -> int:
    """Read (and drop) the rest of the current line in bounded pieces; its length without the newline."""
    length = 0
    while piece := handle.readline(_SCAN_BLOCK):
        if piece.endswith(_NEWLINES):
            return length + len(piece.rstrip("\r\n"))
        length += len(piece)
    return length


def _split_line(text: str, handle: IO[str], limit: int) -> Iterator[str]:
    """Pieces of at most ``limit`` characters of the line that starts with ``text``, cut after the last
    whitespace of a piece when it has one (so words stay whole), else at the limit."""
    at_end = False
    while True:
        while not (at_end or text.endswith(_NEWLINES) or len(text) > limit):
            more = handle.readline(limit + 1 - len(text))
            at_end = not more
            text += more
        if len(text) <= limit:
            if text:
                yield text
            return
        cut = max(text.rfind(" ", 0, limit), text.rfind("\t", 0, limit)) + 1 or limit
        yield text[:cut]
        text = text[cut:]


def _binary_file_error(path: Path) -> ValueError:
    offset = _find_byte(path, b"\x00")
    return ValueError(
        f"Training file {str(path)!r} looks binary: it holds a NUL byte at byte offset {offset:,}. "
        "Train on text files only."
    )


def _not_utf8_error(path: Path) -> ValueError:
    offset, byte = _first_invalid_utf8(path)
    return ValueError(
        f"Training file {str(path)!r} is not UTF-8 text: invalid byte 0x{byte.hex()} at byte offset "
        f"{offset:,}. Convert it to UTF-8 first (e.g. iconv -f latin1 -t utf-8), or leave binary files out."
    )


def _find_byte(path: Path, needle: bytes) -> int:
    """Byte offset of the first ``needle`` (one byte) in ``path``, read in blocks; -1 when absent."""
    offset = 0
    with open(path, "rb") as handle:
        while block := handle.read(_SCAN_BLOCK):
            found = block.find(needle)
            if found >= 0:
                return offset + found
            offset += len(block)
    return -1


def _first_invalid_utf8(path: Path) -> tuple[int, bytes]:
    """Byte offset and value of the first byte of ``path`` that is not valid UTF-8, read in blocks."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    with open(path, "rb") as handle:
        while True:
            block = handle.read(_SCAN_BLOCK)
            pending = len(decoder.getstate()[0])  # bytes of an unfinished character from the last block
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as error:  # error.object is the pending bytes + this block
                return offset - pending + error.start, error.object[error.start : error.start + 1]
            if not block:
                return -1, b""
            offset += len(block)


# --------------------------------------------------------------------------------------------------
# Dataset rows and the byte budget
# --------------------------------------------------------------------------------------------------


def _guard_rows(texts: Iterable[str], source: str, limits: CorpusLimits) -> Iterator[str]:
    """Dataset rows with the same long-line rule as file lines (rows are already in memory): a row that holds a
    whole document is read line by line (newlines kept, as from a file), each line checked on its own."""
    limit = limits.max_line_length
    for number, text in enumerate(texts, start=1):
        lines = text.splitlines(keepends=True) if len(text) > limit else [text]
        for line_number, line in enumerate(lines, start=1):
            if len(line.rstrip("\r\n")) <= limit:
                yield line
            elif limits.long_lines == "error":
                where = f"row {number}" + (f", line {line_number}" if len(lines) > 1 else "")
                raise ValueError(
                    f"{source}, {where}: {len(line):,} characters, longer than max_line_length={limit:,}. "
                    "Raise max_line_length, or pass long_lines='split' (--long_lines split) to cut such rows."
                )
            else:
                yield from _split_text(line, limit)


def _split_text(text: str, limit: int) -> Iterator[str]:
    start = 0
    while len(text) - start > limit:
        cut = max(text.rfind(" ", start, start + limit), text.rfind("\t", start, start + limit)) + 1
        cut = cut if cut > start else start + limit
        yield text[start:cut]
        start = cut
    if start < len(text):
        yield text[start:]


def _take_bytes(texts: Iterable[str], max_train_bytes: int | None) -> Iterator[str]:
    """``texts`` up to ``max_train_bytes`` UTF-8 bytes in all (the text that would pass it is left out)."""
    if max_train_bytes is None:
        yield from texts
        return
    total = 0
    for text in texts:
        size = len(text.encode("utf-8"))
        if total + size > max_train_bytes:
            logger.info("Read %s bytes of training text: max_train_bytes=%s reached.", f"{total:,}",
                        f"{max_train_bytes:,}")
            return
        total += size
        yield text


def read_corpus(
    paths: Iterable[str | os.PathLike | TextFile], dataset_texts: Iterable[str] | None, limits: CorpusLimits,
    source: str = "dataset",
) -> Iterator[str]:
    """All training texts, guarded: the lines of each file in ``paths`` (a :class:`TextFile` up to its
    ``max_chars``), then ``dataset_texts`` (rows named after ``source`` in messages), stopping at
    ``limits.max_train_bytes``."""

    def texts() -> Iterator[str]:
        for path in paths:
            file = as_text_file(path)
            yield from _iter_file(Path(os.fspath(file.path)), limits, file.max_chars)
        if dataset_texts is not None:
            yield from _guard_rows(dataset_texts, source, limits)

    return _take_bytes(texts(), limits.max_train_bytes)
