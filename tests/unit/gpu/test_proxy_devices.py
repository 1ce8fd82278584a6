"""RPC proxy mode: a real rpc_server connects out to farm's rpc_proxy and is reached by its key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from farm.clock import wait_until
from farm.config import ProxySettings, Settings, TrackerSettings
from farm.controllers import PROXY, ControllerContext, DeviceController, controller_for
from farm.controllers.proxy import ProxyController
from farm.errors import PhoneFault, SpecError
from farm.netaddr import free_port
from farm.procs import group_alive, signal_group
from farm.tvm.proxy import proxied_keys
from farm.tvm.tracker import TrackerProcess, parse_summary

NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


class TestProxiedKeys:
    def test_reads_the_keys_the_proxy_listed(self) -> None:
        """The proxy's UPDATE_INFO entry server:proxy[a,b] on its port names its keys."""
        summary = parse_summary({
            "server_info": [
                {"key": "server:proxy[ios-1,web-2]", "addr": ["127.0.0.1", 9091]},
                {"key": "server:android-R58M", "addr": ["127.0.0.1", 5001]},
                {"key": "server:proxy[other]", "addr": ["127.0.0.1", 9999]},
            ],
            "queue_info": {"ios-1": {"free": 1, "pending": 0}},
        })
        assert proxied_keys(summary, 9091) == ("ios-1", "web-2")

    def test_no_proxy_entry_is_no_keys(self) -> None:
        """A tracker with no proxy lists no proxied keys."""
        assert proxied_keys(parse_summary({"server_info": [], "queue_info": {}}), 9091) == ()


@pytest.fixture
def tracker() -> Iterator[TrackerProcess]:
    with TrackerProcess.start() as process:
        yield process


@pytest.fixture
def proxy_ctrl(tracker: TrackerProcess, tmp_path: Path) -> Iterator[ProxyController]:
    settings = Settings(tracker=TrackerSettings(host=tracker.host, port=tracker.port),
                        proxy=ProxySettings(enabled=True, port=free_port()))
    ctrl = controller_for(PROXY, ControllerContext(settings, {"log_dir": tmp_path}))
    assert isinstance(ctrl, ProxyController)
    yield ctrl
    ctrl.close()


class TestProxyController:
    def test_registry_builds_it_and_it_meets_the_protocol(self) -> None:
        """The registry's "proxy" kind is a DeviceController."""
        ctrl = controller_for(PROXY, ControllerContext(Settings()))
        assert isinstance(ctrl, DeviceController)

    def test_disabled_proxy_discovers_nothing_and_starts_nothing(self) -> None:
        """With [proxy] off (the default) discovery is empty and no proxy runs."""
        ctrl = ProxyController(Settings())
        assert ctrl.discover() == []
        ctrl.close()

    def test_device_connecting_out_is_a_device_reached_through_the_tracker(
            self, proxy_ctrl: ProxyController, tmp_path: Path) -> None:
        """An is_proxy rpc_server becomes device proxy-<key>; a client gets a session by its key."""
        from tvm import rpc, runtime

        assert proxy_ctrl.discover() == []  # starts the proxy
        port = proxy_ctrl.settings.proxy.port
        device = subprocess.Popen(
            [sys.executable, "-m", "tvm.exec.rpc_server", "--through-proxy", "--host",
             "127.0.0.1", "--port", str(port), "--key", "ios-1"],
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            found = wait_until(proxy_ctrl.discover, 120, "the device behind the proxy")
            assert [d.serial for d in found] == ["proxy-ios-1"]
            serial = found[0].serial
            assert proxy_ctrl.facts(serial)["key"] == "ios-1"
            assert proxy_ctrl.read_health(serial, NOW).adb_state == "device"
            proxy_ctrl.start_server(serial)  # connected: nothing to do, no error
            tracker = proxy_ctrl.settings.tracker
            session = rpc.connect_tracker(tracker.host, tracker.port).request(
                proxy_ctrl.tracker_key(serial), session_timeout=60)
            values = runtime.tensor(np.arange(4, dtype="float32"), session.cpu(0))
            assert values.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
        finally:
            signal_group(device.pid)
            device.wait()

    def test_close_ends_the_proxy_group(self, proxy_ctrl: ProxyController) -> None:
        """close() stops the proxy it started, with every process of its group."""
        proxy_ctrl.discover()
        proxy = proxy_ctrl._proxy
        assert proxy is not None and proxy.alive()
        proxy_ctrl.close()
        assert not group_alive(proxy.pid)

    def test_no_server_to_start_or_target_to_build(self, proxy_ctrl: ProxyController) -> None:
        """A device not connected cannot be started by farm; no compile target is offered."""
        proxy_ctrl.discover()
        with pytest.raises(PhoneFault, match="connect by itself"):
            proxy_ctrl.start_server("proxy-absent")
        with pytest.raises(SpecError, match="proxy"):
            proxy_ctrl.compile_target({"key": "absent"}, "cpu")
        assert proxy_ctrl.recovery_steps("proxy-absent") == []


def test_proxy_ends_when_farmd_is_killed(tracker: TrackerProcess) -> None:
    """kill -9 of the process that started the proxy ends the proxy's group too."""
    port = free_port()
    script = textwrap.dedent(f"""
        import time
        from farm.tvm.proxy import ProxyProcess
        proxy = ProxyProcess.start("127.0.0.1", {port}, ({tracker.host!r}, {tracker.port}))
        print("PID", proxy.pid, flush=True)
        time.sleep(600)
    """)
    farmd = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             start_new_session=True)
    try:
        assert farmd.stdout is not None
        line = b""
        while not line.startswith(b"PID "):
            line = farmd.stdout.readline()
            assert line, "the farmd stand-in exited before starting the proxy"
        proxy_pid = int(line.split()[1])
        os.kill(farmd.pid, signal.SIGKILL)
        farmd.wait()
        assert wait_until(lambda: not group_alive(proxy_pid), 30)
    finally:
        signal_group(farmd.pid)
        farmd.wait()
