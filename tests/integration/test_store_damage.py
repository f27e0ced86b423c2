"""A damaged or unwritable store is one line, and the file is left as it was: `sbfed broker serve` on a store
truncated, overwritten in the middle or replaced with garbage, and on a read-only data directory; then
`sbfed broker check` says what is wrong and `sbfed broker recover` saves what can be read into a new store.

The stores are real ones written by the broker's engine and SQLite store: a queue of 1 KB messages, a topic
whose copies share payload rows, a session state.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from local_broker.engine import (
    EntityNotFoundError,
    Message,
    Namespace,
    QueueProperties,
    ReceiveMode,
    StoreReadError,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.store import SqliteStore
from local_broker.store.sqlite import SCHEMA_VERSION
from tests.broker_process import ROOT, ServeProcess
from tests.chaos.harness import tmpfs

NAMESPACE = "sbemulatorns"  # what `serve` hosts with no topology
MESSAGES = 2000
FREE_PORTS = ("--amqp-port", "0", "--admin-port", "0", "--amqps-port", "0", "--websocket-port", "0")


def write_store(data: Path, locked: bool = True) -> Path:
    """A store as the broker leaves it after a clean stop. `locked`: the queue's messages were received
    (peek-lock) before the stop, so the broker reads them all when it starts (it leaves plain messages of a
    backlog on disk until a receiver needs them)."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / f"{NAMESPACE}.db"
    ns = Namespace.open(SqliteStore(path))
    ns.create_queue(QueueProperties("q"))
    ns.create_topic(TopicProperties("t"))
    for name in ("a", "b"):
        ns.create_subscription("t", SubscriptionProperties(name))
    ns.create_queue(QueueProperties("s", requires_session=True))
    for start in range(0, MESSAGES, 100):
        ns.send("q", [Message(os.urandom(1024), {"n": i}, message_id=f"m{i}")
                      for i in range(start, start + 100)])
        ns.commit()
    ns.send("t", [Message(b"shared", message_id=f"t{i}") for i in range(50)])
    ns.send("s", Message(b"in a session", session_id="A", message_id="s0"))
    ns.commit()
    ns.set_session_state("s", "A", b"state")
    ns.commit()
    if locked:
        ns.receive("q", MESSAGES, ReceiveMode.PEEK_LOCK)
        ns.commit()
    ns.close()
    return path


