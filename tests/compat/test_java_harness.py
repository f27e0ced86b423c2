"""The Java harness: the pinned azure-messaging-servicebus runs on Java 17+ and a scenario sees the namespace
of a broker started as its own process, with the broker's certificate as its trust store."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from java_runner import JAVA_DIR, run_java

POM = "{http://maven.apache.org/POM/4.0.0}"


def test_pinned_sdk_sees_the_namespace(serve) -> None:
    namespace = serve({"namespaces": {"compat": {"queues": {"q": {}}}}})["compat"]
    seen = run_java("harness", namespace)
    bom = ET.parse(JAVA_DIR / "pom.xml").find(f".//{POM}dependency[{POM}artifactId='azure-sdk-bom']")
    assert bom.findtext(f"{POM}version") == "1.3.8"
    assert seen["sdk"] == "7.17.19"  # what the BOM pins
    assert int(seen["java"].split(".")[0]) >= 17
    assert seen["connectionString"] == namespace.connection_string
    assert seen["trustStore"].endswith(".p12")
