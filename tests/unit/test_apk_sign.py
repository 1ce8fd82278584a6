"""align, sign and verify through the real zipalign and apksigner."""

from __future__ import annotations

import datetime as dt
import stat
import zipfile
from pathlib import Path

import pytest

from apk_tools.align import align, is_aligned
from apk_tools.inspect import inspect_apk
from apk_tools.keys import KeystoreKey, PemKey, Secret, create_keystore, create_pem_key, fingerprint
from apk_tools.sign import _explain, _refusal, sign
from apk_tools.standin import build_standin_apk
from apk_tools.verify import parse_verify_output, verify
from farm.errors import ApkError

# `apksigner verify --print-certs -v` on this machine (Debian apksigner 31) for an
# APK signed v1+v2+v3 with minSdk 24, where v1 is not checked.
VERIFY_OUTPUT = """Verifies
Verified using v1 scheme (JAR signing): false
Verified using v2 scheme (APK Signature Scheme v2): true
Verified using v3 scheme (APK Signature Scheme v3): true
Verified using v4 scheme (APK Signature Scheme v4): false
Verified for SourceStamp: false
Number of signers: 1
Signer #1 certificate DN: CN=farm
Signer #1 certificate SHA-256 digest: a216301c0bb07468a52a844b3c4a5a44cf35d283da9b4ad7d2d6c7342873ee83
Signer #1 certificate SHA-1 digest: 5ab9bdfdcf3c0d5543d42219006491aa002434d9
Signer #1 key algorithm: RSA
Signer #1 key size (bits): 2048
"""  # noqa: E501 (recorded tool output, kept verbatim)

