"""Token files: a corpus tokenised once, to disk, and read back through memory maps by every process.

The layout follows nanoGPT's ``prepare.py`` and fairseq's binarised data: each array is a flat binary file
of ``uint16`` ids (``uint32`` when the vocabulary has more than 65,536 tokens) or ``int64`` offsets, and a
``meta.json`` lists the arrays with their dtype and length. Offsets index a flat id array: ``offsets[i]`` to
``offsets[i + 1]`` are the ids of item ``i`` (a sentence of a pair, a sentence of a document), so an item is
one slice and the RAM of a run does not grow with the corpus. We chose flat arrays over Arrow datasets
because every task reads contiguous slices (LM windows, whole sentences): a slice of a memory map is the
cheapest read there is, and the files need no library to be read.

Every prepared corpus lives in its own folder under the cache folder (:func:`default_cache_dir`), named by a
hash of everything that decides its ids (:func:`cache_key`): the task and its preprocessing arguments, the
tokenizer's serialised JSON and settings, and each input file's resolved path, size and modification time.
A changed tokenizer, argument or file therefore prepares new files instead of reusing stale ones. A folder
is written under a temporary name and renamed when complete, so a reader never sees half a corpus, and a
later run maps the folder as it is (``overwrite_cache=True`` prepares it again).

With ``accelerate``, the local main process of each machine prepares the files while the others wait
(``local_main_process_first``); then every process maps the same files read-only.

A corpus of items (the sentences of a pair, of a document) is one flat id array and an ``int64`` offsets array
``(N + 1,)``, as fairseq's binarised data: item ``i`` is ``tokens[offsets[i]:offsets[i + 1]]`` and
``np.diff(offsets)`` is the length index (:class:`TokenSequences`).

This module holds what every task shares; each task prepares its own corpus on it: the language model's streams
(:mod:`..lm.token_streams`), the sentence pairs of a parallel corpus (:mod:`..seq2seq.token_pairs`) and BERT's
documents (:mod:`..bert.token_documents`).

Text is read in blocks of characters (:func:`line_pieces`), so the corpus is never held as one ``str``.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

FORMAT_VERSION = 1
LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # what str.splitlines cuts at
BLOCK_CHARS = 1 << 20  # characters read at a time


# --------------------------------------------------------------------------- cache folder and key


def default_cache_dir() -> Path:
    """``$HF_SEQMODELS_CACHE``, else ``hf_seqmodels_tokens`` beside the ``datasets`` cache
    (``$HF_HOME``, by default ``~/.cache/huggingface``)."""
    if os.environ.get("HF_SEQMODELS_CACHE"):
        return Path(os.environ["HF_SEQMODELS_CACHE"])
    hf_home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "huggingface"
    return Path(hf_home) / "hf_seqmodels_tokens"


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 of what decides a tokenizer's ids: its class, serialised ``tokenizer.json`` (fast tokenizers;
    otherwise every file ``save_pretrained`` writes), special tokens and ``add_bos``/``add_eos`` switches."""
    digest = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        digest.update(backend.to_str().encode())
    else:
        with tempfile.TemporaryDirectory() as folder:
            tokenizer.save_pretrained(folder)
            for path in sorted(Path(folder).rglob("*")):
                if path.is_file():
                    digest.update(path.name.encode() + path.read_bytes())
    settings = {"special": {k: str(v) for k, v in sorted(tokenizer.special_tokens_map.items())},
                "added": sorted(tokenizer.get_added_vocab().items()), "size": len(tokenizer),
                **{name: getattr(tokenizer, name, None) for name in ("add_bos_token", "add_eos_token")}}
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def file_identity(path: str | Path) -> dict:
    """A file's resolved path, size and modification time (ns): a changed file gets a new cache key."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Text file {str(path)!r} does not exist.")
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


#: bytes hashed at each end of a dataset's Arrow file, and rows of a dataset whose texts are hashed
EDGE_BYTES, SAMPLED_ROWS = 1 << 20, 64


def dataset_identity(dataset, text_column: str) -> dict:
    """What decides the texts of a ``datasets`` split, for a cache key, from public APIs only: the number of
    rows and the ``text_column`` of them. A split read from Arrow files (``dataset.cache_files``: a loaded or
    processed dataset) is known by each file's :func:`file_identity` (path, size, modification time) and the
    SHA-256 of its first and last MiB, and by the texts of :data:`SAMPLED_ROWS` rows spread over the split (a
    shuffled or selected view of the same files reads other rows): cheap on a corpus of any size. A split held
    in memory has no file to name it and is hashed whole, one batch at a time."""
    digest = hashlib.sha256()
    files = [item["filename"] for item in dataset.cache_files]
    if files:
        rows = sorted({round(i * (dataset.num_rows - 1) / max(1, SAMPLED_ROWS - 1)) for i in range(SAMPLED_ROWS)}
                      ) if dataset.num_rows else []
        for text in dataset.select(rows)[text_column] if rows else []:
            digest.update((text or "").encode() + b"\0")
    else:
        for text in dataset_texts(dataset, text_column):
            digest.update(text.encode() + b"\0")
    return {"rows": dataset.num_rows, "files": [{**file_identity(f), "edges": _edge_digest(f)} for f in files],
            "texts": digest.hexdigest()}


def _edge_digest(path: str | Path) -> str:
    """SHA-256 of the first and last :data:`EDGE_BYTES` of a file (all of it when it is shorter)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        digest.update(f.read(EDGE_BYTES))
        f.seek(max(EDGE_BYTES, f.seek(0, os.SEEK_END) - EDGE_BYTES))
        digest.update(f.read(EDGE_BYTES))
    return digest.hexdigest()


