"""``farmctl --server``: every command runs through the HTTP API or refuses in one line.

Refusals come before any request, so the server here is a port nobody listens on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.cli.main import COMMANDS, REMOTE_COMMANDS
from farm.cli.state import LOCAL_ONLY
from farm.netaddr import free_port

#: Each command the API cannot serve, as a user types it.
REFUSED = {"compare": ["compare", "1", "2"], "logs": ["logs", "--job", "1"],
           "db": ["db", "upgrade"], "token": ["token", "list"], "records": ["records", "list"],
           "demo": ["demo", "--phones", "1"]}


@pytest.fixture
def url() -> str:
    """A farm server URL nobody answers at."""
    return f"http://127.0.0.1:{free_port()}"


class TestServerCoverage:
    def test_every_command_runs_remotely_or_is_refused(self) -> None:
        """Each command is remote or refused (doctor checks this host); none is both or neither."""
        assert sorted([*REMOTE_COMMANDS, *LOCAL_ONLY, "doctor"]) == sorted(COMMANDS)
        assert set(REFUSED) == set(LOCAL_ONLY)

    @pytest.mark.parametrize("name", sorted(REFUSED))
    def test_a_host_command_refuses_in_one_line_naming_itself(
            self, farmctl, config: Path, url: str, name: str) -> None:
        """compare, logs, db, token, records, demo: exit 2, one line naming the command and why."""
        result = farmctl("--server", url, *REFUSED[name])
        assert result.exit_code == 2, result.output
        [line] = result.stderr.splitlines()
        assert line.startswith(f"Error: farmctl {name}")
        assert "runs on a farm host, not through --server: it " in line
        assert not (config.parent / "data").exists()  # nothing of this host was opened

    def test_results_regressions_refuses_and_names_the_option(self, farmctl, url: str) -> None:
        """results works remotely, but --regressions needs the host's database: it says so."""
        result = farmctl("--server", url, "results", "--regressions")
        assert result.exit_code == 2
        assert result.stderr.startswith(
            "Error: farmctl results --regressions runs on a farm host, not through --server")

    def test_export_goes_to_the_server(self, farmctl, url: str, tmp_path: Path) -> None:
        """export asks the server for the bundle (here: nobody answers, exit 1 naming it)."""
        result = farmctl("--server", url, "export", "3", "--out", str(tmp_path / "bundle"))
        assert (result.exit_code, result.stderr.splitlines()) == (
            1, [f"Error: cannot reach the farm server {url}: [Errno 111] Connection refused"])
        assert not (tmp_path / "bundle").exists()
