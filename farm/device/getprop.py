r"""Parse the output of ``getprop`` (no arguments): every system property.

The format is one ``[key]: [value]`` per property, sorted by raw byte order
(upper-case keys first). A value may contain newlines, e.g.
``persist.sys.boot.reason.history`` on the Motorola and MTK captures in
``tests/fixtures/android``, so a value ends only at ``]`` followed by a line
that starts a new property, or by the end of the output. Empty values print as
``[]``. Source: AOSP ``system/core/toolbox/getprop.cpp`` (``"[%s]: [%s]\n"``).
"""

from __future__ import annotations

import re

from farm.device._text import as_text, excerpt

# A property: ``[key]: [value]`` where value runs lazily to the first ``]\n``
# that is followed by the next ``[`` or the end of the text.
_PROPERTY = re.compile(r"\[([^\]\n]+)\]: \[(.*?)\]\n(?=\[|\Z)", re.DOTALL)


def parse_getprop(output: str | bytes) -> dict[str, str]:
    """Parse ``getprop`` output into a property map.

    Args:
        output: what ``getprop`` printed (stdout).

    Returns:
        Property name to value, in the order printed. Values keep embedded
        newlines; an empty value (``[]``) is ``""``.

    Raises:
        ValueError: the output is empty or has text that is not a property line.
    """
    text = as_text(output)
    if not text.strip():
        raise ValueError("getprop output is empty")
    if not text.endswith("\n"):
        text += "\n"
    props: dict[str, str] = {}
    position = 0
    for match in _PROPERTY.finditer(text):
        if match.start() != position:
            raise ValueError(f"getprop: cannot read {excerpt(text[position:])!r}")
        props[match.group(1)] = match.group(2)
        position = match.end()
    if position != len(text):
        raise ValueError(f"getprop: cannot read {excerpt(text[position:])!r}")
    return props
