"""farmd's fleet manager on virtual phones: provisioning, crashes, unplug, quarantine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from apk_tools.keys import create_pem_key
from apk_tools.prepare import prepare
from apk_tools.standin import build_standin_apk
from farm.clock import wait_until
from farm.provision.launch import Method
from farm.queue.models import DeviceState
from farm.supervise.ladder import LadderPolicy
from farm.testing import FleetHarness as Farm
from farm.testing import fleet_harness
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet


class TestProvisioning:
    def test_three_phones_come_to_ready(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """Three usb-only phones plugged in reach ready and are registered, untouched."""
        farm = make_farm()
        phones = make_fleet(3, network="usb-only")
        farm.wait_state(phones.serials, DeviceState.READY, 150)
        keys = farm.keys()
        for serial in phones.serials:
            assert farm.manager.runtime(serial).key in keys

    def test_preinstalled_release_app_is_configured_through_the_ui(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm],
        adb_server: AdbServerHandle, tmp_path: Path,
    ) -> None:
        """With no APK configured, a preinstalled non-debuggable app on an unrooted
        phone is configured through its UI (run-as would fail) and registers."""
        key = create_pem_key(tmp_path / "k.pem", tmp_path / "k.crt", common_name="farm-test")
        release = prepare(build_standin_apk(tmp_path / "unsigned", debuggable=False), key,
                          tmp_path / "signed")
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        installed = adb_server.adb("-s", serial, "install", str(release), timeout_s=120)
        assert installed.returncode == 0, installed.stderr
        farm = make_farm(apk=None)
        farm.wait_state([serial], DeviceState.READY, 90)
        assert farm.manager.runtime(serial).method is Method.UI
        registered = farm.keys()
        assert farm.manager.runtime(serial).key in registered


class TestHealing:
    def test_crashed_app_is_back_and_registered(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """An app that crashes is restarted by the ladder and registers again."""
        farm = make_farm()
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        farm.wait_state([serial], DeviceState.READY, 90)
        key = farm.manager.runtime(serial).key
        phones.crash_app(serial)
        assert wait_until(lambda: key not in farm.keys(), 20), "the crash did not unregister"  # noqa: SIM118 - a set of tracker keys
        assert farm.sweep_until(lambda: key in farm.keys()  # noqa: SIM118 - a set of tracker keys
                                and farm.state(serial) is DeviceState.READY, 90)
        events = [e.reason for e in farm.store.device_events(serial)]
        assert any("recovered by" in r for r in events), events

    def test_unplugged_phone_goes_offline_and_comes_back(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """Unplug takes a phone offline; replug brings it back to ready."""
        farm = make_farm()
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        farm.wait_state([serial], DeviceState.READY, 90)
        phones.unplug(serial)
        farm.wait_state([serial], DeviceState.OFFLINE, 30)
        phones.replug(serial)
        farm.wait_state([serial], DeviceState.READY, 90)
        assert farm.manager.runtime(serial).key in farm.keys()  # noqa: SIM118 - a set of tracker keys

    def test_phone_that_keeps_crashing_is_quarantined(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """Crash after crash, the ladder quarantines the phone."""
        ladder = LadderPolicy(backoff_base_s=0.1, backoff_max_s=0.2, quarantine_after=3,
                              attempts_per_rung=1)
        farm = make_farm(ladder=ladder)
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        farm.wait_state([serial], DeviceState.READY, 90)

        def crash_and_check() -> bool:
            if farm.state(serial) is DeviceState.READY:
                phones.crash_app(serial)
            return farm.state(serial) is DeviceState.QUARANTINED

        assert farm.sweep_until(crash_and_check, 240), farm.state(serial)
        [quarantine] = [e for e in farm.store.device_events(serial) if e.to_state == "quarantined"
                        and e.from_state != "quarantined"]
        assert "farmctl release" in quarantine.reason


class TestRestart:
    def test_phone_that_keeps_crashing_across_restarts_is_quarantined(
        self, make_fleet: Callable[..., Fleet], adb_server: AdbServerHandle, signed_apk: Path,
        tmp_path: Path,
    ) -> None:
        """Two crashes fixed before a farm restart and one after it quarantine the phone
        (quarantine after 3): the incidents are counted from the database, not memory."""
        # A crash loop across the restart however long provisioning takes under load.
        ladder = LadderPolicy(backoff_base_s=0.1, backoff_max_s=0.2, quarantine_after=3,
                              attempts_per_rung=1, crash_loop_s=600)
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        data_dir = tmp_path / "farm"
        data_dir.mkdir()

        def recoveries(farm: Farm) -> int:
            return sum(e.reason.startswith("recovery: ") and e.reason.endswith(" ok")
                       for e in farm.store.device_events(serial))

        with fleet_harness(adb_server.port, data_dir, signed_apk, ladder=ladder) as farm:
            farm.wait_state([serial], DeviceState.READY, 90)
            for n in (1, 2):
                phones.crash_app(serial)
                assert farm.sweep_until(lambda: recoveries(farm) == n  # noqa: B023
                                        and farm.state(serial) is DeviceState.READY, 120), n
        with fleet_harness(adb_server.port, data_dir, signed_apk, ladder=ladder) as farm:
            farm.wait_state([serial], DeviceState.READY, 120)  # provisioned again at start
            phones.crash_app(serial)
            assert farm.sweep_until(lambda: farm.state(serial) is DeviceState.QUARANTINED, 120), \
                farm.state(serial)
            assert recoveries(farm) == 2


class TestProvisioningErrors:
    def test_corrupt_apk_leaves_phone_unprovisioned(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm], tmp_path: Path
    ) -> None:
        """A corrupt APK gives a clear error and nothing is installed."""
        corrupt = tmp_path / "broken.apk"
        corrupt.write_bytes(b"PK\x03\x04 this is not a zip")
        farm = make_farm(apk=corrupt)
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        farm.wait_state([serial], DeviceState.UNHEALTHY, 60)
        reason = farm.store.device_events(serial)[0].reason
        assert "broken.apk" in reason and "provisioning failed" in reason
        assert farm.manager.runtime(serial).blocked is not None
        listed = farm.adb_host.adb.shell(serial,
                                         ["pm", "list", "packages", "org.apache.tvm.tvmrpc"])
        assert listed.out.strip() == ""


class TestUsbOnlySessions:
    def test_three_usb_only_phones_serve_sessions_at_once(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """Three usb-only phones, all on device port 5001, each serve a real session."""
        from concurrent.futures import ThreadPoolExecutor

        from farm.tvm.probe import probe_session

        farm = make_farm()
        phones = make_fleet(3, network="usb-only")
        farm.wait_state(phones.serials, DeviceState.READY, 150)
        keys = [farm.manager.runtime(s).key for s in phones.serials]
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(
                lambda k: probe_session(*farm.tracker_addr, k, timeout_s=60), keys))
        ports = {r.server_port for r in results}
        assert len(ports) == 3  # three distinct adb forward endpoints
        tunnels = {port for s in phones.serials
                   for port in farm.manager.runtime(s).tunnel.forward_ports.values()}
        assert ports == tunnels


class TestAdbServerLoss:
    def test_killed_adb_server_loses_no_phone(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm],
        adb_server: AdbServerHandle,
    ) -> None:
        """After the adb server dies and is restarted, every phone is ready again."""
        farm = make_farm()
        phones = make_fleet(2, network="usb-only")
        farm.wait_state(phones.serials, DeviceState.READY, 120)
        adb_server.adb("kill-server")
        farm.wait_state(phones.serials, DeviceState.OFFLINE, 30)
        farm.adb_host.server.ensure_running()
        for serial in phones.serials:  # what farmd's reconnect job does for adb-over-TCP phones
            farm.adb_host.adb.connect(serial)
        farm.wait_state(phones.serials, DeviceState.READY, 150)
        keys = farm.keys()
        assert all(farm.manager.runtime(s).key in keys for s in phones.serials)


class TestFrozenApp:
    def test_frozen_app_is_found_by_a_session_probe(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """An app frozen while still listed at the tracker fails its probe and is restarted."""
        import os
        import signal

        import psutil

        farm = make_farm(probe_every_sweeps=1, probe_timeout_s=15.0)
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        farm.wait_state([serial], DeviceState.READY, 90)
        key = farm.manager.runtime(serial).key
        frozen = [p for p in psutil.process_iter(["cmdline"])
                  if key in " ".join(p.info["cmdline"] or [])]
        assert frozen, "no RPC process serves the phone's key"
        for proc in frozen:
            os.kill(proc.pid, signal.SIGSTOP)
        assert key in farm.keys()  # the tracker still lists the frozen server  # noqa: SIM118 - a set of tracker keys
        farm.manager.sweep()
        # The sweep came back while the probe still hangs on the frozen server:
        # one frozen phone must not hold every other phone's next sweep.
        assert farm.manager.runtime(serial).probing
        assert farm.sweep_until(lambda: any(
            "probe_ok false" in e.reason for e in farm.store.device_events(serial)), 90)
        assert farm.sweep_until(lambda: farm.state(serial) is DeviceState.READY
                                and key in farm.keys(), 120)  # noqa: SIM118 - a set of tracker keys
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in frozen)
