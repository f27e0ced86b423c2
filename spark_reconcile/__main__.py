"""Entry point for `python -m spark_reconcile` and for spark-submit (see docs/reconcile.md)."""

import sys

from spark_reconcile.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
