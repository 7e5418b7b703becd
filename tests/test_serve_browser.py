"""The web page of `mtkit serve` in a real headless browser (Debian's chromium and chromium-driver,
driven by selenium): load the page, type a sentence, wait for the translation, hover a word of it,
and check that the source words it highlights are those the model attended to; save a screenshot
(MTKIT_SCREENSHOT=path keeps it, e.g. for docs/serve.md). Skips, saying why, where the browser or
its driver is missing (`.ci/run` installs them)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
selenium = pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from serve_helpers import ServerProcess, served_model  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver", "/usr/lib/chromium/chromedriver")


def _first(names: tuple[str, ...]) -> str | None:
    for name in names:
        found = shutil.which(name) or (name if Path(name).is_file() else None)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser():
    binary, driver_path = _first(BROWSERS), _first(DRIVERS)
    if binary is None or driver_path is None:
        reason = "no chromium browser and chromedriver (apt-get install chromium chromium-driver)"
        print(f"skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,900"):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=driver_path)
    driver = webdriver.Chrome(options=options, service=service)
    yield driver
    driver.quit()


def test_type_translate_hover_and_see_the_attended_source_words(browser, tmp_path):
    model = Path(os.environ.get("MTKIT_BROWSER_MODEL") or served_model(tmp_path / "en-de"))
    sentence = os.environ.get("MTKIT_BROWSER_TEXT", "the cat sat on the mat.")
    with ServerProcess([model]) as server:
        browser.get(server.url + "/")
        wait = WebDriverWait(browser, 60)
        wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "#pair option")))
        browser.find_element(By.ID, "source").send_keys(sentence)  # translate-as-you-type does the rest
        first_sentence = (By.CSS_SELECTOR, "#output .sentence")
        span = wait.until(expected_conditions.presence_of_element_located(first_sentence))
        reply = json.loads(urllib.request.urlopen(urllib.request.Request(
            server.url + "/v1/translate",
            json.dumps({"text": sentence, "model": model.resolve().name, "attention": True}).encode(),
            {"Content-Type": "application/json"})).read())
        expected = reply["translations"][0]["sentences"][0]
        assert span.text == expected["text"]
        assert float(span.get_attribute("data-confidence")) == pytest.approx(expected["confidence"], abs=1e-4)
        targets = browser.find_elements(By.CSS_SELECTOR, "#att-target .tgt-token")
        sources = browser.find_elements(By.CSS_SELECTOR, "#att-source .src-token")
        assert len(targets) == len(expected["target_tokens"]) + 1  # and the end of sentence
        assert len(sources) == len(expected["source_tokens"])
        for j in (0, len(targets) // 2):
            ActionChains(browser).move_to_element(targets[j]).perform()
            row = expected["attention"][j]
            top = max(row)
            wanted = {i for i, w in enumerate(row) if w >= 0.5 * top}
            wait.until(lambda d, j=j: "active" in targets[j].get_attribute("class"))
            marked = {i for i, s in enumerate(sources) if "attended" in s.get_attribute("class")}
            assert marked == wanted, f"target token {j}: highlighted {marked}, attention says {wanted}"
            assert row.index(top) in marked
        shot = Path(os.environ.get("MTKIT_SCREENSHOT") or tmp_path / "serve.png")
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
