"""A farm server from Python, reached with a token: devices, jobs, comparisons, submissions."""

from __future__ import annotations

import io
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from farm import composition
from farm.client.job import Job
from farm.client.remote import RemoteService
from farm.clock import SystemClock
from farm.kinds.ab import KIND as AB_KIND
from farm.kinds.ab_builds import parse_build
from farm.kinds.model import KIND as MODEL_KIND
from farm.kinds.tune import KIND as TUNE_KIND
from farm.queue.records import DeviceRecord

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Farm"]


class Farm:
    """A farm server, reached with a token.

    Args:
        url: the API's base URL, e.g. ``http://127.0.0.1:9465``.
        token: the caller's token (``farmctl token create``).
    """

    def __init__(self, url: str, token: str | None) -> None:
        composition.install()  # the job kinds the specs are checked by, for a script's process
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
