"""The broker's certificate (management HTTPS, AMQPS, AMQP over WebSockets): self-signed, made on first start
and kept beside the data, unless the user supplies one (`supplied_certificate`).

Clients trust it explicitly instead of turning verification off:
`ServiceBusAdministrationClient.from_connection_string(cs, connection_verify="<dir>/broker-cert.pem")`.
The certificate names `localhost` and `127.0.0.1` (both spellings of a local endpoint work) and is its
own CA (`CA:TRUE`), which is what a trust anchor passed as `connection_verify` must be.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_FILE = "broker-cert.pem"
KEY_FILE = "broker-key.pem"
DNS_NAMES = ("localhost",)
IP_ADDRESSES = ("127.0.0.1", "::1")
VALIDITY = timedelta(days=3650)
RENEW_BEFORE = timedelta(days=30)
_KEY_USAGE = x509.KeyUsage(
    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
    key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
    decipher_only=False,
)


class CertificateError(OSError):
    """A supplied certificate or key cannot be served (missing, unreadable, or not a pair)."""


@dataclass(frozen=True)
class Certificate:
    cert_path: Path
    key_path: Path

    def server_context(self) -> ssl.SSLContext:
        """A TLS server context serving this certificate (TLS 1.2 or later)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_path, self.key_path)
        return context


def ensure_certificate(directory: str | os.PathLike[str], now: datetime | None = None) -> Certificate:
    """The certificate in `directory`, generated there first if missing, unusable or about to expire."""
    folder = Path(directory)
    found = Certificate(folder / CERT_FILE, folder / KEY_FILE)
    moment = now or datetime.now(UTC)
    if _usable(found, moment):
        return found
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _self_signed(key, moment)
    _write_private(found.key_path, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    found.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return found


def supplied_certificate(cert_path: str | os.PathLike[str], key_path: str | os.PathLike[str]) -> Certificate:
    """The user's certificate (PEM chain) and key, checked to load together now rather than at a handshake."""
    supplied = Certificate(Path(cert_path), Path(key_path))
    try:
        supplied.server_context()
    except (OSError, ssl.SSLError) as exc:
        raise CertificateError(f"cannot serve TLS with certificate {cert_path} and key {key_path}: {exc}") \
            from None
    return supplied


def _usable(found: Certificate, now: datetime) -> bool:
    if not (found.cert_path.is_file() and found.key_path.is_file()):
        return False
    try:
        cert = x509.load_pem_x509_certificate(found.cert_path.read_bytes())
        key = serialization.load_pem_private_key(found.key_path.read_bytes(), password=None)
    except ValueError:
        return False
    in_date = cert.not_valid_before_utc <= now < cert.not_valid_after_utc - RENEW_BEFORE
    return in_date and _public_der(cert) == _public_der(key)


def _public_der(holder: x509.Certificate | PrivateKeyTypes) -> bytes:
    return holder.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _self_signed(key: ec.EllipticCurvePrivateKey, now: datetime) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sbfed local broker"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sbfed")])
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in DNS_NAMES]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in IP_ADDRESSES]
    key_id = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_KEY_USAGE, critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(key_id, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(key_id), critical=False)
        .sign(key, hashes.SHA256())
    )


def _write_private(path: Path, data: bytes) -> None:
    """Write the key readable by its owner only."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
