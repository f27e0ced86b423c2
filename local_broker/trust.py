"""Make every client on this machine trust the local broker's certificate, once, as `dotnet dev-certs https
--trust` and `mkcert -install` do for theirs (`sbfed broker trust`; `--undo` takes it back).

Runtimes find trust anchors in different places, so it does two things and says what each runtime reads:
* the system store (Debian/Ubuntu: a copy in /usr/local/share/ca-certificates, then update-ca-certificates):
  .NET on Linux, OpenSSL-based tools (curl, Python's `ssl` defaults), Go; macOS, Windows and Java get the
  command to run printed;
* a CA bundle sbfed owns (`$XDG_DATA_HOME/sbfed/trust/ca-bundle.pem`): the system's bundle plus the broker
  certificates trusted so far, for the runtimes that ignore the system store: Python's `requests` (so the
  `ServiceBusAdministrationClient`) reads certifi unless `REQUESTS_CA_BUNDLE` names a bundle, Node.js adds
  `NODE_EXTRA_CA_CERTS`. No root needed for this part.
`--undo` removes the certificate from both (the bundle goes when no certificate is left).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import ssl
import subprocess
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from local_broker.tls import CERT_FILE

DEBIAN_CA_DIR = "/usr/local/share/ca-certificates"
BUNDLE = "ca-bundle.pem"


def default_store() -> Path:
    """`$XDG_DATA_HOME/sbfed/trust`, beside the broker's default data directory."""
    from local_broker.cli import default_data_dir

    return default_data_dir().parent / "trust"


