"""``farmctl doctor``: what is wrong with this host's farm, and what to do about it.

Each check is a pure-ish function from settings (and what it can observe) to
:class:`Check` rows: ``ok``, ``warn`` or ``fail``, a one-line detail and, when
not ok, a one-line ``fix``. The command exits 1 when any check failed, so it
can gate a deployment script; ``--json`` prints the rows for programs.

Checks, in order::

    adb server       answers on adb.port; its protocol version
    phones           each transport's state: ``unauthorized`` -> accept the RSA
                     prompt; ``offline`` / ``no permissions`` -> cable, udev
    tracker          answers at tracker.host:port (from this host, as farmd does)
    registration     each attached phone's key is listed by the tracker: the
                     evidence that the phone reaches it
    tools            apksigner, zipalign, aapt (apk_tools.tools.find_tool)
    ndk              TVM_NDK_CC / ANDROID_NDK_HOME; only a warning when no
                     known phone needs it (every known ABI links for the host),
                     or when the database's schema is old so no phone is known
    ports            tracker and metrics ports: held while farmd runs, free otherwise
    database         opens, and its schema is at the newest migration

Nothing here changes the host: no server is started, no file is created, no
migration is run. The rows and the checks that need no adb (tools, ndk, ports,
database) are :mod:`farm.cli.doctor_host`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict

import click
from rich.table import Table

from farm.cli.doctor_host import (
    BUILD_TOOLS,
    Check,
    Status,
    check_database,
    check_ndk,
    check_ports,
    check_tools,
    serving_keys,
)
from farm.cli.output import _console, echo_json, note
from farm.cli.state import CliState, pass_state
from farm.config import Settings
from farm.errors import FarmError
from farm.tvm.keys import phone_key

__all__ = ["BUILD_TOOLS", "Check", "Status", "check_database", "check_ndk", "check_ports",
           "check_tools", "doctor", "run_checks", "serving_keys"]

ADB_TIMEOUT_S = 5.0
TRACKER_TIMEOUT_S = 3.0

#: What to do for each adb transport state (AOSP adb ``ConnectionState`` names,
#: as ``adb devices`` prints them: ``transport.cpp`` ``to_string``).
STATE_FIXES = {
    "unauthorized": "accept the RSA prompt on the phone (tick 'Always allow from this computer')",
    "authorizing": "unlock the phone and accept the RSA prompt",
    "offline": "replug the cable or run 'adb reconnect'; check the hub's power",
    "no permissions": "add a udev rule for the phone's USB vendor id (plugdev group), then replug",
    "bootloader": "reboot the phone into Android",
    "recovery": "reboot the phone into Android",
    "sideload": "reboot the phone into Android",
}


# --- adb ----------------------------------------------------------------------------


def check_adb(settings: Settings) -> tuple[list[Check], dict[str, str]]:
    """The adb server and each phone's authorization.

    Returns:
        The checks, and ``{serial: adb state}`` of the attached transports.
    """
    from farm.controllers.adb_host import AdbHost

    server = AdbHost.from_settings(settings, default_timeout_s=ADB_TIMEOUT_S)
    if not server.alive():
        return [Check("adb server", Status.FAIL, f"nothing answers on 127.0.0.1:{server.port}",
                      "start farmd (it runs the host's one adb server), or "
                      f"'adb -P {server.port} start-server'")], {}
    try:
        version = server.version()
        states = server.transports()
    except (FarmError, ValueError) as exc:
        return [Check("adb server", Status.FAIL, f"port {server.port} answers but: {exc}",
                      f"kill whatever holds port {server.port} and restart farmd")], {}
    checks = [Check("adb server", Status.OK,
                    f"127.0.0.1:{server.port}, protocol version {version}")]
    if not states:
        checks.append(Check("phones", Status.WARN, "no phone attached",
                            "plug a phone in with USB debugging on (Developer options)"))
    for serial, state in states.items():
        if state == "device":
            checks.append(Check(f"phone {serial}", Status.OK, "device (authorized)"))
            continue
        fix = next((f for prefix, f in STATE_FIXES.items() if state.startswith(prefix)),
                   "check the cable and 'adb devices -l'")
        checks.append(Check(f"phone {serial}", Status.FAIL, state, fix))
    return checks, states


# --- tracker -------------------------------------------------------------------------


def check_tracker(settings: Settings, states: Mapping[str, str],
                  wanted: Mapping[str, str] | None = None) -> list[Check]:
    """The tracker answers from this host, and each attached phone is registered at it.

    Args:
        settings: farm's settings.
        states: ``{serial: adb state}`` of the attached transports.
        wanted: ``{serial: key}`` a phone should serve now when that is not its
            own key (a tuning job's phones serve the job's key while it runs,
            :func:`farm.tvm.keys.job_key`); from :func:`check_database`.
    """
    from farm.tvm.tracker import summary

    host, port = settings.tracker.host, settings.tracker.port
    try:
        listed = summary(host, port, timeout_s=TRACKER_TIMEOUT_S)
    except FarmError as exc:
        owner = "the external tracker's owner" if settings.tracker.external else "farmd"
        return [Check("tracker", Status.FAIL, str(exc),
                      f"start {owner}: farmd starts and supervises the tracker "
                      "(or set tracker.external and its host:port)")]
    keys = {s.key for s in listed.servers}
    checks = [Check("tracker", Status.OK,
                    f"{host}:{port} answers, {len(keys)} server(s) registered")]
    for serial, state in states.items():
        if state != "device":
            continue
        key = (wanted or {}).get(serial) or phone_key(settings.tracker.key, serial)
        why = "" if key == phone_key(settings.tracker.key, serial) else " (its job's key)"
        if key in keys:
            checks.append(Check(f"registered {serial}", Status.OK, f"as {key}{why}"))
        else:
            checks.append(Check(f"registered {serial}", Status.FAIL,
                                f"no server under key {key}{why}", _registration_fix(settings)))
    return checks


def _registration_fix(settings: Settings) -> str:
    """What to do about a phone missing at the tracker, for this fleet's network mode."""
    if settings.tracker.network == "usb-only":
        return ("see 'farmctl devices' and 'farmctl logs' for the phone: farmd relaunches its app "
                "and re-creates its adb reverse tunnel and relay; if it stays unregistered, "
                "check that the app is running on the phone and 'adb reverse --list'")
    return ("see 'farmctl devices' for its state; if the phone cannot reach the tracker "
            f"port {settings.tracker.port} over the network, use tracker.network = \"usb-only\"")