def cache_key(task: str, tokenizers: dict, files: Iterable[str | Path], arguments: dict) -> str:
    """The folder name of a prepared corpus: ``<task>-<24 hex digits>`` of the hash of the format version,
    the tokenizers' fingerprints, the input files' identities and the preprocessing ``arguments``."""
    material = {"version": FORMAT_VERSION, "task": task, "arguments": arguments,
                "tokenizers": {name: tokenizer_fingerprint(t) for name, t in tokenizers.items() if t is not None},
                "files": [file_identity(f) for f in files]}
    return f"{task}-{hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]}"


def token_dtype(tokenizer) -> np.dtype:
    """``uint16`` for vocabularies of at most 65,536 tokens, else ``uint32``."""
    return np.dtype(np.uint16) if len(tokenizer) <= 1 << 16 else np.dtype(np.uint32)


# --------------------------------------------------------------------------- writing and mapping


class ArrayWriter:
    """Appends ids (or offsets) to a flat binary file, converting each block to ``dtype``."""

    def __init__(self, path: Path, dtype: np.dtype):
        self.path, self.dtype, self.length = path, np.dtype(dtype), 0
        self._file = open(path, "wb")  # noqa: SIM115 (closed by close())

    def append(self, values: np.ndarray | list[int]) -> None:
        block = np.asarray(values, dtype=np.int64)
        if block.size and self.dtype.kind == "u" and (block.min() < 0 or block.max() > np.iinfo(self.dtype).max):
            raise ValueError(f"An id outside [0, {np.iinfo(self.dtype).max}] cannot be stored as {self.dtype} "
                             f"in {self.path.name}; got ids {block.min()}..{block.max()}.")
        block.astype(self.dtype).tofile(self._file)
        self.length += block.size

    def close(self) -> dict:
        self._file.close()
        return {"dtype": self.dtype.name, "length": self.length}


def map_array(folder: Path, name: str, meta: dict) -> np.ndarray:
    """The read-only memory map of array ``name`` (an empty array when it has no element)."""
    info = meta["arrays"][name]
    if info["length"] == 0:
        return np.zeros(0, dtype=info["dtype"])
    return np.memmap(folder / f"{name}.bin", dtype=info["dtype"], mode="r", shape=(info["length"],))


def _read_meta(folder: Path) -> dict | None:
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if meta.get("version") == FORMAT_VERSION else None


def _publish(tmp: Path, folder: Path) -> None:
    """Rename the complete ``tmp`` folder to ``folder`` (replacing an older one): readers see all or nothing."""
    if folder.exists():
        stale = folder.with_name(f".{folder.name}.stale-{uuid.uuid4().hex[:8]}")
        os.replace(folder, stale)
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.replace(tmp, folder)
    except OSError:  # another machine sharing the folder published first: keep its files
        shutil.rmtree(tmp, ignore_errors=True)


