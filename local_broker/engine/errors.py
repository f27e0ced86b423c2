"""One typed error per broker failure; each knows its AMQP condition and HTTP status.

The wire adapters never decide semantics: they catch `BrokerError` and write `amqp_condition`,
`http_status` and `description` to the wire (servicebus-wire.md section 9).
"""

from __future__ import annotations

from typing import ClassVar


class BrokerError(Exception):
    """Base of every failure the engine reports to a client."""

    amqp_condition: ClassVar[str] = "amqp:internal-error"
    http_status: ClassVar[int] = 500

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class EntityNotFoundError(BrokerError):
    amqp_condition = "amqp:not-found"
    http_status = 404

    @classmethod
    def for_path(cls, path: str) -> EntityNotFoundError:
        return cls(f"The messaging entity '{path}' could not be found.")


class EntityAlreadyExistsError(BrokerError):
    amqp_condition = "com.microsoft:entity-already-exists"
    http_status = 409

    @classmethod
    def for_path(cls, path: str) -> EntityAlreadyExistsError:
        return cls(f"SubCode=40900. Conflict. The messaging entity '{path}' already exists.")


class ArgumentError(BrokerError):
    """A bad value or name; `property_name` is the SDK attribute (or argument) at fault, when there is one."""

    amqp_condition = "com.microsoft:argument-error"
    http_status = 400

    def __init__(self, description: str, property_name: str | None = None) -> None:
        super().__init__(description)
        self.property_name = property_name


class ArgumentOutOfRangeError(ArgumentError):
    amqp_condition = "com.microsoft:argument-out-of-range"


class EntityDisabledError(BrokerError):
    amqp_condition = "com.microsoft:entity-disabled"
    http_status = 403


class QuotaExceededError(BrokerError):
    amqp_condition = "amqp:resource-limit-exceeded"
    http_status = 403


class MessageSizeExceededError(BrokerError):
    amqp_condition = "amqp:link:message-size-exceeded"
    http_status = 413


class MessageLockLostError(BrokerError):
    amqp_condition = "com.microsoft:message-lock-lost"
    http_status = 410

    def __init__(self, description: str = "") -> None:
        super().__init__(
            description
            or "The lock supplied is invalid. Either the lock expired, or the message has already been "
            "removed from the queue."
        )


class MessageNotFoundError(BrokerError):
    amqp_condition = "com.microsoft:message-not-found"
    http_status = 410


class SessionCannotBeLockedError(BrokerError):
    amqp_condition = "com.microsoft:session-cannot-be-locked"
    http_status = 409


class SessionLockLostError(BrokerError):
    amqp_condition = "com.microsoft:session-lock-lost"
    http_status = 410

    def __init__(self, description: str = "") -> None:
        super().__init__(
            description or "The session lock has expired on the MessageSession. Accept a new MessageSession."
        )


class OperationTimeoutError(BrokerError):
    """Nothing to give within the wait, e.g. NEXT_AVAILABLE with no unlocked session holding messages."""

    amqp_condition = "com.microsoft:timeout"
    http_status = 408


class NotAllowedError(BrokerError):
    amqp_condition = "amqp:not-allowed"
    http_status = 400


class UnauthorizedError(BrokerError):
    amqp_condition = "amqp:unauthorized-access"
    http_status = 401


class ServerBusyError(BrokerError):
    amqp_condition = "com.microsoft:server-busy"
    http_status = 503


class StoreFullError(QuotaExceededError):
    """The disk under the namespace's store is (nearly) full: sends are refused until there is room again."""


class StoreWriteError(ServerBusyError):
    """The store could not write a commit (an I/O error): the turn's changes were rolled back."""


class StoreReadError(ServerBusyError):
    """The store could not read messages it keeps on disk (the file is damaged there): the operation that
    needed them fails; the rest of the namespace is served."""


class StoreError(Exception):
    """The store cannot be opened (e.g. written by an unknown schema version); not a client error."""
