"""A local Functions host for Service Bus triggers: loads `function_app.py` through the azure-functions
library, feeds each trigger from azure-servicebus receivers, and settles like the Azure host does."""
