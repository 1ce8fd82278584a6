"""Point the stock TVM RPC app at the tracker and start it.

The stock app (apache/tvm ``apps/android_rpc``, ``MainActivity.java``) has no
exported activity that takes the tracker address: ``RPCActivity`` is not
exported, and ``MainActivity`` reads SharedPreferences ``RPCProxyPreference``
(``input_address``, ``input_port``, ``input_key`` as strings, ``input_switch``
as a boolean) in ``onResume`` and, with the switch on, starts the RPC activity
``HANDLER_RESTART_DELAY`` = 5000 ms later. So farm either writes that prefs
file as the app's user (``run-as`` works on debuggable builds; ``su`` on rooted
phones) or types into the app's fields through ``uiautomator dump`` and
``input``, exactly as a person would.

The file content never passes through a shell string: it is pushed, then
copied by the app's user.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import structlog

from farm.adb import Adb
from farm.device.uiautomator import UiNode, center, parse_dump_path, parse_ui_dump
from farm.errors import AdbError

log = structlog.get_logger(__name__)

PACKAGE = "org.apache.tvm.tvmrpc"
#: The app's RPC process name (apache/tvm apps/android_rpc AndroidManifest.xml,
#: ``android:process=":RPCProcess"`` on RPCActivity).
RPC_PROCESS = f"{PACKAGE}:RPCProcess"
MAIN_ACTIVITY = f"{PACKAGE}/.MainActivity"
PREFS_RELATIVE = "shared_prefs/RPCProxyPreference.xml"
STAGING_PREFS = "/data/local/tmp/farm-rpc-prefs.xml"
UI_DUMP_PATH = "/sdcard/window_dump.xml"
# Resource ids in apps/android_rpc res/layout/content_main.xml.
FIELD_IDS = {
    "address": f"{PACKAGE}:id/input_address",
    "port": f"{PACKAGE}:id/input_port",
    "key": f"{PACKAGE}:id/input_key",
}
SWITCH_ID = f"{PACKAGE}:id/switch_persistent"


class Method(str, Enum):
    """How the tracker address reaches the app."""

    RUN_AS = "run-as"  # debuggable build: write the prefs as the app's user
    ROOT = "root"  # rooted phone: write the prefs with su
    UI = "ui"  # anything else: type into MainActivity's fields


@dataclass(frozen=True)
class AppTarget:
    """Where the app registers: the tracker address *as the phone reaches it*, and the key."""

    address: str
    port: int
    key: str


def prefs_xml(target: AppTarget) -> str:
    """The SharedPreferences file the stock app reads (Android's XmlUtils format)."""
    def string(name: str, value: str) -> str:
        return f"    <string name={quoteattr(name)}>{escape(value)}</string>\n"

    return (
        "<?xml version='1.0' encoding='utf-8' standalone='yes' ?>\n<map>\n"
        + string("input_address", target.address)
        + string("input_port", str(target.port))
        + string("input_key", target.key)
        + '    <boolean name="input_switch" value="true" />\n</map>\n'
    )


def launch_app(adb: Adb, serial: str, target: AppTarget, method: Method) -> None:
    """Stop the app, configure it for ``target`` and start MainActivity.

    Registration at the tracker follows about 5 s later; the caller verifies it.

    Raises:
        AdbError: a step failed on the phone (the message names it).
        PhoneFault: adb failed.
    """
    log.info("app_launching", serial=serial, method=method.value, tracker_key=target.key,
             address=target.address, port=target.port)
    stop_app(adb, serial)
    if method is Method.UI:
        _configure_through_ui(adb, serial, target)
        return
    _write_prefs(adb, serial, target, method)
    _start_main(adb, serial)


def stop_app(adb: Adb, serial: str) -> None:
    """``am force-stop`` the app (kills its RPC process too)."""
    adb.shell(serial, ["am", "force-stop", PACKAGE], timeout_s=15, check=True)


def _start_main(adb: Adb, serial: str) -> None:
    """Start MainActivity and return once it is shown.

    ``am start -W`` waits for the launch; with ``-W`` its errors are printed on
    stdout.
    """
    argv = ["am", "start", "-W", "-n", MAIN_ACTIVITY]
    result = adb.shell(serial, argv, timeout_s=20)
    if result.exit_code != 0 or "Error" in result.out or "Error" in result.err:
        raise AdbError(serial, argv, result.exit_code, (result.err or result.out).strip())


def _write_prefs(adb: Adb, serial: str, target: AppTarget, method: Method) -> None:
    with tempfile.TemporaryDirectory(prefix="farm-prefs-") as tmp:
        local = Path(tmp) / "RPCProxyPreference.xml"
        local.write_text(prefs_xml(target))
        adb.push(serial, local, STAGING_PREFS, timeout_s=30)
    try:
        if method is Method.RUN_AS:
            prefix = ["run-as", PACKAGE]
            dest = PREFS_RELATIVE
            adb.shell(serial, [*prefix, "mkdir", "-p", "shared_prefs"], timeout_s=15, check=True)
        else:
            prefix = ["su", "0"]
            dest = f"/data/data/{PACKAGE}/{PREFS_RELATIVE}"
            adb.shell(serial, [*prefix, "mkdir", "-p", dest.rsplit("/", 1)[0]], timeout_s=15,
                      check=True)
        adb.shell(serial, [*prefix, "cp", STAGING_PREFS, dest], timeout_s=15, check=True)
    finally:
        adb.shell(serial, ["rm", "-f", STAGING_PREFS], timeout_s=15)


def _dump_ui(adb: Adb, serial: str) -> list[UiNode]:
    """The nodes on screen now.

    ``uiautomator dump`` exits 0 even when it wrote nothing (``null root
    node``), so the file is read only at the path it says it wrote: an older
    dump left at ``UI_DUMP_PATH`` is never read.

    Raises:
        AdbError: the dump failed or is unreadable (the phone's message).
        PhoneFault: adb failed.
    """
    argv = ["uiautomator", "dump", UI_DUMP_PATH]
    result = adb.shell(serial, argv, timeout_s=30, check=True)
    try:
        path = parse_dump_path(result.stdout, result.stderr)
    except ValueError as exc:
        raise AdbError(serial, argv, result.exit_code, str(exc)) from exc
    xml = adb.shell(serial, ["cat", path], timeout_s=15, check=True).out
    try:
        return parse_ui_dump(xml)
    except ValueError as exc:
        raise AdbError(serial, ["cat", path], 0, str(exc)) from exc


def _node(nodes: list[UiNode], resource_id: str, serial: str) -> UiNode:
    for node in nodes:
        if node.resource_id == resource_id:
            return node
    raise AdbError(serial, ["uiautomator", "dump"], None,
                   f"{resource_id} is not on screen; is MainActivity in front?")


def _tap(adb: Adb, serial: str, node: UiNode) -> None:
    x, y = center(node.bounds)
    adb.shell(serial, ["input", "tap", str(x), str(y)], timeout_s=15, check=True)


def _configure_through_ui(adb: Adb, serial: str, target: AppTarget) -> None:
    _start_main(adb, serial)
    nodes = _dump_ui(adb, serial)
    # MainActivity's relaunch timer reads the fields 5 s after resume while the
    # switch is on: turn it off before typing, on again after.
    if _node(nodes, SWITCH_ID, serial).checked:
        _tap(adb, serial, _node(nodes, SWITCH_ID, serial))
    values = {"address": target.address, "port": str(target.port), "key": target.key}
    for field, resource_id in FIELD_IDS.items():
        node = _node(nodes, resource_id, serial)
        _tap(adb, serial, node)
        deletes = ["KEYCODE_DEL"] * (len(node.text) + 1)
        adb.shell(serial, ["input", "keyevent", "KEYCODE_MOVE_END", *deletes], timeout_s=30,
                  check=True)
        # `input text` reads %s as a space (AOSP cmds/input Input.java).
        adb.shell(serial, ["input", "text", values[field].replace(" ", "%s")], timeout_s=30,
                  check=True)
    nodes = _dump_ui(adb, serial)
    for field, resource_id in FIELD_IDS.items():
        shown = _node(nodes, resource_id, serial).text
        if shown != values[field]:
            raise AdbError(serial, ["input", "text"], None,
                           f"the {field} field reads {shown!r}, expected {values[field]!r}")
    _tap(adb, serial, _node(nodes, SWITCH_ID, serial))
