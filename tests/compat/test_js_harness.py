"""The JavaScript harness: the pinned @azure/service-bus loads under node 18+ and a script sees the namespace
of a broker started as its own process."""

from __future__ import annotations

import json
from pathlib import Path

from js_runner import JS_DIR, run_js


def test_pinned_sdk_sees_the_namespace(serve) -> None:
    namespace = serve({"namespaces": {"compat": {"queues": {"q": {}}}}})["compat"]
    seen = run_js("harness_check.mjs", namespace)
    pinned = json.loads(Path(JS_DIR, "package.json").read_text())["dependencies"]["@azure/service-bus"]
    assert seen["sdk"] == pinned == "7.9.5"
    assert int(seen["node"].split(".")[0]) >= 18
    assert seen["endpoint"] == namespace.connection_string.split(";")[0].removeprefix("Endpoint=")
    assert seen["keyName"] == "RootManageSharedAccessKey"
    assert seen["emulator"] and seen["trustsBrokerCertificate"]
