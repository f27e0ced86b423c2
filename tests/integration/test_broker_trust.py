"""`sbfed broker trust` and its undo, against a real broker and the real clients: after it, the Python
administration client with no `connection_verify` (REQUESTS_CA_BUNDLE=sbfed's bundle) and the JavaScript
one (NODE_EXTRA_CA_CERTS) trust the broker with the emulator's strings unchanged; after the undo, the bundle
and the system store's copy are gone. The system store is a temporary CA
directory and a stand-in update command here, so nothing outside the test's directory changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker_process import ServeProcess

ADMIN_CHECK = """
import sys
from azure.servicebus.management import ServiceBusAdministrationClient
admin = ServiceBusAdministrationClient.from_connection_string(sys.argv[1], retry_total=0)
print([q.name for q in admin.list_queues()])
"""
NODE_CHECK = """
const { createRequire } = require("module");
const sdk = createRequire(process.argv[1])("@azure/service-bus");
new sdk.ServiceBusAdministrationClient(process.argv[2], { retryOptions: { maxRetries: 0 } })
  .getNamespaceProperties()
  .then((properties) => console.log(properties.name), (err) => { console.log(err.code || err.name); });
"""
JS_PROJECT = Path(__file__).resolve().parents[1] / "compat" / "js" / "package.json"  # its node_modules


def _sbfed(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data-home")}
    return subprocess.run([sys.executable, "-m", "sbfed.cli", *args], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def _admin_lists(connection_string: str, bundle: Path | None) -> subprocess.CompletedProcess[str]:
    """The Python admin client with the connection string alone (no connection_verify); it does not retry (a
    refused certificate would be tried again for seconds)."""
    env = {k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    env |= {"REQUESTS_CA_BUNDLE": str(bundle)} if bundle else {}
    return subprocess.run([sys.executable, "-c", ADMIN_CHECK, connection_string], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def _node_admin(connection_string: str, extra_ca: Path | None) -> str:
    """What the JavaScript SDK's admin client answers: the namespace's name, or its error code."""
    env = {k: v for k, v in os.environ.items() if k != "NODE_EXTRA_CA_CERTS"}
    env |= {"NODE_EXTRA_CA_CERTS": str(extra_ca)} if extra_ca else {}
    run = subprocess.run(["node", "-e", NODE_CHECK, str(JS_PROJECT), connection_string], env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    return run.stdout.strip() or run.stderr


@pytest.fixture
def broker(tmp_path: Path):
    serve = ServeProcess(tmp_path, "--amqp-port", "0", "--admin-port", "0", "--amqps-port", "0",
                         "--websocket-port", "0")
    namespace = serve.wait_ready()
    yield namespace
    serve.stop()


def test_trust_makes_the_admin_clients_work_unchanged_and_undo_takes_it_back(tmp_path: Path, broker) -> None:
    store, ca_dir, updated = tmp_path / "trust", tmp_path / "ca-certificates", tmp_path / "updated"
    options = ["--store", str(store), "--ca-dir", str(ca_dir), "--update-command", f"touch {updated}"]
    bundle = store / "ca-bundle.pem"
    cert = Path(broker["cert_path"])
    assert cert.parent == tmp_path / "data-home" / "sbfed" / "broker"  # the default data directory

    before = _admin_lists(broker["admin_connection_string"], None)
    assert before.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in before.stderr

    trusted = _sbfed(tmp_path, "broker", "trust", *options)
    assert trusted.returncode == 0, trusted.stderr
    [copy] = ca_dir.glob("sbfed-*.crt")
    assert copy.read_text() == cert.read_text() and updated.exists()
    assert cert.read_text().strip() in bundle.read_text()
    assert f"export REQUESTS_CA_BUNDLE={bundle}" in trusted.stdout
    assert f"export NODE_EXTRA_CA_CERTS={bundle}" in trusted.stdout
    assert f"undo: sbfed broker trust --undo --store {store}" in trusted.stdout

    after = _admin_lists(broker["admin_connection_string"], bundle)
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "[]"
    assert _node_admin(broker["emulator_admin_connection_string"], None) == "DEPTH_ZERO_SELF_SIGNED_CERT"
    assert _node_admin(broker["emulator_admin_connection_string"], bundle) == "sbemulatorns"

    updated.unlink()
    undone = _sbfed(tmp_path, "broker", "trust", "--undo", *options)
    assert undone.returncode == 0, undone.stderr
    assert list(ca_dir.glob("sbfed-*")) == [] and updated.exists()
    assert not bundle.exists() and "unset REQUESTS_CA_BUNDLE NODE_EXTRA_CA_CERTS" in undone.stdout
    after_undo = _admin_lists(broker["admin_connection_string"], None)
    assert after_undo.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in after_undo.stderr


def test_two_brokers_are_trusted_side_by_side_and_undone_one_at_a_time(tmp_path: Path) -> None:
    from local_broker.tls import ensure_certificate

    store = tmp_path / "trust"
    options = ["--store", str(store), "--ca-dir", "", "--update-command", ""]
    first, second = (ensure_certificate(tmp_path / name).cert_path for name in ("a", "b"))
    for cert in (first, second):
        assert _sbfed(tmp_path, "broker", "trust", "--cert", str(cert), *options).returncode == 0
    bundle = (store / "ca-bundle.pem").read_text()
    assert first.read_text().strip() in bundle and second.read_text().strip() in bundle
    assert _sbfed(tmp_path, "broker", "trust", "--undo", "--cert", str(first), *options).returncode == 0
    bundle = (store / "ca-bundle.pem").read_text()
    assert first.read_text().strip() not in bundle and second.read_text().strip() in bundle


def test_a_missing_certificate_says_to_start_the_broker_first(tmp_path: Path) -> None:
    run = _sbfed(tmp_path, "broker", "trust", "--ca-dir", "", "--store", str(tmp_path / "trust"))
    assert run.returncode == 1
    assert run.stderr.strip().startswith(f"sbfed broker trust: no certificate at "
                                         f"{tmp_path / 'data-home/sbfed/broker/broker-cert.pem'}")
    assert "sbfed broker serve" in run.stderr


def test_serve_prints_the_step_when_its_certificate_is_new(tmp_path: Path) -> None:
    ports = ["--amqp-port", "0", "--admin-port", "0", "--amqps-port", "0", "--websocket-port", "0"]
    first = ServeProcess(tmp_path, *ports)
    first.wait_ready()
    printed = first.stop()
    cert = tmp_path / "data-home" / "sbfed" / "broker" / "broker-cert.pem"
    assert f"new certificate {cert}: trust it once for every client on this machine with `sbfed broker " \
           "trust` (undo: add --undo)" in printed
    again = ServeProcess(tmp_path, *ports)
    again.wait_ready()
    assert "new certificate" not in again.stop()
