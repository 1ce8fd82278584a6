"""inspect_apk against aapt's own reading of the same files, and on bad input."""

from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from apk_tools.inspect import ActivityInfo, inspect_apk
from apk_tools.keys import create_pem_key, fingerprint
from apk_tools.sign import sign
from apk_tools.standin import build_standin_apk
from apk_tools.tools import find_tool
from farm.errors import ApkError


def _badging(apk: Path) -> str:
    aapt = find_tool("aapt")
    return subprocess.run(
        [str(aapt), "dump", "badging", str(apk)], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(scope="module")
def apks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Stand-ins: debuggable with an ABI, release without, and a v1+v2+v3 signed one."""
    root = tmp_path_factory.mktemp("inspect")
    debug = build_standin_apk(
        root / "debug", version_code=42, version_name="4.2-rc", native_abis=["arm64-v8a", "x86_64"]
    )
    release = build_standin_apk(root / "release", debuggable=False, min_sdk=26, target_sdk=33)
    signed = sign(debug, root / "signed.apk", create_pem_key(root / "key.pem", root / "cert.pem"))
    return {"debug": debug, "release": release, "signed": signed}


class TestInspectApk:
    """inspect_apk(path) -> ApkInfo."""

    @pytest.mark.parametrize("name", ["debug", "release"])
    def test_agrees_with_aapt_dump_badging(self, apks: dict[str, Path], name: str) -> None:
        """Package, versions, SDKs, permissions, launcher, debuggable and ABIs match aapt."""
        info = inspect_apk(apks[name])
        badging = _badging(apks[name])
        package = re.search(
            r"package: name='([^']*)' versionCode='(\d+)' versionName='([^']*)'", badging
        )
        assert package is not None
        assert (info.package, info.version_code, info.version_name) == (
            package[1],
            int(package[2]),
            package[3],
        )
        assert info.min_sdk == int(re.search(r"sdkVersion:'(\d+)'", badging)[1])
        assert info.target_sdk == int(re.search(r"targetSdkVersion:'(\d+)'", badging)[1])
        assert list(info.permissions) == re.findall(r"uses-permission: name='([^']*)'", badging)
        assert (
            info.launchable_activity
            == re.search(r"launchable-activity: name='([^']*)'", badging)[1]
        )
        assert info.debuggable == ("application-debuggable" in badging.splitlines())
        native = re.search(r"native-code: (.*)", badging)
        assert list(info.native_abis) == (
            sorted(re.findall(r"'([^']*)'", native[1])) if native else []
        )

    def test_reads_the_stock_manifest_shape(self, apks: dict[str, Path]) -> None:
        """The stand-in declares MainActivity exported and RPCActivity not, fully qualified."""
        info = inspect_apk(apks["debug"])
        assert info.activities == (
            ActivityInfo("org.apache.tvm.tvmrpc.MainActivity", exported=True),
            ActivityInfo("org.apache.tvm.tvmrpc.RPCActivity", exported=False),
        )
        assert info.native_abis == ("arm64-v8a", "x86_64")

    def test_unsigned_apk_has_no_signers(self, apks: dict[str, Path]) -> None:
        """An APK fresh from aapt reports no signers and no schemes."""
        info = inspect_apk(apks["debug"])
        assert (info.signers, info.schemes) == ((), ())

    def test_signed_apk_names_signer_as_apksigner_does(self, apks: dict[str, Path]) -> None:
        """Signer digests match `apksigner verify --print-certs`, and all three schemes are seen."""
        apksigner = find_tool("apksigner")
        out = subprocess.run(
            [str(apksigner), "verify", "--print-certs", str(apks["signed"])],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        digest = re.search(r"certificate SHA-256 digest: ([0-9a-f]{64})", out)[1]
        info = inspect_apk(apks["signed"])
        assert info.signers == (digest,)
        assert info.schemes == (1, 2, 3)

    def test_v1_only_signer_is_read_from_the_jar_signature(
        self, apks: dict[str, Path], tmp_path: Path
    ) -> None:
        """A JAR-signed-only APK reports scheme 1 and the certificate's SHA-256."""
        key = create_pem_key(tmp_path / "k.pem", tmp_path / "c.pem")
        signed = sign(apks["release"], tmp_path / "v1.apk", key, schemes=(1,))
        info = inspect_apk(signed)
        assert (info.schemes, info.signers) == ((1,), (fingerprint(key),))

    def test_truncated_zip_is_an_apk_error(self, apks: dict[str, Path], tmp_path: Path) -> None:
        """A truncated APK raises ApkError saying it is not a valid zip."""
        broken = tmp_path / "broken.apk"
        broken.write_bytes(apks["signed"].read_bytes()[:700])
        with pytest.raises(ApkError, match="not a valid zip"):
            inspect_apk(broken)

    def test_corrupt_entry_is_an_apk_error(self, apks: dict[str, Path], tmp_path: Path) -> None:
        """A zip whose entry fails its CRC raises ApkError naming the entry."""
        data = bytearray(apks["debug"].read_bytes())
        with zipfile.ZipFile(apks["debug"]) as archive:
            entry = archive.getinfo("resources.arsc")  # stored, so its bytes sit in the file as is
        start = entry.header_offset + 30 + len(entry.filename) + len(entry.extra)
        data[start + 10] ^= 0xFF
        corrupt = tmp_path / "corrupt.apk"
        corrupt.write_bytes(bytes(data))
        with pytest.raises(ApkError, match=r"resources\.arsc"):
            inspect_apk(corrupt)

    def test_zip_without_manifest_is_not_an_apk(self, tmp_path: Path) -> None:
        """A plain zip raises ApkError saying it has no AndroidManifest.xml."""
        plain = tmp_path / "plain.apk"
        with zipfile.ZipFile(plain, "w") as archive:
            archive.writestr("hello.txt", "hi")
        with pytest.raises(ApkError, match=r"no AndroidManifest\.xml"):
            inspect_apk(plain)

    def test_text_manifest_is_not_an_apk(self, tmp_path: Path) -> None:
        """A zip with a plain-text manifest (not compiled by aapt) raises ApkError."""
        fake = tmp_path / "fake.apk"
        with zipfile.ZipFile(fake, "w") as archive:
            archive.writestr("AndroidManifest.xml", '<manifest package="x.y"/>')
        with pytest.raises(ApkError, match="not an APK"):
            inspect_apk(fake)

    def test_folder_is_named_a_folder(self, tmp_path: Path) -> None:
        """A folder given as the APK (``apk.path`` set to a folder) is called a folder."""
        with pytest.raises(ApkError, match="is a folder, not an APK file"):
            inspect_apk(tmp_path)

    def test_missing_file_is_an_apk_error(self, tmp_path: Path) -> None:
        """A path that does not exist raises ApkError, not OSError."""
        with pytest.raises(ApkError, match="no such file"):
            inspect_apk(tmp_path / "absent.apk")
