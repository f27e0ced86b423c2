"""The Go harness: the binary holds the pinned azservicebus (go.mod) built with Go 1.26+, and a scenario sees
the namespace of a broker started as its own process."""

from __future__ import annotations

import re

from go_runner import GO_DIR, run_go

SDK = "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
PINNED = re.compile(rf"^\s*{re.escape(SDK)} (v\S+)$", re.M)


def test_pinned_sdk_sees_the_namespace(serve) -> None:
    namespace = serve({"namespaces": {"compat": {"queues": {"q": {}}}}})["compat"]
    seen = run_go("harness", namespace)
    [pinned] = PINNED.findall((GO_DIR / "go.mod").read_text())
    assert seen["versions"][SDK] == pinned == "v1.11.0"
    major, minor = (int(part) for part in seen["versions"]["go"].removeprefix("go").split(".")[:2])
    assert (major, minor) >= (1, 26)
    assert seen["endpoint"] == namespace.connection_string.split(";")[0].removeprefix("Endpoint=")
    assert seen["emulator"] and seen["trustsBroker"]
