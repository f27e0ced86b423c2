"""azure-servicebus's own published samples (from its sdist, the installed version) run against the broker as
a user would run them: unchanged but for the connection (tests/samples/run_sample.py reads their
DefaultAzureCredential clients as `from_connection_string`) and the entity names their environment gives.

Left out, and why: the async samples build azure.identity.aio's credential, which needs aiohttp (not a
dependency here); receive_iterator_queue iterates its receiver until it is stopped; failure_and_recovery,
proxy, client_identity_authentication, connection_to_custom_endpoint_address and the
authenticate_*/generate_sas_token samples are about Azure's endpoints, proxies and Entra ID.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from importlib.metadata import version
from pathlib import Path

import pytest

from local_broker.server import BrokerServer
from topology import parse

RUNNER = Path(__file__).with_name("run_sample.py")
TIME_SCALE = "0.1"  # the samples' sleeps at a tenth
LOCK = "PT5S"  # Service Bus's shortest
# auto_lock_renew holds its messages 100 s: 7 s here, still longer than a lock, so that it takes renewals
TIME_SCALES = {"auto_lock_renew": "0.07"}
SAMPLES = [  # a representative set for every run
    "receive_deferred_message_queue", "deadletter_messages_and_correct", "session_send_receive",
    "topic_subscription_with_rule_operations", "mgmt_rule", "send_and_receive_amqp_annotated_message",
]
SLOW_SAMPLES = [  # the rest, in CI (`make test-all`): about 60 s together
    "auto_lock_renew", "send_queue", "receive_queue", "receive_peek", "receive_deadlettered_messages",
    "schedule_messages_and_cancellation", "session_pool_receive", "list_sessions", "send_topic",
    "receive_subscription", "schedule_topic_messages_and_cancellation", "mgmt_queue", "mgmt_topic",
    "mgmt_subscription",
]


def _entities(name: str) -> dict:
    """One set of entities per sample, so that no sample sees another's messages."""
    return {"queues": {f"{name}-q": {"lock_duration": LOCK},
                       f"{name}-sq": {"requires_session": True, "lock_duration": LOCK}},
            "topics": {f"{name}-t": {"subscriptions": {"s": {}, "ss": {"requires_session": True}}}}}


@pytest.fixture(scope="module")
def samples() -> Path:
    """The sync samples of the installed azure-servicebus, from its source distribution on PyPI, cached as
    Kafka and Artemis are ($SBFED_CACHE, default ~/.cache/sbfed): fetched once a machine, not once a clone."""
    release = version("azure-servicebus")
    cache = Path(os.environ.get("SBFED_CACHE") or Path.home() / ".cache" / "sbfed") / \
        f"azure-servicebus-{release}-samples"
    cache.mkdir(parents=True, exist_ok=True)
    folder = cache / f"azure_servicebus-{release}" / "samples" / "sync_samples"
    if not folder.is_dir():
        subprocess.run([sys.executable, "-m", "pip", "download", f"azure-servicebus=={release}", "--no-deps",
                        "--no-binary", ":all:", "--quiet", "-d", str(cache)], check=True, timeout=300)
        with tarfile.open(cache / f"azure_servicebus-{release}.tar.gz") as sdist:
            sdist.extractall(cache, filter="data")
    return folder


@pytest.fixture(scope="module")
def broker():
    names = SAMPLES + SLOW_SAMPLES
    entities: dict = {"queues": {}, "topics": {}}
    for name in names:
        for kind, found in _entities(name.replace("_", "-")).items():
            entities[kind].update(found)
    with BrokerServer(parse({"namespaces": {"samples": entities}})) as server:
        yield server


def run(samples: Path, broker: BrokerServer, name: str) -> subprocess.CompletedProcess:
    namespace = broker.namespaces["samples"]
    prefix = name.replace("_", "-")
    # list_sessions lists a subscription's sessions: it gets the session-enabled one
    subscription = "ss" if name == "list_sessions" else "s"
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "SAMPLE_TIME_SCALE": TIME_SCALES.get(name, TIME_SCALE),
           "SERVICEBUS_CONNECTION_STR": namespace.connection_string,
           "SERVICEBUS_ADMIN_CONNECTION_STR": namespace.admin_connection_string,
           "REQUESTS_CA_BUNDLE": broker.cert_path,  # the admin client verifies the broker's certificate
           "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE": "localhost", "SERVICEBUS_QUEUE_NAME": f"{prefix}-q",
           "SERVICEBUS_SESSION_QUEUE_NAME": f"{prefix}-sq", "SERVICEBUS_TOPIC_NAME": f"{prefix}-t",
           "SERVICEBUS_SUBSCRIPTION_NAME": subscription, "SERVICEBUS_SESSION_ID": "session-1"}
    return subprocess.run([sys.executable, str(RUNNER), str(samples / f"{name}.py")], env=env,
                          capture_output=True, text=True, timeout=180, check=False)


@pytest.mark.parametrize("name", SAMPLES)
def test_a_published_sample_runs_unchanged(samples, broker, name: str) -> None:
    done = run(samples, broker, name)
    assert done.returncode == 0, f"{name}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_SAMPLES)
def test_more_published_samples_run_unchanged(samples, broker, name: str) -> None:
    done = run(samples, broker, name)
    assert done.returncode == 0, f"{name}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