def _parser() -> argparse.ArgumentParser:
    from local_broker.cli import default_data_dir

    parser = argparse.ArgumentParser(prog="sbfed broker trust", description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--data", default=str(default_data_dir()),
                       help=f"the broker's data directory, whose {CERT_FILE} to trust (default: %(default)s)")
    which.add_argument("--cert", help="the certificate (PEM) to trust instead")
    parser.add_argument("--undo", action="store_true", help="remove the trust this command added")
    parser.add_argument("--store", default=str(default_store()),
                        help=f"where sbfed keeps the certificates it trusts and {BUNDLE} (default: "
                             "%(default)s)")
    parser.add_argument("--ca-dir", default=DEBIAN_CA_DIR,
                        help="the system's directory of extra CA certificates (Debian/Ubuntu); '' to leave "
                             "the system store alone (default: %(default)s)")
    parser.add_argument("--update-command", default="update-ca-certificates",
                        help="the command that rebuilds the system store from --ca-dir; '' for none "
                             "(default: %(default)s)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    cert_path = Path(args.cert) if args.cert else Path(args.data) / CERT_FILE
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    except (OSError, ValueError) as exc:
        print(f"sbfed broker trust: no certificate at {cert_path} ({getattr(exc, 'strerror', None) or exc}): "
              "start the broker once with `sbfed broker serve` (and the same --data), or pass --cert",
              file=sys.stderr)
        return 1
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    name = "sbfed-" + hashlib.sha256(pem.encode()).hexdigest()[:16]
    store = Path(args.store)
    if args.undo:
        _untrust(pem, name, cert_path, store, args)
    else:
        _trust(pem, name, cert_path, store, args)
        print(f"  undo: {shlex.join(['sbfed', 'broker', 'trust', '--undo', *argv])}")
    return 0


def _trust(pem: str, name: str, cert_path: Path, store: Path, args: argparse.Namespace) -> None:
    print(f"trusting {cert_path} ({name})")
    print(f"  {_system_store(args, name, pem, cert_path, add=True)}")
    (store / "certs").mkdir(parents=True, exist_ok=True)
    (store / "certs" / f"{name}.pem").write_text(pem)
    bundle = _rebuild_bundle(store)
    print(f"  sbfed's CA bundle (the system's CAs + the brokers trusted): {bundle}; point the runtimes that "
          "ignore the system store at it:")
    for line in _runtime_lines(bundle, name, cert_path):
        print(f"    {line}")


def _untrust(pem: str, name: str, cert_path: Path, store: Path, args: argparse.Namespace) -> None:
    print(f"no longer trusting {cert_path} ({name})")
    print(f"  {_system_store(args, name, pem, cert_path, add=False)}")
    (store / "certs" / f"{name}.pem").unlink(missing_ok=True)
    bundle = _rebuild_bundle(store)
    print(f"  sbfed's CA bundle: {bundle if bundle.exists() else 'removed (no broker left to trust)'}")
    if not bundle.exists():
        print("    unset REQUESTS_CA_BUNDLE NODE_EXTRA_CA_CERTS   # where you exported them")
    print(f"    Java: keytool -delete -cacerts -storepass changeit -alias {name}")


def _rebuild_bundle(store: Path) -> Path:
    """The system's CA bundle (certifi's where there is none) plus every certificate in `store/certs`."""
    bundle = store / BUNDLE
    trusted = sorted((store / "certs").glob("*.pem")) if (store / "certs").is_dir() else []
    if not trusted:
        bundle.unlink(missing_ok=True)
        return bundle
    system = ssl.get_default_verify_paths().cafile
    base = Path(system).read_text() if system and Path(system).is_file() else _certifi_bundle()
    extra = [path.read_text() for path in trusted]
    text = base.rstrip("\n") + "\n" + "".join(p for p in extra if p.strip() not in base)
    temporary = bundle.with_suffix(".tmp")
    temporary.write_text(text)
    os.replace(temporary, bundle)
    return bundle


def _certifi_bundle() -> str:
    import certifi

    return Path(certifi.where()).read_text()


def _system_store(args: argparse.Namespace, name: str, pem: str, cert_path: Path, *, add: bool) -> str:
    """Add the certificate to (or remove it from) the system store where this command can; else say how."""
    keychain = "/Library/Keychains/System.keychain"
    if sys.platform == "darwin":
        return "macOS, run: " + (f"sudo security add-trusted-cert -d -r trustRoot -k {keychain} "
                                 f"{shlex.quote(str(cert_path))}" if add else
                                 f"sudo security delete-certificate -c 'sbfed local broker' {keychain}")
    if sys.platform == "win32":
        return "Windows, run: " + (f"certutil -addstore Root {cert_path}" if add
                                   else 'certutil -delstore Root "sbfed local broker"')
    if not args.ca_dir:
        return "system store: left alone (--ca-dir '')"
    ca_dir = Path(args.ca_dir)
    target = ca_dir / f"{name}.crt"
    if not os.access(ca_dir if ca_dir.is_dir() else ca_dir.parent, os.W_OK):
        again = "sudo sbfed broker trust" + (" --undo" if not add else "")
        return f"system store: {ca_dir} is not writable here: run `{again}` (with the same options) as root"
    if add:
        ca_dir.mkdir(parents=True, exist_ok=True)
        target.write_text(pem)
    else:
        target.unlink(missing_ok=True)
    done = f"{'added' if add else 'removed'} {target}"
    if not args.update_command:
        return f"system store: {done} (no update command run)"
    run = subprocess.run(shlex.split(args.update_command), capture_output=True, text=True, check=False)
    if run.returncode != 0:
        said = (run.stderr or run.stdout).strip().splitlines()
        return (f"system store: {done}, but `{args.update_command}` failed ({run.returncode})"
                + (f": {said[-1]}" if said else ""))
    return (f"system store: {done} and ran `{args.update_command}`: .NET, curl, Go and OpenSSL-based tools "
            "trust it")


def _runtime_lines(bundle: Path, name: str, cert_path: Path) -> list[str]:
    quoted = shlex.quote(str(bundle))
    return [
        f"export REQUESTS_CA_BUNDLE={quoted}   # Python: azure-servicebus's admin client, requests (certifi "
        "otherwise)",
        f"export NODE_EXTRA_CA_CERTS={quoted}  # Node.js: @azure/service-bus and its admin client",
        f"Python's AMQPS and WebSocket transports read certifi only: connection_verify={quoted}",
        f"Java: keytool -importcert -cacerts -storepass changeit -noprompt -alias {name} -file "
        f"{shlex.quote(str(cert_path))}",
    ]
