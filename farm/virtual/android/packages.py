"""The package manager: installs real APK files and answers as ``pm`` does.

Decisions are read from the APK itself through :func:`apk_tools.inspect.inspect_apk`
(package, versionCode, signers, activities, debuggable). Outcomes print the
exact texts of the fixtures ``pm_install__*`` and ``pm_uninstall__*``:

* unsigned: ``INSTALL_PARSE_FAILED_NO_CERTIFICATES: Failed to collect certificates
  from /data/app/vmdlN.tmp/base.apk: Attempt to get length of null array``
* another signer: ``INSTALL_FAILED_UPDATE_INCOMPATIBLE: Existing package P
  signatures do not match newer version; ignoring!`` (Android 12+; older text below 31)
* lower versionCode without ``-d`` (or with ``-d`` on a non-debuggable app and
  user build): ``INSTALL_FAILED_VERSION_DOWNGRADE: Downgrade detected: Update
  version code X is older than current Y``
* no room: ``INSTALL_FAILED_INSUFFICIENT_STORAGE: Failed to override installation location``

Installed APKs are copied to ``/data/app/~~<rand>==/<pkg>-<rand>==/base.apk``
(the Android 11+ layout of fixture ``pm_path__split_apks_android11plus.txt``).
"""

from __future__ import annotations

import base64
import json
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from farm.errors import ApkError

if TYPE_CHECKING:
    from apk_tools.inspect import ApkInfo
    from farm.virtual.android.phone import AndroidPhone

# Packages present on every phone: (package, APK path on the system image).
SYSTEM_PACKAGES = (
    ("com.android.providers.telephony", "/system/priv-app/TelephonyProvider/TelephonyProvider.apk"),
    ("com.android.providers.calendar", "/system/priv-app/CalendarProvider/CalendarProvider.apk"),
    ("com.android.providers.media", "/system/priv-app/MediaProvider/MediaProvider.apk"),
    ("com.android.documentsui", "/system/priv-app/DocumentsUIGoogle/DocumentsUIGoogle.apk"),
    ("com.android.externalstorage",
     "/system/priv-app/ExternalStorageProvider/ExternalStorageProvider.apk"),
    ("com.android.htmlviewer", "/system/app/HTMLViewer/HTMLViewer.apk"),
    ("com.android.providers.downloads", "/system/priv-app/DownloadProvider/DownloadProvider.apk"),
    ("com.android.networkstack", "/system/priv-app/NetworkStack/NetworkStack.apk"),
    ("com.android.settings", "/system_ext/priv-app/Settings/Settings.apk"),
    ("com.android.shell", "/system/priv-app/Shell/Shell.apk"),
    ("com.android.systemui", "/system_ext/priv-app/SystemUI/SystemUI.apk"),
    ("com.android.launcher3", "/system_ext/priv-app/Launcher3QuickStep/Launcher3QuickStep.apk"),
    ("com.android.inputmethod.latin", "/system/app/LatinIME/LatinIME.apk"),
    ("com.android.vending", "/product/priv-app/Phonesky/Phonesky.apk"),
    ("android", "/system/framework/framework-res.apk"),
)


@dataclass
class Installed:
    """One installed (third-party) package, persisted as JSON."""

    package: str
    version_code: int
    version_name: str
    min_sdk: int
    target_sdk: int
    signers: list[str]
    debuggable: bool
    activities: list[tuple[str, bool]]
    launchable_activity: str | None
    permissions: list[str]
    native_abis: list[str]
    code_dir: str
    uid: int
    first_install_s: float
    last_update_s: float

    @property
    def apk_path(self) -> str:
        """Device path of ``base.apk``."""
        return f"{self.code_dir}/base.apk"

    def activity(self, name: str) -> tuple[str, bool] | None:
        """``(fully qualified name, exported)`` of an activity, short or full name."""
        full = self.package + name if name.startswith(".") else name
        return next((a for a in self.activities if a[0] == full), None)


def _rand_b64(rng: random.Random) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(16)).decode()


def _failure(code: str, text: str) -> tuple[str, int]:
    """``pm install``'s ``Failure [CODE: text]`` line and its exit status 1."""
    return f"Failure [{code}: {text}]\n", 1


