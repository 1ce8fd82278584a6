"""Signing keys: a PKCS12 keystore or a PEM private key + X.509 certificate.

Passwords are :class:`Secret` references, ``env:NAME`` or ``file:PATH``, the
syntax apksigner and keytool (``-storepass:env`` / ``-storepass:file``) accept,
so a password is never on any argv and never in a log line. apksigner's
``pass:<password>`` form is refused for that reason.

PEM keys are made with ``cryptography`` (no external tool needed); keystores
with ``keytool`` because that is what Android developers already have, and
what apache/tvm ``apps/android_rpc/dev_tools/gen_keystore.sh`` uses.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from apk_tools.tools import run_tool
from farm.errors import ApkError, ConfigError


@dataclass(frozen=True)
class Secret:
    """Where a password lives: an environment variable or a file's first line.

    Attributes:
        kind: ``"env"`` or ``"file"``.
        ref: the variable name, or the file path.
    """

    kind: str
    ref: str

    @classmethod
    def parse(cls, spec: str) -> Secret:
        """Parse ``env:NAME`` or ``file:PATH``.

        Raises:
            ConfigError: any other form (notably ``pass:...``, which would put
                the password on argv).
        """
        kind, sep, ref = spec.partition(":")
        if not sep or kind not in ("env", "file") or not ref:
            raise ConfigError(
                "password", "give it as env:NAME or file:PATH (never the password itself)"
            )
        return cls(kind, ref)

    def __str__(self) -> str:
        return f"{self.kind}:{self.ref}"

    def reveal(self) -> str:
        """The password itself; keep it in memory only.

        Returns:
            The variable's value, or the file's first line without its newline
            (apksigner's ``file:`` rule).

        Raises:
            ConfigError: the variable is unset or the file is unreadable.
        """
        if self.kind == "env":
            value = os.environ.get(self.ref)
            if value is None:
                raise ConfigError("password", f"environment variable {self.ref} is not set")
            return value
        try:
            text = Path(self.ref).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                "password", f"cannot read password file {self.ref}: {exc.strerror}"
            ) from exc
        except UnicodeDecodeError:
            raise ConfigError("password", f"password file {self.ref} is not UTF-8 text") from None
        return text.splitlines()[0] if text else ""


@dataclass(frozen=True)
class KeystoreKey:
    """A key in a PKCS12 keystore (keytool's default format since Java 9).

    Attributes:
        keystore: the ``.p12``/``.keystore`` file.
        password: the store password (also the key password, as keytool sets
            for PKCS12).
        alias: the key's alias; None lets apksigner use the only one.
    """

    keystore: Path
    password: Secret
    alias: str | None = None

    def __str__(self) -> str:
        return str(self.keystore)


@dataclass(frozen=True)
class PemKey:
    """A PEM private key (PKCS#1 or PKCS#8, unencrypted) and its PEM certificate."""

    key_pem: Path
    cert_pem: Path

    def __str__(self) -> str:
        return str(self.cert_pem)


SigningKey = KeystoreKey | PemKey


def load_certificate(key: SigningKey) -> x509.Certificate:
    """The signer certificate of ``key``.

    Raises:
        ApkError: the file is missing or unreadable, not PKCS12/PEM, or the
            keystore password is wrong.
        ConfigError: the password reference cannot be resolved.
    """
    if isinstance(key, PemKey):
        try:
            return x509.load_pem_x509_certificate(Path(key.cert_pem).read_bytes())
        except OSError as exc:
            raise ApkError(str(key.cert_pem), f"cannot read certificate: {exc.strerror}") from exc
        except ValueError as exc:
            raise ApkError(str(key.cert_pem), "not a PEM X.509 certificate") from exc
    try:
        data = Path(key.keystore).read_bytes()
    except OSError as exc:
        raise ApkError(str(key.keystore), f"cannot read keystore: {exc.strerror}") from exc
    try:
        _, cert, _ = pkcs12.load_key_and_certificates(data, key.password.reveal().encode())
    except ValueError as exc:
        # cryptography says "Invalid password or PKCS12 data" for both; a JKS
        # store starts with the magic 0xFEEDFEED.
        if data[:4] == b"\xfe\xed\xfe\xed":
            reason = (
                "JKS keystores are not supported; convert with "
                "keytool -importkeystore -deststoretype PKCS12"
            )
        else:
            reason = "wrong keystore password (or not a PKCS12 keystore)"
        raise ApkError(str(key.keystore), reason) from exc
    if cert is None:
        raise ApkError(str(key.keystore), "keystore holds no certificate")
    return cert


def fingerprint(key: SigningKey) -> str:
    """SHA-256 of the signer certificate (DER), lowercase hex, as apksigner prints it.

    Raises:
        ApkError: see :func:`load_certificate`.
        ConfigError: the password reference cannot be resolved.
    """
    cert = load_certificate(key)
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def check_validity(key: SigningKey, now: dt.datetime | None = None) -> x509.Certificate:
    """Refuse a certificate that has expired or is not valid yet.

    Android itself ignores certificate dates on APKs, but an expired certificate
    is almost always a mistake (and Play refuses keys that end before 2033).

    Args:
        key: the signing key.
        now: the time to judge at (UTC); defaults to the current time.

    Returns:
        The certificate.

    Raises:
        ApkError: expired, not yet valid, or unreadable.
        ConfigError: the password reference cannot be resolved.
    """
    cert = load_certificate(key)
    now = now or dt.datetime.now(dt.UTC)
    if cert.not_valid_after_utc < now:
        raise ApkError(str(key), f"certificate expired on {cert.not_valid_after_utc:%Y-%m-%d}")
    if cert.not_valid_before_utc > now:
        raise ApkError(
            str(key), f"certificate not valid before {cert.not_valid_before_utc:%Y-%m-%d}"
        )
    return cert


def _refuse_existing(*paths: Path) -> None:
    for path in paths:
        if path.exists():
            raise ApkError(str(path), "already exists; refusing to overwrite a key")


def create_pem_key(
    key_pem: Path,
    cert_pem: Path,
    *,
    common_name: str = "farm",
    validity_days: int = 10_000,
    valid_from: dt.datetime | None = None,
    key_size_bits: int = 2048,
) -> PemKey:
    """Generate an RSA key and a self-signed certificate as PEM files.

    Both files appear atomically (written to a temp file, then renamed); the key
    file is mode 0600.

    Args:
        key_pem: where to write the PKCS#8 PEM private key.
        cert_pem: where to write the PEM certificate.
        common_name: the certificate's CN.
        validity_days: certificate lifetime in days from ``valid_from``.
        valid_from: start of validity (UTC); defaults to now.
        key_size_bits: RSA modulus size.

    Returns:
        The new :class:`PemKey`.

    Raises:
        ApkError: either file already exists.
    """
    key_pem, cert_pem = Path(key_pem), Path(cert_pem)
    _refuse_existing(key_pem, cert_pem)
    private_key = rsa.generate_private_key(public_exponent=65537, key_size=key_size_bits)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    start = valid_from or dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=validity_days))
        .sign(private_key, hashes.SHA256())
    )
    key_bytes = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    _write_atomic(key_pem, key_bytes, mode=0o600)
    _write_atomic(cert_pem, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
    return PemKey(key_pem, cert_pem)


def create_keystore(
    keystore: Path,
    password: Secret,
    *,
    alias: str = "farm",
    dname: str = "CN=farm",
    validity_days: int = 10_000,
    key_size_bits: int = 2048,
) -> KeystoreKey:
    """Generate a PKCS12 keystore with one RSA key, using keytool.

    Args:
        keystore: the file to create (it appears atomically).
        password: store (and key) password, at least 6 characters (keytool's rule).
        alias: the key's alias.
        dname: the certificate's distinguished name.
        validity_days: certificate lifetime in days.
        key_size_bits: RSA modulus size.

    Returns:
        The new :class:`KeystoreKey`.

    Raises:
        ApkError: the file exists, or keytool refused (e.g. a short password).
        ToolMissing: keytool is not installed.
        ConfigError: the password reference cannot be resolved.
    """
    keystore = Path(keystore)
    _refuse_existing(keystore)
    if len(password.reveal()) < 6:
        raise ApkError(str(keystore), "keystore password must be at least 6 characters")
    keystore.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=keystore.parent, prefix=".keystore-") as work:
        temp = Path(work) / "new.p12"
        pass_option = f"-storepass:{password.kind}"
        result = run_tool(
            "keytool",
            [
                "-genkeypair", "-keystore", str(temp), "-storetype", "PKCS12",
                pass_option, password.ref, "-alias", alias, "-keyalg", "RSA",
                "-keysize", str(key_size_bits), "-validity", str(validity_days),
                "-dname", dname,
            ],
        )  # fmt: skip
        if result.returncode != 0 or not temp.is_file():
            detail = (result.stdout + result.stderr).strip().splitlines()
            raise ApkError(
                str(keystore), f"keytool failed: {detail[-1] if detail else result.returncode}"
            )
        os.chmod(temp, 0o600)
        os.replace(temp, keystore)
    return KeystoreKey(keystore, password, alias)


def _write_atomic(path: Path, data: bytes, *, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
