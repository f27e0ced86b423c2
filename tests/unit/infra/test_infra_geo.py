"""Geo-Replication in the Bicep parameters: the topology's geo_replication becomes the namespace's ARM
geoDataReplication (Microsoft.ServiceBus/namespaces@2023-01-01-preview), with what Azure refuses refused."""

from __future__ import annotations

import pytest

from patterns.infra_params import InfraError, InfraOptions, render_parameters
from topology import load, parse

from .bicep import FIXTURES, INFRA, declaration
from .bicep import parse as parse_bicep


def _render(topology, sku="Premium", locations=None) -> list[dict]:
    options = InfraOptions(locations=locations or {}, topology_file="t.yaml", sku=sku)
    return render_parameters(topology, options)["parameters"]["namespaces"]["value"]


def _geo(**block) -> object:
    geo = {"regions": ["westeurope", "northeurope"], **block}
    return parse({"namespaces": {"orders": {"geo_replication": geo}}})


def test_the_sample_renders_both_replicas_and_the_lag_in_the_primary_region():
    [orders] = _render(load(FIXTURES / "geo-replication.yaml"))
    assert (orders["location"], orders["sku"]) == ("westeurope", "Premium")
    assert orders["geoDataReplication"] == {
        "locations": [{"locationName": "westeurope", "roleType": "Primary"},
                      {"locationName": "northeurope", "roleType": "Secondary"}],
        "maxReplicationLagDurationInSeconds": 300}
    assert [q["name"] for q in orders["queues"]] == ["work"]


def test_synchronous_is_lag_zero_and_the_primary_may_be_the_second_region():
    [orders] = _render(_geo(mode="synchronous", primary="northeurope"))
    assert orders["location"] == "northeurope"
    assert orders["geoDataReplication"]["maxReplicationLagDurationInSeconds"] == 0
    assert [loc["roleType"] for loc in orders["geoDataReplication"]["locations"]] == ["Secondary", "Primary"]


def test_a_namespace_in_one_region_renders_none():
    [plain] = _render(parse({"namespaces": {"plain": {}}}), sku="Standard", locations={"plain": "westeurope"})
    assert plain["geoDataReplication"] is None


@pytest.mark.parametrize("topology, options, message", [
    (_geo(), {"sku": "Standard"}, "Geo-Replication needs a Premium namespace"),
    (_geo(max_lag="PT30S"), {}, "Azure accepts PT5M to P1D for asynchronous replication, not PT30S"),
    (_geo(max_lag="P2D"), {}, "not P2D"),
    (parse({"namespaces": {"orders": {"geo_replication": {"regions": ["a", "b", "c"]}}}}), {},
     "Azure replicates to one secondary region, not 2"),
    (_geo(), {"locations": {"orders": "eastus"}}, "the location map says eastus, geo_replication's primary"),
])
def test_what_azure_refuses_is_refused(topology, options, message):
    with pytest.raises(InfraError, match=message):
        _render(topology, **options)


def test_the_template_passes_geo_data_replication_with_the_api_version_that_has_it():
    module = parse_bicep(INFRA / "modules" / "servicebus-namespace.bicep")
    resource = module["resources"]["serviceBusNamespace"]
    assert resource["api_version"] == "2023-01-01-preview"
    properties = declaration(resource)["properties"]
    assert "geoDataReplication" in properties and properties["disableLocalAuth"] is True
