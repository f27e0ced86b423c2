"""Reading infra/*.bicep with pycep-parser (no Bicep compiler can be installed offline) and rendering the
sample topologies, shared by the infra tests."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from pycep import BicepParser

from patterns.infra_params import InfraOptions, render_parameters
from topology import load

REPO = Path(__file__).resolve().parents[3]
INFRA = REPO / "infra"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
PATTERNS = ("all-active", "active-passive", "spillover")
LOCATIONS = {"primary": "westeurope", "secondary": "northeurope"}

# Built-in role definition ids (shared/reference/functions-and-replication.md 6.2; Storage Blob Data Reader
# is the documented built-in id as well).
ROLE_IDS = {
    "Azure Service Bus Data Receiver": "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0",
    "Azure Service Bus Data Sender": "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39",
    "Storage Blob Data Owner": "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
    "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Storage Blob Data Reader": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
    "Monitoring Metrics Publisher": "3913510d-42f4-4e42-8a64-420c390055eb",
}


def bicep_files() -> list[Path]:
    return sorted(INFRA.rglob("*.bicep"))


@functools.cache
def parse(path: Path) -> dict[str, Any]:
    return BicepParser().parse(file_path=path)


def unquote(key: str) -> str:
    """pycep keeps the quotes of quoted object keys ('azd-env-name')."""
    return key[1:-1] if len(key) > 1 and key[0] == key[-1] == "'" else key


def declaration(node: dict[str, Any]) -> dict[str, Any]:
    """The body of a resource or module, under any loop or condition pycep wraps around it."""
    config = node["config"]
    while "loop_type" in config or ("condition" in config and "config" in config):
        config = config["config"]
    return config


def is_loop(node: dict[str, Any]) -> bool:
    return "loop_type" in node["config"]


@functools.cache
def rendered(pattern: str, hosting: str = "flex") -> dict[str, Any]:
    topology = load(FIXTURES / f"{pattern}.yaml")
    options = InfraOptions(locations=dict(LOCATIONS), hosting=hosting,
                           topology_file=f"tests/unit/infra/fixtures/{pattern}.yaml")
    return render_parameters(topology, options)


def values(pattern: str, hosting: str = "flex") -> dict[str, Any]:
    return {name: p["value"] for name, p in rendered(pattern, hosting)["parameters"].items()}


STREAM_LOCATIONS = {"central": "westeurope", "web": "westeurope"}


def stream_values(hosting: str = "flex") -> dict[str, Any]:
    """The stream-to-queue sample (a Kafka cluster into a session queue) rendered."""
    options = InfraOptions(locations=dict(STREAM_LOCATIONS), hosting=hosting,
                           topology_file="tests/unit/infra/fixtures/stream-to-queue.yaml")
    document = render_parameters(load(FIXTURES / "stream-to-queue.yaml"), options)
    return {name: p["value"] for name, p in document["parameters"].items()}


def namespace(pattern: str, name: str) -> dict[str, Any]:
    return next(ns for ns in values(pattern)["namespaces"] if ns["name"] == name)
