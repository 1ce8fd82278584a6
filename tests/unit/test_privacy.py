"""farm.privacy: a private umask, a private data folder, secrets written 0600."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from farm.privacy import private_dir, restrict_umask, write_private


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The common 022 umask for the test, the previous one restored after."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


class TestRestrictUmask:
    """restrict_umask()."""

    def test_new_files_are_private(self, tmp_path: Path, umask_022: None) -> None:
        """After it, a new file is 0600 and a new folder 0700; it returns the old umask."""
        assert restrict_umask() == 0o022
        (tmp_path / "f").write_text("x")
        (tmp_path / "d").mkdir()
        assert (_mode(tmp_path / "f"), _mode(tmp_path / "d")) == (0o600, 0o700)

    def test_a_stricter_umask_is_kept(self, umask_022: None) -> None:
        """Bits the user already masked stay masked."""
        os.umask(0o177)
        restrict_umask()
        assert os.umask(0o022) == 0o177


class TestPrivateDir:
    """private_dir(path)."""

    def test_creates_the_folder_0700(self, tmp_path: Path, umask_022: None) -> None:
        """A missing folder is created 0700, its parents too."""
        folder = private_dir(tmp_path / "a" / "data")
        assert _mode(folder) == 0o700

    def test_tightens_an_existing_folder(self, tmp_path: Path, umask_022: None) -> None:
        """A folder an older farm made 0755 becomes 0700."""
        folder = tmp_path / "data"
        folder.mkdir(mode=0o755)
        assert _mode(private_dir(folder)) == 0o700


class TestWritePrivate:
    """write_private(path, text)."""

    def test_file_is_0600_whatever_the_umask(self, tmp_path: Path) -> None:
        """Even under umask 000 the file is readable by its user only."""
        previous = os.umask(0)
        try:
            path = write_private(tmp_path / "settings.json", '{"database_url": "x"}')
        finally:
            os.umask(previous)
        assert _mode(path) == 0o600
        assert path.read_text() == '{"database_url": "x"}'

    def test_replaces_a_readable_file(self, tmp_path: Path) -> None:
        """An existing 0644 file is replaced by a 0600 one; no temporary file is left."""
        path = tmp_path / "settings.json"
        path.write_text("old")
        path.chmod(0o644)
        write_private(path, "new")
        assert (_mode(path), path.read_text()) == (0o600, "new")
        assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


class TestFarmctlEntryPoint:
    """farmctl as a process makes what it writes private."""

    def test_first_farmctl_call_creates_a_private_data_folder(self, tmp_path: Path) -> None:
        """Under umask 022, `farmctl jobs` creates the data folder 0700 and farm.db 0600."""
        data_dir = tmp_path / "data"
        config = tmp_path / "farm.toml"
        config.write_text(f'data_dir = "{data_dir}"\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("FARM_")}
        done = subprocess.run(
            [sys.executable, "-c", "from farm.cli.main import main; main()", "--config",
             str(config), "jobs"],
            env=env, capture_output=True, text=True, timeout=120, check=False,
            preexec_fn=lambda: os.umask(0o022))
        assert done.returncode == 0, done.stderr
        assert _mode(data_dir) == 0o700
        assert _mode(data_dir / "farm.db") == 0o600
