"""`sbfed broker check` and `sbfed broker recover`: a damaged namespace store, examined and salvaged without
touching it (local_broker/store/salvage.py says what each verifies and copies).

    sbfed broker check --data DIR                              every namespace's store in DIR: ok, or why not
    sbfed broker recover --data DIR --namespace NS --out NEWDIR    what can be read of NS into a new store

Exit codes: 0 all sound (check) or a store written (recover); 2 a store is not sound, or recover could not
run (no such store, NEWDIR already holds one).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from local_broker.store.salvage import check, recover


def check_parser() -> argparse.ArgumentParser:
    checking = argparse.ArgumentParser(
        prog="sbfed broker check",
        description="SQLite's integrity check and sbfed's own invariants for every <namespace>.db in DIR "
                    "(and each region's replica of a geo-replicated namespace, "
                    "regions/<region>/<namespace>.db); "
                    "one line per store (ok, or each problem). Nothing is written. Exit 2 if a store is not "
                    "sound.")
    checking.add_argument("--data", required=True, metavar="DIR", help="the broker's data directory")
    return checking


def recover_parser() -> argparse.ArgumentParser:
    recovering = argparse.ArgumentParser(
        prog="sbfed broker recover",
        description="Reads DIR/NS.db without changing it and writes NEWDIR/NS.db with every row that can be "
                    "read, minus what would break the store (a message whose payload was lost, ...); prints "
                    "what was saved, unreadable and dropped. Start the broker with --data NEWDIR (copy "
                    "broker.json and the certificate over to keep ports and keys).")
    recovering.add_argument("--data", required=True, metavar="DIR", help="the damaged store's data directory")
    recovering.add_argument("--namespace", required=True, metavar="NS",
                            help="the namespace whose store to read")
    recovering.add_argument("--out", required=True, metavar="NEWDIR", help="where to write the new store")
    return recovering


def main(command: str, argv: list[str]) -> int:
    """`command`: check or recover; `argv`: its arguments."""
    args = (check_parser() if command == "check" else recover_parser()).parse_args(argv)
    data = Path(args.data)
    if command == "check":
        stores = sorted([*data.glob("*.db"), *data.glob("regions/*/*.db")])
        if not stores:
            print(f"{data}: no namespace store (<namespace>.db) here", file=sys.stderr)
            return 2
        findings = [check(path) for path in stores]
        for finding in findings:
            print("\n".join(finding.lines()))
        return 2 if any(f.problems for f in findings) else 0
    source = data / f"{args.namespace}.db"
    target = Path(args.out) / source.name
    if not source.is_file():
        print(f"{source}: no such store", file=sys.stderr)
        return 2
    if target.exists():
        print(f"{target}: exists already; recover writes a new store only (choose another --out)",
              file=sys.stderr)
        return 2
    target.parent.mkdir(parents=True, exist_ok=True)
    salvage = recover(source, target)
    print(f"{source} -> {target}")
    print("\n".join(salvage.lines()))
    return 0
