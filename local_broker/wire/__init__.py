"""Adapters between the wire (AMQP, HTTPS ATOM) and the engine; no semantics here."""
