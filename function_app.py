"""The Azure Functions (Python v2) app: one Service Bus-triggered function per declared replication task."""

import azure.functions as func

app = func.FunctionApp()
