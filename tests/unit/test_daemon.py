"""Tests for farm.daemon.Farmd's lifecycle that need no fleet."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from device_states import put_state
from structlog.testing import capture_logs

from farm.backoff import backoff_s as farm_backoff_s
from farm.clock import FakeClock
from farm.config import Settings
from farm.daemon import Farmd, main
from farm.errors import InfraFault
from farm.netaddr import free_port
from farm.queue.store import Store
from farm.runner.pidfile import PIDFILE_NAME
from farm.tvm.tracker import TrackerProcess, ping


class _BrokenNotifier:
    def stopping(self, status: str | None = None) -> None:
        raise InfraFault("notify socket gone")


class _Relaunches:
    """Stands in for the fleet manager: counts the tracker restarts it was told of."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def tracker_restarted(self) -> list[str]:
        self.reasons.append("tracker restarted")
        return []

    def unjoined(self) -> int:
        return 0


def test_stop_runs_every_step_when_systemd_notify_fails(tmp_path: Path) -> None:
    """A failing STOPPING=1 notification does not keep the parts running."""
    farmd = Farmd(Settings(data_dir=tmp_path))
    farmd.notifier = _BrokenNotifier()  # type: ignore[assignment]
    stopped: list[str] = []
    farmd._stops.append(lambda: stopped.append("store"))
    farmd.stop()
    assert stopped == ["store"]
    assert farmd.stopped.is_set()


@pytest.fixture
def keep_signal_handlers() -> Iterator[None]:
    """farmd's main() installs SIGTERM/SIGINT handlers; give pytest its own back."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.mark.usefixtures("keep_signal_handlers")
class TestStartFailures:
    @pytest.mark.parametrize(
        "spec", ['{ kind = "nope" }', '{ kind = "gemm", params = { n = "x" } }']
    )
    def test_bad_schedule_spec_is_one_error_before_anything_starts(
        self, tmp_path: Path, spec: str
    ) -> None:
        """farmd names the schedule's field, exits 1, and leaves no farmd.json or tracker."""
        data_dir = tmp_path / "farm"
        config = tmp_path / "farm.toml"
        config.write_text(f'data_dir = "{data_dir}"\n[tracker]\nport = {free_port()}\n'
                          f'[[schedules]]\ncron = "0 1 * * *"\nspec = {spec}\n')
        result = CliRunner().invoke(main, ["--config", str(config), "--json-logs"])
        assert result.exit_code == 1, result.output
        assert "schedules.0.spec." in result.output
        assert "Traceback" not in result.output
        assert not (data_dir / PIDFILE_NAME).exists()

    def test_a_schedule_spec_of_the_wrong_type_is_a_config_error(self, tmp_path: Path) -> None:
        """``spec = "x"`` is refused when the config loads."""
        config = tmp_path / "farm.toml"
        config.write_text(
            f'data_dir = "{tmp_path}"\n[[schedules]]\ncron = "0 1 * * *"\nspec = "x"\n'
        )
        result = CliRunner().invoke(main, ["--config", str(config)])
        assert result.exit_code == 1
        assert "schedules" in result.output and "Traceback" not in result.output


@pytest.fixture
def blocker() -> Iterator[TrackerProcess]:
    """A tracker that is not farmd's, holding the port farmd wants."""
    with TrackerProcess.start() as tracker:
        yield tracker


def backoff_s(failures: int) -> float:
    """The wait after ``failures`` failed tracker restarts: farm's backoff, [supervise] defaults."""
    supervise = Settings().supervise
    return farm_backoff_s(failures, supervise.backoff_base_s, supervise.backoff_max_s)


class TestWatchTracker:
    def test_a_tracker_that_cannot_bind_backs_off_and_relaunches_nothing(
        self, tmp_path: Path, blocker: TrackerProcess
    ) -> None:
        """While the port is taken: one error per backoff step, no relaunch; then one restart."""
        clock = FakeClock()
        settings = Settings.model_validate({"data_dir": str(tmp_path),
                                            "tracker": {"port": blocker.port}})
        farmd = Farmd(settings, clock=clock)
        manager = _Relaunches()
        farmd.manager = manager  # type: ignore[assignment]
        try:
            with capture_logs() as logs:
                for _ in range(3):  # watch ticks within the first backoff: one try
                    farmd._watch_tracker()
                clock.advance(backoff_s(1))
                farmd._watch_tracker()
            events = [e["event"] for e in logs]
            assert events == ["tracker_down", "tracker_restart_failed", "tracker_restart_failed"]
            assert [e["retry_in_s"] for e in logs[1:]] == [backoff_s(1), backoff_s(2)]
            assert manager.reasons == []

            blocker.stop()
            clock.advance(backoff_s(2))
            with capture_logs() as logs:
                farmd._watch_tracker()
                farmd._watch_tracker()  # it serves now: nothing more to do
            assert [e["event"] for e in logs] == ["tracker_restarted"]
            assert manager.reasons == ["tracker restarted"]
            assert farmd.tracker is not None and ping(*farmd.tracker_addr)
        finally:
            if farmd.tracker is not None:
                farmd.tracker.stop()


