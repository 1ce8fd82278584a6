"""SharedPreferences files as Android writes them.

Format of AOSP ``XmlUtils.writeMapXml`` through ``FastXmlSerializer`` (what
``SharedPreferencesImpl.writeToFile`` produces): single-quoted XML declaration
with ``standalone='yes'``, a ``<map>`` root, 4-space indent, strings as
elements with escaped text, booleans and ints as ``value`` attributes closed by
`` />``.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr


def render_prefs(values: dict[str, object]) -> str:
    """The XML text of a SharedPreferences map."""
    lines = ["<?xml version='1.0' encoding='utf-8' standalone='yes' ?>", "<map>"]
    for name, value in values.items():
        attr = quoteattr(name)
        if isinstance(value, bool):
            lines.append(f"    <boolean name={attr} value=\"{'true' if value else 'false'}\" />")
        elif isinstance(value, int):
            lines.append(f'    <int name={attr} value="{value}" />')
        else:
            lines.append(f"    <string name={attr}>{escape(str(value))}</string>")
    lines.append("</map>")
    return "\n".join(lines) + "\n"
