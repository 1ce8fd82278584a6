"""Parse ``uiautomator dump``: its stdout and the XML it writes.

``uiautomator dump [path]`` writes the window hierarchy to a file (default
``/sdcard/window_dump.xml``) and then prints ``UI hierchary dumped to: <path>``
(the typo is AOSP's, ``cmds/uiautomator/.../DumpCommand.java``); with no active
window it prints ``ERROR: null root node returned by UiTestAutomationBridge.``
on stderr and writes nothing. The XML is ``<hierarchy rotation="N">`` with
nested ``<node index text resource-id class package content-desc checkable
checked clickable enabled focusable focused scrollable long-clickable password
selected bounds="[l,t][r,b]">``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from xml.etree import ElementTree

from farm.device._text import as_text, excerpt

_BOUNDS = re.compile(r"^\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]$")
_DUMPED = re.compile(r"dumped to: (\S+)")


@dataclass(frozen=True)
class Bounds:
    """A node's rectangle on screen in pixels: left/top inclusive, right/bottom exclusive."""

    left: int
    top: int
    right: int
    bottom: int


@dataclass(frozen=True)
class UiNode:
    """One ``<node>`` of the hierarchy (attributes as the dump prints them)."""

    resource_id: str
    text: str
    class_name: str
    package: str
    content_desc: str
    bounds: Bounds
    checked: bool
    clickable: bool
    enabled: bool
    focused: bool


def parse_dump_path(stdout: str | bytes, stderr: str | bytes = "") -> str:
    """Return the path ``uiautomator dump`` wrote to.

    Args:
        stdout: what the command printed on stdout.
        stderr: what it printed on stderr.

    Returns:
        The absolute path of the XML file on the phone.

    Raises:
        ValueError: no dump was written (e.g. ``null root node``), with the
            phone's message.
    """
    match = _DUMPED.search(as_text(stdout))
    if match is None:
        message = as_text(stderr).strip() or as_text(stdout).strip() or "no output"
        raise ValueError(f"uiautomator dump failed: {excerpt(message, 200)}")
    return match.group(1)


def _bool(value: str | None) -> bool:
    return value == "true"


def _bounds(value: str) -> Bounds:
    match = _BOUNDS.match(value)
    if match is None:
        raise ValueError(f"uiautomator dump: cannot read bounds {value!r}")
    return Bounds(*(int(g) for g in match.groups()))


def parse_ui_dump(xml: str | bytes) -> list[UiNode]:
    """Parse the XML written by ``uiautomator dump``.

    The XML comes from the phone farm controls, so the stdlib parser is used;
    it does not resolve external entities.

    Args:
        xml: the file's content.

    Returns:
        Every node, in document order (depth first).

    Raises:
        ValueError: the XML is malformed, the root is not ``<hierarchy>`` or a
            node has unreadable bounds.
    """
    data = xml.encode("utf-8") if isinstance(xml, str) else xml
    try:
        root = ElementTree.fromstring(data)  # noqa: S314 - the phone's own uiautomator dump
    except ElementTree.ParseError as exc:
        raise ValueError(f"uiautomator dump: malformed XML: {exc}") from None
    if root.tag != "hierarchy":
        raise ValueError(f"uiautomator dump: root is <{root.tag}>, not <hierarchy>")
    return [
        UiNode(
            resource_id=node.get("resource-id", ""),
            text=node.get("text", ""),
            class_name=node.get("class", ""),
            package=node.get("package", ""),
            content_desc=node.get("content-desc", ""),
            bounds=_bounds(node.get("bounds", "")),
            checked=_bool(node.get("checked")),
            clickable=_bool(node.get("clickable")),
            enabled=_bool(node.get("enabled")),
            focused=_bool(node.get("focused")),
        )
        for node in root.iter("node")
    ]


def center(bounds: Bounds) -> tuple[int, int]:
    """Return the pixel ``(x, y)`` at the middle of ``bounds``, for ``input tap``."""
    return ((bounds.left + bounds.right) // 2, (bounds.top + bounds.bottom) // 2)
