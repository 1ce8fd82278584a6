"""What a shell command gets: argv, stdin, stdout/stderr sinks, cwd, and the phone.

Commands are ``async def name(ctx: Ctx) -> int`` functions registered with
:func:`command`; the interpreter (:mod:`farm.virtual.android.shell`) wires
their output to the adb stream, a pipe buffer or a file.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from farm.virtual.android.storage import normalize

if TYPE_CHECKING:
    from farm.virtual.android.phone import AndroidPhone


class Sink(Protocol):
    """Where a command's stdout or stderr goes."""

    def write(self, data: bytes) -> None:
        """Take ``data`` (raw bytes, no encoding implied)."""
        ...


class BufferSink:
    """Collects output in memory (pipes, ``$(...)``-free redirects, tests)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        """Keep ``data``."""
        self.chunks.append(data)

    def getvalue(self) -> bytes:
        """Everything written so far, joined."""
        return b"".join(self.chunks)


class NullSink:
    """``/dev/null``."""

    def write(self, data: bytes) -> None:
        """Drop ``data``."""
        del data


class Stdin(Protocol):
    """A command's standard input."""

    async def read(self) -> bytes:
        """Next chunk; ``b""`` at end of input."""
        ...


class BytesStdin:
    """Stdin from a pipe buffer or a ``<`` file, read at once."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    async def read(self) -> bytes:
        """All of the data at the first call, ``b""`` after."""
        data, self._data = self._data, b""
        return data


async def read_all(stdin: Stdin) -> bytes:
    """Read stdin until its end."""
    chunks = []
    while chunk := await stdin.read():
        chunks.append(chunk)
    return b"".join(chunks)


def strerror(exc: OSError) -> str:
    """The ``strerror`` text toybox and mksh print for ``exc`` (``Permission denied``, ...).

    The phone's own errors carry no errno, so the type decides; any other error
    gives its host ``strerror``, and ``No such file or directory`` without one.
    """
    if isinstance(exc, PermissionError):
        return "Permission denied"
    if isinstance(exc, IsADirectoryError):
        return "Is a directory"
    if isinstance(exc, FileExistsError):
        return "File exists"
    if isinstance(exc, FileNotFoundError):
        return "No such file or directory"
    return exc.strerror or "No such file or directory"


@dataclass
class Ctx:
    """One command invocation.

    Attributes:
        phone: the phone the shell runs on.
        argv: the expanded words; ``argv[0]`` is the command name as typed.
        stdin, out, err: its streams.
        env: shell variables (exported or not; the subset makes no difference).
        cwd: working directory, a normalized device path.
        app: the package a ``run-as`` shell runs as, or None for the shell user.
    """

    phone: AndroidPhone
    argv: list[str]
    stdin: Stdin
    out: Sink
    err: Sink
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "/"
    app: str | None = None

    def print(self, text: str) -> None:
        """Write text to stdout as UTF-8."""
        self.out.write(text.encode())

    def eprint(self, text: str) -> None:
        """Write text to stderr as UTF-8."""
        self.err.write(text.encode())

    def path(self, device_path: str) -> str:
        """Normalize a path argument against the working directory."""
        return normalize(device_path, self.cwd)


CommandFn = Callable[[Ctx], Awaitable[int]]
COMMANDS: dict[str, CommandFn] = {}


def command(*names: str) -> Callable[[CommandFn], CommandFn]:
    """Register an async command function under one or more names."""

    def register(fn: CommandFn) -> CommandFn:
        for name in names:
            COMMANDS[name] = fn
        return fn

    return register
