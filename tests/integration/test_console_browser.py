"""The console in a real browser (Debian's chromium, headless, through chromedriver and selenium) against
`sbfed broker serve`, with the Python SDK as the application: counts change as it sends, the sparkline
shows its messages per second, a peeked message shows its properties, a dead letter is resubmitted, a
namespace taken down makes an SDK send fail until it is brought back, and a pasted Listen-only key finds no
purge or resubmit to click and is refused one posted anyway. Screenshots of each page go to
tests/console-screenshots/ (git-ignored); with SBFED_README_IMAGES=1 (`make console-screenshots`) the
README's image is written to docs/images/ too."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusConnectionError, ServiceBusError
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from patterns.drills.broker import BrokerNamespace
from tests.broker_process import ROOT
from tests.console_client import served_namespace

pytestmark = pytest.mark.slow

SCREENSHOTS = ROOT / "tests" / "console-screenshots"
README_IMAGES = ROOT / "docs" / "images"
WAIT_SECONDS = 20
MAX_SHOT_HEIGHT = 4000
SPARKLINE_SAMPLES = 8
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                  "--window-size=1280,900")
LISTENER_KEY = "bGlzdGVuLW9ubHkta2V5"
MANAGE_KEY = "U0FTX0tFWV9WQUxVRQ=="
TOPOLOGY = {"namespaces": {"primary": {
    "policies": {"RootManageSharedAccessKey": {"key": MANAGE_KEY,
                                               "rights": ["Manage", "Send", "Listen"]},
                 "reader": {"key": LISTENER_KEY, "rights": ["Listen"]}},
    "queues": {"orders": {}, "audit": {}, "payments": {}, "bulk": {}, "carts": {"requires_session": True},
               "sharded": {"enable_partitioning": True}},
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


def _shot(driver: webdriver.Chrome, name: str, readme: str | None = None) -> Path:
    """The whole page, beyond the window (through the DevTools protocol), saved as `name`.png."""
    path = SCREENSHOTS / f"{name}.png"
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    height = min(size["height"], MAX_SHOT_HEIGHT)
    clip = {"x": 0, "y": 0, "width": size["width"], "height": height, "scale": 1}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot",
                                  {"format": "png", "captureBeyondViewport": True, "clip": clip})
    path.write_bytes(base64.b64decode(shot["data"]))
    if readme and os.environ.get("SBFED_README_IMAGES") == "1":
        shutil.copyfile(path, README_IMAGES / readme)
    return path


def _active(driver: webdriver.Chrome, entity: str) -> int:
    """The entity's active count as the page shows it now (read in one script: the table is replaced
    every second, so an element found first may be gone when read)."""
    text = driver.execute_script(
        "const cell = document.querySelector(`tr[data-entity='${arguments[0]}'] td.n`);"
        "return cell ? cell.textContent : null;", entity)
    return -1 if text is None else int(text)


def _rate(driver: webdriver.Chrome, entity: str) -> str:
    """The messages-per-second label next to the entity's sparkline."""
    return driver.execute_script(
        "const label = document.querySelector(`tr[data-entity='${arguments[0]}'] .rate`);"
        "return label ? label.textContent : '';", entity)


def _samples(driver: webdriver.Chrome, entity: str) -> int:
    """How many refreshes the entity's sparkline has plotted."""
    return int(driver.execute_script(
        "const canvas = document.querySelector(`tr[data-entity='${arguments[0]}'] canvas.spark`);"
        "return canvas ? canvas.dataset.samples || 0 : 0;", entity))


def _flowing(label: str) -> bool:
    """True when the label says messages went in and out during the last refresh ("3.0 in · 2.0 out/s")."""
    found = re.match(r"([\d.]+) in · ([\d.]+) out", label)
    return found is not None and float(found.group(1)) > 0 and float(found.group(2)) > 0


class Traffic(threading.Thread):
    """An application at work on one queue: sends a message and completes one about ten times a second."""

    def __init__(self, entry: dict[str, Any], queue: str) -> None:
        super().__init__(daemon=True)
        self.entry, self.queue, self.stopped = entry, queue, threading.Event()

    def run(self) -> None:
        with ServiceBusClient.from_connection_string(self.entry["connection_string"]) as sb, \
                sb.get_queue_sender(self.queue) as sender, \
                sb.get_queue_receiver(self.queue, max_wait_time=1) as receiver:
            while not self.stopped.is_set():
                sender.send_messages(ServiceBusMessage("payment"))
                for message in receiver.receive_messages(max_message_count=10, max_wait_time=0.1):
                    receiver.complete_message(message)

    def __enter__(self) -> Traffic:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        self.join(timeout=WAIT_SECONDS)


