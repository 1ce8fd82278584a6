"""A tune on emulated devices: which devices count as emulated, its budget, its outcome line."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.errors import SpecError
from farm.jobs.params import GemmParams, TuneParams
from farm.tuning.emulated import emulated_devices, emulated_note, path_check_params
from farm.tuning.outcome import outcome_lines

BOARD = {"kind": "board", "abi": "aarch64", "emulated": True}
REAL = {"kind": "board", "abi": "aarch64", "emulated": False}


class TestEmulatedDevices:
    def test_all_emulated_is_true_none_is_false(self) -> None:
        """Every device emulated: True; none (or no emulated fact at all): False."""
        assert emulated_devices({"vb0": BOARD, "vb1": BOARD}) is True
        assert emulated_devices({"b0": REAL, "R1": {"abi": "arm64-v8a"}}) is False
        assert emulated_devices({}) is False

    def test_a_mix_is_refused_in_one_line_naming_both_sides(self) -> None:
        """Emulated and real devices together are a SpecError on devices.serials."""
        with pytest.raises(SpecError) as info:
            emulated_devices({"vb0": BOARD, "b0": REAL, "R1": {}})
        assert info.value.field == "devices.serials"
        message = str(info.value)
        assert "vb0 emulated and R1, b0 not" in message and "\n" not in message


class TestPathCheckParams:
    def test_one_batch_and_no_picks_check(self, tmp_path: Path) -> None:
        """The trials are capped at one batch and the picks are not measured again."""
        params = TuneParams(gemm=GemmParams(n=64), trials=1000, work_dir=tmp_path,
                            trials_per_iter=16)
        checked = path_check_params(params)
        assert (checked.trials, checked.trials_per_iter, checked.verify_rounds) == (16, 16, 0)
        fewer = path_check_params(TuneParams(gemm=None, trials=4, work_dir=tmp_path,
                                             trials_per_iter=16))
        assert fewer.trials == 4


class TestOutcome:
    def test_the_note_says_emulated_path_outputs_and_no_ranking(self) -> None:
        """One line: the devices are emulated, the path and outputs checked, nothing ranked."""
        assert emulated_note(["vb0", "vb1"]) == (
            "vb0, vb1 are emulated: the tune checked the path and the outputs and ranked nothing")

    def test_outcome_lines_are_the_note_alone(self) -> None:
        """farmctl job shows the note as the outcome of a gemm or model tune: no best build,
        speed-up, records or picks lines."""
        note = emulated_note(["vb0"])
        gemm = {"kind": "tune", "emulated": True, "emulated_note": note, "speedup": None}
        model = {**gemm, "best_build": "untuned", "best_note": note, "records_applied": 0,
                 "tasks": [{"trials_measured": 4}], "trials_measured": 4}
        assert outcome_lines(gemm) == [note]
        assert outcome_lines(model) == [note]
