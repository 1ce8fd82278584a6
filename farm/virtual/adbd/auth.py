"""adbd's RSA authentication: the ``adbkey.pub`` format and token signatures.

The host signs adbd's 20-byte random token with its private key
(``~/.android/adbkey``); adbd accepts the signature if one public key in its
authorized set verifies it (AOSP ``adb/daemon/auth.cpp`` ``adbd_auth_verify``:
``RSA_verify(NID_sha1, token, 20, sig, key)``, i.e. PKCS#1 v1.5 with the token
standing in for a SHA-1 digest).

A public key line is ``base64(RSAPublicKey) user@host`` where ``RSAPublicKey``
is AOSP ``libcrypto_utils/android_pubkey.cpp``'s struct, all little-endian::

    u32 modulus_size_words   (64 for RSA-2048)
    u32 n0inv                (-1 / n[0] mod 2**32, for Montgomery arithmetic)
    u8  modulus[256]
    u8  rr[256]              (2**4096 mod n)
    u32 exponent
"""

from __future__ import annotations

import base64
import binascii
import struct

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

MODULUS_BYTES = 256
ENCODED_BYTES = 4 + 4 + MODULUS_BYTES + MODULUS_BYTES + 4  # 524
TOKEN_BYTES = 20  # adb/adb.h TOKEN_SIZE


class KeyFormatError(ValueError):
    """A public key line is not in adb's ``adbkey.pub`` format."""


def parse_public_key(line: str) -> rsa.RSAPublicKey:
    """Decode one ``adbkey.pub`` line (``base64 [comment]``).

    Raises:
        KeyFormatError: not base64, wrong size, or not a valid RSA key.
    """
    fields = line.strip().split()
    if not fields:
        raise KeyFormatError("empty key")
    try:
        raw = base64.b64decode(fields[0], validate=True)
    except binascii.Error as exc:
        raise KeyFormatError(f"invalid base64 key: {exc}") from exc
    if len(raw) != ENCODED_BYTES:
        raise KeyFormatError(f"key is {len(raw)} bytes, expected {ENCODED_BYTES}")
    words, _n0inv = struct.unpack_from("<II", raw, 0)
    if words != MODULUS_BYTES // 4:
        raise KeyFormatError(f"modulus of {words} words, expected {MODULUS_BYTES // 4}")
    modulus = int.from_bytes(raw[8 : 8 + MODULUS_BYTES], "little")
    (exponent,) = struct.unpack_from("<I", raw, 8 + 2 * MODULUS_BYTES)
    try:
        return rsa.RSAPublicNumbers(exponent, modulus).public_key()
    except ValueError as exc:
        raise KeyFormatError(f"invalid RSA key: {exc}") from exc


def encode_public_key(key: rsa.RSAPublicKey, comment: str = "farm@virtual") -> str:
    """The ``adbkey.pub`` line for an RSA-2048 public key (inverse of :func:`parse_public_key`)."""
    numbers = key.public_numbers()
    n = numbers.n
    n0inv = (-pow(n, -1, 2**32)) % 2**32
    rr = pow(2, 2 * MODULUS_BYTES * 8, n)
    raw = (
        struct.pack("<II", MODULUS_BYTES // 4, n0inv)
        + n.to_bytes(MODULUS_BYTES, "little")
        + rr.to_bytes(MODULUS_BYTES, "little")
        + struct.pack("<I", numbers.e)
    )
    return f"{base64.b64encode(raw).decode()} {comment}"


def sign_token(key: rsa.RSAPrivateKey, token: bytes) -> bytes:
    """Sign a token as the adb host does (``RSA_sign(NID_sha1, token, ...)``)."""
    return key.sign(token, padding.PKCS1v15(), Prehashed(hashes.SHA1()))  # noqa: S303 - adb's protocol


def verify_token(key: rsa.RSAPublicKey, token: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is ``key``'s signature of ``token``."""
    try:
        sha1 = Prehashed(hashes.SHA1())  # noqa: S303 - adb's AUTH protocol signs SHA-1 digests
        key.verify(signature, token, padding.PKCS1v15(), sha1)
    except (InvalidSignature, ValueError):
        return False
    return True


class AuthorizedKeys:
    """The phone's ``/data/misc/adb/adb_keys``: public keys allowed to connect."""

    def __init__(self) -> None:
        self._keys: dict[str, rsa.RSAPublicKey] = {}

    def add(self, line: str) -> None:
        """Authorize the key in ``line`` (``adbkey.pub`` format).

        Raises:
            KeyFormatError: the line is not a key.
        """
        key = parse_public_key(line)
        self._keys[line.strip().split()[0]] = key

    def clear(self) -> None:
        """Revoke every key ("Revoke USB debugging authorizations")."""
        self._keys.clear()

    def __contains__(self, line: str) -> bool:
        fields = line.strip().split()
        return bool(fields) and fields[0] in self._keys

    def verify(self, token: bytes, signature: bytes) -> bool:
        """Whether any authorized key signed ``token``."""
        return any(verify_token(k, token, signature) for k in self._keys.values())
