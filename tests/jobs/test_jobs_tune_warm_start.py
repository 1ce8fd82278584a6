"""The cost model trained on the work folder's records before the first batch
(farm.tuning.seed.warm_start)."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.jobs.params import DeviceFacts
from farm.tuning.rounds import cost_model
from farm.tuning.seed import warm_start


def _contexts(model_path: Path) -> list:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from farm.jobs.model import load_model, relax_module, tunable_module
    from farm.jobs.targets import target_for

    model, inputs = load_model(model_path)
    target = tvm.target.Target(target_for(DeviceFacts(abi="x86_64", host_runtime=True,
                                                      num_cores=2)))
    tasks = ms.relax_integration.extract_tasks(
        tunable_module(relax_module(model, inputs), target), target)
    return [ms.TuneContext(mod=t.dispatched[0], target=target, task_name=t.task_name)
            for t in tasks]


class TestWarmStart:
    def test_the_cost_model_holds_each_tasks_records_before_any_batch(
        self, tuned_cnn: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """A folder with one record per task (as the fleet's seeding leaves it): the XGBoost
        model is trained on each before the search starts, so it predicts sooner; a folder
        without records and the random model are left alone."""
        model_path, database_dir = tuned_cnn
        contexts = _contexts(model_path)
        model = cost_model(40)
        assert warm_start(model, contexts, database_dir) == len(contexts) > 1
        assert model.data_size == len(contexts)
        assert warm_start(cost_model(40), contexts, tmp_path) == 0
        assert warm_start("random", contexts, database_dir) == 0


def test_the_cost_model_trains_on_farms_few_threads_not_every_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MetaSchedule's ``XGBModel`` trains on the host's physical cores; farm's on
    ``XGB_THREADS``, whatever the host (16 threads stalled the builds' host).

    Set to a count no host here has, so that the host's own default cannot pass.
    """
    import psutil

    from farm.tuning import rounds

    threads = 2 * (psutil.cpu_count(logical=False) or 1) + 1
    monkeypatch.setattr(rounds, "XGB_THREADS", threads)
    model = cost_model(300)
    assert model.config.nthread == threads
    assert model.num_warmup_samples == 30
