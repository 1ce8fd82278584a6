"""NVML readings recorded on an H100 (tests/fixtures/nvml) parsed and replayed, no GPU needed."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from farm.errors import ConfigError, InfraFault, ToolMissing
from farm.gpu.nvml import (
    PynvmlReader,
    RecordedReader,
    cuda_version_text,
    parse,
    record,
    throttle_reasons,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvml"


def recording(name: str) -> list[dict]:
    return list(json.loads((FIXTURES / name).read_text())["readings"])


class TestParse:
    def test_idle_h100_reading_gives_identity_and_units(self) -> None:
        """The idle H100 reading parses into farm's units: MiB, W, MHz, °C, names."""
        (gpu,) = parse(recording("h100_idle.json")[0])
        assert gpu.name == "NVIDIA H100 80GB HBM3"
        assert gpu.uuid.startswith("GPU-")
        assert gpu.compute_capability == (9, 0)
        assert gpu.arch == "sm_90"
        assert gpu.memory_total_mb == pytest.approx(81559, abs=1)
        assert gpu.driver_version == "580.159.04"
        assert gpu.cuda_version == "13.0"
        assert gpu.temp_c == 33
        assert gpu.slowdown_temp_c == 89
        assert gpu.sm_clock_mhz == 345
        assert gpu.power_w == pytest.approx(69.769)
        assert gpu.power_limit_w == 700
        assert gpu.throttle_reasons == ("gpu_idle",)
        assert gpu.heat_reasons == ()

    def test_loaded_h100_runs_at_full_clock_without_reasons(self) -> None:
        """Under the GEMM the H100 ran at its top SM clock, fully busy, with no event reason."""
        (gpu,) = parse(recording("h100_load.json")[-1])
        assert gpu.utilization_pct == 100
        assert gpu.sm_clock_mhz == gpu.max_sm_clock_mhz == 1980
        assert gpu.throttle_reasons == ()
        assert gpu.temp_c is not None and gpu.temp_c > 33

    def test_unsupported_fields_stay_none(self) -> None:
        """A field NVML did not support on a GPU (None in the raw reading) is None, not 0."""
        raw = copy.deepcopy(recording("h100_idle.json")[0])
        for key in ("temp_c", "power_mw", "clock_event_reasons"):
            raw["gpus"][0][key] = None
        (gpu,) = parse(raw)
        assert (gpu.temp_c, gpu.power_w, gpu.throttle_reasons) == (None, None, ())

    def test_reading_without_identity_is_an_infra_fault(self) -> None:
        """A GPU entry without its uuid did not come from NVML: InfraFault, naming the entry."""
        raw = copy.deepcopy(recording("h100_idle.json")[0])
        del raw["gpus"][0]["uuid"]
        with pytest.raises(InfraFault, match="uuid"):
            parse(raw)

    def test_gpus_come_in_index_order(self) -> None:
        """Readings are sorted by NVML index whatever order the raw list has."""
        raw = copy.deepcopy(recording("h100_idle.json")[0])
        second = copy.deepcopy(raw["gpus"][0]) | {"index": 1, "uuid": "GPU-other"}
        raw["gpus"].insert(0, second)
        assert [g.index for g in parse(raw)] == [0, 1]


class TestThrottleReasons:
    def test_names_each_set_bit_lowest_first(self) -> None:
        """0x20 | 0x40 | 0x4 names the power cap and both thermal slowdowns, low bit first."""
        assert throttle_reasons(0x64) == ("sw_power_cap", "sw_thermal_slowdown",
                                          "hw_thermal_slowdown")

    def test_unknown_bits_are_kept_by_value(self) -> None:
        """A bit newer than farm's table is named by its value, not dropped."""
        assert throttle_reasons(0x1000) == ("bit_0x1000",)

    def test_zero_and_none_are_no_reasons(self) -> None:
        """No bit set, or not read, is no reason."""
        assert throttle_reasons(0) == throttle_reasons(None) == ()


class TestCudaVersion:
    def test_nvml_integer_encoding(self) -> None:
        """1000 * major + 10 * minor: 13000 is 13.0, 12040 is 12.4; unknown is empty."""
        assert cuda_version_text(13000) == "13.0"
        assert cuda_version_text(12040) == "12.4"
        assert cuda_version_text(None) == ""


class TestRecordedReader:
    def test_replays_in_order_then_repeats_the_last(self) -> None:
        """Readings come back in recorded order; past the end the last one repeats."""
        readings = recording("h100_load.json")
        reader = RecordedReader(readings)
        got = [reader.read() for _ in range(len(readings) + 2)]
        assert got[: len(readings)] == readings
        assert got[-1] == got[-2] == readings[-1]

    def test_from_file_reads_a_fixture(self) -> None:
        """A recorded file loads and replays."""
        reader = RecordedReader.from_file(FIXTURES / "h100_idle.json")
        assert parse(reader.read())[0].arch == "sm_90"

    def test_missing_or_empty_recording_is_a_config_error(self, tmp_path: Path) -> None:
        """A missing file or one with no readings is the user's ConfigError."""
        with pytest.raises(ConfigError):
            RecordedReader.from_file(tmp_path / "none.json")
        (tmp_path / "empty.json").write_text('{"source": "x", "readings": []}')
        with pytest.raises(ConfigError, match="no readings"):
            RecordedReader.from_file(tmp_path / "empty.json")

    def test_record_keeps_the_source_and_pauses_between_readings(self) -> None:
        """record() takes count readings with a pause between each pair, and notes the source."""
        pauses: list[int] = []
        out = record(RecordedReader(recording("h100_load.json")), 3, "here",
                     lambda: pauses.append(1))
        assert out["source"] == "here"
        assert len(out["readings"]) == 3
        assert len(pauses) == 2


class TestPynvmlReader:
    def test_without_nvidia_ml_py_names_the_extra(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without nvidia-ml-py, reading is ToolMissing with the pip extra to install."""
        monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
        with pytest.raises(ToolMissing, match=r"farm\[gpu\]"):
            PynvmlReader().read()
