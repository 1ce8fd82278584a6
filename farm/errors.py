"""The one exception tree of farm.

Every error a user or a phone can cause is a :class:`FarmError`; a traceback of
anything else is a bug. Each class says how the queue treats it (``retry``) and
which exit code ``farmctl`` uses for it (``exit_code``), as click's exceptions do::

    FarmError                      exit 1
    ├── UserFault                  fail the job now, with the message (exit 2)
    │   ├── SpecError(field, reason)
    │   ├── ConfigError(key, reason)
    │   ├── ApkError(path, reason)
    │   ├── ToolMissing(tool, install_hint)
    │   ├── CompileError(workload, reason)
    │   └── ReservationError(serial, reason)
    ├── PhoneFault(serial)         retry, on another phone if one fits
    │   ├── AdbError(serial, argv, exit_code, stderr)
    │   ├── AdbTimeout(serial, argv, timeout_s)
    │   ├── DeviceOffline(serial)
    │   ├── InstallError(serial, code, output)
    │   └── SessionError(serial, reason)
    ├── InfraFault                 the host's own services (adb server, tracker, database)
    │   ├── AdbServerDown(port, reason)
    │   ├── TrackerUnreachable(host, port)
    │   └── StoreError(reason)
    │       └── StoreUnreachable(reason)   no connection could be made
    └── JobTimeout(job_id, timeout_s)   retry within the job's attempt limit

Third-party errors (adbutils, SQLAlchemy, TVM) are mapped to these once, at the
boundary that calls the library, with ``raise ... from exc``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum


class Retry(str, Enum):
    """What the queue does with an attempt that failed with this error."""

    NEVER = "never"  # the user's input is wrong: fail the job with the message
    OTHER_PHONE = "other_phone"  # the phone failed: retry, preferably elsewhere
    SAME_LIMIT = "same_limit"  # retry while attempts remain


class FarmError(Exception):
    """Base of every error farm raises on purpose."""

    exit_code = 1
    retry = Retry.SAME_LIMIT


# --- the user's input -------------------------------------------------------


class UserFault(FarmError):
    """The user's input is wrong; retrying cannot help."""

    exit_code = 2
    retry = Retry.NEVER


class SpecError(UserFault):
    """A job spec failed validation.

    Attributes:
        field: dotted path of the offending field, e.g. ``"params.n"``.
        reason: what is wrong with it, in one sentence.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class ConfigError(UserFault):
    """The farm configuration (TOML file or environment) is invalid."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        # A rule across sections (a model validator) has no key of its own.
        super().__init__(f"config {key}: {reason}" if key else f"config: {reason}")


