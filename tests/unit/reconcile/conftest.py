"""One local SparkSession for all reconcile tests (a JVM start costs several seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from spark_reconcile import session

    spark, owned = session.start("local[2]", "1g", 2, {})
    yield spark
    if owned:
        spark.stop()
