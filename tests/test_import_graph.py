"""The import graph of ``hf_seqmodels``, read statically: every ``import`` and ``from ... import`` of every module,
at module level and inside functions alike (a function-level import only postpones a cycle to the first call).

The rules it keeps:

* no cycle between modules;
* ``training/core/`` holds what every task shares, so it imports no task sub-package (``lm``, ``seq2seq``, ``bert``,
  ``finetune``, ``classic``), nor the ``training`` package that gathers them, nor the command line;
* ``models/`` is copied to the Hub beside each saved model (``trust_remote_code``), so it imports nothing of the
  package outside ``models/``;
* an underscore name is private to its package: no module imports one from (or reads one off) a module of another
  package; a helper two packages need is public in the lower one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("lm", "seq2seq", "bert", "finetune", "classic")


@dataclass(frozen=True)
class Edge:
    """``importer`` imports ``imported`` (at ``line``); ``names`` are the names it takes from it."""

    importer: str
    imported: str
    line: int
    names: tuple[str, ...] = ()


def modules(package: Path) -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the package folder ``package`` (a package is its ``__init__``)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` (a module, or a name inside one) starts with."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _statement_edges(node: ast.Import | ast.ImportFrom, module: str, known: dict[str, Path]
                     ) -> list[tuple[Edge, str | None]]:
    """The edges of one import statement of ``module``, each with the local name it binds to a whole module
    (``from .. import text``, ``import a.b as c``; else None)."""
    found = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if (target := _resolve(alias.name, known)) is not None:
                found.append((Edge(module, target, node.lineno), alias.asname if target == alias.name else None))
        return found
    source = node.module or ""
    if node.level:
        base = module if known[module].name == "__init__.py" else module.rpartition(".")[0]
        parent = base.rsplit(".", node.level - 1)[0] if node.level > 1 else base
        source = f"{parent}.{source}" if source else parent
    if (target := _resolve(source, known)) is None:
        return found
    for alias in node.names:  # `from package import submodule` imports the submodule
        submodule = f"{source}.{alias.name}"
        if submodule in known:
            found.append((Edge(module, submodule, node.lineno), alias.asname or alias.name))
        else:
            found.append((Edge(module, target, node.lineno, (alias.name,)), None))
    return found


def _imports(package: Path) -> Iterator[tuple[str, ast.AST, list[tuple[Edge, str | None]]]]:
    """``(module, syntax tree, [(edge, bound name), ...])`` of every module of ``package``."""
    known = modules(package)
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        statements = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
        yield module, tree, [pair for node in statements for pair in _statement_edges(node, module, known)]


def edges(package: Path) -> list[Edge]:
    """Every import of a module of ``package`` by a module of ``package``, relative imports resolved."""
    return [edge for _, _, pairs in _imports(package) for edge, _ in pairs]


def cycles(graph: list[Edge]) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` through each strongly connected group of modules (Tarjan's algorithm)."""
    successors: dict[str, set[str]] = {}
    for edge in graph:
        if edge.importer != edge.imported:
            successors.setdefault(edge.importer, set()).add(edge.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(successors.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(successors):
        if node not in index:
            visit(node)
    return [_cycle_in(group, successors) for group in groups]


def _cycle_in(group: set[str], successors: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the first module of ``group`` (breadth first, inside the group)."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(successors.get(node, set()) & group):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def private_imports(package: Path) -> list[str]:
    """``importer:line takes NAME from MODULE`` for each underscore name a module imports from, or reads off, a
    module of another package (``__dunder__`` names are not private)."""
    known = modules(package)
    packages = {module: module if path.name == "__init__.py" else module.rpartition(".")[0]
                for module, path in known.items()}
    found = []
    for module, tree, pairs in _imports(package):
        found += [(module, edge.line, name, edge.imported) for edge, _ in pairs for name in edge.names
                  if _private(name) and packages[module] != packages[edge.imported]]
        bound = {name: edge.imported for edge, name in pairs if name is not None}
        found += [(module, node.lineno, node.attr, bound[node.value.id]) for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                  and _private(node.attr) and packages[module] != packages[bound[node.value.id]]]
    return [f"{module}:{line} takes {name} from {imported}" for module, line, name, imported in sorted(found)]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


# ------------------------------------------------------------------------------------------------ the package ----
PACKAGE = ROOT / "hf_seqmodels"


def test_the_package_has_no_import_cycle():
    found = cycles(edges(PACKAGE))
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


def _above_core(module: str) -> bool:
    """Whether ``module`` is a task sub-package of ``training``, the ``training`` package itself or the command line."""
    parts = module.split(".")
    return module in ("hf_seqmodels.training", "hf_seqmodels.cli", "hf_seqmodels.demo") or (
        parts[:2] == ["hf_seqmodels", "training"] and len(parts) > 2 and parts[2] in TASKS)


def test_training_core_imports_no_task_and_no_command_line():
    upward = sorted({f"{e.importer}:{e.line} imports {e.imported}" for e in edges(PACKAGE)
                     if e.importer.startswith("hf_seqmodels.training.core") and _above_core(e.imported)})
    assert not upward, "training/core/ imports upward:\n" + "\n".join(upward)


def test_models_import_nothing_outside_models():
    outside = [f"{e.importer}:{e.line} imports {e.imported}" for e in edges(PACKAGE)
               if e.importer.startswith("hf_seqmodels.models") and not e.imported.startswith("hf_seqmodels.models")]
    assert not outside, "models/ (copied to the Hub) imports the rest of the package:\n" + "\n".join(outside)


def test_no_module_takes_a_private_name_from_another_package():
    found = private_imports(PACKAGE)
    assert not found, "private names used across packages:\n" + "\n".join(found)


# ----------------------------------------------------------------------------------------- the checks themselves ----
def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root / "pkg"


def test_a_cycle_through_function_level_and_relative_imports_is_found(tmp_path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/core/__init__.py": "",
        "pkg/core/a.py": "def f():\n    from ..task import b\n",
        "pkg/task/__init__.py": "",
        "pkg/task/b.py": "from ..core.a import f\nimport pkg.task.c\n",
        "pkg/task/c.py": "from . import b\n",
    })
    assert cycles(edges(package)) == [["pkg.core.a", "pkg.task.b", "pkg.core.a"]]
    (package / "task" / "c.py").write_text("x = 1\n")
    (package / "core" / "a.py").write_text("x = 1\n")
    assert cycles(edges(package)) == []


def test_private_names_are_found_across_packages_only(tmp_path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/core/__init__.py": "",
        "pkg/core/text.py": "def _helper():\n    pass\n",
        "pkg/core/other.py": "from .text import _helper\n",
        "pkg/task/__init__.py": "",
        "pkg/task/b.py": "from ..core.text import _helper, __all__\nfrom ..core import text\n\ntext._helper()\n",
    })
    assert private_imports(package) == ["pkg.task.b:1 takes _helper from pkg.core.text",
                                        "pkg.task.b:4 takes _helper from pkg.core.text"]