def _until(driver: webdriver.Chrome, condition: Any, what: str) -> Any:
    wait = WebDriverWait(driver, WAIT_SECONDS, poll_frequency=0.2,
                         ignored_exceptions=(StaleElementReferenceException,))
    return wait.until(lambda d: _unless_replaced(condition, d), what)


def _unless_replaced(condition: Any, driver: webdriver.Chrome) -> Any:
    """console.js rewrites the refreshed parts of a page every second: a node found just before may be gone
    when the next command reaches it, which chromedriver reports as stale or, mid-command, as this error."""
    try:
        return condition(driver)
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc):
            return False
        raise


def _click(driver: webdriver.Chrome, by: str, value: str) -> None:
    """Find and click, again if a refresh replaced the element in between."""
    def clicked(d: webdriver.Chrome) -> bool:
        d.find_element(by, value).click()
        return True

    _until(driver, clicked, f"a click on {value}")


def _confirm(driver: webdriver.Chrome, by: str, value: str) -> None:
    """Click a destructive action's button and confirm it in the dialog it opens."""
    _click(driver, by, value)
    question = _until(driver, lambda d: d.find_element(By.ID, "confirm-text").text, "the confirmation dialog")
    assert question.endswith("?") or "?" in question, question
    _click(driver, By.ID, "confirm-ok")


def _open_message(driver: webdriver.Chrome, row: Any) -> Any:
    """Click a message's row of the table; the row below it that opens, with its properties and body."""
    row.click()
    detail = row.find_element(By.XPATH, "following-sibling::tr[1]")
    _until(driver, lambda d: detail.is_displayed(), "the message's details")
    return detail


