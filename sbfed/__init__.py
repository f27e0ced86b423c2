"""sbfed: cross-region federation and replication for Azure Service Bus."""

__version__ = "0.1.0"
