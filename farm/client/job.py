"""One job on the farm from Python: its state, wait, result, profile, outputs and bundle."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from farm.client.errors import JobFailed, WaitTimedOut
from farm.client.remote import RemoteService
from farm.clock import Clock, wait_until
from farm.errors import UserFault
from farm.queue.models import JobState
from farm.queue.records import JobView, ResultView
from farm.results.ab import ab_phones
from farm.results.profiles import last_profiles

if TYPE_CHECKING:
    import numpy as np

__all__ = ["POLL_S", "Job", "Reach"]

#: Seconds between two looks at a waited-for job (one GET each).
POLL_S = 1.0


class Reach(Protocol):
    """How a :class:`Job` reaches its farm (:class:`farm.client.server.Farm` is one)."""

    @property
    def service(self) -> RemoteService:
        """The API's client."""
        ...

    @property
    def clock(self) -> Clock:
        """The time source :meth:`Job.wait` polls by."""
        ...


class Job:
    """A job on the farm, as :meth:`Farm.submit_model` or :meth:`Farm.job` return it.

    Attributes:
        id: the job's id (``farmctl job ID``).
    """

    def __init__(self, farm: Reach, job_id: int) -> None:
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
        from farm.tuning.outcome import outcome_lines

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
