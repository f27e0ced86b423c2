"""Apache Kafka's own broker on loopback, for the stream-to-queue drill and tests: one KRaft node (broker and
controller in one process, no ZooKeeper) on two free ports, its data in a directory of its own, from the jars
`scripts/ensure-kafka.sh` put in the cache (`make setup`). Started and stopped like `sbfed broker serve`:
a process of its own, its output in a log file."""

from __future__ import annotations

import base64
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

log = logging.getLogger(__name__)
READY_TIMEOUT_SECONDS = 90.0
STOP_TIMEOUT_SECONDS = 20.0
CACHE_VARIABLE = "SBFED_CACHE"
MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class KafkaStartError(RuntimeError):
    """The broker's jars are missing, or it did not start; the message says what to do or where to look."""


def kafka_libs() -> Path:
    """The folder of the broker's jars: `$SBFED_CACHE/kafka/libs` (default `~/.cache/sbfed`)."""
    libs = Path(os.environ.get(CACHE_VARIABLE) or Path.home() / ".cache" / "sbfed") / "kafka" / "libs"
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise KafkaStartError(f"Apache Kafka's jars are not in {libs}: run `bash scripts/ensure-kafka.sh` "
                              "(part of `make setup`)")
    return libs


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class KafkaBroker:
    """One KRaft node: `start()` formats its storage and waits until it answers metadata requests."""

    def __init__(self, data_dir: Path | None = None, *, partitions: int = 3) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="sbfed-kafka-"))
        self.partitions = partitions
        self.port, self.controller_port = free_port(), free_port()
        self.log_path = self.data_dir / "kafka.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> str:
        settings = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir / "log"),
            "num.partitions": self.partitions,
            # one node: every internal topic has one replica, and consumer groups start at once
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "group.initial.rebalance.delay.ms": 0,
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def _java(self, main: str, *args: str) -> list[str]:
        return ["java", *JVM_OPTIONS, "-cp", f"{kafka_libs()}/*", main, *args]

    def start(self) -> KafkaBroker:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "server.properties"
        config.write_text(self._properties(), encoding="utf-8")
        cluster_id = _kafka_uuid()
        with open(self.log_path, "wb") as log:
            format_storage = self._java(STORAGE_TOOL, "format", "-t", cluster_id, "-c", str(config))
            formatted = subprocess.run(format_storage, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, timeout=READY_TIMEOUT_SECONDS)
            if formatted.returncode:
                raise KafkaStartError(f"formatting Kafka's storage failed; see {self.log_path}")
            self._process = subprocess.Popen(self._java(MAIN_CLASS, str(config)), stdout=log,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """First the listener accepts (a client would log every refused connection), then metadata."""
        admin = None
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while True:
            if self._process is not None and self._process.poll() is not None:
                raise KafkaStartError(f"Kafka exited with {self._process.returncode}; see {self.log_path}")
            try:
                if admin is None:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    admin = self._admin()
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # refused, or a KafkaException while the broker starts
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise KafkaStartError(f"Kafka was not ready within {READY_TIMEOUT_SECONDS:.0f} s; "
                                      f"see {self.log_path}")
            time.sleep(0.2)

    def create_topic(self, name: str, partitions: int | None = None) -> None:
        admin = self._admin()  # held until the answer: a client destroyed first fails its futures
        admin.create_topics([NewTopic(name, partitions or self.partitions, 1)])[name].result(timeout=30)

    def _admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap_servers}, logger=log)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _kafka_uuid() -> str:
    """A cluster id as Kafka writes them: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