# apksigner sign's stderr for a PKCS12 keystore and the wrong --ks-pass (same machine).
WRONG_PASSWORD_STDERR = """Failed to load signer "signer #1"
java.io.IOException: keystore password was incorrect
\tat java.base/sun.security.pkcs12.PKCS12KeyStore.engineLoad(PKCS12KeyStore.java:2159)
Caused by: java.security.UnrecoverableKeyException: failed to decrypt safe contents entry: javax.crypto.BadPaddingException: Given final block not properly padded.
\t... 9 more
"""  # noqa: E501 (recorded tool output, kept verbatim)


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An unsigned stand-in, its aligned copy, and a PEM key."""
    root = tmp_path_factory.mktemp("sign")
    unsigned = build_standin_apk(root / "in", native_abis=["arm64-v8a"])
    aligned = align(unsigned, root / "in" / "aligned.apk")
    key = create_pem_key(root / "key.pem", root / "cert.pem")
    return {
        "unsigned": unsigned,
        "aligned": aligned,
        "key_pem": key.key_pem,
        "cert_pem": key.cert_pem,
    }


@pytest.fixture(scope="module")
def keystore(tmp_path_factory: pytest.TempPathFactory) -> KeystoreKey:
    """One PKCS12 keystore for the module (keytool is slow), password in a file."""
    root = tmp_path_factory.mktemp("keystore")
    (root / "pw").write_text("secret-123\n")
    return create_keystore(root / "ks.p12", Secret.parse(f"file:{root / 'pw'}"))


def _pem(material: dict[str, Path]) -> PemKey:
    return PemKey(material["key_pem"], material["cert_pem"])


class TestAlign:
    """align(apk_in, apk_out)."""

    def test_output_passes_zipalign_check(self, material: dict[str, Path]) -> None:
        """The aligned copy passes `zipalign -c -p 4`, the aapt output does not."""
        assert is_aligned(material["aligned"])
        assert not is_aligned(material["unsigned"])

    def test_not_a_zip_leaves_nothing(self, tmp_path: Path) -> None:
        """A file that is not a zip is an ApkError saying the APK is corrupt; nothing is written."""
        (tmp_path / "in.apk").write_text("not a zip")
        out = tmp_path / "out"
        out.mkdir()
        with pytest.raises(ApkError, match="corrupt APK"):
            align(tmp_path / "in.apk", out / "aligned.apk")
        assert list(out.iterdir()) == []


class TestSign:
    """sign(apk_in, apk_out, key)."""

    def test_pem_key_signs_all_three_schemes(
        self, material: dict[str, Path], tmp_path: Path
    ) -> None:
        """A PEM-signed APK verifies with apksigner under the key's certificate digest."""
        signed = sign(material["aligned"], tmp_path / "signed.apk", _pem(material))
        result = verify(signed)
        assert result.signers == (fingerprint(_pem(material)),)
        assert result.schemes == (2, 3)  # v1 is not checked for minSdk >= 24
        assert inspect_apk(signed).schemes == (1, 2, 3)
        assert zipfile.ZipFile(signed).testzip() is None

    def test_keystore_key_signs(
        self, material: dict[str, Path], keystore: KeystoreKey, tmp_path: Path
    ) -> None:
        """A PKCS12 keystore with a file: password signs an APK that verifies under it."""
        signed = sign(material["aligned"], tmp_path / "signed.apk", keystore)
        assert verify(signed).signers == (fingerprint(keystore),)

    def test_v2_only_when_asked(self, material: dict[str, Path], tmp_path: Path) -> None:
        """schemes=(2,) produces no JAR signature and no v3 block."""
        signed = sign(material["aligned"], tmp_path / "signed.apk", _pem(material), schemes=(2,))
        assert inspect_apk(signed).schemes == (2,)

    def test_truncated_apk_is_blamed_not_the_keystore(
        self, material: dict[str, Path], keystore: KeystoreKey, tmp_path: Path
    ) -> None:
        """Signing a truncated APK with a good keystore names the APK as corrupt."""
        truncated = tmp_path / "truncated.apk"
        data = material["aligned"].read_bytes()
        truncated.write_bytes(data[: len(data) // 2])
        with pytest.raises(ApkError) as caught:
            sign(truncated, tmp_path / "signed.apk", keystore)
        assert caught.value.path == str(truncated)
        assert "corrupt APK" in caught.value.reason

    def test_folder_is_named_a_folder(self, keystore: KeystoreKey, tmp_path: Path) -> None:
        """An APK path that is a folder says so, not "no such file"."""
        with pytest.raises(ApkError, match="is a folder, not an APK file"):
            sign(tmp_path, tmp_path / "signed.apk", keystore)

    def test_wrong_password_leaves_nothing(
        self,
        material: dict[str, Path],
        keystore: KeystoreKey,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A wrong keystore password is an ApkError and the out dir stays empty."""
        monkeypatch.setenv("APK_TEST_KS", "wrong-password")
        wrong = KeystoreKey(keystore.keystore, Secret.parse("env:APK_TEST_KS"))
        out = tmp_path / "out"
        out.mkdir()
        with pytest.raises(ApkError, match="wrong keystore password"):
            sign(material["aligned"], out / "signed.apk", wrong)
        assert list(out.iterdir()) == []

    def test_expired_certificate_leaves_nothing(
        self, material: dict[str, Path], tmp_path: Path
    ) -> None:
        """An expired certificate is refused before apksigner runs; nothing is written."""
        expired = create_pem_key(
            tmp_path / "k.pem", tmp_path / "c.pem",
            valid_from=dt.datetime(2019, 1, 1, tzinfo=dt.UTC), validity_days=365,
        )  # fmt: skip
        out = tmp_path / "out"
        out.mkdir()
        with pytest.raises(ApkError, match="expired"):
            sign(material["aligned"], out / "signed.apk", expired)
        assert list(out.iterdir()) == []

    def test_password_never_on_argv(
        self,
        material: dict[str, Path],
        keystore: KeystoreKey,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """apksigner gets `env:NAME`, never the password itself."""
        monkeypatch.setenv("APK_TEST_KS", "secret-123")
        key = KeystoreKey(keystore.keystore, Secret.parse("env:APK_TEST_KS"))
        record = tmp_path / "argv.txt"
        fake = tmp_path / "sdk" / "build-tools" / "99.0.0" / "apksigner"
        fake.parent.mkdir(parents=True)
        fake.write_text(
            f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\necho "apksigner stub" >&2\nexit 1\n'
        )
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("ANDROID_HOME", str(tmp_path / "sdk"))
        with pytest.raises(ApkError) as caught:
            sign(material["aligned"], tmp_path / "signed.apk", key)
        argv = record.read_text().splitlines()
        assert argv[argv.index("--ks-pass") + 1] == "env:APK_TEST_KS"
        assert "secret-123" not in record.read_text()
        assert "secret-123" not in str(caught.value)


class TestExplain:
    """_explain(apksigner output) -> one sentence."""

    def test_wrong_password_stack_trace(self) -> None:
        """apksigner's Java stack trace for a bad --ks-pass reads 'wrong keystore password'."""
        assert _explain(WRONG_PASSWORD_STDERR) == "wrong keystore password"

    def test_apk_format_exception_is_the_apks_fault(self, tmp_path: Path) -> None:
        """apksigner's ApkFormatException (truncated input) is blamed on the APK, not the key."""
        output = ("Exception in thread \"main\" com.android.apksig.apk.ApkFormatException: "
                  "Malformed APK: not a ZIP archive\n\tat com.android.apksig.ApkSigner.sign\n")
        ks = KeystoreKey(tmp_path / "ks.p12", Secret.parse("env:X"))
        error = _refusal(output, tmp_path / "in.apk", ks)
        assert error.path == str(tmp_path / "in.apk")
        assert "corrupt APK" in error.reason
        assert _refusal(WRONG_PASSWORD_STDERR, tmp_path / "in.apk", ks).path == str(ks.keystore)


class TestVerify:
    """verify(apk) and parse_verify_output(stdout)."""

    def test_parses_schemes_and_signer(self) -> None:
        """Recorded apksigner output yields schemes (2, 3) and the SHA-256 digest."""
        result = parse_verify_output(VERIFY_OUTPUT)
        assert result.schemes == (2, 3)
        assert result.signers == (
            "a216301c0bb07468a52a844b3c4a5a44cf35d283da9b4ad7d2d6c7342873ee83",
        )

    def test_unsigned_apk_does_not_verify(self, material: dict[str, Path]) -> None:
        """An unsigned APK raises ApkError saying it is not signed."""
        with pytest.raises(ApkError, match="not signed"):
            verify(material["aligned"])

    def test_tampered_apk_does_not_verify(self, material: dict[str, Path], tmp_path: Path) -> None:
        """Changing one byte of a stored entry after signing breaks verification."""
        signed = sign(material["aligned"], tmp_path / "signed.apk", _pem(material))
        with zipfile.ZipFile(signed) as archive:
            entry = archive.getinfo("lib/arm64-v8a/libtvm4j_runtime_packed.so")
        data = bytearray(signed.read_bytes())
        data[entry.header_offset + 30 + len(entry.filename) + len(entry.extra) + 5] ^= 0x01
        signed.write_bytes(bytes(data))
        with pytest.raises(ApkError, match="does not verify"):
            verify(signed)
