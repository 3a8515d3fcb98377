"""Encryption at rest for cluster private keys (Fernet, rotatable), and the hashes
kept in place of bearer secrets (session registration, metrics and API tokens)."""

import base64
import hashlib
import hmac

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def _fernet() -> MultiFernet:
    try:
        return MultiFernet([Fernet(key) for key in settings.PORTAL_ENCRYPTION_KEYS])
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(
            f"PORTAL_ENCRYPTION_KEYS holds a key that is not a Fernet key: {exc}"
        ) from None


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured(
            "A stored private key cannot be decrypted with PORTAL_ENCRYPTION_KEYS "
            "(was the key changed without keeping the old one?)"
        ) from None


def rotate(token: str) -> str:
    """Re-encrypt with the newest key."""
    return _fernet().rotate(token.encode()).decode()


def generate_key() -> str:
    return Fernet.generate_key().decode()


def secret_hash(secret: str) -> str:
    """What is stored instead of a random bearer secret: its SHA-256, hex."""
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(stored_hash: str, secret: str) -> bool:
    """True if ``secret`` hashes to ``stored_hash`` (constant time; an empty hash never matches)."""
    return bool(stored_hash) and hmac.compare_digest(stored_hash, secret_hash(secret))


def _seal_with(key: str, purpose: str, message: str) -> str:
    mac_key = hashlib.sha256(b"hpc-portal seal\0" + key.encode()).digest()
    return hmac.new(mac_key, f"{purpose}\0{message}".encode(), hashlib.sha256).hexdigest()


def seal(purpose: str, message: str) -> str:
    """A MAC of ``message`` (for ``purpose``) under the first of PORTAL_ENCRYPTION_KEYS: a
    row's fields written by the portal carry it, so fields written around the portal
    (straight into the database) are told apart."""
    return _seal_with(settings.PORTAL_ENCRYPTION_KEYS[0], purpose, message)


def seal_matches(stored: str, purpose: str, message: str) -> bool:
    """``stored`` is the seal of ``message`` under any of PORTAL_ENCRYPTION_KEYS (rotation)."""
    return bool(stored) and any(
        hmac.compare_digest(stored, _seal_with(key, purpose, message))
        for key in settings.PORTAL_ENCRYPTION_KEYS
    )


def ssh_fingerprint(key_blob: bytes) -> str:
    """SHA256 fingerprint of an SSH public key's wire bytes, as `ssh-keygen -lf` prints it."""
    digest = hashlib.sha256(key_blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def new_ssh_key_pair(comment: str) -> tuple[str, str]:
    """A new Ed25519 key pair: (OpenSSH private key, public key line ending in ``comment``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return private, f"{public} {comment}"
