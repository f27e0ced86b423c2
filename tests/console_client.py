"""A plain HTTP client of the broker's web console for tests: a cookie jar, form posts with the page's CSRF
token, and the answer's status even when it is an error page."""

from __future__ import annotations

import http.cookiejar
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from tests.broker_process import brokers


@contextmanager
def served_namespace(topology: Mapping[str, Any], directory: Path) -> Iterator[dict[str, Any]]:
    """`sbfed broker serve` of a one-namespace topology in its own process; yields what its ready file says
    of the namespace (ports, connection strings, `console_url`)."""
    with brokers(topology, directory):
        [entry] = json.loads((directory / "broker-ready.json").read_text())
        yield entry


@dataclass
class Page:
    status: int
    url: str
    html: str

    @property
    def csrf(self) -> str:
        found = re.search(r'name="csrf" value="([^"]+)"', self.html)
        assert found, f"no form on {self.url}: {self.html[:300]}"
        return found.group(1)


class ConsoleClient:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> Page:
        return self._open(urllib.request.Request(self._url(path)))

    def post(self, path: str, form: dict[str, str], csrf: str | None) -> Page:
        fields = dict(form) if csrf is None else {**form, "csrf": csrf}
        return self._open(urllib.request.Request(self._url(path), data=urlencode(fields).encode(),
                                                 method="POST"))

    def sign_in(self, policy: str, key: str) -> Page:
        return self.post("/$console/login", {"policy": policy, "key": key}, None)

    def _url(self, path: str) -> str:
        return path if path.startswith("http") else self.base_url + path

    def _open(self, request: urllib.request.Request) -> Page:
        try:
            with self.opener.open(request, timeout=30) as answer:
                return Page(answer.status, answer.url, answer.read().decode())
        except urllib.error.HTTPError as error:
            return Page(error.code, error.url, error.read().decode())
