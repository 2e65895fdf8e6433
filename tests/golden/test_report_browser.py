"""The HTML report of every report golden input, opened in headless Chromium as a person would.

Each page loads from a file with no request but itself and no console message (a blocked
request or inline script would log a Content-Security-Policy error), and its screenshot is a
real picture: a PNG with many colours, not a blank page. Chromium is Debian's ``chromium``
package, which ``.ci/run`` installs; without it locally the test is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from nvcre.report.html import render_html
from nvcre.testing.browser import Chromium, chromium, chromium_path, png_colours
from tests.golden.report_inputs import report_of

ROOT = Path(__file__).parent / "report"
CASES = sorted(p.parent.name for p in ROOT.glob("*/input.yaml"))

pytestmark = pytest.mark.skipif(
    chromium_path() is None, reason="no chromium on the PATH (.ci/run installs Debian's chromium)"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    with chromium(width=1200, height=900) as opened:
        yield opened


@pytest.mark.parametrize("case", CASES, ids=str)
def test_html_report_opens_in_chromium(case: str, browser: Chromium, tmp_path: Path) -> None:
    report = report_of(yaml.safe_load((ROOT / case / "input.yaml").read_text()))
    page = tmp_path / f"{case}.html"
    page.write_text(render_html([report]))

    load = browser.open(page)

    assert load.requests == [load.url], load.requests  # the file itself, nothing else
    assert load.console == []
    png = png_colours(load.png)
    assert png.width == 1200 and png.height == load.height >= 900
    assert png.colours >= 50, f"a near-blank screenshot: {png.colours} colours"


def test_a_page_that_fetches_is_caught(browser: Chromium, tmp_path: Path) -> None:
    """The harness sees what it must reject: a request beyond the file and the console error."""
    page = tmp_path / "fetches.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>t</title>"
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'"></head>'
        '<body><img src="http://127.0.0.1:9/x.png"><script>console.error("boom")</script></body></html>'
    )
    load = browser.open(page, screenshot=False)
    assert load.console, "the blocked image and script went unnoticed"
    unsafe = tmp_path / "unsafe.html"
    unsafe.write_text(
        '<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png"><script>console.error("boom")'
        "</script></body></html>"
    )
    load = browser.open(unsafe, screenshot=False)
    assert any(u.startswith("http://127.0.0.1:9/") for u in load.other_requests)
    assert any("boom" in line for line in load.console)
