"""``farmctl token create|list|revoke``, and farmctl's own FARM_ variables beside the settings."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from farm.cli.main import cli
from farm.config import load_config
from farm.queue import Store


class TestTokenCommands:
    """Tokens are made, listed without their secret, and revoked on the local database."""

    def test_create_list_revoke(self, tmp_path: Path) -> None:
        """create prints a token that the store accepts; list hides it; revoke ends it."""
        config = tmp_path / "farm.toml"
        config.write_text(f'data_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
        made = CliRunner().invoke(cli, ["--config", str(config), "token", "create", "--owner",
                                        "dana", "--operator"], env={"FARM_CONFIG": None})
        assert made.exit_code == 0, made.output
        token = made.stdout.strip()
        assert token.startswith("farm_")
        listed = CliRunner().invoke(cli, ["--config", str(config), "token", "list", "--json"],
                                    env={"FARM_CONFIG": None})
        [row] = json.loads(listed.stdout)
        assert (row["owner"], row["operator"], row["revoked_at"]) == ("dana", True, None)
        assert token not in listed.stdout
        with Store(f"sqlite:///{tmp_path / 'data' / 'farm.db'}") as store:
            now = datetime.now(UTC)
            assert store.check_token(token, now) is not None
            revoked = CliRunner().invoke(cli, ["--config", str(config), "token", "revoke",
                                               str(row["id"])], env={"FARM_CONFIG": None})
            assert revoked.exit_code == 0 and "revoked" in revoked.stdout
            assert store.check_token(token, now) is None

    def test_revoke_unknown(self, tmp_path: Path) -> None:
        """Revoking an id no token has is a one-line error, exit 2."""
        config = tmp_path / "farm.toml"
        config.write_text(f'data_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
        result = CliRunner().invoke(cli, ["--config", str(config), "token", "revoke", "7"],
                                    env={"FARM_CONFIG": None})
        assert (result.exit_code, result.stderr) == (2, "Error: no token with id 7\n")

    def test_server_refuses_database_commands(self, tmp_path: Path) -> None:
        """Tokens are written to the database: under --server the command says so."""
        result = CliRunner().invoke(cli, ["--server", "http://127.0.0.1:1", "token", "list"])
        assert result.exit_code == 2
        assert "not through --server" in result.stderr


def test_client_variables_are_not_settings() -> None:
    """FARM_SERVER and FARM_TOKEN are farmctl's; the config does not refuse them as unknown."""
    settings = load_config(None, env={"FARM_SERVER": "http://x", "FARM_TOKEN": "farm_y"})
    assert settings.api.port == 9465
