"""Offline checks of infra/*.bicep: syntax (pycep-parser), module wiring, and the security-relevant shape
(managed identity only, least-privilege role ids, ordering the renderer relies on)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from lark.exceptions import UnexpectedInput
from pycep import BicepParser

from .bicep import (
    INFRA,
    REPO,
    ROLE_IDS,
    bicep_files,
    declaration,
    is_loop,
    parse,
    stream_values,
    unquote,
    values,
)


@pytest.mark.parametrize("path", bicep_files(), ids=lambda p: str(p.relative_to(INFRA)))
def test_every_bicep_file_parses(path: Path) -> None:
    tree = parse(path)
    assert tree["parameters"] or tree.get("resources"), f"{path} declares nothing"


def test_the_parser_rejects_broken_bicep() -> None:
    """The syntax check has teeth: a missing colon in a real template is an error."""
    text = (INFRA / "modules" / "monitoring.bicep").read_text()
    broken = text.replace("properties: {", "properties {", 1)
    assert broken != text
    with pytest.raises(UnexpectedInput):
        BicepParser().parse(text=broken)


def _module_calls() -> list[tuple[Path, str, Path, dict]]:
    calls = []
    for path in bicep_files():
        for symbol, module in parse(path).get("modules", {}).items():
            assert module["type"] == "local", f"{path}: module {symbol} is not a local file"
            target = (path.parent / module["detail"]["path"]).resolve()
            calls.append((path, symbol, target, declaration(module)["params"]))
    return calls


def test_modules_exist_and_receive_exactly_their_parameters() -> None:
    calls = _module_calls()
    assert {c[2].name for c in calls} == {p.name for p in bicep_files()} - {"main.bicep"}, \
        "every module file is used, and only existing files are referenced"
    for caller, symbol, target, passed in calls:
        assert target.exists(), f"{caller}: module {symbol} points at missing {target}"
        declared = parse(target)["parameters"]
        required = {name for name, p in declared.items() if p["default"] is None}
        undeclared = set(passed) - set(declared)
        assert not undeclared, f"{caller}:{symbol} passes undeclared {undeclared}"
        assert required <= set(passed), f"{caller}:{symbol} misses required {required - set(passed)}"


def test_module_outputs_used_are_declared() -> None:
    symbols = {(caller, symbol): target for caller, symbol, target, _ in _module_calls()}
    used = 0
    for path in bicep_files():
        for symbol, output in re.findall(r"\b(\w+)(?:\[[^\]]*\])?\.outputs\.(\w+)", path.read_text()):
            target = symbols[(path, symbol)]
            assert output in parse(target)["outputs"], f"{path}: {symbol}.outputs.{output} is not declared"
            used += 1
    assert used >= 10


def _resources_of_type(resource_type: str) -> list[tuple[Path, str, dict]]:
    return [(path, name, res) for path in bicep_files()
            for name, res in parse(path).get("resources", {}).items() if res["type"] == resource_type]


def test_namespaces_allow_no_keys() -> None:
    namespaces = _resources_of_type("Microsoft.ServiceBus/namespaces")
    assert [n for _, n, r in namespaces if not r["existing"]] == ["serviceBusNamespace"]
    for _, _, res in namespaces:
        if not res["existing"]:
            assert declaration(res)["properties"]["disableLocalAuth"] is True


def test_storage_accounts_allow_no_shared_keys() -> None:
    accounts = [r for _, _, r in _resources_of_type("Microsoft.Storage/storageAccounts") if not r["existing"]]
    assert len(accounts) == 2
    storage = parse(INFRA / "modules" / "storage.bicep")
    assert storage["variables"]["accountProperties"]["value"]["allowSharedKeyAccess"] is False
    assert all(declaration(r)["properties"] == "accountProperties" for r in accounts)


def test_application_insights_takes_only_entra_tokens() -> None:
    components = _resources_of_type("Microsoft.Insights/components")
    [(_, _, insights)] = [x for x in components if not x[2]["existing"]]
    assert declaration(insights)["properties"]["DisableLocalAuth"] is True


def test_role_definition_ids_are_the_built_in_ones() -> None:
    access = parse(INFRA / "modules" / "servicebus-access.bicep")["variables"]["roleDefinitionIds"]["value"]
    assert {unquote(k): v for k, v in access.items()} == {
        "Azure Service Bus Data Receiver": ROLE_IDS["Azure Service Bus Data Receiver"],
        "Azure Service Bus Data Sender": ROLE_IDS["Azure Service Bus Data Sender"],
    }
    app = parse(INFRA / "modules" / "app-access.bicep")["variables"]
    assert {k: v["value"] for k, v in app.items()} == {
        "storageBlobDataOwner": ROLE_IDS["Storage Blob Data Owner"],
        "storageBlobDataContributor": ROLE_IDS["Storage Blob Data Contributor"],
        "storageBlobDataReader": ROLE_IDS["Storage Blob Data Reader"],
        "monitoringMetricsPublisher": ROLE_IDS["Monitoring Metrics Publisher"],
    }
    assert "090c5cfd-751d-490a-894a-3ce6f1109419" not in "".join(p.read_text() for p in bicep_files()), \
        "Data Owner is more than a replicator needs"


def test_role_assignments_are_scoped_and_for_the_app_identity() -> None:
    access = parse(INFRA / "modules" / "servicebus-access.bicep")["resources"]
    scopes = {}
    for name, res in access.items():
        if res["type"] == "Microsoft.Authorization/roleAssignments":
            body = declaration(res)
            assert body["properties"]["principalType"] == "ServicePrincipal"
            scope = body["scope"]
            scopes[name] = scope if isinstance(scope, str) else scope["operator"]["operands"]["operand_1"]
    assert scopes == {"namespaceRoles": "serviceBusNamespace", "queueRoles": "queues", "topicRoles": "topics",
                      "subscriptionRoles": "subscriptions"}
    assert {access[s]["type"] for s in scopes.values()} == {
        "Microsoft.ServiceBus/namespaces", "Microsoft.ServiceBus/namespaces/queues",
        "Microsoft.ServiceBus/namespaces/topics", "Microsoft.ServiceBus/namespaces/topics/subscriptions"}
    assert all(access[s]["existing"] for s in scopes.values())


def test_entity_order_supports_autoforwarding() -> None:
    """The renderer orders queues so forward targets come first; Bicep must deploy them one at a time,
    after the topics, and the subscriptions after both."""
    ns = parse(INFRA / "modules" / "servicebus-namespace.bicep")
    queues = ns["resources"]["queues"]
    assert {"type": "batchSize", "argument": 1} in queues["decorators"]
    assert declaration(queues)["dependsOn"] == ["topics"]
    assert declaration(ns["modules"]["subscriptions"])["dependsOn"] == ["topics", "queues"]


def test_flex_consumption_app_uses_its_identity_everywhere() -> None:
    app = parse(INFRA / "modules" / "function-app.bicep")
    site = declaration(app["resources"]["site"])
    assert site["identity"] == {"type": "SystemAssigned"}
    flex = site["properties"]["functionAppConfig"]["operator"]["operands"]["true_value"]
    assert flex["deployment"]["storage"]["authentication"] == {"type": "SystemAssignedIdentity"}
    assert flex["runtime"] == {"name": "python", "version": "pythonVersion"}
    basic_auth = [declaration(r) for r in app["resources"].values()
                  if r["type"] == "Microsoft.Web/sites/basicPublishingCredentialsPolicies"]
    assert sorted(b["name"] for b in basic_auth) == ["ftp", "scm"]
    assert all(b["properties"] == {"allow": False} for b in basic_auth)


def test_app_settings_are_identity_based() -> None:
    variables = parse(INFRA / "modules" / "function-app.bicep")["variables"]
    common = variables["commonSettings"]["value"]
    assert common["AzureWebJobsStorage__credential"] == "managedidentity"
    assert common["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"] == "Authorization=AAD"
    assert {"SBFED_TOPOLOGY", "SBFED_AUDIT_SINK", "AzureWebJobsStorage__accountName"} <= set(common)
    premium = variables["premiumSettings"]["value"]["operator"]["operands"]["false_value"]
    assert premium["WEBSITE_RUN_FROM_PACKAGE_BLOB_MI_RESOURCE_ID"] == "SystemAssigned"
    names = set(common) | set(premium)
    assert "AzureWebJobsStorage" not in names and not any("CONTENTAZUREFILE" in n for n in names)
    assert [n for n in names if n.endswith("CONNECTION_STRING")] == ["APPLICATIONINSIGHTS_CONNECTION_STRING"]
    per_connection = {variables[v]["value"]["function"]["parameters"]["arg_2"]["detail"]["expression"]
                      for v in ("namespaceSettings", "credentialSettings")}
    assert per_connection == {"${c.setting}__fullyQualifiedNamespace", "${c.setting}__credential"}


def test_rendered_fields_are_the_ones_the_templates_read() -> None:
    """The templates read namespaces, entities, rules and role assignments by field name; each name they
    read must be one the renderer writes (checked against the all-active and spillover samples)."""
    samples = [values("all-active"), values("spillover"), stream_values()]
    namespaces = [ns for v in samples for ns in v["namespaces"]]
    topics = [t for ns in namespaces for t in ns["topics"]]
    subscriptions = [s for t in topics for s in t["subscriptions"]]
    written = {
        "namespace": {k for ns in namespaces for k in ns},
        "topic": {k for t in topics for k in t},
        "queue": {k for ns in namespaces for q in ns["queues"] for k in q},
        "subscription": {k for s in subscriptions for k in s},
        "rule": {k for s in subscriptions for r in s["rules"] for k in r},
        "assignment": {k for ns in namespaces for a in ns["roleAssignments"] for k in a},
        "connection": {k for v in samples for c in v["connections"] for k in c},
        "cluster": {k for v in samples for eh in v.get("eventHubs", []) for k in eh},
        "hub": {k for v in samples for eh in v.get("eventHubs", []) for h in eh["hubs"] for k in h},
        "kafka connection": {k for v in samples for c in v.get("kafkaConnections", []) for k in c},
    }
    readers = {  # file -> loop variable -> what it iterates over
        "main.bicep": {"ns": "namespace", "c": "connection", "eh": "cluster", "k": "kafka connection"},
        "eventhubs-namespace.bicep": {"cluster": "cluster", "hub": "hub"},
        "servicebus-namespace.bicep": {"namespace": "namespace", "topic": "topic", "queue": "queue"},
        "servicebus-topic-subscriptions.bicep": {"sub": "subscription"},
        "servicebus-subscription.bicep": {"subscription": "subscription", "rule": "rule"},
        "servicebus-access.bicep": {"a": "assignment"},
    }
    reads = 0
    for path in bicep_files():
        variables = readers.get(path.name, {})
        for var, field in re.findall(r"\b(\w+)\.(\w+)", path.read_text()):
            if var in variables:
                assert field in written[variables[var]], \
                    f"{path.name} reads {var}.{field}, which the renderer never writes"
                reads += 1
    assert reads >= 25


def test_azure_yaml_deploys_the_function_app_and_renders_parameters_first() -> None:
    azure = yaml.safe_load((REPO / "azure.yaml").read_text())
    assert azure["infra"] == {"provider": "bicep", "path": "infra", "module": "main"}
    [(service, spec)] = azure["services"].items()
    assert spec == {"project": ".", "language": "python", "host": "function"}
    site_tags = declaration(parse(INFRA / "modules" / "function-app.bicep")["resources"]["site"])["tags"]
    assert site_tags["function"]["parameters"]["arg_2"] == {"'azd-service-name'": service}
    for shell in azure["hooks"]["preprovision"].values():
        assert "sbfed infra params" in shell["run"].replace("sbfed.exe", "sbfed")
        assert "--out infra/main.parameters.json" in shell["run"]
    assert is_loop(parse(INFRA / "main.bicep")["modules"]["serviceBus"])


def test_the_deploy_guide_names_only_real_outputs_and_settings() -> None:
    """Every SBFED_*/AZURE_* name in docs/deploy-azure.md and azure.yaml is a main.bicep output, a variable
    `sbfed infra params` reads, or one azd sets itself."""
    outputs = set(parse(INFRA / "main.bicep")["outputs"])
    cli_env = set(re.findall(r'env\("(SBFED_\w+)"', (REPO / "patterns" / "infra_cli.py").read_text()))
    azd = {"AZURE_ENV_NAME", "AZURE_LOCATION", "AZURE_PRINCIPAL_ID"}
    assert cli_env == {"SBFED_TOPOLOGY_FILE", "SBFED_LOCATION_MAP", "SBFED_HOSTING", "SBFED_SKU"}
    app_settings = {"SBFED_TOPOLOGY", "SBFED_AUDIT_SINK"}
    for doc in (REPO / "docs" / "deploy-azure.md", REPO / "azure.yaml"):
        named = set(re.findall(r"\b((?:SBFED|AZURE)_[A-Z_]+)\b", doc.read_text()))
        assert named, doc
        unknown = named - outputs - cli_env - azd - app_settings
        assert not unknown, f"{doc.name} names {unknown}"
