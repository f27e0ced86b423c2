"""The Azure Functions (Python v2) app: one Service Bus-triggered function per task of the topology file.

The topology file is named by app setting SBFED_TOPOLOGY (default: topology.yaml next to this file);
each task's `connection` names an app setting, exactly like a binding's `connection` property.
Locally: `sbfed functions run`; in Azure: `func azure functionapp publish <app>` (docs/replication.md).
"""

import atexit
import os
from pathlib import Path

import azure.functions as func

from replicators.app import TaskRuntime, register_tasks
from replicators.tasks import load_deployment
from replicators.telemetry import configure

# Metrics and traces to Application Insights (APPLICATIONINSIGHTS_CONNECTION_STRING, set by infra/) or to an
# OTLP collector (OTEL_EXPORTER_OTLP_ENDPOINT); nothing when neither is set (docs/operations.md).
configure(os.environ)

# A relative SBFED_TOPOLOGY is relative to the app folder, whatever the worker's working directory.
TOPOLOGY = str(Path(__file__).parent / (os.environ.get("SBFED_TOPOLOGY") or "topology.yaml"))

runtime = TaskRuntime(load_deployment(TOPOLOGY), os.environ)
atexit.register(runtime.close)
app = register_tasks(func.FunctionApp(), runtime)