class ApkError(UserFault):
    """An APK or keystore is unusable: corrupt, not an APK, unsigned, bad password."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class ToolMissing(UserFault):
    """An external tool (apksigner, zipalign, aapt, NDK clang) is not installed."""

    def __init__(self, tool: str, install_hint: str) -> None:
        self.tool = tool
        self.install_hint = install_hint
        super().__init__(f"{tool} not found: {install_hint}")


class CompileError(UserFault):
    """TVM could not compile the workload for the target."""

    def __init__(self, workload: str, reason: str) -> None:
        self.workload = workload
        self.reason = reason
        super().__init__(f"cannot compile {workload}: {reason}")


class ReservationError(UserFault):
    """A reservation cannot be made or ended as asked.

    Attributes:
        serial: the device, or None when no device was picked (``no free device matches``).
        reason: one line, e.g. ``reserved by alice until 2026-11-24T07:00Z``.
    """

    def __init__(self, serial: str | None, reason: str) -> None:
        self.serial = serial
        self.reason = reason
        super().__init__(reason if serial is None else f"{serial}: {reason}")


# --- the phone ----------------------------------------------------------------


class PhoneFault(FarmError):
    """The phone (or its link) failed; the work may succeed on another phone."""

    retry = Retry.OTHER_PHONE

    def __init__(self, serial: str, message: str) -> None:
        self.serial = serial
        super().__init__(f"[{serial}] {message}")


class AdbError(PhoneFault):
    """An adb command ran and failed.

    Attributes:
        serial: the phone.
        argv: the command as sent, one argument per item.
        command_exit_code: the command's exit code on the phone, or None if
            unknown (not ``exit_code``: that is farmctl's, inherited from FarmError).
        stderr: what it printed on stderr (or the adb server's FAIL message).
    """

    def __init__(
        self, serial: str, argv: Sequence[str], exit_code: int | None, stderr: str
    ) -> None:
        self.argv = list(argv)
        self.command_exit_code = exit_code
        self.stderr = stderr
        super().__init__(serial, f"{' '.join(self.argv)!r} exited {exit_code}: {stderr.strip()}")


class AdbTimeout(PhoneFault):
    """An adb command did not finish within its deadline."""

    def __init__(self, serial: str, argv: Sequence[str], timeout_s: float) -> None:
        self.argv = list(argv)
        self.timeout_s = timeout_s
        super().__init__(serial, f"{' '.join(self.argv)!r} did not finish in {timeout_s:g} s")


class DeviceOffline(PhoneFault):
    """The phone is not (or no longer) attached as ``device`` to the adb server."""

    def __init__(self, serial: str, state: str = "absent") -> None:
        self.state = state
        super().__init__(serial, f"phone is {state}")


class InstallError(PhoneFault):
    """``pm install`` refused the APK.

    ``code`` is the package manager's reason, e.g. ``INSTALL_FAILED_UPDATE_INCOMPATIBLE``
    (AOSP ``PackageManager.java`` constants). Signature and parse errors are the
    user's to fix, so :attr:`retry` depends on the code.
    """

    _USER_CODES = (
        "INSTALL_PARSE_FAILED",
        "INSTALL_FAILED_UPDATE_INCOMPATIBLE",
        "INSTALL_FAILED_VERSION_DOWNGRADE",
        "INSTALL_FAILED_INVALID_APK",
        "INSTALL_FAILED_NO_MATCHING_ABIS",
    )

    def __init__(self, serial: str, code: str, output: str) -> None:
        self.code = code
        self.output = output
        super().__init__(serial, f"install failed: {code}")
        if code.startswith(self._USER_CODES):
            self.retry = Retry.NEVER


class SessionError(PhoneFault):
    """A TVM RPC session to the phone could not be opened or was dropped."""

    def __init__(self, serial: str, reason: str) -> None:
        self.reason = reason
        super().__init__(serial, f"RPC session failed: {reason}")


class NoFreeServer(SessionError):
    """The tracker gave no ticket for the key within the deadline.

    Nobody is registered under the key, or every server under it is in a
    session (a job's): unlike a server that takes the ticket and never serves,
    this is no verdict on one phone.
    """


# --- the host's own services -----------------------------------------------------


class InfraFault(FarmError):
    """A host-side service (adb server, tracker, database) failed."""


class AdbServerDown(InfraFault):
    """The host's adb server does not answer on its port."""

    def __init__(self, port: int, reason: str = "") -> None:
        self.port = port
        self.reason = reason
        super().__init__(f"adb server on 127.0.0.1:{port} is down{': ' + reason if reason else ''}")


class StopAsked(FarmError):
    """A process was asked to stop (SIGTERM, Ctrl-C) while it waited for a part to start."""


class TrackerUnreachable(InfraFault):
    """The TVM RPC tracker does not answer at host:port."""

    def __init__(self, host: str, port: int, reason: str = "") -> None:
        self.host = host
        self.port = port
        super().__init__(f"tracker {host}:{port} unreachable{': ' + reason if reason else ''}")


class StoreError(InfraFault):
    """The database refused an operation."""


class StoreUnreachable(StoreError):
    """No connection to the database could be made (its server down, refusing, unresolved)."""


class JobTimeout(FarmError):
    """An attempt ran past its job's timeout."""

    def __init__(self, job_id: int, timeout_s: float) -> None:
        self.job_id = job_id
        self.timeout_s = timeout_s
        super().__init__(f"job {job_id} ran past its {timeout_s:g} s timeout")
