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
migration is run.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

import click
from rich.table import Table

from farm.cli.output import _console, echo_json, note
from farm.cli.state import CliState, pass_state
from farm.config import Settings
from farm.errors import FarmError
from farm.tvm.keys import phone_key

__all__ = ["Check", "Status", "doctor", "run_checks"]

ADB_TIMEOUT_S = 5.0
TRACKER_TIMEOUT_S = 3.0
BUILD_TOOLS = ("apksigner", "zipalign", "aapt")

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


class Status(str, Enum):
    """A check's verdict."""

    OK = "ok"
    WARN = "warn"  # works now, but something will bite later
    FAIL = "fail"  # farm cannot do its job until this is fixed


@dataclass(frozen=True)
class Check:
    """One check's result.

    Attributes:
        name: what was checked, e.g. ``adb server`` or ``phone 0123ABCD``.
        status: ok, warn or fail.
        detail: what was found, one line.
        fix: what to do, one line; empty when ok.
    """

    name: str
    status: Status
    detail: str
    fix: str = ""


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


# --- host tools -------------------------------------------------------------------------


def check_tools(env: Mapping[str, str] | None = None) -> list[Check]:
    """apksigner, zipalign and aapt, found as apk_tools finds them."""
    from apk_tools.tools import find_tool

    checks = []
    for tool in BUILD_TOOLS:
        try:
            checks.append(Check(tool, Status.OK, str(find_tool(tool, env=env))))
        except FarmError as exc:
            checks.append(Check(tool, Status.FAIL, "not found",
                                getattr(exc, "install_hint", str(exc))))
    return checks


def check_ndk(abis: Mapping[str, str] | None, env: Mapping[str, str] | None = None) -> Check:
    """Whether libraries can be linked for every known phone's ABI.

    Args:
        abis: ``{serial: abi}`` of the phones farmd knows; None when the database
            could not be read (see the database check), so no phone is known.
        env: the environment (``TVM_NDK_CC``, ``ANDROID_NDK_HOME``); os.environ if None.
    """
    from farm.jobs import params as jp
    from farm.jobs.ndk import linker_for
    from farm.jobs.targets import needs_ndk, target_for

    env = os.environ if env is None else env
    unknown = abis is None
    abis = abis or {}
    needing = {}
    for serial, abi in abis.items():
        try:
            target = target_for(jp.DeviceFacts(abi=abi), jp.DeviceKind.CPU)
        except FarmError:
            continue
        if needs_ndk(dict(target)):
            needing[serial] = target
    configured = env.get("TVM_NDK_CC") or env.get("ANDROID_NDK_HOME") or env.get("ANDROID_NDK_ROOT")
    hint = ("set TVM_NDK_CC to the NDK's <triple><api>-clang++ "
            "(or ANDROID_NDK_HOME to the NDK folder)")
    if unknown:
        known = "phones' ABIs unknown: the database was not read (see the database check)"
        if configured:
            return Check("ndk", Status.OK, f"configured ({configured}); {known}")
        return Check("ndk", Status.WARN, f"not configured; {known}",
                     hint + " if any phone is not of the host's ABI")
    if not needing:
        if configured:
            return Check("ndk", Status.OK, f"configured ({configured}); no phone needs it now")
        return Check("ndk", Status.WARN, "not configured; no known phone needs it yet "
                     "(host-ABI phones link with the host compiler)",
                     hint + " before plugging in ARM phones")
    for serial, target in needing.items():
        try:
            linker = linker_for(target, env)
        except FarmError as exc:
            return Check("ndk", Status.FAIL, f"{serial} ({abis[serial]}) needs the NDK: {exc}",
                         hint)
    return Check("ndk", Status.OK, f"{linker.cc_path} links for {len(needing)} phone(s)")


# --- ports and database ------------------------------------------------------------------


