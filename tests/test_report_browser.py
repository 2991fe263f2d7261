"""The impact report's HTML page in a real browser: Debian's Chromium, headless, driven through chromedriver.

It opens ``report.html`` from a ``file://`` URL (as someone opening the mailed file does) and checks that it
renders (title and sentences in the DOM), that every picture loaded (``naturalWidth > 0``), and that the browser
logged no error or warning (a blocked load, a broken ``data:`` URI). The screenshot is kept as a test artifact:
``build/test-artifacts/report.html-pyX.Y.png`` (one per Python: ``make test-pythons`` runs it beside
``make test``). Never skipped: without Chromium, chromedriver or selenium it fails
saying what to install (``.ci/run`` installs Chromium where it is missing).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.pipeline.report import sentences, write_report
from tests.pipeline.test_report_pages import sample_data

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).parents[1] / "build" / "test-artifacts"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
"""What works on these machines: without the background-networking flags Chromium's own connections to Google's
hosts fail at every start (a closed network), and as root it runs only without its sandbox."""


def _browser(profile: Path) -> Any:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(
            f"{' and '.join(missing)} missing: this test needs Debian's Chromium and its driver "
            "(apt-get install -y chromium chromium-driver; .ci/run does it)"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium missing: install the dev extra (pip install -c constraints.txt -e '.[dev]')")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}", "--window-size=1280,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def test_the_report_page_renders_with_every_picture_and_no_console_error(tmp_path: Path) -> None:
    data = sample_data()
    write_report(data, tmp_path / "out")
    driver = _browser(tmp_path / "profile")
    try:
        driver.set_page_load_timeout(120)
        driver.get((tmp_path / "out" / "report.html").as_uri())
        assert driver.title == f"Fleet impact: {data.title}"
        shown = " ".join(driver.execute_script("return document.body.innerText").split())
        for sentence in sentences(data):
            assert " ".join(sentence.split()) in shown
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth, i.naturalHeight])"
        )
        assert len(images) == 4
        assert all(complete and width > 0 and height > 0 for _, complete, width, height in images), images
        logged = [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]
        assert logged == []
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1280, min(int(height) + 100, 12000))
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(ARTIFACTS / f"report.html-py{sys.version_info[0]}.{sys.version_info[1]}.png"))
        # the control: an error the page would log is seen, so the empty log above means no error
        driver.execute_script("console.error('control: an error the page logs')")
        assert any("control: an error" in entry["message"] for entry in driver.get_log("browser"))
    finally:
        driver.quit()
