"""Helpers shared by the parsers: one way to turn command output into text."""

from __future__ import annotations


def as_text(output: str | bytes) -> str:
    r"""Return command output as text with ``\n`` line ends.

    Bytes are decoded as UTF-8 with replacement characters, because Android
    prints UTF-8 and a stray byte must not hide the rest of a dump. ``\r\n``
    becomes ``\n``: the legacy ``shell:`` service and ``adb shell -t`` run
    through a PTY, which turns every ``\n`` into ``\r\n`` (AOSP
    ``packages/modules/adb`` ``SERVICES.TXT``, shell protocol v1 vs v2).

    Args:
        output: what the command printed.

    Returns:
        The text, with ``\r\n`` replaced by ``\n``.
    """
    text = output.decode("utf-8", errors="replace") if isinstance(output, bytes) else output
    return text.replace("\r\n", "\n")


def excerpt(text: str, limit: int = 80) -> str:
    """Return the start of ``text`` for an error message, one line, at most ``limit`` chars."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."
