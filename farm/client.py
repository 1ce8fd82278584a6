"""``farm.client``: the farm from Python, over its HTTP API.

::

    from farm.client import Farm

    farm = Farm("http://127.0.0.1:9465", token="farm_...")
    job = farm.submit_model("small_cnn.onnx", inputs={"x": x}, profile=True,
                            devices={"soc": "SM8150"})
    result = job.wait(timeout_s=600).result()
    print(result.summary["per_serial"], job.profile(), job.outputs())
    tune = farm.submit_tune("small_cnn.onnx", trials=64, for_s=3600).wait()
    print(tune.outcome(), farm.compare(f"{tune.id}:untuned", tune))
    tune.export("bundle")
    for phone in farm.submit_ab("gemm:n=256", "gemm:n=256,bn=16").wait().ab():
        print(phone["serial"], phone["verdict"], phone["ratio"], phone["why"])

It is a thin layer over :class:`farm.cli.remote.RemoteService`, the client
``farmctl --server`` uses, so there is one implementation of the wire: model
files are uploaded as blobs, specs are checked by the server, and errors are
the classes the server raised, with its one-line messages:

- :class:`~farm.errors.SpecError` (a :class:`~farm.errors.UserFault`): the spec
  or a file is refused, naming the field;
- :class:`~farm.api.errors.Unauthorized`, :class:`~farm.api.errors.Forbidden`: the token;
- :class:`~farm.errors.InfraFault`: the server cannot be reached;
- :class:`JobFailed`: a waited-for job failed or was cancelled;
- :class:`~farm.cli.jobs.WaitTimedOut` (as ``farmctl wait --timeout``): :meth:`Job.wait`
  past its timeout;
- :class:`~farm.api.errors.NotFound`: :meth:`Job.outputs` of a job that kept none,
  :meth:`Job.export` of a job with no bundle to download.

A job given ``inputs`` keeps each phone's outputs on them, by the graph's
output names (:meth:`Job.outputs`, ``GET /api/v1/jobs/{id}/outputs/{serial}``);
a symbolic input takes its shape from its array, as ``--inputs`` does. One
given ``profile=True`` times each kernel on each phone (:meth:`Job.profile`,
read from the result). A finished tune of a model says its outcome as
``farmctl job`` does (:meth:`Job.outcome`) and is exported as ``farmctl export``
writes it (:meth:`Job.export`, the dashboard's download of the bundle).
:meth:`Job.cancel` is ``farmctl cancel``; :meth:`Farm.compare` is ``farmctl
compare A B --json`` (the dashboard's comparison, with the server's threshold
and alpha). An A/B job (:meth:`Farm.submit_ab`, ``farmctl enqueue ab``) gives each
phone's verdict of B against A (:meth:`Job.ab`); its raw samples carry their
build and round (``result().arms``, ``result().rounds``).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from farm.cli.jobs import WaitTimedOut
from farm.cli.remote import RemoteService
from farm.clock import SystemClock, wait_until
from farm.errors import FarmError, UserFault
from farm.kinds.ab import KIND as AB_KIND
from farm.kinds.ab_builds import parse_build
from farm.kinds.model import KIND as MODEL_KIND
from farm.kinds.tune import KIND as TUNE_KIND
from farm.queue.models import JobState
from farm.queue.records import DeviceRecord, JobView, ResultView
from farm.results.ab import ab_phones
from farm.results.profiles import last_profiles

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Farm", "Job", "JobFailed"]

#: Seconds between two looks at a waited-for job (one GET each).
POLL_S = 1.0


class JobFailed(FarmError):
    """A waited-for job ended failed or cancelled; the message carries the server's reason."""