def _open_send_form(driver: webdriver.Chrome) -> None:
    panel = _until(driver, lambda d: d.find_elements(By.ID, "send-panel"), "the send form")[0]
    if panel.get_attribute("open") is None:
        panel.find_element(By.TAG_NAME, "summary").click()


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
    copy = browser.find_element(By.CSS_SELECTOR, "button.copy-button")  # the AMQP connection string's
    copy.click()
    _until(browser, lambda d: copy.text == "copied", "the connection string copied")

    # Counts follow what the SDK sends, without reloading the page (console.js refreshes the table).
    _send(broker, "orders", *[ServiceBusMessage(json.dumps({"order": i}), message_id=f"order-{i}",
                                                application_properties={"region": "west"}) for i in range(3)])
    _until(browser, lambda d: _active(d, "orders") == 3, "the active count of orders to reach 3")
    _send(broker, "orders", ServiceBusMessage("one more", message_id="order-3"))
    _until(browser, lambda d: _active(d, "orders") == 4, "the active count of orders to reach 4")

    # The sparkline: messages per second in and out while an application works on payments.
    with Traffic(broker, "payments"):
        _until(browser, lambda d: _flowing(_rate(d, "payments")), "payments' messages per second in and out")
        _until(browser, lambda d: _samples(d, "payments") >= SPARKLINE_SAMPLES, "a few seconds of sparkline")
        assert re.fullmatch(r"[\d.]+ in/s", _rate(browser, "events"))  # a topic's: what it enqueues only
        _shot(browser, "entities", readme="console-entities.png")

    # A narrow window: the page does not spill sideways (wide tables scroll inside their panel).
    width = browser.get_window_size()["width"]
    browser.set_window_size(480, 900)
    try:
        overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the namespace page is {overflow} px wider than a 480-px window"
        _shot(browser, "namespace-narrow")
    finally:
        browser.set_window_size(width, 900)

    # Peek: the message's system and application properties and its body.
    _click(browser, By.LINK_TEXT, "orders")
    peeked = _until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "tr.message"), "peeked messages")
    assert "order-0" in peeked[0].text
    first = _open_message(browser, peeked[0])
    assert "region" in first.text and "'west'" in first.text
    assert '"order": 0' in first.find_element(By.CSS_SELECTOR, "pre.body-json").text  # shown as JSON
    _shot(browser, "messages")

    # A dead letter, seen with its reason, resubmitted, and back in the queue.
    with ServiceBusClient.from_connection_string(broker["connection_string"]) as sb, \
            sb.get_queue_receiver("orders", max_wait_time=5) as receiver:
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.dead_letter_message(message, reason="BadOrder", error_description="no customer")
    _until(browser, lambda d: "dead-letter 1" in d.find_element(By.ID, "counts").text,
           "the entity page's counts to follow without a reload")
    _click(browser, By.ID, "tab-dlq")
    _until(browser, lambda d: "BadOrder" in d.find_element(By.TAG_NAME, "main").text, "the dead letter")
    assert "dead-lettered: BadOrder — no customer" in browser.find_element(By.CSS_SELECTOR, ".reason").text
    _shot(browser, "dead-letters")
    _confirm(browser, By.ID, "resubmit-all")
    _until(browser, lambda d: d.find_elements(By.ID, "note"), "the resubmit note")
    assert "Resubmitted 1 message(s)" in browser.find_element(By.ID, "note").text
    browser.get(base + "/$console/")
    _until(browser, lambda d: _active(d, "orders") == 4, "the resubmitted message back in orders")

    # Take the namespace down: the SDK cannot send; bring it back: it can.
    _confirm(browser, By.ID, "fault-drop")
    _until(browser, lambda d: d.find_element(By.ID, "ns-status").text == "down (drop)", "the namespace down")
    _shot(browser, "namespace-down")
    with pytest.raises(ServiceBusConnectionError):
        _send(broker, "orders", ServiceBusMessage("during the outage"), retry_total=0)
    _click(browser, By.ID, "fault-up")
    _until(browser, lambda d: d.find_element(By.ID, "ns-status").text == "up", "the namespace back up")
    _send(broker, "orders", ServiceBusMessage("after the outage"))
    _until(browser, lambda d: _active(d, "orders") == 5, "the message sent after the outage")
    _shot(browser, "namespace-back")

    # A drill takes the namespace down through the control API while the page is open: the page follows.
    control = BrokerNamespace.of(broker).control()
    try:
        control.set_down("refuse")
        _until(browser, lambda d: d.find_element(By.ID, "ns-status").text == "down (refuse)",
               "the status to follow the drill")
    finally:
        control.set_down(None)
    _until(browser, lambda d: d.find_element(By.ID, "ns-status").text == "up", "the status back up")

    # A topic's page leads to its subscriptions, whose page says where it forwards.
    _click(browser, By.LINK_TEXT, "events")
    _until(browser, lambda d: d.find_elements(By.ID, "subscriptions"), "the topic page")
    _shot(browser, "topic")
    _click(browser, By.CSS_SELECTOR, "#subscriptions a")
    _until(browser, lambda d: "→ audit" in d.find_element(By.ID, "entity-details").text,
           "the subscription page")

    # A queue's status switch: sends are refused while it is SendDisabled.
    browser.get(base + "/$console/entity/orders")
    for status in ("SendDisabled", "Active"):
        Select(_until(browser, lambda d: d.find_elements(By.ID, "entity-status"), "the status switch")[0]) \
            .select_by_visible_text(status)
        if status == "Active":  # back on: nothing to confirm
            _click(browser, By.ID, "set-status")
        else:
            _confirm(browser, By.ID, "set-status")
        _until(browser, lambda d, s=status: f"Status of orders: {s}." in d.find_element(By.ID, "note").text,
               f"orders {status}")
        if status == "SendDisabled":
            _shot(browser, "entity-send-disabled")
            with pytest.raises(ServiceBusError, match="disabled"):
                _send(broker, "orders", ServiceBusMessage("while disabled"), retry_total=0)
    _send(broker, "orders", ServiceBusMessage("accepted again"))


def _sign_in(driver: webdriver.Chrome, base: str | None, key: str) -> None:
    """Type `key` (a key, or a whole connection string) on the sign-in page: the one `base` leads to after
    the cookies are gone, or the one open now (base None)."""
    if base is not None:
        driver.delete_all_cookies()
        driver.get(base + "/")
    _until(driver, lambda d: d.find_elements(By.NAME, "policy"), "the sign-in page")
    driver.find_element(By.NAME, "key").send_keys(key)
    driver.find_element(By.ID, "sign-in").click()
    _until(driver, lambda d: d.find_elements(By.ID, "entity-rows"), "the namespace page after signing in")


