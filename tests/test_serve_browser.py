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


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    given = os.environ.get("MTKIT_BROWSER_MODEL")
    return Path(given) if given else served_model(tmp_path_factory.mktemp("browser") / "en-de")


@pytest.fixture(scope="module")
def server(browser, model):
    """One server for the page's tests (a server process costs seconds to start)."""
    with ServerProcess([model]) as running:
        yield running


def test_type_translate_hover_and_see_the_attended_source_words(browser, server, model, tmp_path):
    sentence = os.environ.get("MTKIT_BROWSER_TEXT", "the cat sat on the mat.")
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


def multipart(url: str, path: Path, source: str, target: str) -> urllib.request.Request:
    """A /translate_file request as a client script sends it (to compare with what the page got)."""
    boundary = "----mtkit-test-boundary"
    body = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in (("source", source), ("target", target)))
    body += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{path.name}"\r\n\r\n'
             ).encode() + path.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
    return urllib.request.Request(url, body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})


def test_the_files_tab_translates_a_file_and_shows_an_error_in_one_line(browser, server, tmp_path):
    catalog = tmp_path / "messages.po"
    catalog.write_bytes(b'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                        b'msgid "the cat sat on the mat ."\nmsgstr ""\n')
    broken = tmp_path / "broken.po"
    broken.write_bytes(b'msgid "the cat\nmsgstr ""\n')
    browser.get(server.url + "/")
    wait = WebDriverWait(browser, 60)
    tab = wait.until(expected_conditions.visibility_of_element_located((By.ID, "tab-files")))
    tab.click()
    assert browser.find_element(By.ID, "files-panel").is_displayed()
    assert not browser.find_element(By.ID, "text-panel").is_displayed()
    assert ".po" in browser.find_element(By.ID, "file-formats").text
    assert browser.find_element(By.ID, "file-source").get_attribute("value") == "en"
    assert browser.find_element(By.ID, "file-target").get_attribute("value") == "de"
    browser.find_element(By.ID, "file-input").send_keys(str(catalog))
    browser.find_element(By.ID, "file-go").click()
    link = wait.until(expected_conditions.visibility_of_element_located((By.ID, "file-link")))
    assert link.get_attribute("download") == "messages.po" and "messages.po" in link.text
    got = urllib.request.urlopen(link.get_attribute("href")).read()
    request = multipart(server.url + "/translate_file", catalog, "en", "de")
    again = json.loads(urllib.request.urlopen(request).read())["translatedFileUrl"]
    assert got == urllib.request.urlopen(again).read() and b'msgid "the cat sat on the mat ."' in got
    browser.find_element(By.ID, "file-input").clear()
    browser.find_element(By.ID, "file-input").send_keys(str(broken))
    browser.find_element(By.ID, "file-go").click()
    status = (By.CSS_SELECTOR, "#file-status.error")
    error = wait.until(expected_conditions.visibility_of_element_located(status)).text
    assert error.startswith("Invalid request: ") and "not a gettext line" in error and "\n" not in error
    assert not browser.find_element(By.ID, "file-link").is_displayed()
