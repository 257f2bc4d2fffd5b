"""What every save of the package's models adds to its folder, so that the folder is shareable as it is.

:func:`register_save_hooks` (run by ``import hf_seqmodels``) makes every ``save_pretrained`` of the package's
configs and models (``Trainer.save_model``, the training scripts' final saves and ``cards.save_for_hub``
included: they all go through it) also

* declare the pipelines that run the saved head and copy their code beside the model's
  (:func:`hf_seqmodels.pipelines.pipelines_save_hook`), so that ``pipeline("hfsm-translation", model=folder,
  trust_remote_code=True)`` works where the package cannot be imported;
* warn once when an encoder-decoder is saved with a tokenizer that ends no sentence with ``<eos>``
  (:func:`warn_if_sentences_never_end`): labels encoded with it never teach the model to stop.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from .models.config_utils import add_save_hook
from .pipelines import pipelines_save_hook

logger = logging.getLogger(__name__)

TOKENIZER_FILE = "tokenizer.json"
_checked: set[tuple[str, int]] = set()  # (tokenizer file, its modification time) already checked


def saved_tokenizer_file(save_directory: str | Path, name_or_path: str | None) -> Path | None:
    """The tokenizer saved with a model: the one in ``save_directory``, else (a save that writes the tokenizer
    after the model, as ``Trainer.save_model`` does) the one of the folder the model was loaded from."""
    for folder in (save_directory, name_or_path):
        if folder and (Path(folder) / TOKENIZER_FILE).is_file():
            return Path(folder) / TOKENIZER_FILE
    return None


def warn_if_sentences_never_end(config, save_directory: str) -> dict[str, Any]:
    """A save hook: logs a warning, once per tokenizer file, when an encoder-decoder is saved with a tokenizer
    (:func:`saved_tokenizer_file`) that does not end what it encodes with the model's ``eos_token_id``, i.e. one
    with the causal-LM template ``<bos> A``. ``tokenizer(text_target=...)`` labels (transformers'
    ``run_translation.py``) then never end with ``<eos>``, and the trained model generates up to
    ``max_new_tokens``. Writes no config field."""
    eos = getattr(config, "eos_token_id", None)
    if not getattr(config, "is_encoder_decoder", False) or eos is None:
        return {}
    path = saved_tokenizer_file(save_directory, getattr(config, "name_or_path", None))
    if path is None:
        return {}
    key = (str(path.resolve()), path.stat().st_mtime_ns)
    if key in _checked:
        return {}
    _checked.add(key)
    try:
        ids = Tokenizer.from_file(str(path)).encode("a").ids
    except Exception as error:  # a check must not stop the save: tokenizers raises plain Exceptions
        logger.debug("Could not read %s to check its <eos>: %s", path, error)
        return {}
    if ids and ids[-1] in (eos if isinstance(eos, list) else [eos]):
        return {}
    head = (getattr(config, "architectures", None) or [type(config).__name__])[0]
    logger.warning(
        f"{head} is saved to {save_directory} with the tokenizer {path}, which does not end the sentences it "
        f"encodes with <eos> (eos_token_id={eos}; 'a' is encoded as {ids}): target labels encoded with it "
        "(tokenizer(text_target=...), as transformers' run_translation.py does) never teach the model to stop, so "
        "it generates up to max_new_tokens. Give the tokenizer the sequence-to-sequence template 'A <eos>': set "
        "tokenizer.add_bos_token = False and tokenizer.add_eos_token = True and save it again, or train it with "
        "tokenizer_scripts/train_tokenizer.py --add_bos_token false --add_eos_token true.")
    return {}


def register_save_hooks() -> None:
    """Add the hooks of the module docstring to every ``save_pretrained`` of the package's configs and models."""
    add_save_hook(pipelines_save_hook)
    add_save_hook(warn_if_sentences_never_end)


__all__ = ["register_save_hooks", "saved_tokenizer_file", "warn_if_sentences_never_end"]
