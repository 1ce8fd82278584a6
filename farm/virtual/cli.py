"""``farm-phones``: run a fleet of virtual phones, and inject faults into it.

``farm-phones serve`` runs in the foreground, prints one JSON line per phone
once it is attached to the adb server, and on SIGINT/SIGTERM detaches every
phone and ends every process the phones started, then exits 0.

``farm-phones fault SERIAL KIND`` reaches the running ``serve`` (or the phones
of ``farmd --virtual-phones``) over a small control channel: a JSON-lines TCP
listener on 127.0.0.1 whose port ``serve`` (farmd) writes to
``<data-dir>/control.json``. One request line
``{"serial": ..., "fault": ..., "to_c": ..., "to_pct": ..., "factor": ..., "on": ...}``
gets one reply line ``{"ok": true}`` or ``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from farm import logs
from farm.adb.server import DEFAULT_ADB_PORT
from farm.config import load_config
from farm.errors import FarmError
from farm.virtual.fleet import Fleet, FleetError

DEFAULT_DATA_DIR = Path.home() / ".local" / "state" / "farm" / "phones"
CONTROL_FILE = "control.json"
FAULT_TIMEOUT_S = 60.0

def _needs(request: dict[str, Any], key: str, flag: str, fault: str) -> float:
    if request.get(key) is None:
        raise ValueError(f"{fault} needs {flag}")
    return float(request[key])


#: Every fault ``farm-phones fault`` knows: name -> how it is applied to
#: ``(fleet, serial, request)``; blocking, called off the fleet's loop.
FAULT_ACTIONS: dict[str, Callable[[Fleet, str, dict[str, Any]], None]] = {
    "crash-app": lambda fleet, serial, _r: fleet.crash_app(serial),
    "unplug": lambda fleet, serial, _r: fleet.unplug(serial),
    "replug": lambda fleet, serial, _r: fleet.replug(serial),
    "hang-shell": lambda fleet, serial, r: fleet.hang_shell(serial, bool(r.get("on", True))),
    "heat": lambda fleet, serial, r: fleet.heat(serial, _needs(r, "to_c", "--to-c", "heat")),
    "drain": lambda fleet, serial, r: fleet.drain_battery(
        serial, _needs(r, "to_pct", "--to-pct", "drain")),
    "fill-storage": lambda fleet, serial, _r: fleet.fill_storage(serial),
    "unauthorized": lambda fleet, serial, r: fleet.set_unauthorized(
        serial, bool(r.get("on", True))),
    "reboot": lambda fleet, serial, _r: fleet.reboot(serial),
    "throttle": lambda fleet, serial, r: fleet.throttle(
        serial, _needs(r, "factor", "--factor", "throttle")),
}
FAULTS = tuple(FAULT_ACTIONS)


def apply_fault(fleet: Fleet, request: dict[str, Any]) -> None:
    """Apply one control request to ``fleet`` (blocking; call off the fleet's loop).

    Raises:
        ValueError: unknown serial or fault, a missing argument, or a bad value.
    """
    serial = str(request.get("serial", ""))
    fault = request.get("fault")
    if serial not in fleet.serials:
        raise ValueError(f"no phone {serial!r} in this fleet; its phones: "
                         f"{', '.join(fleet.serials) or 'none'}")
    action = FAULT_ACTIONS.get(str(fault))
    if action is None:
        raise ValueError(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")
    action(fleet, serial, request)


async def _serve_control(fleet: Fleet) -> asyncio.Server:
    loop = asyncio.get_running_loop()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                request = json.loads(line)
                await loop.run_in_executor(None, apply_fault, fleet, request)
                reply: dict[str, Any] = {"ok": True}
            except ValueError as exc:  # the caller's words were wrong: say so plainly
                reply = {"ok": False, "error": str(exc)}
            except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def start_control(fleet: Fleet, data_dir: Path) -> Callable[[], None]:
    """Serve ``farm-phones fault`` for a started ``fleet``; returns what stops it.

    Writes ``<data_dir>/control.json`` (the listener's port and this process's
    pid), as ``serve`` does; ``farmd --virtual-phones`` calls it for its own
    phones, so the fault recipes work on the fleet a newcomer starts first.
    """
    control = fleet.run(lambda: _serve_control(fleet))
    control_file = data_dir / CONTROL_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    control_file.write_text(json.dumps({"port": control.sockets[0].getsockname()[1],
                                        "pid": os.getpid()}))

    def stop() -> None:
        with contextlib.suppress(FileNotFoundError):
            control_file.unlink()
        # The server belongs to the fleet's loop: close it there, not from this thread.
        with contextlib.suppress(FleetError, TimeoutError):
            fleet.call(control.close)

    return stop


def _served(control_file: Path) -> bool:
    """Whether ``control_file`` exists and its process is alive (not left by a killed one)."""
    try:
        os.kill(int(json.loads(control_file.read_text())["pid"]), 0)
    except (OSError, ValueError, KeyError):
        return False
    return True


def control_dirs(data_dir: Path | None) -> list[Path]:
    """Where ``farm-phones fault`` looks for ``control.json``, in order.

    ``--data-dir`` if given; else ``serve``'s default folder, then the phones
    folder of the farmd that farm's config names (``<data_dir>/phones``,
    where ``farmd --virtual-phones`` keeps its phones).
    """
    if data_dir is not None:
        return [data_dir]
    found = [DEFAULT_DATA_DIR]
    with contextlib.suppress(FarmError):
        found.append(Path(load_config().data_dir).expanduser() / "phones")
    return found


@click.group()
def main() -> None:
    """Virtual Android phones that the real adb server accepts as devices."""


@main.command()
@click.option("--count", type=click.IntRange(1, 256), default=4, show_default=True,
              help="Number of phones.")
@click.option("--base-port", type=click.IntRange(1, 65535), default=None,
              help="First adbd port (default: free ports).")
@click.option("--network", type=click.Choice(["lan", "usb-only"]), default=None,
              help="How phones reach the host [default: virtual.network of farm's config, "
                   "which follows tracker.network].")
@click.option("--adb-port", type=click.IntRange(1, 65535), default=DEFAULT_ADB_PORT,
              show_default=True, help="The adb server's port.")
@click.option("--data-dir", type=click.Path(path_type=Path), default=DEFAULT_DATA_DIR,
              show_default=True, help="Phones' storage and the control file.")
@click.option("--same-model", is_flag=True,
              help="Every phone of one model (tuning over several phones needs phones of one "
                   "model; by default the phones cycle through four models).")
def serve(
    count: int, base_port: int | None, network: str | None, adb_port: int, data_dir: Path,
    same_model: bool,
) -> None:
    """Run COUNT phones in the foreground until SIGINT or SIGTERM."""
    if network is None:
        try:
            network = load_config().virtual.network
        except FarmError as exc:
            raise click.ClickException(str(exc)) from None
    # stdout carries only the phones' JSON lines; events go to stderr.
    logs.configure(stream=sys.stderr)
    data_dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    fleet = Fleet(count, network=network, adb_port=adb_port, data_dir=data_dir,  # type: ignore[arg-type]
                  base_port=base_port, same_model=same_model)
    stop_control: Callable[[], None] | None = None
    try:
        fleet.start()
        stop_control = start_control(fleet, data_dir)
        for phone in fleet.phones:
            spec = phone.spec
            line = {"serial": phone.serial, "model": spec.model, "network": spec.network}
            click.echo(json.dumps(line))
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    finally:
        if stop_control is not None:
            stop_control()
        fleet.stop()


@main.command()
@click.argument("serial")
@click.argument("kind", type=click.Choice(FAULTS))
@click.option("--to-c", type=float, default=None, help="heat: target temperature, °C.")
@click.option("--to-pct", type=float, default=None, help="drain: target battery level, %.")
@click.option("--factor", type=click.FloatRange(0.0, 1.0, min_open=True), default=None,
              help="throttle: fraction of its speed the phone runs at; 1 removes the throttle.")
@click.option("--off", is_flag=True, help="hang-shell/unauthorized: clear the fault instead.")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help=f"The phones' folder [default: {DEFAULT_DATA_DIR} (farm-phones serve's), "
                   "then <data_dir>/phones of farm's config (farmd --virtual-phones)].")
def fault(
    serial: str,
    kind: str,
    to_c: float | None,
    to_pct: float | None,
    factor: float | None,
    off: bool,
    data_dir: Path | None,
) -> None:
    """Inject fault KIND into phone SERIAL (of `farm-phones serve` or `farmd --virtual-phones`)."""
    if not serial.strip():
        raise click.BadParameter("is empty; give a phone's serial (farm-phones serve lists them)",
                                 param_hint="'SERIAL'")
    tried = [folder / CONTROL_FILE for folder in control_dirs(data_dir)]
    control_file = next((path for path in tried if _served(path)), tried[0])
    try:
        port = int(json.loads(control_file.read_text())["port"])
    except (OSError, ValueError, KeyError) as exc:
        raise click.ClickException(
            "no running farm-phones serve or farmd --virtual-phones "
            f"({', '.join(str(p) for p in tried)}: {exc})") from exc
    request = {
        "serial": serial, "fault": kind, "to_c": to_c, "to_pct": to_pct, "factor": factor,
        "on": not off,
    }
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=FAULT_TIMEOUT_S) as sock:
            sock.sendall(json.dumps(request).encode() + b"\n")
            reply = json.loads(sock.makefile("rb").readline() or b"{}")
    except (OSError, ValueError) as exc:
        raise click.ClickException(
            f"farm-phones serve on port {port} did not answer: {exc}"
        ) from exc
    if not reply.get("ok"):
        raise click.ClickException(str(reply.get("error", "no reply")))
    click.echo(f"{kind} {serial}: ok")
