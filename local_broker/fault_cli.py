"""`sbfed broker fault ...`: inject and read back faults on a running broker namespace.

    sbfed broker fault --admin https://127.0.0.1:PORT --key-name NAME --key KEY [--cert PATH] ACTION

    show                              print the namespace's fault state
    down [--mode refuse|drop]         take the namespace down (default drop: open connections are cut too)
    up                                bring it back (clears namespace_down)
    latency MS                        add MS milliseconds to every response (0 removes it)
    partition ENTITY ID down|up       take one partition of a partitioned queue/topic down or back up
    status ENTITY [STATUS]            read or set an entity's status (Active, Disabled, SendDisabled, ...)

It talks to the control API of the namespace's management port (docs/control-api.md) with a SAS token
signed by the given policy, which needs the Manage right. `--cert` is the broker's certificate
(`broker-cert.pem` beside its data), so TLS is verified rather than switched off.
"""

from __future__ import annotations

import argparse
import functools
import json
import ssl
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import quote, urlsplit

from local_broker.auth import DEFAULT_POLICY_NAME, generate_sas_token

TOKEN_LIFETIME_SECONDS = 3600
TIMEOUT_SECONDS = 30


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sbfed broker fault", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    control_arguments(parser)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    action = functools.partial(_action, actions)
    action("show", "print the fault state")
    down = action("down", "take the namespace down")
    down.add_argument("--mode", choices=("refuse", "drop"), default="drop",
                      help="refuse new connections only, or also drop open ones (default: %(default)s)")
    action("up", "bring the namespace back up")
    latency = action("latency", "add latency to every response")
    latency.add_argument("ms", type=int, help="milliseconds (0 removes it)")
    partition = action("partition", "take a partition of a partitioned entity down or back up")
    partition.add_argument("entity", help="the partitioned queue or topic")
    partition.add_argument("partition_id", type=int, help="the partition's number (0-based)")
    partition.add_argument("state", choices=("down", "up"),
                           help="down: sends pinned to it fail as server-busy, others go elsewhere; up: back")
    status = action("status", "read or set an entity's status")
    status.add_argument("entity", help="queue, topic or TOPIC/subscriptions/SUB")
    status.add_argument("status", nargs="?", help="Active, Disabled, SendDisabled or ReceiveDisabled")
    return parser


def control_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the namespace's control API is and how to sign for it (shared with `sbfed broker geo`)."""
    parser.add_argument("--admin", required=True, help="management endpoint, e.g. https://127.0.0.1:5300")
    parser.add_argument("--key-name", default=DEFAULT_POLICY_NAME,
                        help="SAS policy with the Manage right (default: %(default)s)")
    parser.add_argument("--key", required=True, help="the policy's key")
    parser.add_argument("--cert", help="the broker's certificate (PEM) to trust for https")


def _action(actions: argparse._SubParsersAction, name: str, summary: str) -> argparse.ArgumentParser:
    """A subcommand whose --help says what it does (the summary, as its description too)."""
    return actions.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")


def _request(args: argparse.Namespace) -> tuple[str, str, dict[str, object] | None]:
    """(method, route below /$control, JSON body) for the chosen action."""
    if args.action == "show":
        return "GET", "faults", None
    if args.action == "down":
        return "PUT", "faults", {"namespace_down": args.mode}
    if args.action == "up":
        return "PUT", "faults", {"namespace_down": None}
    if args.action == "latency":
        return "PUT", "faults", {"latency_ms": args.ms}
    if args.action == "partition":
        route = f"partitions/{quote(args.entity)}/{args.partition_id}"
        return "PUT", route, {"available": args.state == "up"}
    if args.status is None:
        return "GET", f"status/{quote(args.entity)}", None
    return "PUT", f"status/{quote(args.entity)}", {"status": args.status}


def call_control(admin: str, key_name: str, key: str, cert: str | None, method: str, route: str,
                 body: dict[str, object] | None) -> tuple[int, dict[str, object]]:
    """One control API call; returns (HTTP status, JSON answer)."""
    endpoint = urlsplit(admin)
    if endpoint.scheme not in ("https", "http") or not endpoint.netloc:
        raise ValueError(f"--admin must be an https://host:port address, not '{admin}'.")
    base = f"{endpoint.scheme}://{endpoint.netloc}"
    token = generate_sas_token(base, key_name, key, int(time.time()) + TOKEN_LIFETIME_SECONDS)
    request = urllib.request.Request(
        f"{base}/$control/{route}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": token, "Content-Type": "application/json"},
    )
    context = ssl.create_default_context(cafile=cert) if endpoint.scheme == "https" else None
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS, context=context) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        payload = error.read()
        try:
            return error.code, json.loads(payload)
        except ValueError:
            return error.code, {"error": {"code": error.code, "message": payload.decode(errors="replace")}}


def run(prog: str, args: argparse.Namespace, method: str, route: str, body: dict[str, object] | None) -> int:
    """Make the call, print its JSON answer (exit 0) or one line saying what went wrong (exit 1)."""
    try:
        status, answer = call_control(args.admin, args.key_name, args.key, args.cert, method, route, body)
    except (ValueError, OSError) as exc:
        hint = " (pass the broker's certificate with --cert)" if "CERTIFICATE_VERIFY" in str(exc) else ""
        print(f"{prog}: cannot reach {args.admin}: {exc}{hint}", file=sys.stderr)
        return 1
    if status >= 400:
        error = answer.get("error")
        message = error.get("message") if isinstance(error, dict) else answer
        print(f"{prog}: {status}: {message}", file=sys.stderr)
        return 1
    print(json.dumps(answer, indent=2))
    return 0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    return run("sbfed broker fault", args, *_request(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
