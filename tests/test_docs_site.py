"""The documentation site builds offline with ``mkdocs build --strict``, its links resolve, and it renders.

``--strict`` already fails on a broken Markdown link, a page left out of the navigation or a docstring mkdocstrings
cannot render; the generated HTML is checked again here (every relative ``<a href>`` names a file of the built site
and, with ``#anchor``, an id on that page), which also covers links written as raw HTML and those mkdocstrings makes.
The screenshot test renders three pages in headless Chromium (skipped without it, unless PHAZE_REQUIRE_CHROMIUM=1).
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest

from test_report import _chromium  # one rule for finding Chromium (skip, or fail under PHAZE_REQUIRE_CHROMIUM=1)

REPO = Path(__file__).resolve().parents[1]
SCREENSHOT_PAGES = ("index.html", "tutorials/what-if.html", "api/evaluate.html")  # home, a tutorial, an API page

pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")


class _Links(HTMLParser):
    """Every href of <a> and every id of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def parse(page: Path) -> _Links:
    links = _Links()
    links.feed(page.read_text(encoding="utf-8"))
    return links


def broken_links(site: Path) -> list[str]:
    """``page: href`` for each relative link of the built site whose file or anchor does not exist."""
    pages = {page: parse(page) for page in site.rglob("*.html")}
    broken = []
    for page, links in pages.items():
        for href in links.hrefs:
            parts = urlsplit(html.unescape(href))
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
                continue  # external: not followed (the build is offline)
            path = unquote(parts.path)
            # a root-relative link (the 404 page's, served from the site's root) resolves against the site's root
            target = ((site / path.lstrip("/")) if path.startswith("/") else (page.parent / path)).resolve() if path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file() or not target.is_relative_to(site.resolve()):
                broken.append(f"{page.relative_to(site)}: {href}")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{page.relative_to(site)}: {href} (no such anchor)")
    return broken


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built once for this module, offline (no proxy, nothing fetched), strict."""
    out = tmp_path_factory.mktemp("site") / "site"
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1", "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
                        "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return out


def test_site_builds_with_every_page_of_the_nav(site):
    for page in ("index.html", "getting-started.html", "changelog.html", "validation.html", "system_table.html",
                 *(f"tutorials/{p.stem}.html" for p in (REPO / "docs" / "tutorials").glob("*.md")),
                 *(f"api/{p.stem}.html" for p in (REPO / "docs" / "api").glob("*.md"))):
        assert (site / page).is_file(), page


def test_api_reference_renders_the_docstrings(site):
    evaluate = (site / "api" / "evaluate.html").read_text(encoding="utf-8")
    assert "Best training throughput of" in evaluate  # evaluate()'s docstring
    assert 'id="phaze_env.evaluate.Evaluation"' in evaluate
    for page in (site / "api").glob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r":(class|func|meth|data|mod|attr):<code>", text), f"{page.name}: a raw Sphinx role"
    for name in ("get_cluster", "get_preset", "get_stack", "make_objective", "run_search", "custom_workload"):
        assert any(f'id="{prefix}{name}"' in page.read_text(encoding="utf-8")
                   for page in (site / "api").glob("*.html") for prefix in ("phaze_env.cluster.", "phaze_env.hardware.accelerator.",
                                                                             "phaze_env.stacks.", "phaze_env.objective.",
                                                                             "search.run.", "phaze_env.workloads.registry.")), name


def test_site_fetches_nothing_from_the_network(site):
    page = (site / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis.com" not in page and "fonts.gstatic.com" not in page
    assert not re.search(r"<(script|link)[^>]+(src|href)=\"https?://", page), "every asset must be local"


def test_every_relative_link_of_the_built_site_resolves(site):
    assert broken_links(site) == []


def test_link_check_finds_a_broken_link(tmp_path):
    (tmp_path / "a.html").write_text('<a href="b.html">ok</a> <a href="c.html">missing</a> <a href="b.html#x">anchor</a>'
                                     ' <a href="https://example.org/">external</a> <a href="#top">self</a>')
    (tmp_path / "b.html").write_text('<h1 id="y">b</h1> <a href="/a.html">root</a> <a href="/d.html">root, missing</a>')
    assert sorted(broken_links(tmp_path)) == ["a.html: #top (no such anchor)", "a.html: b.html#x (no such anchor)",
                                              "a.html: c.html", "b.html: /d.html"]


@pytest.mark.slow
@pytest.mark.parametrize("page", SCREENSHOT_PAGES)
def test_chromium_renders_the_page(site, page, tmp_path):
    """A screenshot of the page as a reader opens it from disk; PHAZE_DOCS_SCREENSHOTS=DIR keeps the PNGs to look at."""
    chromium = _chromium()
    png = tmp_path / (page.replace("/", "-").removesuffix(".html") + ".png")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1600", "--virtual-time-budget=5000"]
    url = (site / page).resolve().as_uri()
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'class="md-content"' in dom.stdout and "md-nav" in dom.stdout, "the Material theme did not render"
    shot = subprocess.run([*flags, f"--screenshot={png}", url], capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and png.exists(), shot.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(png)
    assert pixels.shape[:2] == (1600, 1280)
    assert len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 50, "the screenshot is blank"
    if keep := os.environ.get("PHAZE_DOCS_SCREENSHOTS"):
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)
