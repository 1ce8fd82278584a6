"""farmctl's words: help, exit codes, bounded ids and times, one output format at a time."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from farm.cli.jobs import EXIT_FAILED, EXIT_TIMEOUT
from farm.cli.main import cli
from farm.click_types import DB_INT_MAX, Seconds
from farm.daemon import main as farmd_main
from farm.queue import Store

NOW = datetime(2025, 1, 1, tzinfo=UTC)
HUGE_ID = "99999999999999999999999"


class TestHelp:
    """-h and --help, with defaults and required options shown."""

    @pytest.mark.parametrize("args", [["-h"], ["jobs", "-h"], ["wait", "--help"]])
    def test_dash_h_is_help(self, args: list[str]) -> None:
        """-h prints the help and exits 0, for the group and its commands."""
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0
        assert "Usage:" in result.stdout

    def test_help_shows_defaults(self) -> None:
        """A command's help shows each option's default."""
        out = CliRunner().invoke(cli, ["results", "--help"]).stdout
        assert "[default: table]" in out
        assert "[default: 1000" in out

    def test_help_shows_inherited_defaults_and_required(self) -> None:
        """Subcommands inherit show_default; a required option is marked required."""

        @cli.command("probe-help-words", hidden=True)
        @click.option("--needed", required=True)
        @click.option("--count", type=int, default=7)
        def probe(needed: str, count: int) -> None:  # pragma: no cover - help only
            """A probe command."""

        try:
            out = CliRunner().invoke(cli, ["probe-help-words", "-h"]).stdout
        finally:
            cli.commands.pop("probe-help-words")
        assert "[required]" in out
        assert "[default: 7]" in out

    def test_wait_help_documents_exit_codes(self) -> None:
        """wait --help lists its exit codes, 124 for --timeout included."""
        out = " ".join(CliRunner().invoke(cli, ["wait", "-h"]).stdout.split())
        assert "124 it had not ended after --timeout" in out
        assert "1 it failed" in out

    def test_farmd_dash_h(self) -> None:
        """farmd -h prints farmd's help and exits 0."""
        result = CliRunner().invoke(farmd_main, ["-h"])
        assert result.exit_code == 0
        assert "--virtual-phones" in result.stdout

    def test_farmd_dash_h_as_a_process(self) -> None:
        """`farmd -h` as the console script runs it: usage on stdout, exit 0."""
        done = subprocess.run([sys.executable, "-c", "from farm.daemon import main; main()", "-h"],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert "Usage:" in done.stdout


class TestJob:
    """farmctl job ID."""

    def test_job_prints_the_spec_as_json(self, farmctl, store: Store) -> None:
        """The table view prints the stored spec as JSON, not a Python repr, on its last line."""
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        out = farmctl("job", str(job_id)).stdout
        spec = json.loads(out.splitlines()[-1].removeprefix("spec: "))
        assert spec["kind"] == "gemm"
        assert spec["params"]["n"] == 64


class TestBoundedInput:
    """Ids, limits and seconds outside what can be stored are usage errors, not tracebacks."""

    @pytest.mark.parametrize("args", [
        ["job", HUGE_ID], ["cancel", HUGE_ID], ["wait", HUGE_ID], ["results", "--job", HUGE_ID],
        ["logs", "--job", HUGE_ID], ["job", "0"], ["job", "--", "-5"], ["job", str(DB_INT_MAX + 1)],
        ["jobs", "--limit", HUGE_ID], ["results", "--limit", "0"],
        ["export", "9223372036854775808", "--out", "bundle"],
        ["export", str(DB_INT_MAX + 1), "--out", "bundle"],
    ])
    def test_out_of_range_is_a_usage_error(self, farmctl, args: list[str]) -> None:
        """The value is refused with exit 2 and a one-line reason naming the argument."""
        result = farmctl(*args)
        assert result.exit_code == 2, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert "not in the range" in result.stderr

    def test_largest_id_is_looked_up(self, farmctl) -> None:
        """The largest storable id is a valid question: no such job (exit 2)."""
        result = farmctl("job", str(DB_INT_MAX))
        assert result.exit_code == 2
        assert result.stderr == f"Error: no job {DB_INT_MAX}\n"

    @pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e400", "soon"])
    def test_wait_timeout_must_be_finite_seconds(self, farmctl, store: Store, value: str) -> None:
        """wait --timeout refuses nan, inf, negatives and words."""
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        result = farmctl("wait", str(job_id), "--timeout", value)
        assert result.exit_code == 2
        assert "--timeout" in result.stderr

    def test_poll_of_zero_is_refused(self, farmctl, store: Store) -> None:
        """wait --poll 0 would spin: refused."""
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        assert farmctl("wait", str(job_id), "--poll", "0").exit_code == 2

    def test_seconds_converts_in_range(self) -> None:
        """Seconds returns floats in range, bounds included unless open."""
        assert Seconds(0, 10).convert("10", None, None) == 10.0
        assert Seconds(0, 10).convert(0.0, None, None) == 0.0
        with pytest.raises(click.BadParameter):
            Seconds(0, 10, min_open=True).convert("0", None, None)


class TestConfigFile:
    """A --config file farmctl cannot read is one line naming it, never a traceback."""

    @pytest.mark.parametrize("args", [["jobs"], ["devices"], ["enqueue", "gemm", "--n", "64"]])
    def test_a_binary_file_is_a_one_line_error(self, tmp_path: Path, args: list[str]) -> None:
        """Bytes that are no UTF-8 text: exit 2, 'not valid TOML', the file's name."""
        path = tmp_path / "farm.toml"
        path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x82")
        result = CliRunner().invoke(cli, ["--config", str(path), *args],
                                    env={"FARM_CONFIG": None})
        assert result.exit_code == 2, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert result.stderr == (f"Error: config {path}: not valid TOML: not UTF-8 text (byte 0x89 "
                                 "at offset 0)\n")


class TestWaitExitCodes:
    """farmctl wait tells how it ended by its exit code."""

    def test_timeout_has_its_own_code(self, farmctl, store: Store) -> None:
        """A job still queued at --timeout exits 124, not the failed-job code."""
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        result = farmctl("wait", str(job_id), "--timeout", "0.2", "--poll", "0.05")
        assert result.exit_code == EXIT_TIMEOUT != EXIT_FAILED
        assert "still queued after 0.2 s" in result.stderr

    def test_cancelled_job_exits_failed(self, farmctl, store: Store) -> None:
        """A cancelled job exits with the failed-job code."""
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        store.cancel(job_id, NOW)
        assert farmctl("wait", str(job_id)).exit_code == EXIT_FAILED


class TestOutputFormats:
    """One output format per call."""

    @pytest.mark.parametrize("fmt", ["csv", "table"])
    def test_json_with_another_format_is_refused(self, farmctl, fmt: str) -> None:
        """results --json --format csv asks for two formats: a usage error."""
        result = farmctl("results", "--json", "--format", fmt)
        assert result.exit_code == 2
        assert f"--json and --format {fmt}" in result.stderr

    def test_json_with_format_json_is_fine(self, farmctl) -> None:
        """--json --format json agree: an empty JSON list."""
        result = farmctl("results", "--json", "--format", "json")
        assert result.exit_code == 0
        assert json.loads(result.stdout) == []
