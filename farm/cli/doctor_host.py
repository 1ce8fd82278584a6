"""``farmctl doctor``'s rows, and its checks of the host itself: tools, NDK, ports, database.

:class:`Check` and :class:`Status` are the rows every check returns; the checks
here need neither adb nor a phone. :mod:`farm.cli.doctor` runs them after its
adb, phone and tracker checks, and re-exports every name.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from farm.config import Settings
from farm.errors import FarmError

__all__ = ["BUILD_TOOLS", "Check", "Status", "check_database", "check_ndk", "check_ports",
           "check_tools", "serving_keys"]


BUILD_TOOLS = ("apksigner", "zipalign", "aapt")


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