class Job:
    """A job on the farm, as :meth:`Farm.submit_model` or :meth:`Farm.job` return it.

    Attributes:
        id: the job's id (``farmctl job ID``).
    """

    def __init__(self, farm: Farm, job_id: int) -> None:
        self.id = job_id
        self._farm = farm

    def __repr__(self) -> str:
        return f"Job({self.id})"

    def view(self) -> JobView:
        """The job as the server sees it now (state, attempts made, error)."""
        return self._farm.service.job(self.id)

    def wait(self, timeout_s: float | None = None) -> Job:
        """Wait until the job ends; returns itself once it succeeded.

        Args:
            timeout_s: give up after this many seconds; None waits as long as it takes.

        Raises:
            JobFailed: the job failed or was cancelled.
            WaitTimedOut: it had not ended after ``timeout_s``.
        """
        views: list[JobView] = []

        def ended() -> bool:
            views.append(self.view())
            return views[-1].state.ended

        deadline_s = float("inf") if timeout_s is None else timeout_s
        if not wait_until(ended, deadline_s, interval_s=POLL_S, clock=self._farm.clock):
            raise WaitTimedOut(f"job {self.id} still {views[-1].shown_state} "
                               f"after {timeout_s:g} s")
        view = views[-1]
        if view.state is not JobState.SUCCEEDED:
            raise JobFailed(f"job {self.id} {view.shown_state}: "
                            f"{view.error or 'no reason recorded'}")
        return self

    def cancel(self) -> JobView:
        """Cancel the job, queued or running (``farmctl cancel``).

        The token's owner's own job, or any with an operator token.

        Raises:
            NotFound: no such job.
            Forbidden: another owner's job and no operator token.
        """
        return self._farm.service.cancel(self.id)

    def outcome(self) -> list[str]:
        """A finished model tune's outcome, the lines ``farmctl job`` prints.

        Which build is best and why, its speed-up (only where a tuned build
        exists), the tuning records applied, the picks checked and used, the
        tasks tuned of the model's and the trials measured
        (:func:`farm.tuning.outcome.outcome_lines`); the facts are in
        :meth:`result`'s ``summary`` (``best_build``, ``records_applied``...).

        Raises:
            JobFailed: the job has no result yet.
            UserFault: it is no tune of a model.
        """
        from farm.tuning import outcome_lines

        lines = outcome_lines(self.result().summary)
        if not lines:
            raise UserFault(f"job {self.id} has no tuning outcome: only a finished tune of "
                            "a model has one")
        return lines

    def result(self) -> ResultView:
        """The job's result: ``summary`` (per phone in ``per_serial`` and ``runs``) and samples.

        Raises:
            JobFailed: the job has no result (not finished, or it failed).
        """
        found = self._farm.service.results(self.id)
        if not found:
            raise JobFailed(f"job {self.id} has no result yet ({self.view().state.value})")
        return found[0]

    def profile(self) -> dict[str, dict[str, Any]]:
        """Serial -> the kernel profile of each phone (``farmctl profile JOB --json``'s phones).

        Each profile has ``kernels`` (heaviest first: ``name``, ``calls``,
        ``per_call_ms``, ``total_ms``, ``share_pct``), ``kernels_ms``, ``model_ms``
        and ``ratio`` (:class:`farm.jobs.profile.KernelProfile`).

        Raises:
            JobFailed: the job has no result yet.
            UserFault: it was not submitted with ``profile=True``.
        """
        profiles = last_profiles(self.result())
        if not profiles:
            raise UserFault(f"job {self.id} has no kernel profile: only a finished model job "
                            "submitted with profile=True has one")
        return profiles

    def ab(self) -> list[dict[str, Any]]:
        """Each phone's verdict of B against A, as ``farmctl job`` prints it (by serial).

        Rows of :func:`farm.results.ab.ab_phones`: ``serial``, ``a``, ``b`` (the
        builds' labels), ``verdict`` (``slower``, ``faster``, ``no change`` or
        ``undecided``), ``ratio`` (median B/A of the rounds), ``ci_low``/``ci_high``,
        ``p_value``, ``rounds``, ``phone_s`` (seconds), ``median_a_ms``/``median_b_ms``
        and ``why``. The raw timings are :meth:`result`'s samples with their
        ``arms`` and ``rounds``.

        Raises:
            JobFailed: the job has no result yet.
            UserFault: it is no A/B job.
        """
        phones = ab_phones(self.result().summary)
        if not phones:
            raise UserFault(f"job {self.id} is a {self.view().kind} job, not an A/B job "
                            "(Farm.submit_ab)")
        return phones

    def outputs(self) -> dict[str, dict[str, np.ndarray]]:
        """Serial -> the outputs each phone gave for the job's ``inputs``, by name.

        Names are the graph's output names (``output_0``, ``output_1``... for
        outputs kept before they were: :mod:`farm.jobs.model_io`).

        Raises:
            NotFound: no such job, or it kept no outputs (not finished, or no ``inputs``).
        """
        from farm.jobs.model_io import load_npz

        return {serial: load_npz(data, f"the outputs of {serial}")
                for serial, data in self._farm.service.outputs(self.id).items()}

    def export(self, out: str | Path) -> Path:
        """Write this finished model tune's bundle into ``out``, as ``farmctl export`` does.

        The library, MetaSchedule database, model, inputs and expected outputs,
        manifest, README and C++ example (:mod:`farm.jobs.bundle`), downloaded
        as the dashboard's zip and unpacked.

        Args:
            out: a folder that does not exist or is empty.

        Returns:
            ``out``.

        Raises:
            SpecError: ``out`` exists and is not an empty folder, or cannot be written.
            NotFound: the job is no finished tune of a model, or it left no compiled
                library to download (the server's one line says which).
            InfraFault: the server's answer is not a bundle.
        """
        return self._farm.service.export(self.id, out)


