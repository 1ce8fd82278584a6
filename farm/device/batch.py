"""Several shell commands in one adb round trip, and their outputs cut apart.

Each command's stdout follows a marker line. Commands are argv lists quoted
with :func:`shlex.join`; their stderr is dropped, since a missing reading is
detected by its parser, not by an error message.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

MARK = "@@farm:"


def batch_script(sections: Mapping[str, Sequence[str]]) -> str:
    """One ``sh -c`` script running each ``{name: argv}`` after its marker, in order."""
    parts = []
    for name, argv in sections.items():
        parts.append(shlex.join(["echo", MARK + name]))
        parts.append(shlex.join(argv) + " 2>/dev/null")
    return "; ".join(parts)


def split_batch(stdout: str) -> dict[str, str]:
    """Cut a batch's stdout back into ``{name: output}``."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines(keepends=True):
        if line.startswith(MARK):
            current = sections.setdefault(line[len(MARK):].strip(), [])
        elif current is not None:
            current.append(line)
    return {name: "".join(lines) for name, lines in sections.items()}
