"""A MetaSchedule builder whose worker processes stay warm for the whole tuning run.

MetaSchedule's ``LocalBuilder`` starts a fresh process pool for every batch
(apache/tvm ``python/tvm/s_tir/meta_schedule/builder/local_builder.py``: "we
restart the PopenPool everytime because of a known memory leak") and one more
for a sanity check when it is created. Each worker first imports
``tvm.s_tir.tensor_intrin`` (:func:`farm.tuning.rounds.builder_initializer`),
which took 62 s on the loaded 2-core CI host: a minute per batch before
anything is built. :class:`WarmBuilder` keeps one pool, starts its workers
(the imports) at once, in the background, while the search proposes the first
candidates, and recycles a worker after ``max_uses`` builds, which bounds the
leak LocalBuilder restarts for. Each build runs LocalBuilder's own worker
function, so candidates are built and exported exactly as LocalBuilder does.

Pipelined (``pipeline=True``), a build call does not wait for its builds: it
hands each candidate the path its library will have
(:func:`artifact_path`), submits the builds and returns, so MetaSchedule's
task scheduler sends the batch to the runner and goes on searching the next
batch while this one is built and measured. The runner's upload waits for
each library (:class:`farm.tuning.rate.TimedUpload` with ``build_wait_s``);
a build that fails leaves ``<path>.error`` with its reason, which the upload
raises, so the candidate is recorded as failed, as a failed build is.
"""

from __future__ import annotations

import math
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

__all__ = ["ERROR_SUFFIX", "artifact_path", "warm_builder"]

#: Appended to a pipelined candidate's library path for the file holding why its build failed.
ERROR_SUFFIX = ".error"


def artifact_path() -> str:
    """A fresh path for a candidate's library, in a folder of its own (as ``SoExporter`` makes).

    MetaSchedule removes the folder once the candidate is measured
    (``RemoveBuildArtifact``).
    """
    return str(Path(tempfile.mkdtemp(prefix="farm-ms-")) / "tvm_tmp_mod.so")


def _note_failure(path: str, future: Future[Any]) -> None:
    """Leave ``<path>.error`` when a pipelined build failed (an exception or the pool's timeout)."""
    error = future.exception()
    if error is not None:
        Path(path + ERROR_SUFFIX).write_text(f"build failed: {error!r}", encoding="utf-8")


def _ready() -> bool:
    """A no-op run in each worker at start, so that its initializer runs now."""
    return True


def _builder_class() -> type:
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.builder.local_builder import _serialize_params, _worker_func
    from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

    @derived_object
    class _WarmBuilder(PyBuilder):
        def __init__(self, workers: int, timeout_s: float, f_export: Any,
                     initializer: Callable[[], None], max_uses: int,
                     on_built: Callable[[], None] | None, pipeline: bool) -> None:
            super().__init__()
            self.f_export = f_export
            self.pipeline = pipeline
            self.on_built = on_built
            self.workers = workers
            #: Seconds per wave of ``workers`` candidates of the last build calls:
            #: prices the picks' check (farm.tuning.check_cost).
            self.waves_s: list[float] = []
            self.timeout_s = timeout_s
            self.pool = PopenPoolExecutor(max_workers=workers, timeout=timeout_s,
                                          initializer=initializer,
                                          maximum_process_uses=max_uses)
            for _ in range(workers):
                self.pool.submit(_ready)

        def build(self, build_inputs: list[Any]) -> list[Any]:
            if self.pipeline:
                return self._submit(build_inputs)
            started_s = time.monotonic()
            args = [(None, self.f_export, b.mod, b.target, _serialize_params(b.params))
                    for b in build_inputs]
            results = []
            for done in self.pool.map_with_error_catching(lambda x: _worker_func(*x), args):
                if done.status == StatusKind.COMPLETE:
                    results.append(BuilderResult(done.value, None))
                elif done.status == StatusKind.TIMEOUT:
                    results.append(BuilderResult(
                        None, f"WarmBuilder: timeout, killed after {self.timeout_s} s"))
                else:
                    results.append(BuilderResult(None, f"WarmBuilder: {done.value}"))
            if build_inputs:  # one wave: as many candidates as processes, built at once
                waves = math.ceil(len(build_inputs) / max(self.workers, 1))
                self.waves_s = [*self.waves_s[-3:], (time.monotonic() - started_s) / waves]
            if self.on_built is not None:
                self.on_built()
            return results

        def _submit(self, build_inputs: list[Any]) -> list[Any]:
            """Start each build and return its library's path now (the module docstring)."""
            started_s = time.monotonic()
            paths = [artifact_path() for _ in build_inputs]
            futures = [self.pool.submit(_worker_func, None, self.f_export.to(path), b.mod,
                                        b.target, _serialize_params(b.params))
                       for path, b in zip(paths, build_inputs, strict=True)]
            left = [len(futures)]
            lock = threading.Lock()

            def done(path: str, future: Future[Any]) -> None:
                _note_failure(path, future)
                with lock:
                    left[0] -= 1
                    if left[0]:
                        return
                waves = math.ceil(len(futures) / max(self.workers, 1))
                self.waves_s = [*self.waves_s[-3:], (time.monotonic() - started_s) / waves]

            for path, future in zip(paths, futures, strict=True):
                future.add_done_callback(lambda f, p=path: done(p, f))
            if self.on_built is not None:
                self.on_built()
            return [BuilderResult(path, None) for path in paths]

        @property
        def wave_s(self) -> float | None:
            """Seconds a wave of ``workers`` builds takes: the least of the last 4 calls'.

            The first call waits for the processes' start (their imports, up to a
            minute on a loaded host), which later waves do not pay.
            """
            return min(self.waves_s, default=None)

        def shutdown(self) -> None:
            """End the worker processes, on a thread of its own: the caller does not wait.

            TVM's ``PopenWorker.kill`` closes the pipe a worker still starting
            (``_ready``, its initializer importing TVM) is read through, and
            that close waits for the read: a tuning whose time budget ran out
            as the pool started waited 28 s (a loaded 2-core host) to end.
            """
            threading.Thread(target=self.pool.shutdown, kwargs={"wait": False},
                             name="builder-shutdown", daemon=True).start()

    return _WarmBuilder


_CLASS: list[type] = []


def warm_builder(workers: int, timeout_s: float, f_export: Any,
                 initializer: Callable[[], None], max_uses: int = 64,
                 on_built: Callable[[], None] | None = None, *, pipeline: bool = False) -> Any:
    """A MetaSchedule ``Builder`` with ``workers`` processes, started now.

    Args:
        workers: build processes.
        timeout_s: one build's limit (the first build of a worker includes
            its initializer).
        f_export: writes a built module to a ``.so`` and returns its path;
            pipelined, its ``to(path)`` gives one writing to ``path``
            (:class:`farm.tuning.rounds.SoExporter`).
        initializer: run once in each worker when it starts.
        max_uses: builds before a worker is replaced by a fresh one.
        on_built: called after each call's builds are done, in the caller's
            thread (MetaSchedule's task scheduler builds a batch before it
            searches the next: :meth:`farm.tuning.progress.TuneProgress.batch_built`);
            pipelined, once its builds are submitted.
        pipeline: return from a build call at once, each candidate's library
            to come (the module docstring); False: return once all are built.

    Returns:
        The builder; call its ``shutdown()`` when tuning ends.
    """
    if not _CLASS:
        _CLASS.append(_builder_class())
    return _CLASS[0](workers, timeout_s, f_export, initializer, max_uses, on_built, pipeline)
