"""launch_app's UI path reads only the dump uiautomator says it wrote."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from farm.adb.client import ShellResult
from farm.errors import PhoneFault
from farm.provision.launch import MAIN_ACTIVITY, AppTarget, Method, _dump_ui, launch_app

_DUMP = ('<?xml version="1.0"?><hierarchy rotation="0"><node index="0" text="hi" '
         'resource-id="r" class="c" package="p" content-desc="" checkable="false" '
         'checked="false" clickable="true" enabled="true" focusable="true" focused="false" '
         'scrollable="false" long-clickable="false" password="false" selected="false" '
         'bounds="[0,0][10,10]" /></hierarchy>')


class FakeAdb:
    """Answers ``uiautomator dump`` as told; records every command."""

    def __init__(self, dump_out: str, dump_err: str = "") -> None:
        self.dump = ShellResult(0, dump_out.encode(), dump_err.encode())
        self.calls: list[list[str]] = []

    def shell(self, serial: str, argv: Sequence[str], *, timeout_s: float | None = None,
              check: bool = False) -> ShellResult:
        self.calls.append(list(argv))
        if argv[0] == "uiautomator":
            return self.dump
        if argv[0] == "cat":
            return ShellResult(0, _DUMP.encode(), b"")
        return ShellResult(0, b"", b"")


class TestUiDump:
    def test_failed_dump_is_a_phone_fault_and_no_old_file_is_read(self) -> None:
        """uiautomator's error (exit 0) raises with its message; nothing is cat."""
        adb = FakeAdb("", "ERROR: null root node returned by UiTestAutomationBridge.\n")
        with pytest.raises(PhoneFault, match="null root node"):
            launch_app(adb, "s1", AppTarget("127.0.0.1", 9190, "k"), Method.UI)  # type: ignore[arg-type]
        assert not [c for c in adb.calls if c[0] == "cat"]
        assert ["am", "start", "-W", "-n", MAIN_ACTIVITY] in adb.calls

    def test_reads_the_path_the_dump_names(self) -> None:
        """The XML is read from the path in ``UI hierchary dumped to: PATH``."""
        adb = FakeAdb("UI hierchary dumped to: /sdcard/elsewhere.xml\n")
        nodes = _dump_ui(adb, "s1")  # type: ignore[arg-type]
        assert adb.calls[-1] == ["cat", "/sdcard/elsewhere.xml"]
        assert [n.text for n in nodes] == ["hi"]
