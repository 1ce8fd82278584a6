"""``farmctl reserve | unreserve | reservations`` and the reserved column of ``devices``."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from click.testing import Result

from farm.click_types import Seconds
from farm.queue import DeviceState, Store

NOW = datetime(2025, 1, 1, tzinfo=UTC)
Farmctl = Callable[..., Result]


@pytest.fixture
def phones(store: Store) -> Store:
    """Two ready phones, R1 (SM8150) and R2 (SM8450)."""
    for serial, soc in (("R1", "SM8150"), ("R2", "SM8450")):
        store.upsert_device(serial, NOW, {"abi": "arm64-v8a", "sdk": 34, "soc": soc})
        store.move_device(serial, DeviceState.READY, "test", NOW,
                          expect_state=DeviceState.DISCOVERED)
    return store


class TestReserve:
    def test_prints_tracker_key_and_connect_line(self, farmctl: Farmctl, phones: Store) -> None:
        """reserve SERIAL prints the tracker, the phone's key and a line to paste."""
        result = farmctl("reserve", "R1", "--for", "2h", "--owner", "alice")
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert lines[0].startswith("reserved R1 for alice until ")
        assert lines[1] == "tracker 127.0.0.1:9190 key android-R1"
        assert lines[2] == 'tvm.rpc.connect_tracker("127.0.0.1", 9190).request("android-R1")'

    def test_selection_picks_a_matching_phone(self, farmctl: Farmctl, phones: Store) -> None:
        """reserve --soc gets a free phone of that SoC; --json carries the same fields."""
        result = farmctl("reserve", "--soc", "sm8450", "--owner", "bob", "--json")
        assert result.exit_code == 0, result.output
        row = json.loads(result.stdout)
        assert (row["serial"], row["owner"], row["tracker_key"]) == ("R2", "bob", "android-R2")

    def test_another_owner_gets_a_one_line_error(self, farmctl: Farmctl, phones: Store) -> None:
        """A phone someone else holds is refused with exit code 2 and no traceback."""
        assert farmctl("reserve", "R1", "--owner", "alice").exit_code == 0
        result = farmctl("reserve", "R1", "--owner", "bob")
        assert result.exit_code == 2
        assert result.stderr.startswith("Error: R1: reserved by alice until ")

    def test_serial_and_selection_together_are_refused(self, farmctl: Farmctl,
                                                       phones: Store) -> None:
        """A serial and a selection at once is a usage error."""
        result = farmctl("reserve", "R1", "--soc", "sm8150", "--owner", "a")
        assert result.exit_code == 2 and "not both" in result.stderr

    def test_for_out_of_range_names_the_bounds_in_units(self, farmctl: Farmctl,
                                                        phones: Store) -> None:
        """--for past the type's bound shows the bounds as a user writes them (366d, not 3e+07)."""
        result = farmctl("reserve", "R1", "--for", "400d", "--owner", "a")
        assert result.exit_code == 2
        assert "Error: Invalid value for '--for': 400d is not in the range 0s<x<=366d\n" \
            in result.stderr

    def test_neither_serial_nor_selection_is_refused_as_such(self, farmctl: Farmctl,
                                                             phones: Store) -> None:
        """No serial and no selection says what is missing (it said 'not both')."""
        result = farmctl("reserve", "--for", "1h", "--owner", "a")
        assert result.exit_code == 2
        assert result.stderr == ("Error: give a SERIAL or a selection "
                                 "(--abi/--soc/--gpu/--sdk-min) to reserve\n")

    def test_longer_than_the_limit_is_refused(self, farmctl: Farmctl, phones: Store) -> None:
        """--for beyond reservations.max_for_s is refused."""
        result = farmctl("reserve", "R1", "--for", "30d", "--owner", "a")
        assert result.exit_code == 2 and "reservations.max_for_s" in result.stderr


class TestUnreserveAndList:
    def test_owner_only_unless_any(self, farmctl: Farmctl, phones: Store) -> None:
        """Another owner cannot unreserve; --any can; the list empties."""
        farmctl("reserve", "R1", "--owner", "alice")
        listed = json.loads(farmctl("reservations", "--json").stdout)
        assert [(r["serial"], r["owner"]) for r in listed] == [("R1", "alice")]
        refused = farmctl("unreserve", "R1", "--owner", "bob")
        assert refused.exit_code == 2 and "another owner" in refused.stderr
        assert farmctl("unreserve", "R1", "--any").exit_code == 0
        assert json.loads(farmctl("reservations", "--json").stdout) == []
        ended = json.loads(farmctl("reservations", "--all", "--json").stdout)
        assert ended[0]["end_reason"] == "unreserved by operator"

    def test_devices_shows_the_reservation(self, farmctl: Farmctl, phones: Store) -> None:
        """devices --json names the owner and end time of a reserved phone."""
        farmctl("reserve", "R1", "--owner", "alice", "--for", "1h")
        rows = {r["serial"]: r for r in json.loads(farmctl("devices", "--json").stdout)}
        assert rows["R1"]["reserved_by"] == "alice"
        assert rows["R1"]["shown_state"] == "ready (reserved)"
        assert rows["R2"]["reserved"] is None


class TestSecondsUnits:
    @pytest.mark.parametrize(("text", "seconds"),
                             [("90", 90.0), ("90s", 90.0), ("15m", 900.0), ("2h", 7200.0),
                              ("1d", 86400.0), ("1.5H", 5400.0)])
    def test_units(self, text: str, seconds: float) -> None:
        """A duration may end with s, m, h or d."""
        assert Seconds(0, 1e9).convert(text, None, None) == seconds