def _build_into(folder: Path, key: str, build: Callable[[Path], dict]) -> None:
    """Run ``build`` in a temporary folder beside ``folder`` and publish it, or remove it on failure."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{key}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        meta = {"version": FORMAT_VERSION, "key": key, **build(tmp)}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        _publish(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prepare(key: str, build: Callable[[Path], dict], *, cache_dir: str | Path | None = None,
            overwrite_cache: bool = False, accelerator=None) -> tuple[Path, dict]:
    """The folder and metadata of the prepared corpus ``key``, built by ``build(tmp_folder) -> arrays meta``
    unless a complete one is cached (or ``overwrite_cache``). With ``accelerator``, each machine's local main
    process builds while the other processes wait, then all read the same folder."""
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = folder / key
    first = accelerator.local_main_process_first() if accelerator is not None else contextlib.nullcontext()
    error = None
    with first:
        builder = accelerator is None or accelerator.is_local_main_process
        if builder and (overwrite_cache or _read_meta(folder) is None):
            try:
                _build_into(folder, key, build)
            except Exception as exc:  # raised after the barrier, so that the waiting processes are released
                error = exc
    if error is not None:
        raise error
    meta = _read_meta(folder)
    if meta is None:
        raise FileNotFoundError(f"No complete token files in {str(folder)!r}: the preparing process failed.")
    return folder, meta


# --------------------------------------------------------------------------- indexed sequences


class TokenSequences:
    """Sequences of ids stored as one flat array and ``offsets`` ``(N + 1,)``: item ``i`` is
    ``tokens[offsets[i]:offsets[i + 1]]``. Indexing gives a Python ``list`` of ids (a slice, a list of
    them), so it stands in for a ``list[list[int]]``; :attr:`lengths` is the length index ``(N,)``."""

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray):
        self.tokens, self.offsets = tokens, offsets

    def __len__(self) -> int:
        return max(len(self.offsets) - 1, 0)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"sequence index {index} out of range for {len(self)} sequences")
        return self.tokens[self.offsets[index] : self.offsets[index + 1]].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        return (self[i] for i in range(len(self)))

    @property
    def lengths(self) -> np.ndarray:
        """``(N,)`` int64: the number of ids of every sequence."""
        return np.diff(self.offsets)


def sequence_writers(folder: Path, name: str, dtype: np.dtype) -> tuple[ArrayWriter, ArrayWriter]:
    """The writers of sequences ``name``: ids ``<name>.bin`` and offsets ``<name>_offsets.bin`` (opened at 0)."""
    tokens, offsets = ArrayWriter(folder / f"{name}.bin", dtype), ArrayWriter(folder / f"{name}_offsets.bin", np.int64)
    offsets.append([0])
    return tokens, offsets


def append_sequences(tokens: ArrayWriter, offsets: ArrayWriter, sequences: list[list[int]]) -> None:
    """Append ``sequences`` to the writers of :func:`sequence_writers`, each ending at its new offset."""
    tokens.append(np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int64))
    offsets.append(tokens.length - sum(map(len, sequences)) + np.cumsum([len(s) for s in sequences], dtype=np.int64))


def map_sequences(folder: Path, name: str, meta: dict) -> TokenSequences:
    """The :class:`TokenSequences` of the arrays that :func:`sequence_writers` wrote, memory-mapped read-only."""
    return TokenSequences(map_array(folder, name, meta), map_array(folder, f"{name}_offsets", meta))


# --------------------------------------------------------------------------- reading text in blocks


def count_characters(path: str | Path) -> int:
    """The number of characters of a UTF-8 file read with universal newlines (``Path.read_text``)."""
    with open(path, encoding="utf-8") as f:
        return sum(len(block) for block in iter(lambda: f.read(BLOCK_CHARS), ""))


def line_pieces(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 file with their line breaks: ``read_text(path).splitlines(keepends=True)``,
    read one block of characters at a time."""
    with open(path, encoding="utf-8") as f:  # universal newlines: no "\r" is left to pair with a "\n"
        carry = ""
        for block in iter(lambda: f.read(BLOCK_CHARS), ""):
            pieces = (carry + block).splitlines(keepends=True)
            carry = "" if pieces[-1][-1] in LINE_BREAKS else pieces.pop()
            yield from pieces
        if carry:
            yield carry


def batched(items: Iterable, size: int) -> Iterator[list]:
    """Consecutive lists of ``size`` items (the last: fewer)."""
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def dataset_texts(dataset, text_column: str = "text", batch_size: int = 1000) -> Iterator[str]:
    """The ``text_column`` of a ``datasets.Dataset`` one example at a time (read from its memory-mapped Arrow
    files in batches; a missing value is an empty text)."""
    for batch in dataset.iter(batch_size=batch_size):
        yield from (text or "" for text in batch[text_column])


__all__ = [
    "ArrayWriter",
    "TokenSequences",
    "append_sequences",
    "batched",
    "cache_key",
    "count_characters",
    "dataset_identity",
    "dataset_texts",
    "default_cache_dir",
    "line_pieces",
    "map_array",
    "map_sequences",
    "prepare",
    "sequence_writers",
    "token_dtype",
    "tokenizer_fingerprint",
]
