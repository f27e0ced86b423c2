"""A Service Bus-compatible broker for one machine: same wire protocol, management API and semantics."""
