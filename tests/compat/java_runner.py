"""Runs a scenario of the Java SDK suite (java/, a Maven project) against a namespace and returns the JSON
document it prints.

`java -cp <the scenarios' jar + the SDK's jars> sbfed.compat.Main <scenario> <args>` reads the namespace from
its environment (`SB_CONNECTION_STRING`, `SB_ADMIN_CONNECTION_STRING`) and prints one JSON document as the
last line of its standard output. The JVM trusts the broker's self-signed certificate through a PKCS#12
trust store made from the namespace's certificate (`javax.net.ssl.trustStore`): TLS is verified, as in
Azure. The jar is built by Maven (`make setup` resolves the SDK into ~/.m2 once per pom.xml); a test session
rebuilds it at most once, when a source is newer than the jar."""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from patterns.drills.broker import BrokerNamespace
from tests.compat.scenario_process import ScenarioError, connection_settings, run_printing_json

JAVA_DIR = Path(__file__).resolve().parent / "java"
JAR = JAVA_DIR / "target" / "sbfed-compat-java.jar"
CLASSPATH = JAVA_DIR / "target" / "classpath.txt"
DEFAULT_TIMEOUT_SECONDS = 240
# A scenario's JVM lives for seconds: the C1 compiler alone and one GC thread start it fastest.
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k"]
TRUST_STORE_PASSWORD = "sbfed-compat"


def run_java(scenario: str, namespace: BrokerNamespace | None = None, *args: str,
             env: Mapping[str, str] | None = None, cert_path: str | None = None,
             timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Any:
    """The scenario's JSON, run with the namespace's settings and `env` added to this process's environment;
    the JVM trusts `cert_path` (by default the namespace's certificate)."""
    environment = {**os.environ, **(env or {})}
    if namespace:
        environment = {**connection_settings(namespace), **environment}
    certificate = cert_path or (namespace.cert_path if namespace else None)
    trust = [f"-Djavax.net.ssl.trustStore={trust_store(certificate)}",
             "-Djavax.net.ssl.trustStoreType=PKCS12",
             f"-Djavax.net.ssl.trustStorePassword={TRUST_STORE_PASSWORD}"] if certificate else []
    command = ["java", *JVM_OPTIONS, *trust, "-cp", classpath(), "sbfed.compat.Main", scenario, *args]
    return run_printing_json(command, cwd=JAVA_DIR, env=environment, timeout=timeout,
                             label=f"java {scenario}")


@functools.cache
def classpath() -> str:
    """The jar and its dependencies, built first when the jar is missing or older than a source."""
    sources = [JAVA_DIR / "pom.xml", *JAVA_DIR.joinpath("src").rglob("*.java")]
    if not (JAR.exists() and CLASSPATH.exists()
            and JAR.stat().st_mtime >= max(path.stat().st_mtime for path in sources)):
        built = subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", "package"], cwd=JAVA_DIR,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
                               check=False)
        if built.returncode != 0:
            raise ScenarioError(f"mvn package failed in {JAVA_DIR} (`make setup` installs Maven)\n"
                                f"{built.stdout[-6000:]}\n{built.stderr[-3000:]}")
    return f"{JAR}{os.pathsep}{CLASSPATH.read_text().strip()}"


@functools.cache
def trust_store(cert_path: str) -> Path:
    """A PKCS#12 trust store holding the certificate (keytool cannot be pointed at a PEM file at run time)."""
    pem = Path(cert_path).read_bytes()
    store = Path(tempfile.gettempdir(), "sbfed-java-trust", f"{hashlib.sha256(pem).hexdigest()[:16]}.p12")
    if not store.exists():
        store.parent.mkdir(exist_ok=True)
        partial = store.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "sbfed-broker", "-file", cert_path,
                        "-keystore", str(partial), "-storetype", "PKCS12",
                        "-storepass", TRUST_STORE_PASSWORD], check=True, capture_output=True, timeout=60)
        partial.replace(store)
    return store
