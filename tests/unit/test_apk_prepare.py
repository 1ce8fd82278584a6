"""prepare(): idempotent, named by content and key, never half-written."""

from __future__ import annotations

import datetime as dt
import stat
from pathlib import Path

import pytest

from apk_tools.keys import PemKey, create_pem_key, fingerprint
from apk_tools.prepare import file_sha256, prepare
from apk_tools.sign import sign
from apk_tools.standin import build_standin_apk
from apk_tools.verify import verify
from farm.errors import ApkError, ToolMissing


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Two unsigned stand-ins (versionCode 1 and 2) and two PEM keys."""
    root = tmp_path_factory.mktemp("prepare")
    return {
        "v1": build_standin_apk(root / "v1", version_code=1),
        "v2": build_standin_apk(root / "v2", version_code=2),
        "key_a": create_pem_key(root / "a.pem", root / "a.crt", common_name="a"),
        "key_b": create_pem_key(root / "b.pem", root / "b.crt", common_name="b"),
    }


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


class TestPrepare:
    """prepare(unsigned_apk, key, out_dir)."""

    def test_output_is_signed_and_named_by_content_and_key(
        self, inputs: dict, tmp_path: Path
    ) -> None:
        """The result verifies under the key and its name carries both hashes."""
        key: PemKey = inputs["key_a"]
        out = prepare(inputs["v1"], key, tmp_path)
        assert out.parent == tmp_path
        assert file_sha256(inputs["v1"])[:16] in out.name
        assert fingerprint(key)[:16] in out.name
        assert out.name.startswith("org.apache.tvm.tvmrpc-v1-")
        assert verify(out).signers == (fingerprint(key),)

    def test_second_call_returns_existing_file_without_tools(
        self, inputs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Preparing again returns the same untouched file even with no tool installed."""
        first = prepare(inputs["v1"], inputs["key_a"], tmp_path)
        stat_before = first.stat()
        monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
        monkeypatch.delenv("ANDROID_HOME", raising=False)
        monkeypatch.delenv("ANDROID_SDK_ROOT", raising=False)
        second = prepare(inputs["v1"], inputs["key_a"], tmp_path)
        assert second == first
        assert (second.stat().st_ino, second.stat().st_mtime_ns) == (
            stat_before.st_ino,
            stat_before.st_mtime_ns,
        )
        assert _files(tmp_path) == [first.name]
        with pytest.raises(ToolMissing):  # proves the tools really are gone
            prepare(inputs["v2"], inputs["key_a"], tmp_path)

    def test_different_key_or_content_gives_a_different_file(
        self, inputs: dict, tmp_path: Path
    ) -> None:
        """Another key or another input never collides with an earlier result."""
        names = {
            prepare(inputs["v1"], inputs["key_a"], tmp_path).name,
            prepare(inputs["v1"], inputs["key_b"], tmp_path).name,
            prepare(inputs["v2"], inputs["key_a"], tmp_path).name,
        }
        assert len(names) == 3
        assert _files(tmp_path) == sorted(names)

    def test_already_signed_by_the_key_is_not_resigned(self, inputs: dict, tmp_path: Path) -> None:
        """An APK the key already signed comes back byte for byte; a prepared one returns itself."""
        signed = sign(inputs["v1"], tmp_path / "mine.apk", inputs["key_a"])
        out = prepare(signed, inputs["key_a"], tmp_path / "out")
        assert out.read_bytes() == signed.read_bytes()
        assert prepare(out, inputs["key_a"], tmp_path / "out") == out
        assert len(_files(tmp_path / "out")) == 1

    def test_signed_by_another_key_is_resigned(self, inputs: dict, tmp_path: Path) -> None:
        """An APK signed by key b comes out signed by key a only."""
        signed_b = sign(inputs["v1"], tmp_path / "b.apk", inputs["key_b"])
        out = prepare(signed_b, inputs["key_a"], tmp_path / "out")
        assert verify(out).signers == (fingerprint(inputs["key_a"]),)

    def test_expired_key_leaves_nothing(self, inputs: dict, tmp_path: Path) -> None:
        """An expired certificate raises ApkError and the out dir gets no file."""
        expired = create_pem_key(
            tmp_path / "e.pem", tmp_path / "e.crt",
            valid_from=dt.datetime(2018, 1, 1, tzinfo=dt.UTC), validity_days=10,
        )  # fmt: skip
        with pytest.raises(ApkError, match="expired"):
            prepare(inputs["v1"], expired, tmp_path / "out")
        assert _files(tmp_path / "out") == []

    def test_corrupt_input_leaves_nothing(self, inputs: dict, tmp_path: Path) -> None:
        """A truncated APK raises ApkError and the out dir gets no file."""
        broken = tmp_path / "broken.apk"
        broken.write_bytes(inputs["v1"].read_bytes()[:500])
        with pytest.raises(ApkError):
            prepare(broken, inputs["key_a"], tmp_path / "out")
        assert _files(tmp_path / "out") == []

    def test_signer_failure_leaves_no_temp_files(
        self, inputs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """When apksigner fails mid-way no temp or partial file stays in the out dir."""
        fake = tmp_path / "sdk" / "build-tools" / "99.0.0" / "apksigner"
        fake.parent.mkdir(parents=True)
        fake.write_text(
            '#!/bin/sh\nfor a; do out=$a; done\necho partial > "$out.partial"\nexit 3\n'
        )
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("ANDROID_HOME", str(tmp_path / "sdk"))
        out_dir = tmp_path / "out"
        with pytest.raises(ApkError):
            prepare(inputs["v1"], inputs["key_a"], out_dir)
        assert _files(out_dir) == []