class PackageManager:
    """Installed packages of one phone.

    Args:
        phone: the phone (storage, spec, processes, logs).
    """

    def __init__(self, phone: AndroidPhone) -> None:
        self.phone = phone
        self._file = phone.storage.state_dir / "packages.json"
        self._rng = random.Random()
        self.installed: dict[str, Installed] = {}
        if self._file.exists():
            for raw in json.loads(self._file.read_text()):
                raw["activities"] = [tuple(a) for a in raw["activities"]]
                self.installed[raw["package"]] = Installed(**raw)

    def _save(self) -> None:
        self._file.write_text(json.dumps([asdict(p) for p in self.installed.values()]))

    def uid_of(self, package: str) -> int:
        """The app's uid (10000 + n), or 1000 for system packages."""
        pkg = self.installed.get(package)
        return pkg.uid if pkg else 1000

    def _update_refusal(self, info: ApkInfo, old: Installed, *,
                        allow_downgrade: bool) -> tuple[str, int] | None:
        """Why an update of ``old`` to ``info`` is refused (signers, downgrade), or None."""
        if set(old.signers) != set(info.signers):
            if self.phone.spec.sdk >= 31:
                text = f"Existing package {info.package} signatures do not match newer version"
            else:
                text = (f"Package {info.package} signatures do not match "
                        "previously installed version")
            return _failure("INSTALL_FAILED_UPDATE_INCOMPATIBLE", f"{text}; ignoring!")
        downgrade_ok = allow_downgrade and (self.phone.spec.debuggable or old.debuggable)
        if info.version_code < old.version_code and not downgrade_ok:
            return _failure("INSTALL_FAILED_VERSION_DOWNGRADE",
                            f"Downgrade detected: Update version code {info.version_code} "
                            f"is older than current {old.version_code}")
        return None

    def install(self, host_apk: Path, *, allow_downgrade: bool) -> tuple[str, int]:
        """Install an APK file; returns (``pm`` stdout, exit status)."""
        from apk_tools.inspect import inspect_apk

        session = self._rng.randrange(10**8, 2 * 10**9)
        tmp = f"/data/app/vmdl{session}.tmp/base.apk"
        size = host_apk.stat().st_size
        if self.phone.storage_free_bytes() < size * 2:
            return _failure("INSTALL_FAILED_INSUFFICIENT_STORAGE",
                            "Failed to override installation location")
        try:
            info = inspect_apk(host_apk)
        except ApkError:
            return _failure("INSTALL_PARSE_FAILED_NOT_APK",
                            f"Failed to parse {tmp}: Failed to load asset path {tmp}")
        if not info.signers:
            return _failure("INSTALL_PARSE_FAILED_NO_CERTIFICATES",
                            f"Failed to collect certificates from {tmp}: "
                            "Attempt to get length of null array")
        sdk = self.phone.spec.sdk
        if info.min_sdk > sdk:
            return _failure("INSTALL_FAILED_OLDER_SDK",
                            f"Failed parse during installPackageLI: {tmp} "
                            f"(at Binary XML file line #7): Requires newer sdk version "
                            f"#{info.min_sdk} (current version is #{sdk})")
        abis = self.phone.props["ro.product.cpu.abilist"].split(",")
        if info.native_abis and not set(info.native_abis) & set(abis):
            return _failure("INSTALL_FAILED_NO_MATCHING_ABIS",
                            "Failed to extract native libraries, res=-113")
        old = self.installed.get(info.package)
        if old is not None:
            refusal = self._update_refusal(info, old, allow_downgrade=allow_downgrade)
            if refusal is not None:
                return refusal
        code_dir = f"/data/app/~~{_rand_b64(self._rng)}/{info.package}-{_rand_b64(self._rng)}"
        dest = self.phone.storage.backing(code_dir)
        if dest is None:  # /data is always backed by a host folder
            raise RuntimeError(f"{code_dir} has no backing folder")
        dest.mkdir(parents=True)
        shutil.copyfile(host_apk, dest / "base.apk")
        now = time.time()
        if old is not None:
            old_dir = self.phone.storage.backing(old.code_dir)
            if old_dir is not None:
                shutil.rmtree(old_dir.parent, ignore_errors=True)
        uid = old.uid if old else max((p.uid for p in self.installed.values()), default=10149) + 1
        self.installed[info.package] = Installed(
            package=info.package,
            version_code=info.version_code,
            version_name=info.version_name,
            min_sdk=info.min_sdk,
            target_sdk=info.target_sdk,
            signers=list(info.signers),
            debuggable=info.debuggable,
            activities=[(a.name, a.exported) for a in info.activities],
            launchable_activity=info.launchable_activity,
            permissions=list(info.permissions),
            native_abis=list(info.native_abis),
            code_dir=code_dir,
            uid=uid,
            first_install_s=old.first_install_s if old else now,
            last_update_s=now,
        )
        self.phone.storage.app_dir(info.package).mkdir(parents=True, exist_ok=True)
        self._save()
        return "Success\n", 0

    def uninstall(self, package: str, *, keep_data: bool = False) -> tuple[str, int]:
        """Remove a third-party package; returns (stdout, status)."""
        pkg = self.installed.pop(package, None)
        if pkg is None:
            return "Failure [DELETE_FAILED_INTERNAL_ERROR]\n", 1
        code = self.phone.storage.backing(pkg.code_dir)
        if code is not None:
            shutil.rmtree(code.parent, ignore_errors=True)
        if not keep_data:
            shutil.rmtree(self.phone.storage.app_dir(package), ignore_errors=True)
        self._save()
        return "Success\n", 0

    def clear(self, package: str) -> tuple[str, int]:
        """``pm clear``: wipe the app's data directory."""
        if package not in self.installed:
            return "Failed\n", 1
        shutil.rmtree(self.phone.storage.app_dir(package), ignore_errors=True)
        self.phone.storage.app_dir(package).mkdir(parents=True)
        return "Success\n", 0

    def listing(self, *, third_party_only: bool) -> list[tuple[str, str]]:
        """``(package, apk path)`` in PackageManager map order: system first, then installed."""
        rows = [] if third_party_only else list(SYSTEM_PACKAGES)
        rows += [(p.package, p.apk_path) for p in self.installed.values()]
        return rows