def truncated(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


def overwritten_in_the_middle(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        handle.write(b"\xab" * 64 * 1024)


def replaced_with_garbage(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": truncated, "overwritten in the middle": overwritten_in_the_middle,
    "replaced with garbage": replaced_with_garbage}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def broker_command(*args: str) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "sbfed.cli", "broker", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def sound_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("sound") / "data")


@pytest.fixture
def damaged(request: pytest.FixtureRequest, sound_store: Path, tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "data"
    shutil.copytree(sound_store.parent, data)
    path = data / sound_store.name
    DAMAGE[request.param](path)
    yield path


@pytest.mark.parametrize("damaged", list(DAMAGE), indirect=True)
def test_a_damaged_store_is_one_line_naming_the_file_and_what_to_do(damaged: Path, tmp_path: Path) -> None:
    before = digest(damaged)
    code, err = ServeProcess(tmp_path, "--data", str(damaged.parent), *FREE_PORTS).exit()
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith(f"{damaged}: the store of namespace {NAMESPACE} is damaged (SQLite: ")
    assert "the file was not changed" in line
    assert f"sbfed broker check --data {damaged.parent}" in line
    assert f"sbfed broker recover --data {damaged.parent} --namespace {NAMESPACE} --out NEWDIR" in line
    assert digest(damaged) == before


@pytest.mark.parametrize("damaged", list(DAMAGE), indirect=True)
def test_check_names_what_is_wrong_and_recover_saves_what_can_be_read(damaged: Path, tmp_path: Path) -> None:
    before = digest(damaged)
    code, out, err = broker_command("check", "--data", str(damaged.parent))
    assert code == 2, out + err
    assert out.splitlines() and all(line.startswith(f"{damaged}: ") for line in out.splitlines())
    assert "ok" not in out.splitlines()[0].split(": ", 1)[1][:3]
    recovered = tmp_path / "recovered"
    code, out, err = broker_command("recover", "--data", str(damaged.parent), "--namespace", NAMESPACE,
                                    "--out", str(recovered))
    assert code == 0, out + err
    assert out.splitlines()[0] == f"{damaged} -> {recovered / damaged.name}"
    assert any(line.startswith("saved: ") for line in out.splitlines())
    assert digest(damaged) == before  # neither command wrote to it
    # The new store opens, and holds what recover said it saved.
    ns = Namespace.open(SqliteStore(recovered / damaged.name))
    try:
        saved = ns.get_queue_runtime_properties("q").active_message_count
    except EntityNotFoundError:
        saved = 0
    finally:
        ns.close()
    if "(file is not a database)" in out:
        assert saved == 0 and "saved: nothing" in out.splitlines()  # garbage: not one page is SQLite's
    else:
        assert 0 < saved < MESSAGES, out
    assert broker_command("check", "--data", str(recovered))[0] == 0, "the recovered store is not sound"


def test_check_passes_a_sound_store_and_recover_copies_all_of_it(sound_store: Path, tmp_path: Path) -> None:
    before = digest(sound_store)
    code, out, _ = broker_command("check", "--data", str(sound_store.parent))
    summary = f"schema {SCHEMA_VERSION}, 5 entities, {MESSAGES + 100 + 1} messages"
    assert (code, out) == (0, f"{sound_store}: ok ({summary})\n")
    recovered = tmp_path / "recovered"
    code, out, _ = broker_command("recover", "--data", str(sound_store.parent), "--namespace", NAMESPACE,
                                  "--out", str(recovered))
    assert code == 0 and {"unreadable: nothing", "dropped: nothing"} <= set(out.splitlines())
    ns = Namespace.open(SqliteStore(recovered / sound_store.name))
    try:
        assert ns.get_queue_runtime_properties("q").active_message_count == MESSAGES
        assert ns.get_subscription_runtime_properties("t", "b").active_message_count == 50
        assert ns.get_session_state("s", "A") == b"state"
    finally:
        ns.close()
    assert digest(sound_store) == before
    code, _, err = broker_command("recover", "--data", str(sound_store.parent), "--namespace", NAMESPACE,
                                  "--out", str(recovered))
    assert code == 2 and "exists already" in err  # never over a store


def test_damage_in_a_backlog_left_on_disk_fails_the_reads_that_reach_it(tmp_path: Path) -> None:
    """Plain messages of a backlog stay on disk until a receiver needs them: the start does not see damage
    there; the receive that reaches it fails with a server-busy error naming the file, and the namespace's
    other entities are served."""
    path = write_store(tmp_path / "data", locked=False)
    overwritten_in_the_middle(path)
    ns = Namespace.open(SqliteStore(path))
    try:
        received = 0
        with pytest.raises(StoreReadError, match=f"store {path} cannot be read here"):
            for _ in range(MESSAGES // 100 + 1):
                batch = ns.receive("q", 100, ReceiveMode.RECEIVE_AND_DELETE)
                ns.commit()
                received += len(batch)
        assert 0 < received < MESSAGES
        [peeked] = ns.peek("t/subscriptions/a", 1, 1)  # another entity is served
        assert peeked.body == b"shared"
    finally:
        ns.close()
    assert broker_command("check", "--data", str(path.parent))[0] == 2


@pytest.fixture
def read_only_data(tmp_path: Path) -> Iterator[Path]:
    """A data directory holding a store, on a file system mounted read-only."""
    with tmpfs(tmp_path / "ro", 64, "the read-only store test") as mount:
        write_store(mount / "data")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        yield mount / "data"


def test_a_read_only_data_directory_is_one_line(read_only_data: Path, tmp_path: Path) -> None:
    path = read_only_data / f"{NAMESPACE}.db"
    before = digest(path)
    code, err = ServeProcess(tmp_path, "--data", str(read_only_data), *FREE_PORTS).exit()
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith(f"{read_only_data}") and "cannot write there" in line
    assert f"in {read_only_data}: make it writable for this user (or mount it read-write)" in line
    assert digest(path) == before
    assert broker_command("check", "--data", str(read_only_data))[0] == 0  # reading needs no write
