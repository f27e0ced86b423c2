"""The console in a real browser (Debian's chromium, headless, through chromedriver and selenium) against
`sbfed broker serve`, with the Python SDK as the application: counts change as it sends, a peeked message
shows its properties, a dead letter is resubmitted, and a namespace taken down makes an SDK send fail until
it is brought back. Screenshots of each page go to tests/console-screenshots/ (git-ignored)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusConnectionError
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.broker_process import ROOT
from tests.console_client import served_namespace

pytestmark = pytest.mark.slow

SCREENSHOTS = ROOT / "tests" / "console-screenshots"
WAIT_SECONDS = 20
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                  "--window-size=1280,900")
TOPOLOGY = {"namespaces": {"primary": {
    "queues": {"orders": {}, "audit": {}},
    "topics": {"events": {"subscriptions": {"all": {"forward_to": "audit"}}}},
}}}


def _ensure_chromium() -> None:
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        subprocess.run(["bash", str(ROOT / "scripts" / "ensure-chromium.sh")], check=True)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with served_namespace(TOPOLOGY, tmp_path_factory.mktemp("console-browser")) as entry:
        yield entry


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    _ensure_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    SCREENSHOTS.mkdir(exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def _shot(driver: webdriver.Chrome, name: str) -> Path:
    path = SCREENSHOTS / f"{name}.png"
    assert driver.save_screenshot(str(path)), path
    return path


def _active(driver: webdriver.Chrome, entity: str) -> int:
    """The entity's active count as the page shows it now (read in one script: the table is replaced
    every second, so an element found first may be gone when read)."""
    text = driver.execute_script(
        "const cell = document.querySelector(`tr[data-entity='${arguments[0]}'] td.n`);"
        "return cell ? cell.textContent : null;", entity)
    return -1 if text is None else int(text)


def _until(driver: webdriver.Chrome, condition: Any, what: str) -> Any:
    wait = WebDriverWait(driver, WAIT_SECONDS, poll_frequency=0.2,
                         ignored_exceptions=(StaleElementReferenceException,))
    return wait.until(lambda d: condition(d), what)


def _send(entry: dict[str, Any], queue: str, *messages: ServiceBusMessage, retry_total: int = 3) -> None:
    with ServiceBusClient.from_connection_string(entry["connection_string"], retry_total=retry_total) as sb, \
            sb.get_queue_sender(queue) as sender:
        sender.send_messages(list(messages))


def test_a_person_watches_the_namespace_and_takes_it_down(broker: dict[str, Any],
                                                          browser: webdriver.Chrome) -> None:
    base = f"http://127.0.0.1:{broker['admin_port']}"
    browser.get(broker["console_url"])
    _until(browser, lambda d: d.find_elements(By.ID, "entity-rows"), "the namespace page")
    assert browser.find_element(By.ID, "ns-status").text == "up"
    assert "events/subscriptions/all" in browser.find_element(By.ID, "entity-rows").text
    _shot(browser, "namespace")

    # Counts follow what the SDK sends, without reloading the page (console.js refreshes the table).
    _send(broker, "orders", *[ServiceBusMessage(json.dumps({"order": i}), message_id=f"order-{i}",
                                                application_properties={"region": "west"}) for i in range(3)])
    _until(browser, lambda d: _active(d, "orders") == 3, "the active count of orders to reach 3")
    _send(broker, "orders", ServiceBusMessage("one more", message_id="order-3"))
    _until(browser, lambda d: _active(d, "orders") == 4, "the active count of orders to reach 4")
    _shot(browser, "entities")

    # Peek: the message's system and application properties and its body.
    browser.find_element(By.LINK_TEXT, "orders").click()
    peeked = _until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "article.message"), "peeked messages")
    first = peeked[0]
    assert "order-0" in first.text and "region" in first.text and "'west'" in first.text
    assert '"order": 0' in first.find_element(By.CSS_SELECTOR, "pre.body-json").text  # shown as JSON
    _shot(browser, "messages")

    # A dead letter, seen with its reason, resubmitted, and back in the queue.
    with ServiceBusClient.from_connection_string(broker["connection_string"]) as sb, \
            sb.get_queue_receiver("orders", max_wait_time=5) as receiver:
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.dead_letter_message(message, reason="BadOrder", error_description="no customer")
    browser.find_element(By.ID, "tab-dlq").click()
    _until(browser, lambda d: "BadOrder" in d.find_element(By.TAG_NAME, "main").text, "the dead letter")
    _shot(browser, "dead-letters")
    browser.find_element(By.ID, "resubmit-all").click()
    _until(browser, lambda d: d.find_elements(By.ID, "note"), "the resubmit note")
    assert "Resubmitted 1 message(s)" in browser.find_element(By.ID, "note").text
    browser.get(base + "/$console/")
    _until(browser, lambda d: _active(d, "orders") == 4, "the resubmitted message back in orders")

    # Take the namespace down: the SDK cannot send; bring it back: it can.
    browser.find_element(By.ID, "fault-drop").click()
    _until(browser, lambda d: d.find_element(By.ID, "ns-status").text == "down (drop)", "the namespace down")
    _shot(browser, "namespace-down")
    with pytest.raises(ServiceBusConnectionError):
        _send(broker, "orders", ServiceBusMessage("during the outage"), retry_total=0)
    browser.find_element(By.ID, "fault-up").click()
    _until(browser, lambda d: d.find_element(By.ID, "ns-status").text == "up", "the namespace back up")
    _send(broker, "orders", ServiceBusMessage("after the outage"))
    _until(browser, lambda d: _active(d, "orders") == 5, "the message sent after the outage")
    _shot(browser, "namespace-back")