def _fill(driver: webdriver.Chrome, fields: dict[str, str]) -> None:
    for name, value in fields.items():
        driver.find_element(By.CSS_SELECTOR, f"form.send [name={name}]").send_keys(value)


def test_a_person_sends_test_messages_and_pages_through_them(broker: dict[str, Any],
                                                             browser: webdriver.Chrome) -> None:
    base = f"http://127.0.0.1:{broker['admin_port']}"
    _sign_in(browser, base, MANAGE_KEY)

    # The latency switch: the status says it, and it goes back to 0.
    for latency in ("150", "0"):
        field = browser.find_element(By.NAME, "latency_ms")
        field.clear()
        field.send_keys(latency)
        _click(browser, By.ID, "set-latency")
        _until(browser, lambda d, ms=latency: f"latency {ms} ms" in d.find_element(By.ID, "status").text,
               f"latency {latency} ms")

    # A session queue's send form: body, message id, application properties, session id; then a scheduled one.
    _click(browser, By.LINK_TEXT, "carts")
    _open_send_form(browser)
    _fill(browser, {"body": '{"sku": "A-1", "qty": 2}', "message_id": "cart-line-1",
                    "properties": '{"channel": "web", "priority": 3}', "session_id": "cart-7"})
    _click(browser, By.ID, "send")
    _until(browser, lambda d: "Sent a message to carts." in d.find_element(By.ID, "note").text, "the send")
    [row] = browser.find_elements(By.CSS_SELECTOR, "tr.message")
    assert "cart-line-1" in row.text
    card = _open_message(browser, row)
    assert "cart-7" in card.text and "'web'" in card.text and "3" in card.text
    assert '"qty": 2' in card.find_element(By.CSS_SELECTOR, "pre.body-json").text
    card.find_element(By.XPATH, ".//summary[text()='body as hex']").click()  # the other views, on a click
    assert card.find_element(By.CSS_SELECTOR, "pre.body-hex").text.startswith("7b 22 73 6b 75")
    _shot(browser, "sent")
    _open_send_form(browser)
    _fill(browser, {"body": "later", "session_id": "cart-7", "schedule_seconds": "3600"})
    _click(browser, By.ID, "send")
    _until(browser, lambda d: "scheduled 1" in d.find_element(By.ID, "counts").text, "the scheduled message")
    with ServiceBusClient.from_connection_string(broker["connection_string"]) as sb, \
            sb.get_queue_receiver("carts", session_id="cart-7", max_wait_time=5) as receiver:
        [got] = receiver.receive_messages(max_message_count=5, max_wait_time=5)
        assert got.message_id == "cart-line-1"
        assert got.application_properties == {b"channel": b"web", b"priority": 3}
        receiver.complete_message(got)

    # A partitioned queue: a partition key sends to its partition; 25 messages page 20 and 5.
    browser.get(base + "/$console/entity/sharded")
    _open_send_form(browser)
    _fill(browser, {"body": "keyed", "partition_key": "tenant-9"})
    _click(browser, By.ID, "send")
    keyed = _until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "tr.message"), "the keyed message")[0]
    assert "tenant-9" in _open_message(browser, keyed).text  # with its PartitionKey
    partition = zlib.crc32(b"tenant-9") % 16  # the partition the key maps to, as the broker hashes it
    _confirm(browser, By.CSS_SELECTOR, f"button[value='{partition}:down']")  # shows "up"
    _until(browser, lambda d: f"Partition {partition} down." in d.find_element(By.ID, "note").text,
           "the partition down")
    switch = browser.find_element(By.CSS_SELECTOR, f"button[value='{partition}:up']")
    assert switch.text == f"{partition} down"
    _shot(browser, "partition-down")
    with pytest.raises(ServiceBusError, match="temporarily unavailable"):
        _send(broker, "sharded", ServiceBusMessage("refused", partition_key="tenant-9"), retry_total=0)
    _click(browser, By.CSS_SELECTOR, f"button[value='{partition}:up']")
    _until(browser, lambda d: f"Partition {partition} up." in d.find_element(By.ID, "note").text,
           "the partition back up")
    _send(broker, "sharded", ServiceBusMessage("accepted", partition_key="tenant-9"))
    _send(broker, "bulk", *[ServiceBusMessage(f"bulk-{i}") for i in range(25)])
    browser.get(base + "/$console/entity/bulk")
    _until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.message")) == 20, "a page of 20")
    _click(browser, By.ID, "next-page")
    _until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.message")) == 5, "the last 5")
    assert "bulk-24" in browser.find_element(By.TAG_NAME, "main").text
    _click(browser, By.LINK_TEXT, "← first")
    _until(browser, lambda d: "bulk-0" in d.find_element(By.TAG_NAME, "main").text, "the first page again")


