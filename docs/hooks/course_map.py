"""The course map: each section of the lecture notes, the pages and code that implement it, and the tests that
check its equations (``docs/course_map.yml``), rendered as ``course-map.md``.

:func:`problems` lists every entry that names something missing: a page of the site, a module or symbol of the
package, a test file or test function, a section heading of the notes (when the notes are on this machine).
"""

from __future__ import annotations

import ast
import importlib
import os
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MAP_FILE = DOCS / "course_map.yml"
NOTES_README = "README.md"


def entries(path: Path = MAP_FILE) -> list[dict]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def notes_dir() -> Path | None:
    """The lecture notes: ``$HF_SEQMODELS_COURSE_NOTES``, else ``shared/course-notes`` beside the clone."""
    candidates = [os.environ.get("HF_SEQMODELS_COURSE_NOTES")] + [str(p / "shared" / "course-notes")
                                                                  for p in ROOT.parents[:2]]
    return next((Path(c) for c in candidates if c and (Path(c) / NOTES_README).exists()), None)


def resolve(dotted: str):
    """The module, class or function named by ``dotted``; ImportError or AttributeError if there is none."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(f"no module in {dotted!r}")


def defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names |= {f"{node.name}::{item.name}" for item in node.body if isinstance(item, ast.FunctionDef)}
    return names


def site_pages() -> set[str]:
    """The pages of the site: the markdown files of ``docs/`` and the pages the hooks write."""
    import api_pages
    import family_pages

    from hf_seqmodels.registry import FAMILY_DESCRIPTIONS

    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    pages |= {family_pages.page_path(f) for f in FAMILY_DESCRIPTIONS} | {"models/index.md", "course-map.md"}
    return pages | {f"api/{page}.md" for page, _, _ in api_pages.API_MODULES} | {"api/index.md"}


def problems(path: Path = MAP_FILE) -> list[str]:
    found, pages, notes = [], site_pages(), notes_dir()
    for entry in entries(path):
        topic = entry["topic"]
        found += [f"{topic}: page {page!r} does not exist" for page in entry["pages"] if page not in pages]
        for dotted in entry["code"]:
            try:
                resolve(dotted)
            except (ImportError, AttributeError) as error:
                found.append(f"{topic}: code {dotted!r} does not exist ({error})")
        for node in entry["tests"]:
            file, _, name = node.partition("::")
            if not (ROOT / file).exists():
                found.append(f"{topic}: test file {file!r} does not exist")
            elif name and name not in defined_tests(ROOT / file):
                found.append(f"{topic}: test {node!r} does not exist")
        for reference in entry["notes"] if notes else []:
            number, _, heading = reference.partition(" ")
            files = list(notes.glob(f"{number}_*.txt"))
            if not files or heading not in files[0].read_text(encoding="utf-8"):
                found.append(f"{topic}: the notes {number} have no section {heading!r}")
    return found


def course_map_page(path: Path = MAP_FILE) -> str:
    lines = ["# Course map", "",
             "Each section of the course notes (five sets of lecture notes, in Chinese with LaTeX: `000` to `004`), "
             "the pages and the code that implement it, and the tests that check its equations. The build fails "
             "if any page, symbol or test named here does not exist (`docs/course_map.yml`).", "",
             "| Topic | Notes | Pages | Code | Tests |", "|---|---|---|---|---|"]
    import api_pages

    documented = {path for entries_ in api_pages.surface().values() for path, _ in entries_}
    for entry in entries(path):
        pages = ", ".join(f"[{page.removesuffix('.md')}]({page})" for page in entry["pages"])
        code = "<br>".join(f"[`{dotted}`][{dotted}]" if dotted in documented else f"`{dotted}`"
                           for dotted in entry["code"])
        tests = "<br>".join(f"`{node}`" for node in entry["tests"])
        notes = "<br>".join(entry["notes"])
        lines.append(f"| {entry['topic']} | {notes} | {pages} | {code} | {tests} |")
    return "\n".join(lines) + "\n"
