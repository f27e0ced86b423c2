"""Replication tasks: the copy of one message, batching, retries, settlement, audit records, local host."""