# --- all together ------------------------------------------------------------------------------


def run_checks(settings: Settings, *, farmd_running: bool,
               env: Mapping[str, str] | None = None) -> list[Check]:
    """Every check, in the order of the module doc."""
    checks, states = check_adb(settings)
    checks += check_tracker(settings, states, serving_keys(settings))
    checks += check_tools(env)
    database, abis = check_database(settings)
    checks.append(check_ndk(abis, env))
    checks += check_ports(settings, farmd_running)
    checks.append(database)
    return checks


_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red"}


def _print(checks: list[Check]) -> None:
    console = _console()
    table = Table(title="farm doctor", title_justify="left")
    for header in ("check", "status", "found", "what to do"):
        table.add_column(header)
    for check in checks:
        status = f"[{_STYLE[check.status]}]{check.status.value.upper()}[/]"
        table.add_row(check.name, status, check.detail, check.fix)
    console.print(table)
    failed = sum(c.status is Status.FAIL for c in checks)
    console.print(f"{failed} check(s) failed" if failed else "all checks passed")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@pass_state
def doctor(state: CliState, as_json: bool) -> None:
    """Check this host's adb, phones, tracker, tools, NDK, ports and database; say what to fix.

    It checks the machine it runs on, with its config: under ``--server`` it
    says so first (on stderr), since the farm server is not what it checks.
    """
    if state.server is not None:
        note(f"note: doctor checks this host and its config, not the farm server "
             f"{state.server} (--server or FARM_SERVER); run it on the farm host to check that")
    checks = run_checks(state.settings, farmd_running=state.farmd().running)
    if as_json:
        echo_json([asdict(c) for c in checks])
    else:
        _print(checks)
    if any(c.status is Status.FAIL for c in checks):
        raise click.exceptions.Exit(1)
