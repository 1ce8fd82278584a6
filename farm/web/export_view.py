"""A finished model tune's bundle for the dashboard: whether it can be downloaded, and the zip.

The bundle is what ``farmctl export JOB --out DIR`` writes (:mod:`farm.jobs.bundle`).
The dashboard offers it only when the tuning job left its compiled library
(``model_tuned.so`` in its work folder), so a download copies files and runs
onnxruntime for the expected outputs, and never compiles inside the API; a
tune without one still says how to export it on the farm host.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from farm.errors import SpecError
from farm.jobs.tuning_db import TUNED_LIBRARY
from farm.kinds.tuned import FinishedTune, finished_tune
from farm.queue.store import Store

__all__ = ["ExportState", "export_state", "write_export_zip"]


@dataclass(frozen=True)
class ExportState:
    """Whether a job's bundle can be downloaded.

    Attributes:
        available: the zip can be built without compiling.
        reason: why not, one line (empty when available).
    """

    available: bool
    reason: str = ""


def _exportable(store: Store, data_dir: Path, job_id: int) -> FinishedTune:
    """The finished tune ``job_id`` whose work folder holds its library.

    Raises:
        SpecError: no such job, not a finished tune of a model, or no library left.
    """
    tune = finished_tune(store, data_dir, job_id, field="job")
    if not (tune.work_dir / TUNED_LIBRARY).is_file():
        raise SpecError("job", f"tune job {job_id} left no {TUNED_LIBRARY} to download: "
                               f"'farmctl export {job_id} --out DIR' on the farm host compiles it")
    return tune


def export_state(store: Store, data_dir: Path, job_id: int) -> ExportState:
    """Whether job ``job_id``'s bundle can be downloaded, and if not why."""
    try:
        _exportable(store, data_dir, job_id)
    except SpecError as exc:
        return ExportState(False, exc.reason)
    return ExportState(True)


def write_export_zip(store: Store, data_dir: Path, job_id: int) -> Path:
    """Write job ``job_id``'s bundle as ``job-N-bundle.zip`` in a new temporary folder.

    The caller removes the folder (the zip's parent) once it is sent.

    Raises:
        SpecError: as :func:`export_state` says (nothing to download).
        StoreError: the model's blob cannot be read.
    """
    from farm.jobs.bundle import write_bundle
    from farm.jobs.cache import CompileCache
    from farm.kinds.run import COMPILE_CACHE_DIR

    tune = _exportable(store, data_dir, job_id)
    folder = Path(tempfile.mkdtemp(prefix=f"farm-export-{job_id}-"))
    try:
        name = f"job-{job_id}-bundle"
        write_bundle(tune.bundle_input(store, data_dir), folder / name,
                     CompileCache(data_dir / COMPILE_CACHE_DIR))
        return Path(shutil.make_archive(str(folder / name), "zip", root_dir=folder,
                                        base_dir=name))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
