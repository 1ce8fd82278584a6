"""Tests for farm.device.processes."""

from pathlib import Path

import pytest

from farm.device.processes import Process, parse_pidof, parse_ps_a, parse_vm_hwm_kb


class TestParsePidof:
    def test_one_pid(self, fixture_text):
        """A single match is one PID."""
        assert parse_pidof(
            fixture_text("pidof_system_server__mtk_tb8168_android13_derived.txt")
        ) == [832]

    def test_not_running(self, fixture_text):
        """Empty output (exit 1) means no process."""
        assert parse_pidof(fixture_text("pidof_not_running__derived.txt")) == []

    def test_several(self):
        """Several matches are space separated on one line."""
        assert parse_pidof("812 4411\n") == [812, 4411]

    def test_garbage(self):
        """An error message raises instead of being read as no process."""
        with pytest.raises(ValueError, match="inaccessible"):
            parse_pidof("/system/bin/sh: pidof: inaccessible or not found\n")


class TestParsePsA:
    def test_mtk_as_root(self, fixture_text):
        """All 343 rows, kernel threads and long WCHAN cells included."""
        processes = parse_ps_a(fixture_text("ps_-A__mtk_tb8168_android13_as_root.txt"))
        assert len(processes) == 343
        assert processes[0] == Process("root", 1, 0, "init", "S")
        assert processes[1] == Process("root", 2, 0, "[kthreadd]", "S")
        assert Process("logd", 198, 1, "logd", "S") in processes
        assert processes[-1] == Process("root", 6178, 6098, "ps", "R")

    def test_wrong_header(self):
        """Old toolbox ps output (other columns) raises."""
        with pytest.raises(ValueError, match="header"):
            parse_ps_a("USER PID PPID VSIZE RSS WCHAN PC NAME\n")

    def test_short_row(self):
        """A truncated row raises naming it."""
        header = "USER           PID  PPID     VSZ    RSS WCHAN            ADDR S NAME\n"
        with pytest.raises(ValueError, match="root 1 0"):
            parse_ps_a(header + "root 1 0\n")


class TestParseVmHwm:
    def test_this_kernels_status(self):
        """The peak resident set of a real ``/proc/self/status``, in KiB."""
        text = Path("/proc/self/status").read_text()
        [line] = [line for line in text.splitlines() if line.startswith("VmHWM:")]
        assert parse_vm_hwm_kb(text) == int(line.split()[1]) > 0

    def test_a_kernel_thread_has_none(self):
        """A status without memory lines (a kernel thread's) raises, naming what it read."""
        with pytest.raises(ValueError, match="no VmHWM"):
            parse_vm_hwm_kb("Name:\tkthreadd\nState:\tS (sleeping)\n")