class TestReclaim:
    def test_restart_requeues_this_hosts_attempts_without_charging_a_try(
        self, tmp_path: Path
    ) -> None:
        """At start farmd requeues its host's running attempts at once, uncounted; others' stay."""
        from farm.queue import Assignment, AttemptState, DeviceState, JobState, Store

        clock = FakeClock()
        store = Store(f"sqlite:///{tmp_path / 'farm.db'}")
        try:
            for serial in ("A", "B"):
                store.upsert_device(serial, clock.now())
                put_state(store, serial, DeviceState.READY, "test", clock.now())
            jobs = [store.enqueue({"kind": "gemm", "params": {"n": 64}}, clock.now())
                    for _ in range(2)]
            [mine] = store.claim([Assignment(jobs[0], ("A",), 3600.0)], clock.now(), host="h1")
            [theirs] = store.claim([Assignment(jobs[1], ("B",), 3600.0)], clock.now(), host="h2")
            farmd = Farmd(Settings(data_dir=tmp_path, host_id="h1"), clock=clock)
            farmd.store = store
            with capture_logs() as logs:
                farmd._reclaim()
            assert [e["attempts"] for e in logs if e["event"] == "attempts_reclaimed"] == [
                [mine.attempt.id]]
            [reclaimed] = store.attempts(jobs[0])
            assert reclaimed.state is AttemptState.ABANDONED
            job = store.get_job(jobs[0])
            assert job is not None and job.state is JobState.QUEUED and job.attempts_made == 0
            # Freed, and health-checked before new work (its app served a dead farmd).
            assert store.get_device("A").state is DeviceState.UNHEALTHY  # type: ignore[union-attr]
            [other] = store.attempts(jobs[1])
            assert other.id == theirs.attempt.id and other.state is AttemptState.RUNNING
        finally:
            store.close()


class TestHostRow:
    """farmd's hosts row: registered at start, stamped by the heartbeat job."""

    def test_register_then_heartbeat(self, tmp_path: Path) -> None:
        """The row carries the advertised tracker address; a heartbeat moves its stamp."""
        clock = FakeClock()
        settings = Settings.model_validate({
            "data_dir": str(tmp_path), "host_id": "rack-1",
            "tracker": {"host": "127.0.0.1", "port": 9300, "advertise_host": "rack1.lab"}})
        farmd = Farmd(settings, clock=clock)
        with Store(settings.database_url) as store:
            farmd.store = store
            farmd._register_host()
            clock.advance(5)
            farmd.host_heartbeat()
            [host] = store.list_hosts()
        assert (host.host_id, host.tracker_host, host.tracker_port) == ("rack-1", "rack1.lab", 9300)
        assert (host.heartbeat_at - host.started_at).total_seconds() == 5

    def test_heartbeat_registers_a_deleted_row_again(self, tmp_path: Path) -> None:
        """A heartbeat that finds no row registers the host again instead of failing."""
        settings = Settings.model_validate({"data_dir": str(tmp_path), "host_id": "rack-1"})
        farmd = Farmd(settings, clock=FakeClock())
        with Store(settings.database_url) as store:
            farmd.store = store
            farmd.host_heartbeat()
            assert [h.host_id for h in store.list_hosts()] == ["rack-1"]

    def test_dead_hosts_phones_count_as_unreachable(self, tmp_path: Path) -> None:
        """The phone gauge counts a dead host's phones under state="unreachable"."""
        clock = FakeClock()
        settings = Settings.model_validate({"data_dir": str(tmp_path), "host_id": "rack-1"})
        farmd = Farmd(settings, clock=clock)
        with Store(settings.database_url) as store:
            farmd.store = store
            store.register_host("rack-2", "127.0.0.1", 9191, clock.now())
            farmd._register_host()
            for serial, host in (("A", "rack-1"), ("B", "rack-2")):
                store.adopt_device(serial, host, clock.now(), dead_after_s=60)
            clock.advance(settings.hosts.dead_after_s + 1)
            farmd.host_heartbeat()  # rack-1 beats on; rack-2 is silent
            farmd.update_metrics()
        value = farmd.metrics.registry.get_sample_value
        assert value("farm_phones", {"state": "unreachable"}) == 1
        assert value("farm_phones", {"state": "discovered"}) == 1


#: What farmd's own process must not load: jobs import them in their children
#: (the zygote, a cold child). TVM alone is ~190 MB resident, scipy.stats ~75 MB.
HEAVY_IN_FARMD = ("tvm", "tvm_ffi", "onnx", "onnxruntime", "scipy", "torch")


class TestImports:
    def test_farmd_and_its_api_load_no_tvm_onnx_or_scipy(self) -> None:
        """Importing farmd with its API, dashboard and dispatcher loads none of HEAVY_IN_FARMD."""
        probe = ("import json, sys\n"
                 "import farm.daemon, farm.api.context, farm.serve.server, farm.runner.dispatcher\n"
                 f"print(json.dumps(sorted(m for m in {HEAVY_IN_FARMD!r} if m in sys.modules)))")
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              timeout=120, check=True)
        assert json.loads(done.stdout.splitlines()[-1]) == []
