"""Runs one of azure-servicebus's published samples against a namespace, unchanged but for how it connects.

`python run_sample.py <sample.py>` with SERVICEBUS_CONNECTION_STR and SERVICEBUS_ADMIN_CONNECTION_STR set: the
samples build their clients from a namespace name and DefaultAzureCredential (Entra ID, which the broker does
not serve); those constructions are read as `from_connection_string` with the namespace's connection strings
instead. SAMPLE_TIME_SCALE (default 1) shortens the samples' sleeps (time.sleep, asyncio.sleep), so a sample
that holds messages for 100 s holds them for 10 s at 0.1 against queues with locks that short.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from pathlib import Path

CLIENTS = re.compile(
    r"(ServiceBusClient|ServiceBusAdministrationClient)\(\s*(?:FULLY_QUALIFIED_NAMESPACE|fully_qualified_namespace)"
    r",\s*credential\b")


def connected(source: str) -> str:
    def by_connection_string(match: re.Match) -> str:
        setting = "ADMIN_CONNECTION_STR" if match[1] == "ServiceBusAdministrationClient" else "CONNECTION_STR"
        return f"{match[1]}.from_connection_string({setting}"
    return CLIENTS.sub(by_connection_string, source)


def scale_sleeps(scale: float) -> None:
    real_sleep, real_async_sleep = time.sleep, asyncio.sleep
    time.sleep = lambda seconds: real_sleep(seconds * scale)

    async def async_sleep(seconds: float, result=None):
        return await real_async_sleep(seconds * scale, result)
    asyncio.sleep = async_sleep


def main(path: str) -> None:
    source = Path(path).read_text()
    scale_sleeps(float(os.environ.get("SAMPLE_TIME_SCALE", "1")))
    settings = {"CONNECTION_STR": os.environ["SERVICEBUS_CONNECTION_STR"],
                "ADMIN_CONNECTION_STR": os.environ["SERVICEBUS_ADMIN_CONNECTION_STR"]}
    sys.argv = [path]
    exec(compile(connected(source), path, "exec"), {"__name__": "__main__", "__file__": path, **settings})


if __name__ == "__main__":
    main(sys.argv[1])
