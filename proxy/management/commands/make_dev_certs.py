"""A local CA and a wildcard certificate for *.PROXY_SESSION_DOMAIN, for dev and tests."""

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.conf import settings
from django.core.management.base import BaseCommand


def _name(common: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "HPC portal dev"),
            x509.NameAttribute(NameOID.COMMON_NAME, common),
        ]
    )


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def spki_hash(cert_path: Path) -> str:
    """base64 SHA-256 of the certificate's public key (Chromium's --ignore-certificate-errors-spki-list)."""
    import base64

    cert = x509.load_pem_x509_certificate(Path(cert_path).read_bytes())
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    digest = hashes.Hash(hashes.SHA256())
    digest.update(spki)
    return base64.b64encode(digest.finalize()).decode()


class Command(BaseCommand):
    help = (
        "Create var/tls/{ca.pem,sessions.pem,sessions-key.pem} for the session proxy (idempotent)."
    )

    def handle(self, *args, **options):
        tls = Path(settings.TLS_DIR)
        tls.mkdir(mode=0o700, parents=True, exist_ok=True)  # holds the proxy's private key
        cert_path, key_path, ca_path = (
            tls / "sessions.pem",
            tls / "sessions-key.pem",
            tls / "ca.pem",
        )
        domain = settings.PROXY_SESSION_DOMAIN
        if cert_path.exists() and key_path.exists():
            cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
            names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            fresh = cert.not_valid_after_utc > datetime.datetime.now(
                datetime.UTC
            ) + datetime.timedelta(days=30)
            if f"*.{domain}" in names.get_values_for_type(x509.DNSName) and fresh:
                self.stdout.write(f"TLS certificate for *.{domain} already in {tls}")
                return
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = (
            x509.CertificateBuilder()
            .subject_name(_name("HPC portal dev CA"))
            .issuer_name(_name("HPC portal dev CA"))
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        sans = [
            x509.DNSName(f"*.{domain}"),
            x509.DNSName(domain),
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(f"*.{domain}"))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=825))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        key_path.touch(mode=0o600)
        key_path.write_bytes(_pem_key(key))
        cert_path.write_bytes(
            cert.public_bytes(serialization.Encoding.PEM)
            + ca.public_bytes(serialization.Encoding.PEM)
        )
        self.stdout.write(
            f"Created a dev CA and a certificate for *.{domain} in {tls} "
            f"(trust {ca_path} in your browser, or see the docs: start/first-notebook)"
        )
