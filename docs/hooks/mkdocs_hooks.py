"""The mkdocs hooks of the site (``hooks:`` in ``mkdocs.yml``): the pages written from the code.

* ``on_config`` fills the nav sections ``Models``, ``API reference`` and ``Tutorials`` from the registry,
  :data:`api_pages.API_MODULES` and the tutorial scripts ``docs/tutorials/*.py``;
* ``on_files`` adds the family pages (their examples executed), the API pages, the course map and the model
  cards' figures; a family without prose or a course map naming something that does not exist fails the build;
* ``on_post_build`` checks every link and anchor of the built site (:mod:`link_check`).
"""

from __future__ import annotations

import logging
import sys
from html.parser import HTMLParser
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).parent))

import api_pages  # noqa: E402
import course_map  # noqa: E402
import family_pages  # noqa: E402
import link_check  # noqa: E402

logger = logging.getLogger("mkdocs.hooks.hf_seqmodels")


def _families():
    from hf_seqmodels.registry import FAMILY_DESCRIPTIONS

    return FAMILY_DESCRIPTIONS


def tutorial_title(path: Path) -> str:
    """The first markdown heading of a jupytext percent script (``# # Title``), else its file name."""
    import re

    found = re.search(r"^# #\s+(.+)$", path.read_text(encoding="utf-8"), flags=re.M)
    return found.group(1).strip() if found else path.stem.split("_", 1)[-1].replace("_", " ").capitalize()


def generated_nav(docs_dir: Path) -> dict[str, list]:
    """The nav sections written from the code: the family pages, the API pages and the tutorial scripts."""
    tutorials = sorted((docs_dir / "tutorials").glob("[0-9]*.py"))
    return {
        "Models": [{"Overview": "models/index.md"}]
        + [{family_pages.family_title(f).split(" (")[0]: family_pages.page_path(f)} for f in _families()],
        "API reference": [{"Overview": "api/index.md"}] + [{title: f"api/{page}.md"}
                                                           for page, title, _ in api_pages.API_MODULES],
        "Tutorials": [{tutorial_title(path): f"tutorials/{path.name}"} for path in tutorials],
    }


def on_config(config):
    generated = generated_nav(Path(config.docs_dir))
    nav = []
    for item in config.nav or []:
        title = next(iter(item)) if isinstance(item, dict) else None
        if title in generated:
            if generated[title]:
                nav.append({title: generated[title]})
        else:
            nav.append(item)
    config.nav = nav
    return config


def benchmarks_page() -> str:
    """The benchmark scripts of ``benchmarks/``, each with the first paragraph of its docstring."""
    import ast

    lines = ["# Benchmarks", "", "Speed comparisons are scripts, not timed tests: each prints ratios against its "
             "reference measured in the same run. Run one with `python -m benchmarks.NAME --help`.", "",
             "| Script | What it measures |", "|---|---|"]
    for path in sorted((family_pages.ROOT / "benchmarks").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if path.stem.startswith("_") or not doc:
            continue
        summary = " ".join(doc.split("\n\n")[0].split()).replace("|", "\\|")
        lines.append(f"| `python -m benchmarks.{path.stem}` | {summary} |")
    return "\n".join(lines) + "\n"


def _add(files, config, path: str, content: str | bytes) -> None:
    files.append(File.generated(config, path, content=content))


def on_files(files, config):
    problems = []
    for page in family_pages.all_family_pages(execute=True):
        problems += page.problems
        _add(files, config, page.path, page.markdown)
        for target, source in page.images.items():
            _add(files, config, target, source.read_bytes())
    _add(files, config, "models/index.md", family_pages.models_index(_families()))
    _add(files, config, "api/index.md", api_pages.api_index())
    for page, _, _ in api_pages.API_MODULES:
        _add(files, config, f"api/{page}.md", api_pages.api_page(page))
    _add(files, config, "benchmarks.md", benchmarks_page())
    problems += course_map.problems()
    _add(files, config, "course-map.md", course_map.course_map_page())
    if problems:
        raise PluginError("documentation problems:\n" + "\n".join(problems))
    return files


class _HeadingIds(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6") and dict(attrs).get("id"):
            self.ids.append(dict(attrs)["id"])


def align_toc(toc, html: str) -> None:
    """Point a tutorial's table of contents at the ids nbconvert gave its headings. mkdocs-jupyter slugs the
    headings itself, and its slugs lose the code of a heading (``with `Trainer` `` gives ``...-with``), so their
    links would miss; the entries and the headings come in the same order, so the n-th entry takes the n-th id."""
    parser = _HeadingIds()
    parser.feed(html)
    entries, stack = [], list(reversed(list(toc)))
    while stack:
        entry = stack.pop()
        entries.append(entry)
        stack.extend(reversed(list(entry.children)))
    if len(entries) == len(parser.ids):
        for entry, heading_id in zip(entries, parser.ids, strict=True):
            entry.id = heading_id


def on_page_content(html, page, config, files):
    if page.file.src_uri.startswith("tutorials/") and page.file.src_uri.endswith(".py"):
        align_toc(page.toc, html)
    return html


def on_post_build(config):
    problems = link_check.site_problems(config.site_dir)
    if problems:
        raise PluginError(f"{len(problems)} broken links in the built site:\n" + "\n".join(problems[:50]))
