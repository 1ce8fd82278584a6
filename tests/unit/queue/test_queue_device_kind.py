"""Jobs select devices by kind (``DeviceSelection.kind``, ``farmctl enqueue --kind``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from queue_helpers import ARM64, T0, add_ready, gemm_spec, plan

from farm import controllers
from farm.cli.main import cli
from farm.clock import FakeClock
from farm.config import Settings
from farm.errors import SpecError
from farm.queue import Store
from farm.queue.models import DeviceState
from farm.queue.scheduler import DeviceView, matches
from farm.queue.spec import DeviceSelection, parse_spec
from farm.queue.waiting import refusal, wait_reasons
from farm.runner.dispatcher import Dispatcher

BOARD_FACTS = {"abi": "aarch64", "abis": ["aarch64"], "soc": "rk3399", "model": "EAIDK-310"}


class TestMatches:
    """:func:`farm.queue.scheduler.matches` compares the selection's kind with the device's."""

    def test_no_kind_matches_every_kind(self) -> None:
        """A selection without a kind takes a phone and a board alike."""
        phone = DeviceView("p", DeviceState.READY, facts=ARM64)
        board = DeviceView("b", DeviceState.READY, facts=BOARD_FACTS, kind="board")
        assert matches(DeviceSelection(), phone) and matches(DeviceSelection(), board)

    def test_kind_must_equal(self) -> None:
        """``kind=board`` takes boards only; ``kind=android`` phones only."""
        phone = DeviceView("p", DeviceState.READY, facts=ARM64)
        board = DeviceView("b", DeviceState.READY, facts=BOARD_FACTS, kind="board")
        assert matches(DeviceSelection(kind="board"), board)
        assert not matches(DeviceSelection(kind="board"), phone)
        assert matches(DeviceSelection(kind="android"), phone)
        assert not matches(DeviceSelection(kind="android"), board)


class TestSpec:
    """The spec validates the kind's shape; the registry is the CLI's business."""

    def test_bad_kind_names_the_field(self) -> None:
        """A kind that could never be a device kind is a SpecError on devices.kind."""
        with pytest.raises(SpecError) as info:
            parse_spec(gemm_spec(devices={"kind": "Board!"}))
        assert info.value.field == "devices.kind"

    def test_kind_round_trips(self) -> None:
        """The kind is stored with the spec and read back."""
        spec = parse_spec(gemm_spec(devices={"kind": "gpu"}))
        assert parse_spec(spec.to_json()).devices.kind == "gpu"


class TestStoreAndPlan:
    """The store keeps each device's kind and the plan honours it."""

    def test_plan_sends_each_job_to_its_kind(self, store: Store) -> None:
        """A board job goes to the board, a phone job to the phone, however shuffled."""
        add_ready(store, "phone1")
        store.upsert_device("board-a", T0, BOARD_FACTS, kind="board")
        add_ready(store, "board-a", facts=BOARD_FACTS)
        assert store.get_device("board-a") is not None
        assert store.get_device("board-a").kind == "board"  # type: ignore[union-attr]
        board_job = store.enqueue(gemm_spec(devices={"kind": "board"}), T0)
        phone_job = store.enqueue(gemm_spec(devices={"kind": "android"}), T0)
        for seed in range(5):
            placed = {a.job_id: a.serials for a in plan(store.snapshot(), T0, seed=seed)}
            assert placed == {board_job: ("board-a",), phone_job: ("phone1",)}

    def test_refusal_names_the_kind(self, store: Store) -> None:
        """With phones only, a board job is refused saying ``kind=board``."""
        add_ready(store, "phone1")
        spec = parse_spec(gemm_spec(devices={"kind": "board"}))
        assert refusal(spec, store.snapshot().devices) == "0 phones match kind=board"