def _port_in_use(host: str, port: int) -> bool:
    """Whether binding ``host:port`` fails because something holds it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # ignore TIME_WAIT
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def check_ports(settings: Settings, farmd_running: bool) -> list[Check]:
    """The tracker and metrics ports: held while farmd runs, free for it otherwise."""
    wanted = []
    if not settings.tracker.external:
        wanted.append(("tracker port", settings.tracker.host, settings.tracker.port,
                       "tracker.port"))
    if settings.metrics.enabled:
        wanted.append(("metrics port", settings.metrics.host, settings.metrics.port,
                       "metrics.port"))
    checks = []
    for name, host, port, key in wanted:
        used = _port_in_use(host, port)
        where = f"{host}:{port}"
        if farmd_running and not used:
            checks.append(Check(name, Status.FAIL, f"{where} free although farmd runs",
                                "farmd lost this service: see its log (journalctl -u farmd)"))
        elif not farmd_running and used:
            checks.append(Check(name, Status.FAIL, f"{where} is held by another program",
                                f"stop that program or set {key} to a free port"))
        else:
            checks.append(Check(name, Status.OK,
                                f"{where} {'in use by farmd' if used else 'free'}"))
    return checks


def _database_exists(url: str) -> bool:
    if not url.startswith("sqlite"):
        return True
    path = url.split(":///", 1)[-1]
    return path in ("", ":memory:") or Path(path).is_file()


def check_database(settings: Settings) -> tuple[Check, dict[str, str] | None]:
    """The database opens and its schema is at the newest migration; the phones' ABIs.

    (:func:`serving_keys` reads the keys phones should serve from the same database.)

    Nothing is created or migrated: the revision is read (:func:`farm.queue.db.revisions`)
    and the ``devices`` table is queried only when the schema is at the newest revision.

    Returns:
        The check, and ``{serial: abi}`` from the facts farmd stored: empty when
        there is no database yet, None when it could not be read at the newest schema.
    """
    import sqlalchemy as sa

    from farm.queue import db
    from farm.queue.models import Device

    url = settings.database_url
    shown = sa.engine.make_url(url).render_as_string(hide_password=True)
    if not _database_exists(url):
        return Check("database", Status.WARN, f"{shown} does not exist yet",
                     "start farmd or run any farmctl command: opening creates and migrates it"), {}
    try:
        engine = db.create_engine(url)
        try:
            with engine.connect() as connection:
                current, head = db.revisions(connection)
                if current != head:
                    found = f"at revision {current}" if current else "never migrated"
                    return Check(
                        "database", Status.WARN, f"{shown} {found}, newest revision is {head}",
                        "start farmd or run any farmctl command: opening migrates it"
                        if settings.database.auto_migrate else "run 'farmctl db upgrade'"), None
                rows = connection.execute(sa.select(Device.serial, Device.facts)).all()
        finally:
            engine.dispose()
    except (sa.exc.SQLAlchemyError, FarmError) as exc:
        return Check("database", Status.FAIL, f"{shown} does not open: {exc}",
                     "check database_url, the file's permissions and free disk space"), None
    abis = {}
    for serial, stored in rows:
        facts = stored or {}
        abi = facts.get("abi") or next(iter(facts.get("abis") or []), None)
        if abi and facts.get("host_runtime") is not True:  # host code needs no NDK
            abis[serial] = str(abi)
    return Check("database", Status.OK, f"{shown}, schema at {head}"), abis


def serving_keys(settings: Settings) -> dict[str, str]:
    """``{serial: key}`` for devices whose hold asks them to serve a key not their own.

    A tuning attempt asks its devices to serve ``<key>-job-<id>`` while it tunes
    (``devices.serve_key``, :mod:`farm.fleet.serving`); doctor judged such a
    phone against its own key and failed a normal tune (issue 25). Empty when
    the database cannot be read (:func:`check_database` says why).
    """
    import sqlalchemy as sa

    from farm.queue import db
    from farm.queue.models import Device

    if not _database_exists(settings.database_url):
        return {}
    query = sa.select(Device.serial, Device.serve_key).where(Device.serve_key.is_not(None))
    try:
        engine = db.create_engine(settings.database_url)
        try:
            with engine.connect() as connection:
                rows = connection.execute(query).all()
        finally:
            engine.dispose()
    except (sa.exc.SQLAlchemyError, FarmError):
        return {}
    return {serial: key for serial, key in rows if key is not None}


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
