r"""Parse the host's ``adb devices`` and ``adb devices -l``.

Format (``packages/modules/adb`` ``transport.cpp`` ``append_transport()``):
header ``List of devices attached``, then per transport either
``serial\tstate`` or, with ``-l``, the serial padded with ``%-22s``, one space,
the state, then `` usb:<devpath>`` (USB only), `` product:`` `` model:``
`` device:`` (only once the device's banner arrived, so not for
``unauthorized``/``offline``) and `` transport_id:N``; then an empty line.
States come from ``adb.cpp`` ``to_string(ConnectionState)``; the
``no permissions (...)`` state contains spaces. A client that starts the
server first prints ``* daemon not running; starting now at tcp:5037`` and
``* daemon started successfully``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from farm.device._text import as_text, excerpt

_HEADER = "List of devices attached"
_KEY = re.compile(r"^(usb|product|model|device|transport_id|features):(.*)$")


@dataclass(frozen=True)
class DeviceEntry:
    """One transport the adb server knows.

    Attributes:
        serial: e.g. ``0123456789ABCDEF``, ``192.168.1.20:5555``, ``emulator-5554``.
        state: ``device``, ``offline``, ``unauthorized``, ``no permissions (...)``...
        usb: the USB devpath (``1-1.2``), ``""`` for TCP transports or short form.
        product: ``ro.product.name``, ``""`` until the banner arrived.
        model: ``ro.product.model`` with non-alphanumerics as ``_``.
        device: ``ro.product.device``.
        transport_id: the server's transport id, None in the short form.
    """

    serial: str
    state: str
    usb: str = ""
    product: str = ""
    model: str = ""
    device: str = ""
    transport_id: int | None = None


def _long_entry(line: str) -> DeviceEntry:
    tokens = line.split()
    serial, rest = tokens[0], tokens[1:]
    state_tokens: list[str] = []
    keys: dict[str, str] = {}
    for token in rest:
        match = _KEY.match(token)
        if match and state_tokens:
            keys[match.group(1)] = match.group(2)
        elif keys:
            raise ValueError(f"adb devices: cannot read {line!r}")
        else:
            state_tokens.append(token)
    if not state_tokens:
        raise ValueError(f"adb devices: no state in {line!r}")
    transport_id = keys.get("transport_id")
    if transport_id is not None and not transport_id.isdigit():
        raise ValueError(f"adb devices: transport_id {transport_id!r} is not a number")
    return DeviceEntry(
        serial=serial,
        state=" ".join(state_tokens),
        usb=keys.get("usb", ""),
        product=keys.get("product", ""),
        model=keys.get("model", ""),
        device=keys.get("device", ""),
        transport_id=int(transport_id) if transport_id is not None else None,
    )


def parse_devices_l(output: str | bytes) -> list[DeviceEntry]:
    """Parse ``adb devices -l`` (the short ``adb devices`` form is read too).

    Args:
        output: what the host ``adb devices [-l]`` printed.

    Returns:
        The transports in printed order.

    Raises:
        ValueError: the header is missing or a line is unreadable.
    """
    lines = [line for line in as_text(output).split("\n") if line.strip()]
    lines = [line for line in lines if not line.startswith("* ")]  # daemon start notes
    if not lines or lines[0].strip() != _HEADER:
        raise ValueError(
            f"adb devices: no {_HEADER!r} header in {excerpt(lines[0] if lines else '')!r}"
        )
    entries = []
    for line in lines[1:]:
        if "\t" in line:
            serial, _, state = line.partition("\t")
            entries.append(DeviceEntry(serial=serial, state=state.strip()))
        else:
            entries.append(_long_entry(line))
    return entries
