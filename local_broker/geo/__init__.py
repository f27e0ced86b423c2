"""Service Bus Geo-Replication on one machine: one namespace, one replica per region, one endpoint.

`log` is the replication log (the store's change sets, in commit order), `store` the replicated store the
engine writes through (roles, modes, throttling, promotion), `hosting` the broker's side (files, the
shipping thread, swapping the replica behind the endpoint), `control` the `/$control/geo` routes.
See docs/geo-replication.md.
"""
