"""A schedule's ``baseline`` and the ``[results]`` settings compare and the watch read."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.config import Schedule, load_config
from farm.errors import ConfigError


def _config(tmp_path: Path, baseline: str) -> Path:
    path = tmp_path / "farm.toml"
    path.write_text(f'data_dir = "{tmp_path}"\n[[schedules]]\ncron = "0 1 * * *"\n'
                    f'spec = {{ kind = "gemm", params = {{ n = 64 }} }}\nbaseline = {baseline}\n')
    return path


class TestScheduleBaseline:
    @pytest.mark.parametrize(("text", "value"), [('"previous"', "previous"), ("42", 42)])
    def test_previous_or_a_job_id(self, tmp_path: Path, text: str, value: object) -> None:
        """A baseline is "previous" or a job id, read from the TOML file."""
        assert load_config(_config(tmp_path, text), env={}).schedules[0].baseline == value

    def test_no_baseline_by_default(self) -> None:
        """A schedule without a baseline is not watched."""
        assert Schedule(cron="0 1 * * *", spec={}).baseline is None

    @pytest.mark.parametrize("text", ['"last"', "0", "-3", "true", "1.5", '"7"'])
    def test_anything_else_is_one_config_error(self, tmp_path: Path, text: str) -> None:
        """Any other baseline names the schedule's key and says what is allowed."""
        with pytest.raises(ConfigError) as caught:
            load_config(_config(tmp_path, text), env={})
        assert caught.value.key == "schedules.0.baseline"
        assert caught.value.reason.startswith('must be "previous" or a job id')


class TestResultsSettings:
    def test_defaults(self, tmp_path: Path) -> None:
        """A change counts from 5% at p < 0.01, as the issue asks."""
        path = tmp_path / "farm.toml"
        path.write_text("")
        results = load_config(path, env={}).results
        assert (results.change_threshold, results.alpha) == (0.05, 0.01)

    @pytest.mark.parametrize("env", [{"FARM_RESULTS__ALPHA": "1.5"},
                                     {"FARM_RESULTS__CHANGE_THRESHOLD": "0"}])
    def test_bounds(self, tmp_path: Path, env: dict[str, str]) -> None:
        """alpha and the threshold are fractions strictly between 0 and 1."""
        path = tmp_path / "farm.toml"
        path.write_text("")
        with pytest.raises(ConfigError, match="results"):
            load_config(path, env=env)
