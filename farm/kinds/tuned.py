"""A finished model-tuning job, as ``enqueue model --tuned`` and ``farmctl export`` read it.

A ``tune`` job of an ONNX model (``params.model``) leaves its MetaSchedule
database in its work folder (:func:`farm.jobs.tuning_db.tune_work_dir`) and, in its
result summary, the model's ``model_sha256``, the ``target`` dict it tuned for,
and what each phone measured. Both readers need the same checks, so they live
here once: the job exists, is a tune of a model, has succeeded, and its work
folder holds tuning records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.errors import SpecError
from farm.jobs.tuning_db import RECORDS_FILE
from farm.queue.models import JobState

if TYPE_CHECKING:
    from farm.jobs.bundle import TunedModel
    from farm.queue.records import JobView
    from farm.queue.store import Store

__all__ = ["FinishedTune", "finished_tune"]


@dataclass(frozen=True)
class FinishedTune:
    """A succeeded model-tuning job.

    Attributes:
        job: the job row.
        summary: its result summary (JSON data).
        work_dir: its work folder: the MetaSchedule database, ``model_tuned.so``.
        model_sha256: SHA-256 of the ONNX file it tuned (its blob, when stored).
        device: ``"cpu"`` or ``"opencl"``: the processor it tuned for.
    """

    job: JobView
    summary: Mapping[str, Any]
    work_dir: Path
    model_sha256: str
    device: str

    @property
    def serials(self) -> list[str]:
        """The phones it tuned and timed on: its summary's ``phones``, else its runs' serials."""
        phones = self.summary.get("phones")
        if not isinstance(phones, list) or not phones:
            runs = self.summary.get("runs")
            phones = [r.get("serial") for r in runs if isinstance(r, Mapping)] \
                if isinstance(runs, list) else []
        return list(dict.fromkeys(str(s) for s in phones if isinstance(s, str) and s))

    @property
    def model_name(self) -> str:
        """The tuned model as people read it (the user's file name)."""
        from farm.kinds.model import shown_name

        return shown_name(self.job.spec["params"]["model"])

    def model_file(self, store: Store, data_dir: Path) -> Path:
        """The tuned ONNX file on this host: its blob's cached copy (written if missing).

        A spec stored with only a ``path`` (no blob) gives that path.

        Raises:
            SpecError: the spec's blob is not in the database.
            StoreError: the blob is damaged or cannot be read.
        """
        from farm.jobs.model_store import materialise

        model = self.job.spec["params"]["model"]
        if model.get("sha256"):
            return materialise(store, str(model["sha256"]), data_dir, "params.model.sha256")
        return Path(str(model.get("path", "")))

    def bundle_input(self, store: Store, data_dir: Path) -> TunedModel:
        """What :func:`farm.jobs.bundle.write_bundle` exports of this job (farmctl, the dashboard).

        Raises:
            SpecError, StoreError: as :meth:`model_file`.
        """
        from farm.jobs.bundle import TunedModel

        model = self.job.spec["params"]["model"]
        shapes = model.get("input_shapes")
        return TunedModel(
            job_id=self.job.id,
            model_path=self.model_file(store, data_dir),
            model_sha256=self.model_sha256,
            model_name=self.model_name,
            input_shapes=({k: tuple(v) for k, v in shapes.items()}
                          if isinstance(shapes, Mapping) else None),
            target=self.target,
            work_dir=self.work_dir,
            summary=self.summary,
        )

    @property
    def target(self) -> dict[str, Any]:
        """The target dict it tuned for (empty when the summary lacks it)."""
        target = self.summary.get("target")
        return dict(target) if isinstance(target, Mapping) else {}


def finished_tune(store: Store, data_dir: Path, job_id: int, field: str = "params.tuned"
                  ) -> FinishedTune:
    """The succeeded model-tuning job ``job_id``, checked.

    Args:
        store: the queue.
        data_dir: farm's data folder (work folders live under it).
        job_id: the tune job.
        field: the spec field (or flag) that named it, for errors.

    Raises:
        SpecError: no such job; not a tune of a model; not succeeded (its state
            is named); or no tuning records in its work folder.
    """
    from farm.jobs.targets import runtime_device_name
    from farm.jobs.tuning_db import tune_work_dir

    job = store.get_job(job_id)
    if job is None:
        raise SpecError(field, f"no job {job_id}")
    params = job.spec.get("params")
    model = params.get("model") if isinstance(params, Mapping) else None
    if job.kind != "tune" or not isinstance(model, Mapping):
        raise SpecError(field, f"job {job_id} is a {job.kind} job, not a tune of a model")
    if job.state is not JobState.SUCCEEDED:
        raise SpecError(field, f"tune job {job_id} has not finished well: it is {job.state.value}")
    results = store.results(job_id, limit=1)
    summary: Mapping[str, Any] = results[0].summary if results else {}
    work_dir = tune_work_dir(data_dir, job_id)
    if not (work_dir / RECORDS_FILE).is_file():
        raise SpecError(field, f"tune job {job_id} left no tuning records in {work_dir}")
    sha256 = str(summary.get("model_sha256") or model.get("sha256") or "")
    target = summary.get("target")
    device = runtime_device_name(dict(target)) if isinstance(target, Mapping) and "kind" in target \
        else "cpu"
    return FinishedTune(job, summary, work_dir, sha256, device)
