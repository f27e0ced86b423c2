"""Outage drills: a pattern applied to two namespaces of a local broker process, its replication tasks run by
the local Functions host, a producer and a consumer, and a regional outage through the broker's control API
(docs/drills.md)."""
