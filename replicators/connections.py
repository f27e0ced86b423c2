"""Connection settings resolved the way a Functions binding resolves its `connection` property.

`connection: PRIMARY` reads app setting `PRIMARY` as a connection string, or, when that is absent,
`PRIMARY__fullyQualifiedNamespace` as an identity-based connection (`PRIMARY__credential: managedidentity`
and `PRIMARY__clientId` pick a managed identity; otherwise DefaultAzureCredential). An empty name means
`AzureWebJobsServiceBus`, as in Functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from azure.servicebus import ServiceBusClient, parse_connection_string

DEFAULT_CONNECTION = "AzureWebJobsServiceBus"


class ConnectionSettingError(LookupError):
    """A task names a connection setting that is not configured."""


@dataclass(frozen=True)
class Connection:
    setting: str
    connection_string: str | None = None
    fully_qualified_namespace: str | None = None
    credential: str | None = None
    client_id: str | None = None

    @property
    def host(self) -> str:
        """The namespace host without scheme or port (`contoso.servicebus.windows.net`, `127.0.0.1`)."""
        if self.connection_string:
            fqdn = parse_connection_string(self.connection_string).fully_qualified_namespace
        else:
            fqdn = self.fully_qualified_namespace or ""
        return fqdn.split("://")[-1].split("/")[0].rsplit(":", 1)[0]

    def client(self, **kwargs: Any) -> ServiceBusClient:
        """A client for this connection; kwargs go to ServiceBusClient (retry_total, prefetch, ...)."""
        if self.connection_string:
            return ServiceBusClient.from_connection_string(self.connection_string, **kwargs)
        return ServiceBusClient(self.fully_qualified_namespace or "", self._token_credential(), **kwargs)

    def _token_credential(self) -> Any:
        from azure.identity import DefaultAzureCredential, ManagedIdentityCredential

        if (self.credential or "").lower() == "managedidentity":
            return (
                ManagedIdentityCredential(client_id=self.client_id)
                if self.client_id
                else ManagedIdentityCredential()
            )
        return DefaultAzureCredential(managed_identity_client_id=self.client_id)


def resolve_connection(setting: str | None, settings: Mapping[str, str]) -> Connection:
    name = setting or DEFAULT_CONNECTION
    for separator in ("__", ":"):
        if f"{name}{separator}fullyQualifiedNamespace" in settings and not settings.get(name):
            return Connection(
                setting=name,
                fully_qualified_namespace=settings[f"{name}{separator}fullyQualifiedNamespace"],
                credential=settings.get(f"{name}{separator}credential"),
                client_id=settings.get(f"{name}{separator}clientId"),
            )
    value = settings.get(name)
    if not value:
        raise ConnectionSettingError(
            f"connection setting '{name}' is not set: set {name} to a connection string, or "
            f"{name}__fullyQualifiedNamespace to <namespace>.servicebus.windows.net (identity-based)"
        )
    if "Endpoint=" not in value:
        raise ConnectionSettingError(f"connection setting '{name}' is not a Service Bus connection string")
    return Connection(setting=name, connection_string=value)
