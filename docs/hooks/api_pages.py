"""The API reference: one page per public module, written from the modules' own lists at build time.

:data:`API_MODULES` names the public surface; each page holds a mkdocstrings ``:::`` block for every public
class and function of its module (``__all__``, else the classes and functions the module defines), so a name
added to ``__all__`` is documented with no docs edit, and :func:`undocumented` lists those without a docstring
(``tests/test_docs.py`` fails on any).
"""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType

#: ``(page name, title, modules)``: the public surface of the package
API_MODULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("models", "Models and configurations", ("hf_seqmodels",)),
    ("training", "Training", ("hf_seqmodels.training",)),
    ("recipes", "Training recipes", ("hf_seqmodels.recipes",)),
    ("entry-points", "Training entry points", ("hf_seqmodels.training.lm.cli", "hf_seqmodels.training.seq2seq.cli",
                                               "hf_seqmodels.training.bert.cli", "hf_seqmodels.training.finetune.cli",
                                               "hf_seqmodels.training.classic.ngram_cli",
                                               "hf_seqmodels.training.classic.embeddings_cli")),
    ("export", "Export", ("hf_seqmodels.export",)),
    ("hub", "Hub", ("hf_seqmodels.cards", "hf_seqmodels.publishing")),
    ("tokenization", "Tokenization", ("hf_seqmodels.tokenization",)),
    ("embeddings", "Word embeddings", ("hf_seqmodels.embeddings",)),
    ("ngram", "n-gram language model", ("hf_seqmodels.ngram",)),
    ("building-blocks", "Building blocks", tuple(f"hf_seqmodels.models.{name}" for name in (
        "recurrent_stack", "recurrent_cells", "tree_lstm", "crf", "rnn_attention", "multi_head_attention",
        "positional_encoding", "state_cache"))),
)
#: of an entry-point module, only these are documented (the rest serves them)
ENTRY_POINT_NAMES = ("main", "parse_arguments", "build_parser")


def public_names(module: ModuleType, entry_points: bool = False) -> list[str]:
    """The module's public classes and functions: those of ``__all__`` (entry-point modules: ``main``,
    ``parse_arguments``, ``build_parser``), else the ones it defines."""
    if entry_points:
        names = [name for name in ENTRY_POINT_NAMES if hasattr(module, name)]
    elif hasattr(module, "__all__"):
        names = list(module.__all__)
    else:
        names = [name for name, value in vars(module).items()
                 if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__]
    return [name for name in names if inspect.isclass(getattr(module, name)) or inspect.isroutine(getattr(module, name))]


def identifier(module: ModuleType, name: str) -> str:
    """The path mkdocstrings documents ``name`` under: ``module.name``, or the defining module's path for a
    name the module imports lazily (``__getattr__``), which static analysis cannot follow."""
    if name in getattr(module, "_LAZY", {}):
        value = getattr(module, name)
        return f"{value.__module__}.{value.__qualname__}"
    return f"{module.__name__}.{name}"


def surface() -> dict[str, list[tuple[str, object]]]:
    """``{page: [(identifier, object), ...]}`` of every documented class and function."""
    pages = {}
    for page, _, modules in API_MODULES:
        entries = []
        for module_name in modules:
            module = importlib.import_module(module_name)
            for name in public_names(module, entry_points=page == "entry-points"):
                entries.append((identifier(module, name), getattr(module, name)))
        pages[page] = entries
    return pages


def _own_doc(obj: object) -> str | None:
    return obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)


def undocumented() -> list[str]:
    """The public classes and functions, and the public methods our classes define, without a docstring (a method
    that overrides a documented one of transformers or torch counts as documented by it)."""
    missing = []
    for entries in surface().values():
        for path, obj in entries:
            if not (_own_doc(obj) or "").strip():
                missing.append(path)
            if not inspect.isclass(obj):
                continue
            for name, member in vars(obj).items():
                function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                if name.startswith("_") or not inspect.isfunction(function):
                    continue
                if not (inspect.getdoc(getattr(obj, name)) or "").strip():  # an override inherits its base's
                    missing.append(f"{path}.{name}")
    return sorted(set(missing))


def api_page(page: str) -> str:
    title, modules = next((t, m) for p, t, m in API_MODULES if p == page)
    lines = [f"# {title}", ""]
    for module_name in modules:
        module = importlib.import_module(module_name)
        summary = (module.__doc__ or "").strip().split("\n\n")[0]
        if len(modules) > 1:
            lines += [f"## `{module_name}`", ""]
        lines += [summary, ""]
        for name in public_names(module, entry_points=page == "entry-points"):
            lines += [f"::: {identifier(module, name)}", ""]
    return "\n".join(lines)


def api_index() -> str:
    lines = ["# API reference", "", "Written from the docstrings; each page lists what its module exports.", ""]
    for page, title, modules in API_MODULES:
        lines.append(f"- [{title}]({page}.md): " + ", ".join(f"`{m}`" for m in modules))
    return "\n".join(lines) + "\n"