def test_a_listen_only_key_finds_no_purge_or_resubmit(broker: dict[str, Any],
                                                      browser: webdriver.Chrome) -> None:
    base = f"http://127.0.0.1:{broker['admin_port']}"
    _send(broker, "audit", ServiceBusMessage("keep me", message_id="keep-1"))
    with ServiceBusClient.from_connection_string(broker["connection_string"]) as sb, \
            sb.get_queue_receiver("audit", max_wait_time=5) as receiver:
        for message in receiver.receive_messages(max_message_count=10, max_wait_time=5):
            receiver.dead_letter_message(message, reason="Unreadable", error_description="kept for a look")

    # Signed in with the Manage policy's name and key, a person watches the namespace page until the session
    # ends under it: the page says so instead of going on with old figures.
    _sign_in(browser, base, MANAGE_KEY)  # the policy field's default is the Manage policy's name
    _until(browser, lambda d: _active(d, "audit") == 0, "the namespace page")
    browser.delete_all_cookies()
    notice = _until(browser, lambda d: d.find_elements(By.ID, "signed-out"), "the signed-out notice")[0]
    assert "The session ended" in notice.text
    _shot(browser, "signed-out")

    # A person pastes the reader policy's connection string on the sign-in page (its policy name and key
    # are taken from it; the policy field keeps its default).
    notice.find_element(By.LINK_TEXT, "Sign in again").click()
    _sign_in(browser, None, f"Endpoint=sb://localhost:{broker['amqp_port']};SharedAccessKeyName=reader;"
                            f"SharedAccessKey={LISTENER_KEY};UseDevelopmentEmulator=true")
    _until(browser, lambda d: "signed in as reader" in d.find_element(By.TAG_NAME, "header").text,
           "signed in as reader")
    assert not browser.find_elements(By.ID, "fault-drop")
    assert "need the Manage right" in browser.find_element(By.ID, "rights-note").text

    # Its dead letters can be looked at, but neither purge nor resubmit is there to click.
    _click(browser, By.LINK_TEXT, "audit")
    _until(browser, lambda d: d.find_elements(By.ID, "tab-dlq"), "the audit page").pop().click()
    _until(browser, lambda d: "Unreadable" in d.find_element(By.TAG_NAME, "main").text, "the dead letter")
    buttons = [b.text for b in browser.find_elements(By.TAG_NAME, "button") if b.is_displayed()]
    assert buttons == ["sign out"], buttons
    note = browser.find_element(By.ID, "rights-note").text
    assert "purging needs Manage" in note and "resubmitting needs Listen and Send" in note
    _shot(browser, "listen-only")

    # A form posted anyway (a stale page, a hand-made request) is refused with Service Bus's message.
    for action, right in (("purge", "Manage"), ("resubmit", "Send")):
        browser.execute_script(
            "const form = document.createElement('form');"
            "form.method = 'post'; form.action = arguments[0];"
            "for (const [name, value] of [['csrf', document.querySelector('input[name=csrf]').value],"
            "                             ['action', arguments[1]]]) {"
            "  const input = document.createElement('input');"
            "  input.type = 'hidden'; input.name = name; input.value = value; form.appendChild(input);"
            "}"
            "document.body.appendChild(form); form.submit();",
            base + "/$console/entity/audit/actions?queue=dlq", action)
        error = _until(browser, lambda d: d.find_elements(By.ID, "error"), f"the refused {action}")[0]
        assert f"'{right}' claim(s) are required" in error.text and "Policy: 'reader'" in error.text
        browser.back()
    _shot(browser, "listen-only-refused")
    with ServiceBusClient.from_connection_string(broker["connection_string"]) as sb, \
            sb.get_queue_receiver("audit", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver:
        assert "keep-1" in {m.message_id for m in receiver.peek_messages(max_message_count=50)}
