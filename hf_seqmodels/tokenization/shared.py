"""A tokenizer trained once for all the processes of a run: the main process reads the text, trains and saves
the tokenizer; every other process waits, then loads the saved folder.

Under ``accelerate launch`` every process runs the same script, so a tokenizer trained on the training text
would otherwise be trained (and the text read) once per process. :func:`train_on_main_process` runs the
training only in ``accelerator.main_process_first()``'s first turn (the main process), so the text is read
once; the others enter the block after the main process has left it and load ``output_dir``. The folder must
be on a file system every process sees, as the run's output folder is.

An error while training (an empty file, a long line, a non-UTF-8 byte: messages that name the user's file and
line) is raised by the main process after it has released the others, and the others then raise an error that
points to it instead of waiting for ever or loading an old tokenizer left in the folder.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["TOKENIZER_FILE", "train_on_main_process"]

TOKENIZER_FILE = "tokenizer.json"


def train_on_main_process(output_dir: str | Path, train: Callable[[], Any], accelerator: Any = None, *,
                          reuse: bool = False):
    """The tokenizer that ``train()`` returns, trained by the main process only and saved in ``output_dir``;
    every process returns it as loaded from ``output_dir`` (``AutoTokenizer.from_pretrained``).

    Args:
        output_dir: the folder the tokenizer is saved in (created if needed).
        train: reads the training text and returns a ``PreTrainedTokenizerFast``; called on the main process
            only (and not at all with ``reuse``).
        accelerator: an ``accelerate.Accelerator`` (anything with ``is_main_process``, ``num_processes`` and
            ``main_process_first()``); ``None`` for a single process.
        reuse: load the tokenizer already saved in ``output_dir`` (a resumed run) instead of training one.

    Raises:
        Exception: the error of ``train()``, on the main process.
        RuntimeError: on the other processes, saying that the main process failed.
        FileNotFoundError: when ``reuse`` finds no saved tokenizer.
    """
    from transformers import AutoTokenizer

    output_dir = Path(output_dir)
    main = accelerator is None or accelerator.is_main_process
    first = accelerator.main_process_first() if accelerator is not None else contextlib.nullcontext()
    error = None
    with first:
        if main and not reuse:
            try:
                tokenizer = train()
                output_dir.mkdir(parents=True, exist_ok=True)
                tokenizer.save_pretrained(output_dir)
            except Exception as exc:  # raised after the barrier, so that the waiting processes are released
                error = exc
    if not _all_succeeded(error is None, accelerator):
        if error is not None:
            raise error
        raise RuntimeError(f"The main process failed to train the tokenizer saved in {str(output_dir)!r}; "
                           "its error message says why.")
    if not (output_dir / TOKENIZER_FILE).is_file():
        raise FileNotFoundError(f"No tokenizer in {str(output_dir)!r} ({TOKENIZER_FILE} is missing).")
    return AutoTokenizer.from_pretrained(output_dir)


def _all_succeeded(succeeded: bool, accelerator: Any) -> bool:
    """The main process's ``succeeded``, as every process learns it (a broadcast when there are several)."""
    if accelerator is None or accelerator.num_processes == 1:
        return succeeded
    from accelerate.utils import broadcast_object_list

    return bool(broadcast_object_list([succeeded], from_process=0)[0])