class TestUnknownDeviceKind:
    """A device of a kind this farm has no controller for (a newer farm's row) gets no job."""

    def _add_hologram(self, store: Store) -> None:
        facts = {"abi": "arm64-v8a", "model": "Hologram One"}
        store.upsert_device("holo", T0, facts, kind="hologram")
        add_ready(store, "holo", facts=facts)

    def test_plan_gives_it_no_job(self, store: Store) -> None:
        """Over the head the dispatcher reads, a gemm goes to the phone, never to the hologram."""
        self._add_hologram(store)
        add_ready(store, "phone1")
        first = store.enqueue(gemm_spec(), T0)
        store.enqueue(gemm_spec(), T0)
        known = controllers.kinds()
        for seed in range(5):
            head = store.head(T0, seed=seed, device_kinds=known)
            placed = [(a.job_id, a.serials)
                      for a in plan(head, T0, seed=seed, device_kinds=known)]
            assert placed == [(first, ("phone1",))]

    def test_the_wait_reason_names_the_kind(self, store: Store) -> None:
        """A job only the hologram fits waits, saying its kind is unknown to this farm."""
        self._add_hologram(store)
        job_id = store.enqueue(gemm_spec(), T0)
        reasons = wait_reasons(store.snapshot(), T0, device_kinds=controllers.kinds())
        assert reasons[job_id] == (
            "the only match is of device kind 'hologram', unknown to this farm")

    def test_the_dispatcher_starts_nothing_on_it(self, store: Store, tmp_path: Path) -> None:
        """farmd's tick claims the phone for the first job and leaves the hologram free."""
        self._add_hologram(store)
        add_ready(store, "phone1")
        first = store.enqueue(gemm_spec(), T0)
        second = store.enqueue(gemm_spec(), T0)
        dispatcher = Dispatcher(store, Settings(data_dir=tmp_path, database_url=store.url),
                                FakeClock(T0), command=lambda *_: [sys.executable, "-c", "pass"])
        report = dispatcher.tick(T0)
        for child in dispatcher.children.values():
            child.process.wait()
        assert len(report.started) == 1
        assert [a.serials for a in store.attempts(first)] == [("phone1",)]
        assert store.attempts(second) == []
        holo = store.get_device("holo")
        assert holo is not None and holo.state is DeviceState.READY


class TestCli:
    """``farmctl enqueue ... --kind`` on a farm that knows one board and no phone."""

    @pytest.fixture
    def farmctl(self, tmp_path: Path) -> Callable[..., Result]:
        config = tmp_path / "farm.toml"
        config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
        runner = CliRunner()

        def run(*args: str) -> Result:
            return runner.invoke(cli, ["--config", str(config), *args], env={"FARM_CONFIG": None})

        assert run("jobs").exit_code == 0  # creates the database
        with Store(f"sqlite:///{tmp_path / 'data' / 'farm.db'}") as store:
            store.upsert_device("board-a", T0, BOARD_FACTS, kind="board")
            add_ready(store, "board-a", facts=BOARD_FACTS)
        return run

    def test_kind_without_devices_is_refused(self, farmctl: Callable[..., Result]) -> None:
        """A kind no known device has exits 2 with the reason in one line."""
        result = farmctl("enqueue", "gemm", "--n", "64", "--kind", "android")
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [
            ("Error: no known phone can run this job: 0 phones match kind=android "
             "(--wait-for-device queues it for phones not plugged in yet)")
        ]

    def test_kind_is_stored(self, farmctl: Callable[..., Result]) -> None:
        """``--kind android --wait-for-device`` queues a job whose selection names the kind."""
        result = farmctl("enqueue", "gemm", "--n", "64", "--kind", "android",
                         "--wait-for-device", "--json")
        assert result.exit_code == 0, result.output
        assert '"kind": "android"' in result.output

    def test_unknown_kind_is_a_usage_error(self, farmctl: Callable[..., Result]) -> None:
        """A kind the registry does not list is click's usage error (exit 2), not a traceback."""
        result = farmctl("enqueue", "gemm", "--n", "64", "--kind", "toaster")
        assert result.exit_code == 2
        assert "--kind" in result.stderr
