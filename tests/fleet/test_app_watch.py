"""farmd notices the TVM RPC app's death from the phone's event log, not at the next sweep."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from farm.adb import Adb
from farm.clock import wait_until
from farm.controllers.android_events import events_argv
from farm.queue.models import DeviceState
from farm.testing import FleetHarness as Farm
from farm.virtual.fleet import Fleet

pytestmark = pytest.mark.fleet

#: The sweep interval of these tests' config: far longer than any wait below.
#: The harness runs no sweep by itself; the config says what farmd would do.
LONG_SWEEP = {"health": {"interval_s": 300}}


class TestAppWatch:
    def test_crash_is_recovered_before_any_sweep(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """A crashed app is restarted and registered again from its am_crash event alone."""
        farm = make_farm(settings=LONG_SWEEP)
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        farm.wait_state([serial], DeviceState.READY, 90)
        assert wait_until(lambda: farm.manager.app_watch.running(serial), 10)
        key = farm.manager.runtime(serial).key
        phones.crash_app(serial)
        assert wait_until(lambda: key not in farm.keys(), 20), "the crash did not unregister"  # noqa: SIM118 - a set of tracker keys
        # No sweep runs here: only the event can bring it back, well within 300 s.
        assert wait_until(lambda: key in farm.keys()  # noqa: SIM118 - a set of tracker keys
                          and farm.state(serial) is DeviceState.READY, 60)
        reasons = [e.reason for e in farm.store.device_events(serial)]
        assert any(r.startswith("recovery: failure (am_crash org.apache.tvm.tvmrpc pid ")
                   for r in reasons), reasons
        assert any("app died: am_crash" in r for r in reasons), reasons
        assert "recovery: restart_app ok" in reasons, reasons

    def test_without_the_watch_a_crash_waits_for_the_sweep(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """With watch_app_events off nothing restarts a crashed app until a sweep runs."""
        farm = make_farm(settings={"health": {"interval_s": 300, "watch_app_events": False}})
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        farm.wait_state([serial], DeviceState.READY, 90)
        key = farm.manager.runtime(serial).key
        phones.crash_app(serial)
        assert wait_until(lambda: key not in farm.keys(), 20)  # noqa: SIM118 - a set of tracker keys
        assert not farm.manager.app_watch.running(serial)
        assert not wait_until(lambda: key in farm.keys(), 15)  # noqa: SIM118 - a set of tracker keys
        assert farm.sweep_until(lambda: key in farm.keys()  # noqa: SIM118 - a set of tracker keys
                                and farm.state(serial) is DeviceState.READY, 90)

    def test_unplug_ends_the_watcher(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """A phone that leaves adb has no watcher left; back and ready, it has one again."""
        farm = make_farm(settings=LONG_SWEEP)
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        farm.wait_state([serial], DeviceState.READY, 90)
        assert wait_until(lambda: farm.manager.app_watch.running(serial), 10)
        phones.unplug(serial)
        farm.wait_state([serial], DeviceState.OFFLINE, 30)
        assert wait_until(lambda: not farm.manager.app_watch.running(serial), 30)
        phones.replug(serial)
        farm.wait_state([serial], DeviceState.READY, 120)
        assert wait_until(lambda: farm.manager.app_watch.running(serial), 10)


class TestEventStream:
    def test_stream_follows_from_the_phones_now(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """The watcher's logcat skips deaths logged before it started and streams later ones."""
        farm = make_farm(settings={"health": {"watch_app_events": False}})
        adb: Adb = farm.adb_host.adb
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        farm.wait_state([serial], DeviceState.READY, 90)
        phones.crash_app(serial)  # an old death: before the stream starts
        old = adb.shell(serial, ["logcat", "-d", "-b", "events", "-s", "am_crash"]).out
        assert "am_crash" in old
        now = int(adb.shell(serial, ["date", "+%s"]).out)
        assert wait_until(lambda: int(adb.shell(serial, ["date", "+%s"]).out) > now, 5)
        stream = adb.stream(serial, events_argv(now + 1), timeout_s=15)
        try:
            lines = stream.lines()
            farm.manager.launch(serial)
            phones.crash_app(serial)
            line = next(lines)
            while line.startswith("---------"):
                line = next(lines)
            assert " I am_crash: [0," in line
        finally:
            stream.close()

    def test_burst_arrives_without_a_later_write(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """Two event lines logged back to back both reach the stream, not only with the next
        line (adbd once held output queued while it waited for the host's OKAY)."""
        farm = make_farm(settings={"health": {"watch_app_events": False}})
        phones = make_fleet(1, network="usb-only")
        serial = phones.serials[0]
        farm.wait_state([serial], DeviceState.READY, 90)
        logs = phones.phone(serial).android.logs
        now = int(farm.adb_host.adb.shell(serial, ["date", "+%s"]).out)
        stream = farm.adb_host.adb.stream(serial, events_argv(now), timeout_s=15)
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.extend(stream.lines()))
        reader.start()
        try:
            def died(pid: int) -> None:
                logs.log(832, "I", "am_proc_died", f"[0,{pid},org.apache.tvm.tvmrpc,0,2]",
                         buffer="events")

            phones.call(lambda: died(1))
            assert wait_until(lambda: any(",1," in line for line in got), 10), got
            phones.call(lambda: died(2))  # two writes: the second while the first waits
            phones.call(lambda: died(3))  # for its OKAY (one call would print both at once)
            assert wait_until(lambda: any(",3," in line for line in got), 10), got
        finally:
            stream.close()
            reader.join(10)
