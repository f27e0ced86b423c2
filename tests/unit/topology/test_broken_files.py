"""A corpus of broken topology files (tests/unit/topology/broken/): every problem of a file is one line
`file: namespace/entity: property: what is wrong, what is allowed`, all at once, and the three commands that
read topologies (`sbfed broker serve`, `sbfed topology apply`, `sbfed infra params`) print exactly those
lines and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from local_broker import cli as broker_cli
from local_broker.topology import check_sql
from patterns import cli as topology_cli
from patterns import infra_cli
from topology import TopologyError, add_check, load

BROKEN = Path(__file__).parent / "broken"
CORPUS = sorted(BROKEN.iterdir())
NAME_RULE = "allowed letters, digits, '.', '-' and '_', starting with a letter or digit"


@pytest.fixture(autouse=True)
def _sql_checked() -> None:
    add_check(check_sql)  # what the `sbfed` dispatcher does for every command that reads a topology


def _problems(name: str) -> list[str]:
    with pytest.raises(TopologyError) as caught:
        load(BROKEN / name)
    return caught.value.problems


EXPECTED = {
    "out-of-range.yaml": [
        "primary/orders: lock_duration: PT10H is out of range, allowed PT5S to PT5M",
        "primary/orders: duplicate_detection_history_time_window: PT1S is out of range, allowed PT20S to P7D",
        "primary/orders: auto_delete_on_idle: PT1M is out of range, allowed PT5M or longer",
        "primary/orders: default_message_time_to_live: PT0S is out of range, allowed PT1S or longer",
        "primary/orders: max_delivery_count: 0 is out of range, allowed 1 to 2147483647",
        "primary/orders: max_size_in_megabytes: 100000 is out of range, allowed 1 to 81920",
        "primary/local: amqp_port: 70000 is out of range, allowed 0 to 65535",
    ],
    "unknown-keys.yaml": [
        "namespace: unknown key, did you mean namespaces?",
        "primary: queue: unknown key, did you mean queues?",
        "primary/orders: lock_duraton: unknown property, did you mean lock_duration?",
        "primary/orders: maxdeliverycount: unknown property, did you mean max_delivery_count?",
        "primary/events/consumer/red: filtre: unknown key, did you mean filter?",
        "primary/events/consumer/blue: filter.correlation.lable: unknown field, did you mean label?",
        "primary/local: amqp-port: unknown property, did you mean amqp_port?",
    ],
    "wrong-types.yaml": [
        "primary/orders: max_delivery_count: 'ten' is not a whole number, allowed 1 to 2147483647",
        "primary/orders: requires_session: 'maybe' is not true or false",
        "primary/orders: lock_duration: 60 is not an ISO 8601 duration (for example PT30S, PT5M, P14D)",
        f"primary/orders: forward_to: 5 is not an entity name, {NAME_RULE}",
        "primary/orders: status: 'Paused' is not a status, allowed: Active, Disabled, SendDisabled, "
        "ReceiveDisabled",
        "primary/events: list where a mapping is expected",
    ],
    "duplicate-names.yaml": [
        "primary/Orders: name: duplicate of orders, allowed: each queue and topic name once in a namespace "
        "(case does not count)",
        "primary/ORDERS: name: duplicate of orders, allowed: each queue and topic name once in a namespace "
        "(case does not count)",
    ],
    "emulator-duplicates.json": [
        "sbemulatorns/Queue.1: Name: duplicate of queue.1, allowed: each queue and topic name once in a "
        "namespace (case does not count)",
        "sbemulatorns/t/S: Name: duplicate of s, allowed: each name once (case does not count)",
        "sbemulatorns/t/s/R: Name: duplicate of r, allowed: each name once (case does not count)",
    ],
    "duplicate-key.yaml": ["line 5: 'orders': duplicate key, allowed: each name once"],
    "bad-yaml.yaml": ["line 4, column 1: not valid YAML or JSON: expected ',' or '}', but got "
                      "'<stream end>'"],
    "bad-sql.yaml": [
        "primary/events/consumer/red: filter.sql: Syntax error at column 9: unexpected end of expression; "
        "expected an expression",
        "primary/events/consumer/stamp: action.sql: Syntax error at column 5: sys.SequenceNumber is set by "
        "the broker and cannot be changed by an action",
    ],
    "forwarding.yaml": [
        "primary/c: forward_to: 'nowhere' is not declared in namespace primary, allowed: a queue or topic of "
        "the same namespace",
        "primary/a: forward_to: a -> b -> a is a forwarding cycle, allowed: chains that end at an entity "
        "that does not forward",
    ],
    "emulator-config.json": [
        "sbemulatorns/queue.1: DeadLetteringOnMessageExpiration: 'no' is not true or false",
        "sbemulatorns/queue.1: DefaultMessageTimeToLive: '1 hour' is not an ISO 8601 duration (for example "
        "PT30S, PT5M, P14D)",
        "sbemulatorns/queue.1: DuplicateDetectionHistoryTimeWindow: PT10S is out of range, allowed PT20S "
        "to P7D",
        "sbemulatorns/queue.1: LockDuration: PT10H is out of range, allowed PT5S to PT5M",
        "sbemulatorns/queue.1: MaxDeliveryCount: 0 is out of range, allowed 1 to 2147483647",
        "sbemulatorns/queue.1: RequiresDuplicateDetection: 1 is not true or false",
        "sbemulatorns/queue.1: RequiresSession: 'false' is not true or false",
        f"sbemulatorns: Queues[1].Name: None is not a name, {NAME_RULE}",
        "sbemulatorns/topic.1: DefaultMessageTimeToLive: PT0.5S is out of range, allowed PT1S or longer",
        "sbemulatorns/topic.1: DuplicateDetectionHistoryTimeWindow: P8D is out of range, allowed PT20S "
        "to P7D",
        "sbemulatorns/topic.1: RequiresDuplicateDetection: 'yes' is not true or false",
        "sbemulatorns/topic.1/subscription.1: DeadLetteringOnMessageExpiration: None is not true or false",
        "sbemulatorns/topic.1/subscription.1: LockDuration: PT1S is out of range, allowed PT5S to PT5M",
        "sbemulatorns/topic.1/subscription.1: MaxDeliveryCount: '3' is not a whole number, allowed 1 to "
        "2147483647",
        "sbemulatorns/topic.1/subscription.1/corr: CorrelationFilter.CorelationId: unknown key, did you mean "
        "CorrelationId?",
        "sbemulatorns/topic.1/subscription.1/corr: CorrelationFilter.Label: 5 is not text",
        "sbemulatorns/topic.1/subscription.1/neither: FilterType: 'Boolean' is not a filter type, allowed: "
        "Correlation, Sql",
        "sbemulatorns/queue.1: ForwardDeadLetteredMessagesTo: 'missing-dlq' is not declared in namespace "
        "sbemulatorns, allowed: a queue or topic of the same namespace",
        "sbemulatorns/topic.1/subscription.1: ForwardTo: 'topic.2' is not declared in namespace "
        "sbemulatorns, did you mean topic.1?",
    ],
}
SHAPE = "expected a mapping with `namespaces` (sbfed) or `UserConfig` (emulator Config.json)"
EXPECTED |= {"empty.yaml": [SHAPE], "not-a-mapping.yaml": [SHAPE]}


def test_the_corpus_is_covered() -> None:
    assert sorted(EXPECTED) == [path.name for path in CORPUS]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_problem_is_one_exact_line(name: str) -> None:
    assert _problems(name) == [f"{BROKEN / name}: {line}" for line in EXPECTED[name]]


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_every_command_prints_the_lines_and_exits_2(path: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    lines = [f"{path}: {line}" for line in EXPECTED[path.name]]
    runs = {
        "broker serve": lambda: broker_cli.main(["serve", "--topology", str(path), "--in-memory"]),
        "topology apply": lambda: topology_cli.main(["apply", "--topology", str(path)]),
        "infra params": lambda: infra_cli.main(["params", "--topology", str(path), "--app-root", "/",
                                                "--out", str(tmp_path / "p.json")]),
    }
    for command, run in runs.items():
        assert run() == 2, command
        captured = capsys.readouterr()
        assert captured.err.splitlines() == lines, command
        assert "Traceback" not in captured.err + captured.out


@pytest.mark.parametrize("command", [["topology", "apply"], ["infra", "params", "--app-root", "/"],
                                     ["broker", "serve", "--in-memory"]])
def test_the_sbfed_command_checks_sql_for_every_part(command: list[str]) -> None:
    """In a fresh process (nothing registered yet) the dispatcher adds the broker's SQL check for every
    command that reads a topology, so a file is valid everywhere or nowhere."""
    path = BROKEN / "bad-sql.yaml"
    run = subprocess.run([sys.executable, "-m", "sbfed.cli", *command, "--topology", str(path)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [f"{path}: {line}" for line in EXPECTED["bad-sql.yaml"]]
