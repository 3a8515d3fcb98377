"""Encryption at rest for cluster private keys (Fernet, rotatable), and the hashes
kept in place of bearer secrets (session registration, metrics and API tokens)."""

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
