"""Publishing a folder on the Hub: only the files a model repository needs (an allow-list), after checks that
the folder loads and its card parses (:class:`PushError` names what is wrong), with a dry run that writes the
exact folder instead. The folder is written by :func:`hf_seqmodels.cards.save_for_hub` or a training run.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard

logger = logging.getLogger(__name__)

PUSH_ALLOW_PATTERNS = (  # the only files `push_folder_to_hub` uploads (fnmatch patterns on relative paths)
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model-*-of-*.safetensors",
    "model.safetensors.index.json",
    "*.py",  # the model code named by the config's auto_map and its sibling modules (top level only)
    "README.md",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "source_tokenizer/tokenizer.json",  # the source-side tokenizer of a model with two vocabularies
    "source_tokenizer/tokenizer_config.json",
    "source_tokenizer/special_tokens_map.json",
)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")  # uploaded only when README.md shows them
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
_IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?[^)]*\)")


class PushError(ValueError):
    """A folder that must not be published as it is; the message names the missing or offending file."""


def _checked_card(folder: Path) -> ModelCard:
    """``README.md`` parsed with ``huggingface_hub.ModelCard`` (locally: ``ModelCard.validate`` needs the
    network, so the metadata is checked here), with a YAML header that has the keys the Hub shows."""
    path = folder / "README.md"
    if not path.is_file():
        raise PushError(f"{folder} has no README.md: write a model card first (hf_seqmodels.cards.write_model_card).")
    text = path.read_text(encoding="utf-8-sig")
    if not text.startswith("---"):
        raise PushError(f"{path} has no YAML metadata header (a first line '---').")
    try:
        card = ModelCard.load(path)  # a local Path: no network
    except Exception as error:  # yaml.YAMLError, ValueError from the card data
        raise PushError(f"The YAML header of {path} does not parse: {error}") from error
    metadata = card.data.to_dict()
    for key in ("license", "library_name"):
        if not isinstance(metadata.get(key), str) or not metadata[key]:
            raise PushError(f"The YAML header of {path} needs a `{key}` string (got {metadata.get(key)!r}).")
    for key in ("tags", "datasets", "language"):
        value = metadata.get(key)
        if value is not None and not (isinstance(value, str) or
                                      (isinstance(value, list) and all(isinstance(v, str) for v in value))):
            raise PushError(f"The YAML header of {path}: `{key}` must be a string or a list of strings, got {value!r}.")
    if "pipeline_tag" in metadata and not isinstance(metadata["pipeline_tag"], str):
        raise PushError(f"The YAML header of {path}: `pipeline_tag` must be a string.")
    return card


def _card_images(folder: Path, card: ModelCard) -> list[str]:
    """The local pictures the card shows (relative links to image files)."""
    names = []
    for link in _IMAGE_LINK.findall(card.text):
        if "://" in link or link.startswith(("/", "#", "data:")) or not link.lower().endswith(IMAGE_SUFFIXES):
            continue
        relative = Path(link).as_posix().removeprefix("./")
        if ".." in Path(relative).parts:
            continue
        if not (folder / relative).is_file():
            raise PushError(f"README.md shows {relative!r}, which is not in {folder}.")
        names.append(relative)
    return sorted(set(names))


def files_to_push(folder: str | Path) -> list[str]:
    """Validate ``folder`` and return the relative paths :func:`push_folder_to_hub` would upload.

    Checked first: ``config.json`` with an ``auto_map`` whose modules are there, ``model.safetensors``
    (or a complete sharded index), a model card whose YAML header parses, and no pickle-format
    file (``*.bin``, ``*.pt``…) next to the weights. Only files matching :data:`PUSH_ALLOW_PATTERNS` at their
    own folder level (``*.py`` is the top level's code, never the code of nested folders) and the images the
    card shows are kept: ``checkpoint-*`` folders, optimizer states, training logs and anything else stay
    local. A chosen file that is a link to a place outside the folder is refused. Raises :class:`PushError`
    naming what is missing or wrong.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise PushError(f"{folder} is not a folder.")
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise PushError(f"{folder} has no config.json: is it the output folder of a finished training run?")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise PushError(f"{config_path} is not valid JSON: {error}") from error
    auto_map = config.get("auto_map")
    if not isinstance(auto_map, dict) or not auto_map:
        raise PushError(f"{config_path} has no auto_map: the model would not load with trust_remote_code=True. "
                        "Save it with hf_seqmodels.cards.save_for_hub or the training scripts.")
    for reference in auto_map.values():
        for ref in reference if isinstance(reference, list) else [reference]:
            if ref is None:
                continue
            _require_module(folder, ref, "auto_map names")
    custom_pipelines = config.get("custom_pipelines") or {}
    if not isinstance(custom_pipelines, dict):
        raise PushError(f"{config_path}: custom_pipelines={custom_pipelines!r}; expected a dict of entries keyed by "
                        "task ({\"hfsm-translation\": {\"impl\": \"pipelines.TranslationPipeline\", ...}}): save "
                        "the model again with hf_seqmodels imported.")
    for task, entry in custom_pipelines.items():
        implementation = entry.get("impl") if isinstance(entry, dict) else None
        _require_module(folder, implementation, f"custom_pipelines names for {task!r}",
                        "; save the model again with hf_seqmodels imported (save_pretrained, Trainer.save_model or "
                        "hf_seqmodels.cards.save_for_hub write it), or call hf_seqmodels.pipelines.save_pipelines")
    pickles = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix.lower() in PICKLE_SUFFIXES)
    if pickles:
        raise PushError(f"{folder} holds pickle-format files {pickles}: publish safetensors weights only "
                        "(remove or convert them first).")
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        missing = [s for s in shards if not (folder / s).is_file()]
        if missing:
            raise PushError(f"{folder} lacks {missing[0]}, a weight shard listed in model.safetensors.index.json.")
    elif not (folder / "model.safetensors").is_file():
        raise PushError(f"{folder} has no model.safetensors: weights must be saved as safetensors.")
    card = _checked_card(folder)
    chosen = set()
    for pattern in PUSH_ALLOW_PATTERNS:  # each pattern names one folder level: "*" never crosses a "/"
        parent, _, name_pattern = pattern.rpartition("/")
        directory = folder / parent
        if not _stays_inside(folder, directory) or not directory.is_dir():
            continue
        chosen.update(f"{parent}/{p.name}" if parent else p.name for p in directory.iterdir()
                      if fnmatch.fnmatchcase(p.name, name_pattern) and p.is_file())
    chosen.update(_card_images(folder, card))
    outside = sorted(name for name in chosen if not _stays_inside(folder, folder / name))
    if outside:
        raise PushError(f"{folder / outside[0]} is a link to a file outside {folder}: copy the file into the "
                        "folder (or remove the link) before publishing it.")
    return sorted(chosen)


