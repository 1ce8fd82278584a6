"""The TVM RPC app's SharedPreferences ``RPCProxyPreference`` and MainActivity's fields.

From apache/tvm ``apps/android_rpc`` ``MainActivity.java``: ``enableInputView``
fills the EditTexts and the switch from the preferences, ``updateRPCPrefs``
writes them back (parsing the port with ``Integer.parseInt``). Android's
``SharedPreferencesImpl`` reads the XML file once per process and caches it, so
edits to the file take effect at the next process start (:meth:`AppPrefs.forget`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from farm.virtual.android.prefs_xml import render_prefs

__all__ = ["AppPrefs", "Fields"]


@dataclass
class Fields:
    """MainActivity's inputs (EditText contents and the switch)."""

    address: str = ""
    port: str = ""
    key: str = ""
    switch: bool = False


class AppPrefs:
    """One app process's view of its preferences file.

    Args:
        path: the host path of ``shared_prefs/RPCProxyPreference.xml`` (the
            app's folder moves with the phone's storage, so it is asked each time).
    """

    def __init__(self, path: Callable[[], Path]) -> None:
        self._path = path
        self._cache: dict[str, object] | None = None

    def read_file(self) -> dict[str, object]:
        """Parse the XML as Android's ``XmlUtils.readMapXml`` would (missing = empty)."""
        path = self._path()
        if not path.exists():
            return {}
        try:
            root = ET.fromstring(path.read_bytes())  # noqa: S314 - the app's own prefs file
        except ET.ParseError:
            return {}
        values: dict[str, object] = {}
        for node in root:
            name = node.get("name", "")
            if node.tag == "string":
                values[name] = node.text or ""
            elif node.tag == "boolean":
                values[name] = node.get("value") == "true"
            elif node.tag in ("int", "long"):
                values[name] = int(node.get("value", "0"))
        return values

    def _cached(self) -> dict[str, object]:
        if self._cache is None:
            self._cache = self.read_file()
        return self._cache

    def forget(self) -> None:
        """The process ended (or started): the next read is from the file."""
        self._cache = None

    def load_into(self, fields: Fields) -> None:
        """``enableInputView``: the fields from the preferences (a missing text is kept)."""
        prefs = self._cached()
        if "input_address" in prefs:
            fields.address = str(prefs["input_address"])
        if "input_port" in prefs:
            fields.port = str(prefs["input_port"])
        if "input_key" in prefs:
            fields.key = str(prefs["input_key"])
        fields.switch = bool(prefs.get("input_switch", False))

    def commit(self, fields: Fields) -> None:
        """``updateRPCPrefs``: write the fields to the cache and the XML file.

        Raises:
            ValueError: the port field is not an integer (``Integer.parseInt``).
        """
        port_text = fields.port
        int(port_text)
        prefs = self._cached()
        prefs.update(
            input_address=fields.address,
            input_port=port_text,
            input_key=fields.key,
            input_switch=fields.switch,
        )
        path = self._path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_prefs(prefs))
