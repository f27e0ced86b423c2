"""host.json, retry policies, local settings and connection settings, as the local host reads them."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from replicators.connections import ConnectionSettingError, resolve_connection
from replicators.host.hostjson import ServiceBusHostOptions, load_host_json, service_bus_options
from replicators.host.retry_policy import FunctionRetryPolicy
from replicators.host.settings import apply_settings, load_local_settings

REPO = Path(__file__).resolve().parents[3]
LOCAL = (
    "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=Root;SharedAccessKey=a2V5;UseDevelopmentEmulator=true"
)


def test_repository_host_json_is_read():
    options = load_host_json(REPO / "host.json")
    assert options.prefetch_count == 200 and options.auto_complete_messages is True
    assert options.max_auto_lock_renewal_duration == dt.timedelta(minutes=5)
    assert (options.max_concurrent_calls, options.max_message_batch_size) == (4, 100)


def test_missing_host_json_gives_the_extension_defaults(tmp_path):
    assert load_host_json(tmp_path / "host.json") == ServiceBusHostOptions()


def test_legacy_shape_is_understood_and_flat_keys_win():
    options = service_bus_options(
        {
            "extensions": {
                "serviceBus": {
                    "prefetchCount": 50,
                    "messageHandlerOptions": {
                        "autoComplete": False,
                        "maxConcurrentCalls": 2,
                        "maxAutoRenewDuration": "00:01:00",
                    },
                    "batchOptions": {"maxMessageCount": 20},
                    "maxMessageBatchSize": 30,
                }
            }
        }
    )
    assert (options.prefetch_count, options.auto_complete_messages, options.max_concurrent_calls) == (
        50,
        False,
        2,
    )
    assert options.max_auto_lock_renewal_duration == dt.timedelta(minutes=1)
    assert options.max_message_batch_size == 30


def test_min_message_batch_size_and_its_wait_are_read():
    options = service_bus_options(
        {"extensions": {"serviceBus": {"minMessageBatchSize": 20, "maxBatchWaitTime": "00:00:02"}}}
    )
    assert (options.min_message_batch_size, options.max_batch_wait_time) == (20, dt.timedelta(seconds=2))
    assert ServiceBusHostOptions().min_message_batch_size == 1  # the extension's default: no waiting
    with pytest.raises(ValueError, match="at least 1"):
        service_bus_options({"extensions": {"serviceBus": {"minMessageBatchSize": 0}}})


def test_bad_host_json_values_name_the_key():
    with pytest.raises(ValueError, match="maxAutoLockRenewalDuration"):
        service_bus_options({"extensions": {"serviceBus": {"maxAutoLockRenewalDuration": "5m"}}})
    with pytest.raises(ValueError, match="at least 1"):
        service_bus_options({"extensions": {"serviceBus": {"maxConcurrentCalls": 0}}})


def test_exponential_retry_policy_doubles_up_to_the_maximum():
    policy = FunctionRetryPolicy.from_settings(
        {
            "setting_name": "retry_policy",
            "strategy": "exponential_backoff",
            "max_retry_count": "-1",
            "minimum_interval": "00:00:05",
            "maximum_interval": "00:05:00",
        }
    )
    assert [policy.delay(n).total_seconds() for n in (1, 2, 3, 7, 20)] == [5, 10, 20, 300, 300]
    assert policy.allows(10_000)


def test_fixed_retry_policy_stops_after_max_retry_count():
    policy = FunctionRetryPolicy.from_settings(
        {"strategy": "fixedDelay", "max_retry_count": "2", "delay_interval": "00:00:10"}
    )
    assert policy.delay(1) == policy.delay(2) == dt.timedelta(seconds=10)
    assert policy.allows(2) and not policy.allows(3)
    assert FunctionRetryPolicy.from_settings(None) is None
    with pytest.raises(ValueError, match="retry strategy"):
        FunctionRetryPolicy.from_settings({"strategy": "linear", "max_retry_count": "1"})


def test_local_settings_do_not_override_the_environment(tmp_path):
    path = tmp_path / "local.settings.json"
    path.write_text(json.dumps({"IsEncrypted": False, "Values": {"PRIMARY": LOCAL, "OTHER": "x"}}))
    environ = {"OTHER": "from-env"}
    assert apply_settings(load_local_settings(path), environ) == {"PRIMARY": LOCAL, "OTHER": "from-env"}
    assert load_local_settings(tmp_path / "absent.json") == {}


def test_connection_string_setting():
    connection = resolve_connection("PRIMARY", {"PRIMARY": LOCAL})
    assert connection.connection_string == LOCAL and connection.host == "127.0.0.1"


def test_identity_based_setting():
    settings = {
        "SECONDARY__fullyQualifiedNamespace": "contoso-2.servicebus.windows.net",
        "SECONDARY__credential": "managedidentity",
        "SECONDARY__clientId": "1234",
    }
    connection = resolve_connection("SECONDARY", settings)
    assert connection.connection_string is None
    assert (connection.host, connection.credential, connection.client_id) == (
        "contoso-2.servicebus.windows.net",
        "managedidentity",
        "1234",
    )
    from azure.identity import ManagedIdentityCredential

    assert isinstance(connection._token_credential(), ManagedIdentityCredential)


def test_empty_connection_means_azurewebjobsservicebus_and_missing_settings_say_what_to_set():
    assert resolve_connection("", {"AzureWebJobsServiceBus": LOCAL}).setting == "AzureWebJobsServiceBus"
    with pytest.raises(ConnectionSettingError, match="PRIMARY__fullyQualifiedNamespace"):
        resolve_connection("PRIMARY", {})
    with pytest.raises(ConnectionSettingError, match="not a Service Bus connection string"):
        resolve_connection("PRIMARY", {"PRIMARY": "hello"})
