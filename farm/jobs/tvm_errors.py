"""Turning TVM's exceptions into farm's one-sentence reasons."""

from __future__ import annotations


def reason_of(exc: BaseException) -> str:
    """The last non-empty line of a TVM error (its message; the lines above are a traceback).

    TVM 0.27's errors are Python builtins (``RuntimeError``, ``ValueError`` ...) whose text
    starts with the C++ traceback and ends with the message.
    """
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(exc).__name__
