"""Ed25519 signatures of a bundle's manifest (``cryptography``; optional: unsigned bundles verify too).

A signature over the manifest covers every file, since the manifest holds each file's sha256.
Keys are PEM files: the private key PKCS#8 (written owner-readable only), the public key
SubjectPublicKeyInfo, so ``openssl pkey`` reads both.
"""

from __future__ import annotations

import os
from pathlib import Path


def _crypto():
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as error:  # pragma: no cover - the dev install has it
        raise ImportError("signing needs the `cryptography` package: pip install 'crs[publish]'") from error
    return serialization, ed25519


def new_key_pair(private_path: Path | str, public_path: Path | str | None = None) -> tuple[Path, Path]:
    """Write a new Ed25519 key pair (``public_path`` default: ``<private>.pub``); refuse to overwrite."""
    serialization, ed25519 = _crypto()
    private_path = Path(private_path)
    public_path = Path(public_path) if public_path is not None else private_path.with_name(private_path.name + ".pub")
    for path in (private_path, public_path):
        if path.exists():
            raise FileExistsError(f"{path} exists; choose another name (a key is never overwritten)")
    key = ed25519.Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(private_pem)
    public_path.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                          serialization.PublicFormat.SubjectPublicKeyInfo))
    return private_path, public_path


def sign(data: bytes, private_path: Path | str) -> bytes:
    """The Ed25519 signature of ``data`` with the private key at ``private_path``."""
    serialization, ed25519 = _crypto()
    key = serialization.load_pem_private_key(Path(private_path).read_bytes(), password=None)
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise ValueError(f"{private_path} is not an Ed25519 private key (make one with `crs keygen NAME`)")
    return key.sign(data)


def signature_holds(data: bytes, signature: bytes, public_path: Path | str) -> bool:
    """Whether ``signature`` is the public key's owner's signature of ``data``."""
    from cryptography.exceptions import InvalidSignature

    serialization, ed25519 = _crypto()
    key = serialization.load_pem_public_key(Path(public_path).read_bytes())
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise ValueError(f"{public_path} is not an Ed25519 public key")
    try:
        key.verify(signature, data)
    except InvalidSignature:
        return False
    return True
