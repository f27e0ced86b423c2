"""The web console of the local broker: namespaces, entities with live counts, messages, dead letters and
fault switches, served on each namespace's management port at `/` (docs/console.md).

`Console(...).respond(method, segments, query, headers, body)` answers one request; the management
endpoint hands it every path that `Console.serves`.
"""

from local_broker.console.app import Console, ConsoleResponse

__all__ = ["Console", "ConsoleResponse"]
