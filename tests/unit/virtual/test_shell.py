"""The mksh-style interpreter: quoting, operators, redirects, globs, errors."""

from __future__ import annotations

import asyncio

import pytest

from farm.virtual.android.shell_syntax import ShellSyntaxError, parse

from .conftest import fixture_text, run, sh

pytestmark = pytest.mark.timeout(30)


class TestParse:
    def test_redirect_with_fd_number_is_not_a_word(self) -> None:
        """``2>/dev/null`` parses as a redirect of fd 2, not an argument ``2``."""
        cmd = parse("ls /x 2>/dev/null")[0].first.commands[0]
        assert [w.literal() for w in cmd.words] == ["ls", "/x"]
        assert (cmd.redirects[0].fd, cmd.redirects[0].op) == (2, ">")

    def test_dangling_pipe_is_a_syntax_error(self) -> None:
        """A pipe with nothing after it is rejected."""
        with pytest.raises(ShellSyntaxError):
            parse("ls |")


class TestShell:
    def test_unknown_command_prints_mksh_error_and_exits_127(self, phone) -> None:
        """An unknown command gives mksh's text on stderr and status 127."""
        status, out, err = sh(phone, "foo")
        assert (status, out) == (127, "")
        assert err == fixture_text("sh_command_not_found__mksh_stderr_derived.txt")

    def test_and_or_and_status_variable(self, phone) -> None:
        """``&&``/``||`` follow exit statuses and ``$?`` holds the last one."""
        status, out, _ = sh(phone, "true && echo a || echo b; false || echo c; false; echo $?")
        assert (status, out) == (0, "a\nc\n1\n")

    def test_single_quotes_stop_expansion(self, phone) -> None:
        """Variables expand in double quotes but not in single quotes."""
        _, out, _ = sh(phone, "X=1; echo \"$X\" '$X'")
        assert out == "1 $X\n"

    def test_exit_status_of_sh_c(self, phone) -> None:
        """``sh -c 'exit 3'`` returns 3 to the outer shell."""
        _, out, _ = sh(phone, "sh -c 'exit 3'; echo $?")
        assert out == "3\n"
        assert (sh(phone, "exit 5"))[0] == 5

    def test_redirects_write_append_and_merge(self, phone) -> None:
        """``>``, ``>>`` and ``2>&1`` behave as in mksh."""
        sh(phone, "echo a > /data/local/tmp/f; echo b >> /data/local/tmp/f")
        assert (sh(phone, "cat /data/local/tmp/f"))[1] == "a\nb\n"
        _, out, err = sh(phone, "cat /nope 2>&1")
        assert (out, err) == ("cat: /nope: No such file or directory\n", "")
        _, out, err = sh(phone, "cat /nope 2>/dev/null")
        assert (out, err) == ("", "")

    def test_pipe_feeds_next_command(self, phone) -> None:
        """The left side's stdout is the right side's stdin."""
        _, out, _ = sh(phone, "getprop | grep ro.product.model")
        assert out == "[ro.product.model]: [Pixel 8]\n"

    def test_glob_order_is_strcmp(self, phone) -> None:
        """Globs sort thermal_zone10 before thermal_zone2, as mksh does."""
        phone._vfiles.update(
            {f"/sys/class/thermal/thermal_zone{i}/type": (lambda i=i: f"z{i}\n") for i in range(12)}
        )
        from farm.virtual.android.sysfiles import virtual_dirs

        phone._vdirs = virtual_dirs(phone._vfiles)
        _, out, _ = sh(phone, "cat /sys/class/thermal/thermal_zone*/type")
        assert out.split()[:4] == ["z0", "z1", "z10", "z11"]

    def test_write_outside_storage_is_denied(self, phone) -> None:
        """Redirecting into /system fails as mksh reports it."""
        status, _, err = sh(phone, "echo x > /system/x")
        assert status == 1
        assert err == "/system/bin/sh: can't create /system/x: Permission denied\n"

    def test_interactive_shell_reads_lines_until_exit(self, phone) -> None:
        """An empty command runs stdin line by line and stops at ``exit``."""
        status, out, _ = sh(phone, "", stdin=b"echo one\nexit 4\necho two\n")
        assert (status, out) == (4, "one\n")

    def test_hung_shell_never_returns(self, phone) -> None:
        """Under hang_shell(True) a command blocks until cancelled."""
        phone.hang_shell(True)
        with pytest.raises(asyncio.TimeoutError):
            asyncio.run(asyncio.wait_for(run(phone, "echo hi"), timeout=0.2))