def _require_module(folder: Path, reference: Any, named_by: str, advice: str = "") -> None:
    """A remote-code reference (``"module.Class"``, or ``"repo--module.Class"``) must name a ``module.py`` that
    is in ``folder``; else a :class:`PushError` saying which config entry names it."""
    module = reference.split("--")[-1].rsplit(".", 1)[0] + ".py" if isinstance(reference, str) else None
    if module is None or not (folder / module).is_file():
        raise PushError(f"{folder} has no {module or 'code module'}, which config.json's {named_by} "
                        f"({reference}){advice}.")


def _stays_inside(folder: Path, path: Path) -> bool:
    """Whether ``path``, once every symbolic link on the way is followed, is still below ``folder``."""
    return path.resolve().is_relative_to(folder.resolve())


def _copy_or_link(source: Path, target: Path, link: bool) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if link:
        try:
            os.link(source, target)  # no copy of large weights when the file system allows it
            return
        except OSError:
            pass
    shutil.copy2(source, target)


def stage_push_folder(folder: str | Path, target: str | Path, link: bool = False) -> list[tuple[str, int]]:
    """Write exactly the files :func:`push_folder_to_hub` uploads into the empty (or new) folder ``target``;
    returns ``(relative path, size in bytes)`` for each. ``link=True`` hard-links instead of copying where
    possible (for a throw-away staging folder: editing a linked file would edit the original)."""
    folder, target = Path(folder), Path(target)
    names = files_to_push(folder)
    if target.exists() and any(target.iterdir()):
        raise PushError(f"The dry-run folder {target} is not empty.")
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        _copy_or_link(folder / name, target / name, link)
    return [(name, (target / name).stat().st_size) for name in names]


def format_file_list(files: list[tuple[str, int]]) -> str:
    """``files`` (``(name, size)`` pairs) as aligned lines of sizes and names, with a total."""
    rows = [f"{size:>12,}  {name}" for name, size in files]
    return "\n".join([*rows, f"{sum(size for _, size in files):>12,}  total ({len(files)} files)"])


def push_folder_to_hub(folder: str | Path, repo_id: str, private: bool = False, token: str | None = None, *,
                       dry_run: bool = False, dry_run_dir: str | Path | None = None,
                       commit_message: str = "Upload with hf_seqmodels") -> str:
    """Publish a folder written by :func:`~hf_seqmodels.cards.save_for_hub` or a training run as the model
    repository ``repo_id``.

    The folder is validated and only its allow-listed files are uploaded (:func:`files_to_push`).
    The repository is created if needed (``private`` applies to a new repository). ``token`` is
    optional: without it ``huggingface_hub`` reads ``HF_TOKEN`` or the stored login. The token is
    never written to a file or a log.

    ``dry_run=True`` touches no network: it writes exactly the folder that would be uploaded to
    ``dry_run_dir`` (or a new temporary folder) and returns its path (``hf-seqmodels push --dry-run`` prints
    its files and sizes).
    Otherwise returns the URL of the commit.
    """
    folder = Path(folder)
    if dry_run:
        target = Path(dry_run_dir) if dry_run_dir is not None else Path(tempfile.mkdtemp(prefix="hf-push-dry-run-"))
        files = stage_push_folder(folder, target)
        logger.info("Dry run: wrote the %d files that would be uploaded to %s (%s) to %s", len(files), repo_id,
                    "private" if private else "public", target)
        logger.debug("Files:\n%s", format_file_list(files))
        return str(target)
    from huggingface_hub import HfApi

    names = files_to_push(folder)
    api = HfApi(token=token)
    repo = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    with tempfile.TemporaryDirectory(prefix="hf-push-") as staging:
        files = stage_push_folder(folder, staging, link=True)
        logger.info("Uploading to %s:\n%s", repo.repo_id, format_file_list(files))
        info = api.upload_folder(folder_path=staging, repo_id=repo.repo_id, repo_type="model",
                                 allow_patterns=names, commit_message=commit_message)
    url = getattr(info, "commit_url", None) or str(info)
    logger.info("Pushed %d files to %s", len(names), url)
    return url
