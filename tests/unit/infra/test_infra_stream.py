"""stream-to-queue in Azure: the topology's Kafka cluster rendered as an Event Hubs namespace with its topics
as hubs, the task's Service Bus target as the only Service Bus role, and the Kafka trigger's app settings: the
namespace's Kafka endpoint and a Key Vault reference to a Listen-only connection string (the app's one
secret, which the Kafka trigger needs: it has no managed-identity sign-in to Event Hubs)."""

from __future__ import annotations

import pytest

from patterns.infra_params import InfraError, InfraOptions, render_parameters
from topology import load

from .bicep import FIXTURES, INFRA, declaration, parse, stream_values

KEY_VAULT_SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"


def test_the_kafka_cluster_becomes_an_event_hubs_namespace_and_only_the_target_gets_a_role():
    values = stream_values()
    assert values["eventHubs"] == [{"name": "web", "location": "westeurope", "hubs": [
        {"name": "clicks", "partitions": 4}, {"name": "views", "partitions": 2}]}]
    assert values["kafkaConnections"] == [{"setting": "WEB", "cluster": "web"}]
    assert values["connections"] == [{"setting": "CENTRAL", "namespace": "central"}]
    [central] = values["namespaces"]
    assert central["roleAssignments"] == [
        {"role": "Azure Service Bus Data Sender", "entityType": "queue", "queue": "clicks"}]


def test_clusters_azure_cannot_deploy_are_refused():
    topology = load(FIXTURES / "stream-to-queue.yaml")
    with pytest.raises(InfraError, match="kafka/web: no Azure region; add web=<region>"):
        render_parameters(topology, InfraOptions(locations={"central": "westeurope"}, topology_file="t.yaml"))
    topology.kafka["web"].topics[0].partitions = 40
    with pytest.raises(InfraError, match="kafka/web/clicks: 40 partitions, a Standard Event Hubs namespace "
                                         "allows at most 32"):
        render_parameters(topology, InfraOptions(locations={"central": "x", "web": "x"}, topology_file="t"))


def test_the_connection_string_goes_only_into_the_key_vault_and_the_app_reads_it_by_reference():
    hubs = parse(INFRA / "modules" / "eventhubs-namespace.bicep")["resources"]
    rule = declaration(hubs["listenRule"])
    assert rule["properties"]["rights"] == ["Listen"]
    secret = declaration(hubs["connectionString"])
    assert hubs["connectionString"]["type"] == "Microsoft.KeyVault/vaults/secrets"
    assert "listKeys" in str(secret["properties"]["value"])
    partitions = declaration(hubs["hubs"])["properties"]["partitionCount"]["operator"]["operands"]
    assert partitions == {"operand_1": "hub", "operand_2": "partitions"}
    app = parse(INFRA / "modules" / "function-app.bicep")["variables"]
    password = app["kafkaPasswordSettings"]["value"]["function"]["parameters"]
    assert password["arg_2"]["detail"]["expression"] == "${c.setting}__password"
    assert "@Microsoft.KeyVault(SecretUri=${c.secretUri})" in str(password["arg_3"])
    vault = declaration(parse(INFRA / "modules" / "key-vault.bicep")["resources"]["keyVault"])
    assert vault["properties"]["enableRbacAuthorization"] is True
    access = parse(INFRA / "modules" / "key-vault-access.bicep")
    assert access["variables"]["keyVaultSecretsUser"]["value"] == KEY_VAULT_SECRETS_USER
    role = declaration(access["resources"]["secretsUserRole"])
    assert role["scope"] == "keyVault" and role["properties"]["principalType"] == "ServicePrincipal"


def test_a_topology_without_kafka_deploys_no_key_vault():
    main = parse(INFRA / "main.bicep")["modules"]
    for module in ("keyVault", "keyVaultAccess"):
        condition = main[module]["config"]["condition"]["operator"]
        assert condition["type"] == "not"
        assert condition["operands"]["bool_value"]["function"] == {
            "type": "empty", "parameters": {"item_to_test": "eventHubs"}}
