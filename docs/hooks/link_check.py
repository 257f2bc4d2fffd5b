"""Every link resolves: in the built site (files and anchors) and in the README (files; web addresses well formed).

``python docs/hooks/link_check.py [SITE_DIR]`` checks the README and, given a built site, the site; it prints
each broken link and exits with status 1 if there is any. The site check also runs at the end of every
``mkdocs build`` (``mkdocs_hooks.on_post_build``).
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

ROOT = Path(__file__).resolve().parents[2]
#: schemes a link may use besides relative paths
EXTERNAL = ("http", "https", "mailto")


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        target = attrs.get("href") if tag == "a" else attrs.get("src") if tag == "img" else None
        if target:
            self.links.append(target)


def well_formed_web_address(url: str) -> bool:
    parsed = urlparse(url)
    if parsed.scheme == "mailto":
        return "@" in parsed.path
    return parsed.scheme in ("http", "https") and bool(re.fullmatch(r"[\w.-]+\.[a-z]{2,}(:\d+)?", parsed.netloc))


def site_problems(site_dir: str | Path) -> list[str]:
    """Broken links of the built site: a relative link to a missing file or a missing anchor, a malformed web
    address."""
    site = Path(site_dir)
    pages = {}
    for path in site.rglob("*.html"):
        if path.name == "404.html" and path.parent == site:  # served at any address: its links are absolute
            continue
        parser = _Links()
        parser.feed(path.read_text(encoding="utf-8"))
        pages[path] = parser
    problems = []
    for path, parser in sorted(pages.items()):
        page_url = "/" + path.relative_to(site).as_posix()
        for link in parser.links:
            parsed = urlparse(link)
            if parsed.scheme == "data":  # an inline image (the tutorials' figures)
                continue
            if parsed.scheme:
                if parsed.scheme not in EXTERNAL or not well_formed_web_address(link):
                    problems.append(f"{page_url}: malformed address {link!r}")
                continue
            target_url = urlparse(urljoin(page_url, link))
            target = site / unquote(target_url.path).lstrip("/")
            if target_url.path.endswith("/") or target.is_dir():
                target = target / "index.html"
            if not target.exists():
                problems.append(f"{page_url}: {link!r} points to a missing file")
            elif parsed.fragment and target in pages and unquote(parsed.fragment) not in pages[target].ids:
                problems.append(f"{page_url}: {link!r} points to a missing anchor")
    return problems


MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def markdown_problems(path: Path) -> list[str]:
    """Broken links of a markdown file read outside the site (the README): relative links must name existing
    files, web addresses must be well formed."""
    problems = []
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    for target in MARKDOWN_LINK.findall(text):
        parsed = urlparse(target)
        if parsed.scheme:
            if not well_formed_web_address(target):
                problems.append(f"{path.name}: malformed address {target!r}")
        elif parsed.path and not (path.parent / unquote(parsed.path)).exists():
            problems.append(f"{path.name}: {target!r} points to a missing file")
    return problems


def main(argv: list[str]) -> int:
    problems = markdown_problems(ROOT / "README.md")
    if argv:
        problems += site_problems(argv[0])
    print("\n".join(problems) or "every link resolves")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
