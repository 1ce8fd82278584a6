"""The virtual phone's storage count while its app removes files (``df`` during a session end)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from farm.virtual.android.storage import Storage


def test_a_folder_removed_during_the_walk_counts_as_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app's session folder goes between its listing and its scan: ``df`` still answers.

    Before, the walk raised ``FileNotFoundError`` and the shell service died with
    no output (the host's ``link lost``, a job's try).
    """
    storage = Storage(tmp_path)
    cache = storage.app_dir("org.apache.tvm.tvmrpc") / "cache"
    session = cache / "rpc-session-x"
    session.mkdir(parents=True)
    (session / "lib.so").write_bytes(b"x" * 10)
    (storage.root / "data/local/tmp/model.bin").write_bytes(b"y" * 7)
    scandir = os.scandir

    def scandir_after_the_session_ended(path: int | str | os.PathLike[str]) -> object:
        if not isinstance(path, int) and Path(path) == session:
            shutil.rmtree(session)  # the app ends its session now
        return scandir(path)

    monkeypatch.setattr(os, "scandir", scandir_after_the_session_ended)
    assert storage.used_bytes() == 7
