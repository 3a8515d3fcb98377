"""A person's own SSH public keys, which the portal certifies for a short while to reach a
running job's allocation from their terminal or editor (jobs/node_access.py).

Only the public half is ever sent or kept. A key is checked as hostile input before it is
stored: one line of a bounded length, a key type OpenSSH accepts and strong enough (Ed25519,
ECDSA, RSA of 3072 bits or more), never a certificate; stored in the canonical
"type base64" form with its SHA-256 fingerprint, once per person."""

from __future__ import annotations

import base64
import hashlib
import re

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

LINE_MAX = 16 * 1024  # an RSA-16384 key's line is about 2.8 kB
NAME_MAX = 64
KEYS_MAX = 20  # per person
RSA_MIN_BITS = 3072
_NAME = re.compile(r"[^A-Za-z0-9 ._@+=:-]+")

PublicKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey
ACCEPTED = (ed25519.Ed25519PublicKey, ec.EllipticCurvePublicKey, rsa.RSAPublicKey)


def parse_public_key(text: str) -> tuple[str, str, str]:
    """(canonical "type base64" line, SHA256 fingerprint, its comment) of an OpenSSH public
    key line; ValidationError with a message a person can act on otherwise."""
    if not isinstance(text, str) or len(text) > LINE_MAX:
        raise ValidationError(f"Paste one public key line (at most {LINE_MAX} characters).")
    line = text.strip()
    if "PRIVATE KEY" in line:
        raise ValidationError("That is a private key: paste the .pub file, never the key itself.")
    if "\n" in line or "\r" in line or "\x00" in line:
        raise ValidationError("Paste one public key: a single line such as ssh-ed25519 AAAA…")
    words = line.split()
    if len(words) < 2:
        raise ValidationError(
            "Not an OpenSSH public key: it starts with its type, e.g. ssh-ed25519."
        )
    if words[0].endswith("-cert-v01@openssh.com"):
        raise ValidationError("That is a certificate; paste the public key it was made for.")
    try:
        key = serialization.load_ssh_public_key(f"{words[0]} {words[1]}".encode())
    except (ValueError, TypeError, NotImplementedError, UnsupportedAlgorithm, UnicodeError):
        raise ValidationError("Not an OpenSSH public key the portal can read.") from None
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < RSA_MIN_BITS:
        raise ValidationError(
            f"This RSA key has {key.key_size} bits; use Ed25519 (ssh-keygen -t ed25519) or "
            f"RSA of at least {RSA_MIN_BITS} bits."
        )
    if not isinstance(key, ACCEPTED):
        raise ValidationError("Use an Ed25519, ECDSA or RSA key (DSA keys are refused by OpenSSH).")
    canonical = key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()
    blob = base64.b64decode(canonical.split()[1])
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    comment = _NAME.sub("_", " ".join(words[2:]))[:NAME_MAX].strip(" _")
    return canonical, f"SHA256:{digest}", comment


class PersonalKey(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys"
    )
    name = models.CharField(max_length=NAME_MAX)
    public_key = models.TextField()
    fingerprint = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_certified_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        app_label = "jobs"
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "fingerprint"], name="one_key_once_per_person")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})"

    @classmethod
    def add(cls, user, text: str, name: str = "") -> PersonalKey:
        """Keep ``text`` (a public key line) for ``user``; ValidationError if it is no key
        the portal accepts, is theirs already, or they have KEYS_MAX keys."""
        canonical, fingerprint, comment = parse_public_key(text)
        label = _NAME.sub("_", name or "")[:NAME_MAX].strip(" _") or comment or fingerprint[:20]
        mine = cls.objects.filter(user=user)
        if mine.filter(fingerprint=fingerprint).exists():
            raise ValidationError(f"You have added this key already ({fingerprint}).")
        if mine.count() >= KEYS_MAX:
            raise ValidationError(f"You have {KEYS_MAX} keys; remove one first.")
        return cls.objects.create(
            user=user, name=label, public_key=canonical, fingerprint=fingerprint
        )

    @classmethod
    def of(cls, user, text: str) -> PersonalKey | None:
        """``user``'s key whose public half is ``text`` (None: not one of theirs)."""
        _, fingerprint, _ = parse_public_key(text)
        return cls.objects.filter(user=user, fingerprint=fingerprint).first()

    def load(self) -> PublicKey:
        key = serialization.load_ssh_public_key(self.public_key.encode())
        assert isinstance(key, ACCEPTED)
        return key