class Farm:
    """A farm server, reached with a token.

    Args:
        url: the API's base URL, e.g. ``http://127.0.0.1:9465``.
        token: the caller's token (``farmctl token create``).
    """

    def __init__(self, url: str, token: str | None) -> None:
        self.service = RemoteService(url, token)
        self.clock = SystemClock()

    def close(self) -> None:
        """Close the HTTP connections."""
        self.service.close()

    def __enter__(self) -> Farm:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def devices(self) -> list[DeviceRecord]:
        """Every device of the farm, with its state, facts and latest health."""
        return self.service.devices()

    def job(self, job_id: int) -> Job:
        """A job already submitted, by id."""
        return Job(self, job_id)

    def compare(self, a: str | int | Job, b: str | int | Job) -> dict[str, Any]:
        """Compare B with A per phone, as ``farmctl compare A B --json`` prints it.

        Args:
            a: a job (or its id), a run id (``r-...``), or ``N:untuned`` (tune job
                N's own untuned timings).
            b: the same.

        Returns:
            ``phones`` (each with ``verdict``, ``ratio`` B/A and its CI, ``p_value``,
            ``reason``), ``slower``, ``undecided``, ``exit_code``
            (:meth:`farm.results.compare.CompareReport.to_json`).

        Raises:
            UserFault: an unknown or unfinished job or run, no phone in common,
                different workloads (the server's one line).
        """
        return self.service.compare(_ref(a), _ref(b))

    def submit_model(
        self, path: str | Path, input_shapes: Mapping[str, Sequence[int]] | None = None, *,
        devices: Mapping[str, Any] | None = None, target: str = "cpu",
        tuned: int | None = None, repetitions: int | None = None,
        inputs: str | Path | Mapping[str, np.ndarray] | None = None, profile: bool = False,
        number: int | None = None, repeat: int | None = None,
    ) -> Job:
        """Time an ONNX model on a device and check it against onnxruntime (``enqueue model``).

        Args:
            path: the ONNX file on this machine; it is uploaded.
            input_shapes: input name -> shape; None for the model's own (with
                ``inputs``, a symbolic dimension takes its array's size).
            inputs: the model's inputs (``--inputs``): an ``.npz`` file, or input
                name -> array; uploaded, fed to the phone and to onnxruntime, and
                the phone's outputs kept by output name (:meth:`Job.outputs`).
                None: random inputs.
            profile: also time each kernel on the phone (:meth:`Job.profile`).
            number: runs per sample (``--number``); None for the spec's default.
            repeat: samples per measurement (``--repeat``); None for the spec's default.
            devices: the device selection (``serials``, ``soc``, ``abi``, ``count``...).
            target: ``cpu``, ``opencl`` or ``cuda``.
            tuned: a finished tune job of this model whose records are applied.
            repetitions: measured runs per device; None for the server's default.

        Raises:
            SpecError: a file, the inputs or the spec is refused (the server's one line).
        """
        params: dict[str, Any] = {"path": str(path), "target": target, "tuned": tuned,
                                  "input_shapes": _shapes(input_shapes),
                                  "profile": profile or None, "number": number,
                                  "repeat": repeat}
        if isinstance(inputs, Mapping):
            params["inputs"] = self.service.upload_inputs(_npz(inputs), "inputs.npz").model_dump()
        elif inputs is not None:
            params["inputs"] = str(inputs)
        return self._submit(MODEL_KIND.name, params, MODEL_KIND.input_files, devices,
                            repetitions)[0]

    def submit_tune(
        self, path: str | Path, input_shapes: Mapping[str, Sequence[int]] | None = None, *,
        trials: int | None = None, for_s: float | None = None,
        devices: Mapping[str, Any] | None = None, target: str = "cpu",
        trials_per_task: int | None = None, max_tasks: int | None = None,
        trials_per_batch: int | None = None, phones: int | None = None,
    ) -> Job:
        """Tune an ONNX model with MetaSchedule on the devices (``enqueue tune --model``).

        Args:
            path: the ONNX file on this machine; it is uploaded.
            input_shapes: input name -> shape (``--input-shape``); None for the model's own.
            trials: measured trials in total (``--trials``); None for the server's
                ``jobs.tune_model_trials``.
            for_s: tuning seconds at most (``--for``), whichever of it and ``trials``
                runs out first; None for the server's ``jobs.tune_model_for_s``.
            devices: the device selection (``serials``, ``soc``, ``abi``...).
            target: ``cpu``, ``opencl`` or ``cuda``.
            trials_per_task: measured trials per task at most (``--trials-per-task``).
            max_tasks: tune only this many of the heaviest tasks (``--max-tasks``).
            trials_per_batch: candidates built and measured per round (``--trials-per-batch``).
            phones: phones measuring candidates in parallel (``--phones``).

        Warns:
            UserWarning: ``trials`` cannot reach a search batch on the model's tasks
                (``enqueue tune``'s warning: :mod:`farm.tuning.advice`); the job
                is queued all the same.

        Raises:
            SpecError: the file or the spec is refused (the server's one line).
        """
        params: dict[str, Any] = {
            "model": {"path": str(path), "input_shapes": _shapes(input_shapes),
                      "target": target},
            "trials": trials, "for_s": for_s, "trials_per_task": trials_per_task,
            "max_tasks": max_tasks, "trials_per_batch": trials_per_batch, "phones": phones,
        }
        [job] = self._submit(TUNE_KIND.name, params, TUNE_KIND.input_files, devices, None)
        for line in [] if TUNE_KIND.enqueue.advise is None else TUNE_KIND.enqueue.advise(params):
            warnings.warn(line, UserWarning, stacklevel=2)
        return job

    @overload
    def submit_ab(
        self, a: str | Path, b: str | Path, *, tuned: int | None = None,
        target: str | None = None, threshold: float | None = None,
        max_phone_s: float | None = None, order: str | None = None, seed: int | None = None,
        devices: Mapping[str, Any] | None = None, each: Literal[False] = False,
    ) -> Job: ...

    @overload
    def submit_ab(
        self, a: str | Path, b: str | Path, *, tuned: int | None = None,
        target: str | None = None, threshold: float | None = None,
        max_phone_s: float | None = None, order: str | None = None, seed: int | None = None,
        devices: Mapping[str, Any] | None = None, each: Literal[True],
    ) -> list[Job]: ...

    def submit_ab(
        self, a: str | Path, b: str | Path, *, tuned: int | None = None,
        target: str | None = None, threshold: float | None = None,
        max_phone_s: float | None = None, order: str | None = None, seed: int | None = None,
        devices: Mapping[str, Any] | None = None, each: bool = False,
    ) -> Job | list[Job]:
        """Time two builds in turns on each phone until B is judged (``farmctl enqueue ab A B``).

        Each phone's verdict calls B slower, faster or no change against A, or
        undecided with the reason (:meth:`Job.ab`).

        Args:
            a: the baseline, written as on the command line
                (:func:`farm.kinds.ab_builds.parse_build`): ``gemm:n=256[,bn=16,...]``,
                an ONNX file on this machine (uploaded), a finished job's id (``"12"``,
                its build; a tune job's tuned build) or ``"12:untuned"``.
            b: the build judged against ``a``, written the same way.
            tuned: B is a model file: apply this finished tune job's records to it.
            target: the processor of model sides (``cpu``, ``opencl``, ``cuda``).
            threshold: the smallest change that counts (0.05 = 5%); None: the server's.
            max_phone_s: phone time at most per phone, seconds; None: the server's.
            order: ``abba`` or ``random``; None: the server's.
            seed: the coin of ``random`` order.
            devices: the device selection (``serials``, ``soc``, ``count``...).
            each: one job per phone in service that fits (``--each``); the jobs.

        Returns:
            The job, or with ``each`` one per phone.

        Raises:
            SpecError: a side or the spec is refused, naming it (the server's one line).
            UserFault: with ``each``, no phone to run on now.
        """
        params: dict[str, Any] = {"a": parse_build(str(a), "params.a"),
                                  "b": parse_build(str(b), "params.b"),
                                  "target": target, "threshold": threshold,
                                  "max_phone_s": max_phone_s, "order": order, "seed": seed}
        if tuned is not None:
            params["b"]["tuned"] = tuned
        jobs = self._submit(AB_KIND.name, params, AB_KIND.input_files, devices, None, each=each)
        return jobs if each else jobs[0]

    def _submit(self, kind: str, params: dict[str, Any], files: Sequence[str],
                devices: Mapping[str, Any] | None, repetitions: int | None, *,
                each: bool = False) -> list[Job]:
        raw: dict[str, Any] = {"kind": kind,
                               "params": {k: v for k, v in params.items() if v is not None}}
        if devices is not None:
            raw["devices"] = dict(devices)
        if repetitions is not None:
            raw["repetitions"] = repetitions
        raw = self.service.store_inputs(self.service.store_models(raw, files))
        submitted = self.service.submit(raw, each=each)
        return [Job(self, view.id) for view in submitted.jobs]


def _npz(arrays: Mapping[str, np.ndarray]) -> bytes:
    """``arrays`` as the bytes of an ``.npz`` (``np.savez``)."""
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **{name: np.asarray(a) for name, a in arrays.items()})
    return buffer.getvalue()


def _ref(side: str | int | Job) -> str:
    """A job, a job id or a reference (``r-...``, ``N:untuned``) as ``farmctl compare`` takes it."""
    return str(side.id) if isinstance(side, Job) else str(side)


def _shapes(shapes: Mapping[str, Sequence[int]] | None) -> dict[str, list[int]] | None:
    return None if shapes is None else {name: [int(d) for d in dims]
                                        for name, dims in shapes.items()}
