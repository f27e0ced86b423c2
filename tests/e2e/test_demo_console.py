"""`sbfed demo` keeps the last drill's broker up and, at a terminal, prints its console links and waits: the
broker it starts for that drill serves the console and the printed link signs in; it stops with the demo.
Without a terminal it prints no link to a broker it is about to stop."""

from __future__ import annotations

import contextlib
import io
import re
import urllib.error
from pathlib import Path

import pytest

from patterns.drills.catalog import drill_settings
from sbfed.demo import kept_broker, show_console
from tests.console_client import ConsoleClient


class Terminal(io.StringIO):
    """A person at a terminal who presses Enter."""

    def isatty(self) -> bool:
        return True


def test_the_kept_broker_serves_the_printed_console_links(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    settings = drill_settings("all-active", tmp_path / "all-active")
    with contextlib.ExitStack() as stack:
        kept = kept_broker(settings, tmp_path / "console-broker", stack)
        assert kept.broker_file == tmp_path / "console-broker" / "broker-ready.json"
        show_console(kept.broker_file, wait=True)  # no terminal under pytest: no link, no wait
        assert "http" not in capsys.readouterr().out
        show_console(kept.broker_file, wait=False)  # --no-wait
        assert "stops now" in capsys.readouterr().out
        monkeypatch.setattr("sys.stdin", Terminal("\n"))
        show_console(kept.broker_file, wait=True)
        printed = capsys.readouterr().out
        assert "press Enter to stop the broker" in printed
        links = dict(re.findall(r"^  (\w+): (http://\S+/\$console/\S+)$", printed, re.M))
        assert sorted(links) == sorted(settings.namespaces)
        metrics = dict(re.findall(r"^  (\w+): (http://\S+/metrics)$", printed, re.M))
        assert sorted(metrics) == sorted(settings.namespaces)
        for address in metrics.values():  # each namespace's Prometheus page, as printed
            assert "servicebus_active_connections{" in ConsoleClient(address).get(address).html
        for link in links.values():
            page = ConsoleClient(link.split("/$console")[0]).get(link)
            assert page.status == 200 and "signed in as" in page.html
    with pytest.raises(urllib.error.URLError):  # stopped with the demo
        ConsoleClient(link.split("/$console")[0]).opener.open(link.split("/$console")[0] + "/health",
                                                              timeout=5)
