"""Signing keys: password references, PEM keys, keystores, fingerprints, validity."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from pathlib import Path

import pytest

from apk_tools.keys import (
    KeystoreKey,
    PemKey,
    Secret,
    check_validity,
    create_keystore,
    create_pem_key,
    fingerprint,
)
from apk_tools.tools import find_tool
from farm.errors import ApkError, ConfigError


class TestSecret:
    """Secret.parse and Secret.reveal."""

    def test_env_reference_reads_the_variable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """env:NAME reveals the variable's value."""
        monkeypatch.setenv("APK_TEST_PW", "hunter22")
        assert Secret.parse("env:APK_TEST_PW").reveal() == "hunter22"

    def test_file_reference_reads_the_first_line(self, tmp_path: Path) -> None:
        """file:PATH reveals the first line without its newline, as apksigner does."""
        (tmp_path / "pw").write_text("first-line\nsecond\n")
        assert Secret.parse(f"file:{tmp_path / 'pw'}").reveal() == "first-line"

    def test_binary_file_is_a_config_error(self, tmp_path: Path) -> None:
        """file:PATH holding bytes that are no UTF-8 text is a ConfigError naming the file."""
        (tmp_path / "pw").write_bytes(b"\xff\xfe\x00secret")
        with pytest.raises(ConfigError, match=r"password file .*pw is not UTF-8 text"):
            Secret.parse(f"file:{tmp_path / 'pw'}").reveal()

    @pytest.mark.parametrize("spec", ["pass:hunter22", "hunter22", "env:", "stdin"])
    def test_literal_passwords_are_refused(self, spec: str) -> None:
        """Anything but env:/file: is a ConfigError, so a password never lands on argv."""
        with pytest.raises(ConfigError):
            Secret.parse(spec)

    def test_unset_variable_is_a_config_error(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An unset variable names itself in a ConfigError."""
        monkeypatch.delenv("APK_TEST_UNSET", raising=False)
        with pytest.raises(ConfigError, match="APK_TEST_UNSET"):
            Secret.parse("env:APK_TEST_UNSET").reveal()


class TestCreatePemKey:
    """create_pem_key(key_pem, cert_pem)."""

    def test_writes_private_key_readable_only_by_owner(self, tmp_path: Path) -> None:
        """The key file is mode 0600 and the certificate loads."""
        key = create_pem_key(tmp_path / "k.pem", tmp_path / "c.pem", common_name="farm-test")
        assert (tmp_path / "k.pem").stat().st_mode & 0o777 == 0o600
        assert re.fullmatch(r"[0-9a-f]{64}", fingerprint(key))

    def test_refuses_to_overwrite(self, tmp_path: Path) -> None:
        """An existing key file is never replaced."""
        (tmp_path / "k.pem").write_text("precious")
        with pytest.raises(ApkError, match="already exists"):
            create_pem_key(tmp_path / "k.pem", tmp_path / "c.pem")
        assert (tmp_path / "k.pem").read_text() == "precious"
        assert not (tmp_path / "c.pem").exists()


class TestCreateKeystore:
    """create_keystore(path, password)."""

    def test_fingerprint_matches_keytool(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The certificate SHA-256 equals what `keytool -list -v` prints."""
        monkeypatch.setenv("APK_TEST_KS", "secret-123")
        key = create_keystore(tmp_path / "ks.p12", Secret.parse("env:APK_TEST_KS"), alias="tvmrpc")
        listing = subprocess.run(
            [str(find_tool("keytool")), "-list", "-v", "-keystore", str(key.keystore),
             "-storepass:env", "APK_TEST_KS"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        keytool_sha = re.search(r"SHA256: ([0-9A-F:]+)", listing)[1].replace(":", "").lower()
        assert fingerprint(key) == keytool_sha
        assert "Alias name: tvmrpc" in listing

    def test_short_password_leaves_no_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """keytool's 6-character minimum is an ApkError and nothing is written."""
        monkeypatch.setenv("APK_TEST_KS", "abc")
        with pytest.raises(ApkError, match="at least 6"):
            create_keystore(tmp_path / "ks.p12", Secret.parse("env:APK_TEST_KS"))
        assert list(tmp_path.iterdir()) == []

    def test_wrong_password_is_an_apk_error(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Reading the keystore with the wrong password says so."""
        monkeypatch.setenv("APK_TEST_KS", "secret-123")
        key = create_keystore(tmp_path / "ks.p12", Secret.parse("env:APK_TEST_KS"))
        monkeypatch.setenv("APK_TEST_KS", "not-the-password")
        with pytest.raises(ApkError, match="wrong keystore password"):
            fingerprint(KeystoreKey(key.keystore, key.password))


class TestCheckValidity:
    """check_validity(key, now)."""

    def test_expired_certificate_is_refused(self, tmp_path: Path) -> None:
        """A certificate that ended in the past raises ApkError with its end date."""
        key = create_pem_key(
            tmp_path / "k.pem", tmp_path / "c.pem",
            valid_from=dt.datetime(2020, 1, 1, tzinfo=dt.UTC), validity_days=30,
        )  # fmt: skip
        with pytest.raises(ApkError, match="expired on 2020-01-31"):
            check_validity(key)

    def test_future_certificate_is_refused(self, tmp_path: Path) -> None:
        """A certificate not valid yet at `now` raises ApkError."""
        key = create_pem_key(tmp_path / "k.pem", tmp_path / "c.pem")
        with pytest.raises(ApkError, match="not valid before"):
            check_validity(key, now=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))

    def test_valid_certificate_passes(self, tmp_path: Path) -> None:
        """A fresh certificate is returned."""
        key = create_pem_key(tmp_path / "k.pem", tmp_path / "c.pem")
        assert check_validity(key).subject.rfc4514_string() == "CN=farm"

    def test_garbage_certificate_is_an_apk_error(self, tmp_path: Path) -> None:
        """A certificate file that is not PEM raises ApkError."""
        (tmp_path / "c.pem").write_text("nope")
        with pytest.raises(ApkError, match="not a PEM"):
            check_validity(PemKey(tmp_path / "k.pem", tmp_path / "c.pem"))
