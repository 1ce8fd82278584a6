"""Install or upgrade the signed TVM RPC APK on one phone, by policy.

What is installed is read from the phone's own copy of the APK (``pm path``,
then ``adb pull`` of ``base.apk``): its certificate digests are exact, where
``dumpsys package`` prints only a hash code of the signature.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import structlog

from apk_tools.inspect import inspect_apk
from farm.adb import Adb
from farm.device.packages import parse_pm_install, parse_pm_path
from farm.errors import ApkError, InstallError
from farm.provision.policy import Action, ClashPolicy, Installed, Wanted, install_plan

log = structlog.get_logger(__name__)

INSTALL_TIMEOUT_S = 120.0
STAGING_PATH = "/data/local/tmp/farm-install.apk"


def installed_version(adb: Adb, serial: str, package: str) -> Installed | None:
    """VersionCode and signers of ``package`` on the phone, or None if absent.

    Raises:
        PhoneFault: adb failed (see :class:`farm.adb.Adb`).
    """
    result = adb.shell(serial, ["pm", "path", package], timeout_s=15)
    paths = parse_pm_path(result.out)
    if not paths:
        return None
    base = next((p for p in paths if p.endswith("/base.apk")), paths[0])
    with tempfile.TemporaryDirectory(prefix="farm-pull-") as tmp:
        local = Path(tmp) / "base.apk"
        adb.pull(serial, base, local, timeout_s=60)
        info = inspect_apk(local)
    return Installed(version_code=info.version_code, signers=info.signers)


def ensure_installed(
    adb: Adb, serial: str, apk: Path, clash: ClashPolicy = ClashPolicy.FAIL
) -> Action:
    """Bring ``apk`` onto the phone unless the same version and signer are there.

    Args:
        adb: the host's adb.
        serial: the phone.
        apk: a signed APK (see :func:`apk_tools.sign.prepare`).
        clash: what to do when another key signed the installed app.

    Returns:
        What was done.

    Raises:
        ApkError: the path is missing or a folder, the APK is corrupt, not an
            APK, or unsigned (:func:`apk_tools.inspect.inspect_apk`).
        SignatureClash: another key signed the installed app and ``clash`` is FAIL.
        InstallError: ``pm install`` refused it (its code says why).
    """
    info = inspect_apk(Path(apk))
    if not info.signers:
        raise ApkError(
            str(apk), "the APK is unsigned; sign it first (python -m apk_tools sign ...)"
        )
    wanted = Wanted(package=info.package, version_code=info.version_code, signers=info.signers)
    installed = installed_version(adb, serial, info.package)
    action = install_plan(serial, installed, wanted, clash)
    if action is Action.SKIP:
        log.info("apk_up_to_date", serial=serial, package=info.package,
                 version_code=info.version_code)
        return action
    if action is Action.UNINSTALL_INSTALL:
        log.warning("apk_signature_clash_uninstall", serial=serial, package=info.package)
        adb.shell(serial, ["pm", "uninstall", info.package], timeout_s=60, check=True)
    _install(adb, serial, Path(apk), downgrade=installed is not None
             and installed.version_code > info.version_code)
    log.info("apk_installed", serial=serial, package=info.package, action=action.value,
             version_code=info.version_code)
    return action


def _install(adb: Adb, serial: str, apk: Path, *, downgrade: bool) -> None:
    adb.push(serial, apk, STAGING_PATH, timeout_s=INSTALL_TIMEOUT_S)
    argv = ["pm", "install", "-r", *(["-d"] if downgrade else []), STAGING_PATH]
    try:
        result = adb.shell(serial, argv, timeout_s=INSTALL_TIMEOUT_S)
    finally:
        adb.shell(serial, ["rm", "-f", STAGING_PATH], timeout_s=15)
    outcome = parse_pm_install(result.stdout, result.stderr)
    if not outcome.ok:
        raise InstallError(serial, outcome.code or "INSTALL_FAILED_UNKNOWN",
                           (result.out + result.err).strip())
