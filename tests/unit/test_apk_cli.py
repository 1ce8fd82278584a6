"""`python -m apk_tools`: every command, JSON output, one-line errors and exit codes."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from apk_tools.__main__ import cli
from apk_tools.keys import create_pem_key


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


class TestCli:
    """The click group `cli`."""

    def test_full_flow_standin_keystore_prepare_verify(self, tmp_path: Path) -> None:
        """standin -> keystore -> prepare -> verify -> inspect works end to end with --json."""
        env = {"APK_CLI_PW": "secret-123"}
        code, out, _ = _run("--json", "standin", "--out-dir", str(tmp_path), "--version-code", "9")
        assert code == 0
        unsigned = json.loads(out)["standin"]
        code, out, _ = _run(
            "--json",
            "keystore",
            "--out",
            str(tmp_path / "ks.p12"),
            "--password",
            "env:APK_CLI_PW",
            env=env,
        )
        assert code == 0
        sha = json.loads(out)["certificate_sha256"]
        code, out, _ = _run(
            "--json", "prepare", unsigned, "--out-dir", str(tmp_path / "prepared"),
            "--ks", str(tmp_path / "ks.p12"), "--ks-pass", "env:APK_CLI_PW", env=env,
        )  # fmt: skip
        assert code == 0
        prepared = json.loads(out)["prepared"]
        code, out, _ = _run("--json", "verify", prepared)
        [verdict] = json.loads(out)
        assert (code, verdict["ok"], verdict["signers"]) == (0, True, [sha])
        code, out, _ = _run("--json", "inspect", prepared)
        info = json.loads(out)
        assert (info["version_code"], info["signers"], info["debuggable"]) == (9, [sha], True)

    def test_pem_align_sign_readable_output(self, tmp_path: Path) -> None:
        """keystore --key-out/--cert-out, align and sign print readable `key: value` lines."""
        assert _run("standin", "--out-dir", str(tmp_path), "--no-debuggable")[0] == 0
        unsigned = tmp_path / "tvmrpc-standin-v1.apk"
        code, out, _ = _run(
            "keystore", "--key-out", str(tmp_path / "k.pem"), "--cert-out", str(tmp_path / "c.pem")
        )
        assert code == 0
        assert "certificate_sha256:" in out
        code, _, err = _run("align", str(unsigned), "--out", str(tmp_path / "al.apk"))
        assert code == 0, err
        code, out, _ = _run(
            "sign", str(tmp_path / "al.apk"), "--out", str(tmp_path / "s.apk"),
            "--key", str(tmp_path / "k.pem"), "--cert", str(tmp_path / "c.pem"),
        )  # fmt: skip
        assert code == 0
        assert "schemes: 2, 3" in out

    def test_not_an_apk_is_one_line_and_exit_2(self, tmp_path: Path) -> None:
        """inspect of a non-zip prints one `error:` line on stderr and exits 2."""
        (tmp_path / "x.apk").write_text("hello")
        code, out, err = _run("inspect", str(tmp_path / "x.apk"))
        assert code == 2
        assert out == ""
        assert err.startswith("error: ")
        assert err.count("\n") == 1

    def test_wrong_password_is_one_line_and_nothing_written(self, tmp_path: Path) -> None:
        """sign with the wrong keystore password exits 2 and writes no output file."""
        _run("standin", "--out-dir", str(tmp_path))
        _run(
            "keystore",
            "--out",
            str(tmp_path / "ks.p12"),
            "--password",
            "env:APK_CLI_PW",
            env={"APK_CLI_PW": "secret-123"},
        )
        before = sorted(p.name for p in tmp_path.iterdir())
        code, _, err = _run(
            "sign", str(tmp_path / "tvmrpc-standin-v1-debug.apk"), "--out", str(tmp_path / "s.apk"),
            "--ks", str(tmp_path / "ks.p12"), "--ks-pass", "env:APK_CLI_PW",
            env={"APK_CLI_PW": "nope-nope"},
        )  # fmt: skip
        assert code == 2
        assert "wrong keystore password" in err
        assert "nope-nope" not in err
        assert sorted(p.name for p in tmp_path.iterdir()) == before

    def test_literal_password_is_refused(self, tmp_path: Path) -> None:
        """`--ks-pass pass:...` is refused with exit 2, as it would put the password on argv."""
        (tmp_path / "ks.p12").write_bytes(b"x")
        (tmp_path / "in.apk").write_bytes(b"x")
        code, _, err = _run(
            "sign",
            str(tmp_path / "in.apk"),
            "--out",
            str(tmp_path / "o.apk"),
            "--ks",
            str(tmp_path / "ks.p12"),
            "--ks-pass",
            "pass:hunter22",
        )
        assert code == 2
        assert "env:NAME or file:PATH" in err

    def test_missing_tool_names_packages(self, tmp_path: Path) -> None:
        """With no tools on PATH, align exits 2 naming build-tools and the Debian package."""
        with zipfile.ZipFile(tmp_path / "in.apk", "w") as archive:  # a zip: only the tool lacks
            archive.writestr("AndroidManifest.xml", b"")
        code, _, err = _run(
            "align",
            str(tmp_path / "in.apk"),
            "--out",
            str(tmp_path / "o.apk"),
            env={"PATH": str(tmp_path), "ANDROID_HOME": "", "ANDROID_SDK_ROOT": ""},
        )
        assert code == 2
        assert (
            "zipalign not found" in err
        )
        assert (
            "build-tools" in err
        )
        assert (
            "apt-get install zipalign" in err
        )
        assert not (tmp_path / "o.apk").exists()

    def test_expired_certificate_is_refused(self, tmp_path: Path) -> None:
        """sign with an expired certificate exits 2 saying so, writing nothing."""
        create_pem_key(
            tmp_path / "k.pem",
            tmp_path / "c.pem",
            valid_from=dt.datetime(2015, 1, 1, tzinfo=dt.UTC),
            validity_days=1,
        )
        _run("standin", "--out-dir", str(tmp_path))
        code, _, err = _run(
            "sign",
            str(tmp_path / "tvmrpc-standin-v1-debug.apk"),
            "--out",
            str(tmp_path / "s.apk"),
            "--key",
            str(tmp_path / "k.pem"),
            "--cert",
            str(tmp_path / "c.pem"),
        )
        assert code == 2
        assert "expired on 2015-01-02" in err
        assert not (tmp_path / "s.apk").exists()

    def test_module_entry_point_runs(self) -> None:
        """`python -m apk_tools --help` lists the commands."""
        out = subprocess.run(
            [sys.executable, "-m", "apk_tools", "--help"],
            capture_output=True,
            text=True,
            check=True,
        )
        for command in ("keystore", "align", "sign", "verify", "inspect", "prepare", "standin"):
            assert command in out.stdout

    @pytest.mark.parametrize("args", [["keystore"], ["sign", "--out", "x"]])
    def test_usage_errors_exit_2(self, args: list[str]) -> None:
        """Incomplete arguments are usage errors with exit code 2."""
        assert CliRunner().invoke(cli, args).exit_code == 2


class TestVerifySeveral:
    """`python -m apk_tools verify APK...`."""

    def test_one_line_each_and_exit_2_if_any_fails(self, tmp_path: Path) -> None:
        """Every APK is checked and gets one line; one bad APK makes the exit code 2."""
        code, out, _ = _run("--json", "standin", "--out-dir", str(tmp_path))
        unsigned = Path(json.loads(out)["standin"])
        key_args = ["--key", str(tmp_path / "k.pem"), "--cert", str(tmp_path / "c.pem")]
        assert _run("keystore", "--key-out", key_args[1], "--cert-out", key_args[3])[0] == 0
        signed = tmp_path / "signed.apk"
        code, _, err = _run("align", str(unsigned), "--out", str(tmp_path / "al.apk"))
        assert code == 0, err
        assert _run("sign", str(tmp_path / "al.apk"), "--out", str(signed), *key_args)[0] == 0
        truncated = tmp_path / "truncated.apk"
        truncated.write_bytes(signed.read_bytes()[:1000])
        folder = tmp_path / "folder.apk"
        folder.mkdir()

        code, out, _ = _run("verify", str(signed), str(signed))
        assert code == 0
        assert out.count("verified (v2, v3)") == 2

        code, out, _ = _run("verify", str(signed), str(truncated), str(folder), str(unsigned))
        lines = out.splitlines()
        assert code == 2
        assert len(lines) == 4
        assert lines[0].startswith(f"{signed}: verified")
        assert lines[1].startswith(f"{truncated}: corrupt APK")
        assert lines[2] == f"{folder}: is a folder, not an APK file"
        assert lines[3].startswith(f"{unsigned}: does not verify: the APK is not signed")

        code, out, _ = _run("--json", "verify", str(signed), str(truncated))
        assert code == 2
        assert [v["ok"] for v in json.loads(out)] == [True, False]

    def test_no_apk_is_a_usage_error(self) -> None:
        """verify with no APK is a usage error (exit 2)."""
        assert CliRunner().invoke(cli, ["verify"]).exit_code == 2

    def test_help_shows_defaults_and_dash_h(self) -> None:
        """-h works and the help shows defaults."""
        result = CliRunner().invoke(cli, ["sign", "-h"])
        assert result.exit_code == 0
        assert "[default: 1,2,3]" in result.stdout
