"""The documentation site as a person sees it (``make test-docs``; marked ``docs``, so the default
suite leaves it out and CI runs it after).

Builds the site with warnings as errors, then: every internal link and image of every page points
at a file that exists (and a link's anchor at an element of that page); three pages (the index, a
tutorial, an API page) open in headless Chromium, their screenshots go to
``docs/_build/screenshots``, and the math on them is typeset by MathJax (no raw TeX left).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "docs" / "_build"
HTML = BUILD / "html"
SCREENSHOTS = BUILD / "screenshots"
#: (page, the name of its screenshot)
PAGES = (
    ("index.html", "index.png"),
    ("auto_tutorials/plot_1_harmonics.html", "tutorial.png"),
    ("api/zonal.harmonics.html", "api.png"),
)


class _Links(HTMLParser):
    """The ids, link targets and image sources of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        if tag == "a" and values.get("href"):
            self.links.append(str(values["href"]))
        if tag == "img" and values.get("src"):
            self.images.append(str(values["src"]))


def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("no Chromium on PATH: `make docs-setup` installs Debian's chromium")


def _browse(page: Path, *arguments: str) -> str:
    """Run headless Chromium on ``page`` (JavaScript given 10 s of virtual time); its stdout."""
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--window-size=1280,900",
        "--virtual-time-budget=10000",
        *arguments,
        page.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return result.stdout


@pytest.fixture(scope="module")
def site() -> Path:
    """The site, built as ``make docs`` builds it (warnings are errors)."""
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q"]
    subprocess.run([*command, "docs", str(HTML)], cwd=ROOT, env=environment, check=True)
    return HTML


def test_every_internal_link_and_image_resolves(site: Path):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    parsed = {page: _parse(page) for page in pages}
    broken = []
    for page, links in parsed.items():
        for reference in links.links + links.images:
            parts = urlsplit(reference)
            if parts.scheme or parts.netloc or reference.startswith("mailto:"):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {reference}")
            elif parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(site)} -> {reference} (no such anchor)")
    assert not broken, "broken internal links or images:\n" + "\n".join(broken)


def test_tutorials_have_their_figures(site: Path):
    """Each executed tutorial shows at least one figure, and the figure files are images."""
    tutorials = sorted((site / "auto_tutorials").glob("plot_*.html"))
    assert len(tutorials) == 8
    for tutorial in tutorials:
        images = [src for src in _parse(tutorial).images if "sphx_glr_plot_" in src]
        assert images, f"{tutorial.name} shows no figure"
        for source in images:
            assert (tutorial.parent / source).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("page", "screenshot"), PAGES)
def test_page_renders_in_chromium(site: Path, page: str, screenshot: str):
    """The page opens, its screenshot is a non-trivial PNG, and its math is typeset."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    picture = SCREENSHOTS / screenshot
    picture.unlink(missing_ok=True)
    _browse(site / page, f"--screenshot={picture}")
    assert picture.read_bytes()[:4] == b"\x89PNG"
    assert picture.stat().st_size > 20_000  # a blank page compresses to a few kB
    dom = _browse(site / page, "--dump-dom")
    assert "<main" in dom or 'class="main' in dom
    source = (site / page).read_text(encoding="utf-8")
    if 'class="math notranslate' in source:
        assert "mjx-container" in dom, f"{page}: MathJax typeset nothing"
        assert "\\(" not in _text_of_math(dom), f"{page}: raw TeX left on the page"


def test_concepts_math_is_typeset(site: Path):
    """Display and inline math of the concepts page are all typeset by MathJax."""
    dom = _browse(site / "concepts.html", "--dump-dom")
    source = (site / "concepts.html").read_text(encoding="utf-8")
    assert dom.count("<mjx-container") >= source.count('class="math notranslate')
    assert "\\[" not in _text_of_math(dom) and "\\(" not in _text_of_math(dom)


def _text_of_math(dom: str) -> str:
    """The text of the page's math spans and divs that MathJax left as they were."""

    class _Math(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.depth = 0
            self.text: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            classes = (dict(attrs).get("class") or "").split()
            if self.depth or ("math" in classes and tag in ("span", "div")):
                self.depth += 1

        def handle_endtag(self, tag: str) -> None:
            if self.depth:
                self.depth -= 1

        def handle_data(self, data: str) -> None:
            if self.depth:
                self.text.append(data)

    parser = _Math()
    parser.feed(dom)
    return "".join(parser.text)
