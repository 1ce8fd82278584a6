"""Test helpers for virtual Linux boards (like :mod:`farm.virtual.testing` for phones).

:func:`virtual_boards` starts ``n`` boards (``vb1``, ``vb2``, ...) under one
client key made for the test, and stops them, and everything they ran, at the
end. Each board's :meth:`~farm.virtual.board.VirtualBoard.settings` is the
``[[boards]]`` entry that reaches it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from farm.virtual.board import VirtualBoard, make_key

__all__ = ["virtual_boards"]


@contextlib.contextmanager
def virtual_boards(n: int, root: Path, prefix: str = "vb",
                   arch: str = "host") -> Iterator[list[VirtualBoard]]:
    """Run ``n`` virtual boards of ``arch`` with sandboxes under ``root``; all stop on exit.

    Raises:
        RuntimeError: a board's sshd did not start.
        ToolMissing: ``aarch64`` without QEMU, the cross compiler or the aarch64 wheels.
    """
    client_key = root / "client_ed25519"
    make_key(client_key)
    with contextlib.ExitStack() as stack:
        boards = []
        for index in range(1, n + 1):
            board = VirtualBoard(f"{prefix}{index}", root / f"{prefix}{index}", client_key, arch)
            stack.callback(board.stop)
            boards.append(board.start())
        yield boards
