"""Whether and how to install the TVM RPC APK: a pure decision.

Android refuses an update signed by another key
(``INSTALL_FAILED_UPDATE_INCOMPATIBLE``) and a lower versionCode without ``-d``
(``INSTALL_FAILED_VERSION_DOWNGRADE``); see AOSP ``PackageManager.java``. The
only way past a signature clash is to uninstall, which wipes the app's data, so
farm does it only when the config says so (``apk.on_signature_clash``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from farm.errors import UserFault


class ClashPolicy(str, Enum):
    """What to do when the installed app is signed by another key."""

    FAIL = "fail"  # stop and tell the operator (default: never wipe data silently)
    UNINSTALL = "uninstall"  # uninstall (wipes app data), then install


class Action(str, Enum):
    """What :func:`install_plan` decided."""

    SKIP = "skip"  # same versionCode and signer: nothing to do
    INSTALL = "install"  # not installed yet
    UPGRADE = "upgrade"  # same signer, other versionCode: pm install -r [-d]
    UNINSTALL_INSTALL = "uninstall_install"  # other signer, policy allows wiping


@dataclass(frozen=True)
class Installed:
    """What is on the phone: versionCode and signer certificate SHA-256 digests."""

    version_code: int
    signers: tuple[str, ...]


@dataclass(frozen=True)
class Wanted:
    """The APK farm wants installed."""

    package: str
    version_code: int
    signers: tuple[str, ...]


class SignatureClash(UserFault):
    """The installed app is signed by another key and the policy is ``fail``."""

    def __init__(self, serial: str, package: str) -> None:
        self.serial = serial
        self.package = package
        super().__init__(
            f"[{serial}] {package} is installed with another signing key; "
            "installing over it fails with INSTALL_FAILED_UPDATE_INCOMPATIBLE. Sign the APK "
            "with the key used before, or set apk.on_signature_clash = \"uninstall\" "
            "(this wipes the app's data on the phone)."
        )


def install_plan(
    serial: str, installed: Installed | None, wanted: Wanted, clash: ClashPolicy
) -> Action:
    """Decide how to bring ``wanted`` onto the phone.

    Raises:
        SignatureClash: the signers differ and ``clash`` is ``FAIL``.
    """
    if installed is None:
        return Action.INSTALL
    if set(installed.signers) != set(wanted.signers):
        if clash is ClashPolicy.UNINSTALL:
            return Action.UNINSTALL_INSTALL
        raise SignatureClash(serial, wanted.package)
    if installed.version_code == wanted.version_code:
        return Action.SKIP
    return Action.UPGRADE
