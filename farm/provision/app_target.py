"""Where a phone's TVM RPC app must point, and how its settings can reach it.

:func:`app_target` is the one place that maps farm's network mode to the
address the *phone* uses for the tracker (farmd's fleet manager and a tuning
job's child both call it)::

    usb-only   127.0.0.1:<tracker.device_port or tracker.port>   through adb reverse
               and the phone's relay (farm.provision.tunnels, farm.tvm.relay)
    lan        <tracker.phone_host or tracker.host>:<tracker.port>

:func:`detect_method` answers, from the phone alone, how the app's
SharedPreferences can be written (:class:`farm.provision.launch.Method`). farmd
learns it while provisioning and keeps it in memory; a job's child process
does not share that memory, so it asks the phone: ``run-as`` works only on a
debuggable build (AOSP ``system/core/run-as/run-as.cpp`` refuses others with
``package not debuggable``), ``su 0 id -u`` prints 0 only on a rooted phone.
"""

from __future__ import annotations

from farm.adb import Adb
from farm.config import Settings
from farm.provision.launch import PACKAGE, AppTarget, Method

__all__ = ["app_target", "app_target_for", "detect_method"]

PROBE_TIMEOUT_S = 15.0


def app_target_for(
    network: str, tracker: tuple[str, int], key: str, *, phone_host: str | None = None,
    device_tracker_port: int | None = None,
) -> AppTarget:
    """The tracker address as the phone reaches it, from plain values.

    Args:
        network: ``"usb-only"`` or ``"lan"``.
        tracker: where the host reaches the tracker, ``(host, port)``.
        key: the tracker key to register under (``phone_key`` or ``job_key``).
        phone_host: the host's address as lan phones reach it; None means
            ``tracker[0]``.
        device_tracker_port: the tracker's port on a usb-only phone (the
            reversed port); None means ``tracker[1]``.

    Returns:
        The app's address, port and key.
    """
    if network == "usb-only":
        return AppTarget("127.0.0.1", device_tracker_port or tracker[1], key)
    return AppTarget(phone_host or tracker[0], tracker[1], key)


def app_target(settings: Settings, key: str) -> AppTarget:
    """The tracker address as the phone reaches it under farm's settings, with ``key``.

    Args:
        settings: farm's settings; only ``settings.tracker`` is read.
        key: the tracker key to register under.

    Returns:
        The app's address, port and key (see the module doc for each network).
    """
    t = settings.tracker
    return app_target_for(t.network, (t.host, t.port), key, phone_host=t.phone_host,
                          device_tracker_port=t.device_port)


def detect_method(adb: Adb, serial: str) -> Method:
    """How the app can be configured on ``serial``: run-as, then root, then the UI.

    Args:
        adb: the adb client.
        serial: the phone.

    Returns:
        ``Method.RUN_AS`` when ``run-as <package> id -u`` succeeds,
        ``Method.ROOT`` when ``su 0 id -u`` prints 0, else ``Method.UI``.

    Raises:
        PhoneFault: adb failed or timed out.
    """
    run_as = adb.shell(serial, ["run-as", PACKAGE, "id", "-u"], timeout_s=PROBE_TIMEOUT_S)
    if run_as.exit_code == 0:
        return Method.RUN_AS
    root = adb.shell(serial, ["su", "0", "id", "-u"], timeout_s=PROBE_TIMEOUT_S)
    if root.exit_code == 0 and root.out.strip() == "0":
        return Method.ROOT
    return Method.UI
