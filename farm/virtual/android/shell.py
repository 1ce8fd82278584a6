"""The shell interpreter: runs parsed command lines as mksh would.

Messages and exit codes follow mksh R59c (``exec.c``, ``io.c``), which Android
ships as ``/system/bin/sh``: an unknown command prints
``/system/bin/sh: NAME: inaccessible or not found`` on stderr and exits 127
(fixture ``sh_command_not_found__mksh_stderr_derived.txt``); a syntax error
prints ``/system/bin/sh: syntax error: unexpected 'TOKEN'`` and exits 1.

Simplifications, stated: commands joined by ``|`` run one after another with
the left side's output buffered; ``&`` runs in the foreground.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import posixpath
from typing import TYPE_CHECKING

from farm.virtual.android.context import (
    COMMANDS,
    BufferSink,
    BytesStdin,
    Ctx,
    NullSink,
    Sink,
    Stdin,
    read_all,
    strerror,
)
from farm.virtual.android.shell_io import FileSink, IoStdin, StreamSink
from farm.virtual.android.shell_syntax import (
    AndOr,
    Pipeline,
    ShellSyntaxError,
    Simple,
    Word,
    parse,
)
from farm.virtual.contracts import ShellIO

if TYPE_CHECKING:
    from farm.virtual.android.phone import AndroidPhone

SH = "/system/bin/sh"
_BIN_DIRS = ("/system/bin/", "/system/xbin/", "/vendor/bin/", "/product/bin/", "/bin/")


class ShellExit(Exception):
    """``exit N`` was run."""

    def __init__(self, status: int) -> None:
        self.status = status


class Shell:
    """One shell session (``sh -c LINE`` or interactive).

    Args:
        phone: the phone whose commands and storage the shell uses.
        stdin, out, err: the session's streams.
        drain: awaited after each command so output reaches the host in order.
        app: run as this package (``run-as``) instead of the shell user.
        cwd: starting directory.
    """

    def __init__(
        self,
        phone: AndroidPhone,
        stdin: Stdin,
        out: Sink,
        err: Sink,
        *,
        drain: object = None,
        app: str | None = None,
        cwd: str = "/",
    ) -> None:
        self.phone = phone
        self.stdin = stdin
        self.out = out
        self.err = err
        self._drain = drain
        self.app = app
        self.cwd = cwd
        self.status = 0
        self.env: dict[str, str] = {
            "PATH": "/product/bin:/apex/com.android.runtime/bin:/apex/com.android.art/bin:"
            "/system_ext/bin:/system/bin:/system/xbin:/odm/bin:/vendor/bin:/vendor/xbin",
            "HOME": "/",
            "USER": "shell",
            "HOSTNAME": phone.spec.device,
            "SHELL": SH,
            "TMPDIR": "/data/local/tmp",
            "ANDROID_DATA": "/data",
            "ANDROID_ROOT": "/system",
            "EXTERNAL_STORAGE": "/sdcard",
        }

    @classmethod
    def for_io(cls, phone: AndroidPhone, io: ShellIO) -> Shell:
        """A shell wired to an adb stream."""
        return cls(
            phone,
            IoStdin(io),
            StreamSink(io.write_stdout),
            StreamSink(io.write_stderr),
            drain=io.drain,
        )

    async def run_line(self, line: str) -> int:
        """Run one command line; returns the last command's status.

        Raises:
            ShellExit: the line ran ``exit``.
        """
        try:
            script = parse(line)
        except ShellSyntaxError as exc:
            self.err.write(f"{SH}: syntax error: unexpected '{exc.token}'\n".encode())
            self.status = 1
            return 1
        for and_or in script:
            await self._and_or(and_or)
        return self.status

    async def run_script(self, line: str) -> int:
        """Run ``line`` as ``sh -c`` does: ``exit`` ends it with its status."""
        try:
            return await self.run_line(line)
        except ShellExit as done:
            return done.status

    async def run_interactive(self) -> int:
        """Read lines from stdin and run each until EOF or ``exit``."""
        pending = b""
        while True:
            chunk = await self.stdin.read()
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                try:
                    await self.run_line(line.decode(errors="replace"))
                except ShellExit as done:
                    return done.status
        if pending.strip():
            return await self.run_script(pending.decode(errors="replace"))
        return self.status

    async def _and_or(self, and_or: AndOr) -> None:
        await self._pipeline(and_or.first)
        for op, pipeline in and_or.rest:
            if (op == "&&") == (self.status == 0):
                await self._pipeline(pipeline)

    async def _pipeline(self, pipeline: Pipeline) -> None:
        stdin: Stdin = self.stdin
        for i, cmd in enumerate(pipeline.commands):
            if i == len(pipeline.commands) - 1:
                self.status = await self._simple(cmd, stdin, self.out)
            else:
                piped = BufferSink()
                self.status = await self._simple(cmd, stdin, piped)
                stdin = BytesStdin(piped.getvalue())
        if self._drain is not None:
            await self._drain()  # type: ignore[operator]

    # --- expansion -----------------------------------------------------------

    def _expand_vars(self, text: str) -> str:
        out, i = [], 0
        while i < len(text):
            c = text[i]
            if c != "$" or i + 1 >= len(text):
                out.append(c)
                i += 1
                continue
            nxt = text[i + 1]
            if nxt == "?":
                out.append(str(self.status))
                i += 2
            elif nxt == "$":
                out.append(str(self.phone.shell_pid))
                i += 2
            elif nxt == "{":
                end = text.find("}", i)
                name = text[i + 2 : end] if end > 0 else ""
                out.append(self.env.get(name, ""))
                i = end + 1 if end > 0 else len(text)
            elif nxt.isalpha() or nxt == "_":
                j = i + 1
                while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                    j += 1
                out.append(self.env.get(text[i + 1 : j], ""))
                i = j
            else:
                out.append(c)
                i += 1
        return "".join(out)

    def _expand_word(self, word: Word) -> list[str]:
        parts = []
        pattern_parts = []
        for text, quote in word.segments:
            value = text if quote == "'" else self._expand_vars(text)
            parts.append(value)
            pattern_parts.append(value if quote == "" else _escape_glob(value))
        literal = "".join(parts)
        pattern = "".join(pattern_parts)
        if any(ch in pattern for ch in "*?[") and pattern != _escape_glob(literal):
            matches = self._glob(pattern)
            if matches:
                return matches
        return [literal]

    def _glob(self, pattern: str) -> list[str]:
        absolute = pattern.startswith("/")
        base = "/" if absolute else self.cwd
        results = [""]
        for comp in [c for c in pattern.split("/") if c]:
            nxt = []
            for prefix in results:
                where = posixpath.join(base, prefix) if prefix else base
                if not any(ch in comp for ch in "*?["):
                    literal = _unescape_glob(comp)
                    nxt.append(posixpath.join(prefix, literal) if prefix else literal)
                    continue
                names = self.phone.listdir(self._norm(where), app=self.app) or []
                for name in names:
                    if name.startswith(".") and not comp.startswith("."):
                        continue
                    if fnmatch.fnmatchcase(name, comp):
                        nxt.append(posixpath.join(prefix, name) if prefix else name)
            results = nxt
        found = [("/" + r) if absolute else r for r in results]
        found = [p for p in found if self.phone.exists(self._norm(p), app=self.app)]
        # mksh sorts matches by strcmp(): thermal_zone10 comes before thermal_zone2.
        return sorted(found, key=lambda p: p.encode())

    def _norm(self, path: str) -> str:
        from farm.virtual.android.storage import normalize

        return normalize(path, self.cwd)

    # --- running one command ---------------------------------------------------

    async def _simple(self, cmd: Simple, stdin: Stdin, out: Sink) -> int:
        argv: list[str] = []
        for word in cmd.words:
            argv.extend(self._expand_word(word))
        assigns = {name: "".join(self._expand_word(value)) for name, value in cmd.assigns}
        err: Sink = self.err
        fds: dict[int, Sink] = {1: out, 2: err}
        for redir in cmd.redirects:
            target = "".join(self._expand_word(redir.target))
            if redir.op in (">&", "<&"):
                if target.isdigit() and int(target) in fds:
                    fds[redir.fd] = fds[int(target)]
                continue
            if redir.op == "<":
                try:
                    data = self.phone.read_file(self._norm(target), app=self.app)
                except OSError as exc:
                    self.err.write(f"{SH}: can't open {target}: {strerror(exc)}\n".encode())
                    return 1
                stdin = BytesStdin(data)
                continue
            if target == "/dev/null":
                fds[redir.fd] = NullSink()
                continue
            try:
                host = self.phone.storage.check(self._norm(target), write=True, app=self.app)
                if host.is_dir():
                    raise IsADirectoryError(target)
                fds[redir.fd] = FileSink(host, append=redir.op == ">>")
            except OSError as exc:
                self.err.write(f"{SH}: can't create {target}: {strerror(exc)}\n".encode())
                return 1
        if not argv:
            self.env.update(assigns)
            return 0
        ctx = Ctx(
            phone=self.phone,
            argv=argv,
            stdin=stdin,
            out=fds[1],
            err=fds[2],
            env={**self.env, **assigns},
            cwd=self.cwd,
            app=self.app,
        )
        return await self.dispatch(ctx)

    async def dispatch(self, ctx: Ctx) -> int:
        """Run one expanded command (builtin or registered), as the shell would."""
        name = ctx.argv[0]
        if name == "exit":
            given = len(ctx.argv) > 1 and ctx.argv[1].isdigit()
            raise ShellExit(int(ctx.argv[1]) & 0xFF if given else self.status)
        if name == "cd":
            return self._cd(ctx)
        if name == "export":
            self._export(ctx)
            return 0
        if name == "exec":  # mksh: run the command in place of the shell, whose status it is
            if len(ctx.argv) == 1:
                return 0
            raise ShellExit(await self.dispatch(dataclasses.replace(ctx, argv=ctx.argv[1:])))
        if name in ("sh", "/system/bin/sh"):
            return await self._sub_shell(ctx)
        short = name
        for prefix in _BIN_DIRS:
            if name.startswith(prefix) and "/" not in name[len(prefix) :]:
                short = name[len(prefix) :]
        fn = COMMANDS.get(short)
        if fn is None:
            if "/" in name and self.phone.exists(ctx.path(name), app=self.app):
                ctx.eprint(f"{SH}: {name}: can't execute: Permission denied\n")
                return 126
            ctx.eprint(f"{SH}: {name}: inaccessible or not found\n")
            return 127
        return await fn(ctx)

    def _cd(self, ctx: Ctx) -> int:
        """The ``cd`` builtin: 2 when the target is not a folder."""
        target = ctx.path(ctx.argv[1] if len(ctx.argv) > 1 else "/")
        if not self.phone.isdir(target, app=self.app):
            ctx.eprint(f"{SH}: cd: {target} - No such file or directory\n")
            return 2
        self.cwd = target
        return 0

    def _export(self, ctx: Ctx) -> None:
        """The ``export`` builtin: set each ``KEY=VALUE`` argument; bare names are kept as is."""
        for arg in ctx.argv[1:]:
            key, eq, value = arg.partition("=")
            if eq:
                self.env[key] = value

    async def _sub_shell(self, ctx: Ctx) -> int:
        sub = Shell(self.phone, ctx.stdin, ctx.out, ctx.err, app=self.app, cwd=self.cwd)
        sub.env = dict(ctx.env)
        args = ctx.argv[1:]
        if args and args[0] == "-c":
            if len(args) < 2:
                ctx.eprint(f"{SH}: -c: option requires an argument\n")
                return 1
            return await sub.run_script(args[1])
        if args:
            try:
                script = self.phone.read_file(ctx.path(args[0]), app=self.app)
            except OSError:
                ctx.eprint(f"{SH}: {args[0]}: No such file or directory\n")
                return 127
            return await sub.run_script(script.decode(errors="replace"))
        return await sub.run_script((await read_all(ctx.stdin)).decode(errors="replace"))


def _escape_glob(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _unescape_glob(text: str) -> str:
    for c in "*?[":
        text = text.replace(f"[{c}]", c)
    return text
