"""The two implementations of the AMQP value codec, values.py (the pure-Python reference) and its C twin
`_speedups`: the codec, value and message tests run under `value_codec`, once with each."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from local_broker.wire.amqp import values


@pytest.fixture(scope="session")
def native() -> Any:
    """The C module; skipped where it was not built (no C compiler at install), failed in CI, which builds
    it (`make setup`)."""
    module = values.native_codec()
    if module is None:
        if os.environ.get("CI") == "true":
            pytest.fail("local_broker.wire.amqp._speedups is not built: `pip install -e .` compiles it")
        pytest.skip("local_broker.wire.amqp._speedups is not built (no C compiler at install)")
    return module


@pytest.fixture(params=["c", "python"])
def value_codec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    chosen = request.getfixturevalue("native") if request.param == "c" else None
    monkeypatch.setattr(values, "_native", chosen)
    yield request.param
