"""``farmctl compare A B``: per phone, is B slower or faster than A?

A and B are each a job id (``12``), the run id of an ``enqueue --each``
fan-out (``r-1a2b3c4d5e6f``, one job per phone) or ``12:untuned``, read into
the raw timings of every phone it ran on (:class:`~farm.results.sides.Side`,
:mod:`farm.results.sides` says which samples); the phones present on both
sides are compared with :func:`farm.stats.compare_samples` (median ratio B/A
with its bootstrap 95% CI, Mann-Whitney U p-value, verdict against the
threshold and alpha); phones on one side only are listed as such.

Numbers from different phones are never pooled: each verdict is one phone's.

Builds of one model (untuned, tuned by job N) are comparable although their
workload labels differ: :mod:`farm.results.builds` says which is which, and a
tune job's own untuned timings are the side ``JOB:untuned``. Two labels that
ran one library (a tune that applied no tuning record:
:func:`farm.results.builds.same_library`) are never called slower or faster:
each common phone is no change where its CI lies inside the threshold, else
undecided, and its reason says the difference is the phones' noise.
A phone whose samples on either side are noisy (CV above ``[results]
max_cv``) or whose thermal status changed between its runs is flagged with
the reason (``noisy``); its verdict still stands, but a person should know.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median
from typing import Any

from farm.errors import UserFault
from farm.queue.store import Store
from farm.results.builds import same_library
from farm.results.sides import Side, emulation_refusal, load_side
from farm.results.spreads import noise_reasons
from farm.stats import Comparison, Verdict, compare_samples, spread

__all__ = [
    "EXIT_REGRESSED",
    "EXIT_UNDECIDED",
    "CompareReport",
    "PhoneComparison",
    "compare_refs",
    "compare_sides",
    "plot_report",
]

#: ``farmctl compare``'s exit code when at least one phone is slower in B.
EXIT_REGRESSED = 3
#: ``farmctl compare``'s exit code when no phone is slower but at least one is
#: undecided (too few samples, or a CI too wide to rule a change in or out).
EXIT_UNDECIDED = 4

@dataclass(frozen=True)
class PhoneComparison:
    """One phone's line of a comparison.

    ``comparison`` is None when the phone is on one side only (``only_in`` is
    then ``"a"`` or ``"b"``); ``median_a_s``/``median_b_s`` are None on the
    side it is missing from. ``noisy`` says why its samples are not to be
    trusted (``"A: CV 14% > 5%; B: thermal status 0->2"``), empty when steady.
    """

    serial: str
    comparison: Comparison | None
    median_a_s: float | None
    median_b_s: float | None
    n_a: int
    n_b: int
    only_in: str | None = None
    noisy: str = ""

    @property
    def verdict(self) -> str:
        """``slower``, ``faster``, ``no change``, ``undecided``, or ``only in A``/``only in B``."""
        if self.comparison is None:
            return f"only in {(self.only_in or '').upper()}"
        return self.comparison.verdict.value


@dataclass(frozen=True)
class CompareReport:
    """Every phone's line, common phones first (by serial), then the one-sided ones."""

    a: Side
    b: Side
    threshold: float
    alpha: float
    phones: tuple[PhoneComparison, ...]

    @property
    def slower(self) -> list[str]:
        """Serials of the phones that are slower in B."""
        return [p.serial for p in self.phones
                if p.comparison is not None and p.comparison.verdict is Verdict.SLOWER]

    @property
    def undecided(self) -> list[str]:
        """Serials of the phones whose verdict is undecided."""
        return [p.serial for p in self.phones
                if p.comparison is not None and p.comparison.verdict is Verdict.UNDECIDED]

    @property
    def same_library(self) -> str:
        """Why A and B ran one library under two labels; "" where they may differ.

        See :func:`farm.results.builds.same_library`.
        """
        return same_library(self.a.build, self.b.build)

    @property
    def to_confirm(self) -> list[str]:
        """Serials of the common phones an A/B job would settle: every one but a steady no change.

        Two runs taken at different times see the phone's drift (heat, other
        load): a change between them, or no verdict, may be the phone's. An
        A/B job (:mod:`farm.kinds.ab`) times both builds in turns on the
        phone, where that drift cancels. None where A and B ran one library
        (:attr:`same_library`): there is no build to tell from the phone.
        """
        if self.same_library:
            return []
        return [p.serial for p in self.phones if p.comparison is not None
                and (p.comparison.verdict is not Verdict.NO_CHANGE or p.noisy)]

    def ab_sides(self, serial: str) -> tuple[str, str]:
        """The builds ``serial`` timed, as ``enqueue ab`` takes them (``12``, ``7:untuned``)."""
        return _ab_side(self.a, serial), _ab_side(self.b, serial)

    def confirm_command(self, serial: str) -> str:
        """The ``farmctl enqueue ab`` of :meth:`ab_sides` on ``serial``."""
        a, b = self.ab_sides(serial)
        return f"farmctl enqueue ab {a} {b} --serial {serial}"

    @property
    def regressed(self) -> bool:
        """Whether any phone is slower in B (``farmctl compare`` exits :data:`EXIT_REGRESSED`)."""
        return bool(self.slower)

    @property
    def exit_code(self) -> int:
        """The exit code: :data:`EXIT_REGRESSED`, else :data:`EXIT_UNDECIDED`, else 0."""
        if self.regressed:
            return EXIT_REGRESSED
        return EXIT_UNDECIDED if self.undecided else 0

    def to_json(self) -> dict[str, Any]:
        """The report as ``farmctl compare --json`` and the dashboard show it.

        Medians in seconds; ``ratio`` is B's median over A's with its 95 % CI
        and the Mann-Whitney U ``p_value`` (None for a one-sided phone);
        ``reason`` says why the verdict; ``noisy`` why the samples are not to be
        trusted (empty when steady); ``same_library`` why A and B ran one
        library (empty where they may differ).
        """
        def side(s: Side) -> dict[str, Any]:
            return {"ref": s.ref, "workload": s.workload, "jobs": dict(s.jobs),
                    "build": s.build and s.build.label}

        return {
            "a": side(self.a), "b": side(self.b), "threshold": self.threshold,
            "alpha": self.alpha, "regressed": self.regressed, "slower": self.slower,
            "undecided": self.undecided, "exit_code": self.exit_code,
            "same_library": self.same_library,
            "phones": [
                {"serial": p.serial, "verdict": p.verdict, "only_in": p.only_in,
                 "median_a_s": p.median_a_s, "median_b_s": p.median_b_s,
                 "n_a": p.n_a, "n_b": p.n_b,
                 "ratio": p.comparison and p.comparison.ratio,
                 "ci_low": p.comparison and p.comparison.ci_low,
                 "ci_high": p.comparison and p.comparison.ci_high,
                 "p_value": p.comparison and p.comparison.p_value,
                 "reason": p.comparison.reason if p.comparison else "",
                 "noisy": p.noisy}
                for p in self.phones
            ],
        }


def _ab_side(side: Side, serial: str) -> str:
    """The job that timed ``side`` on ``serial``, as an A/B side (``:untuned`` kept)."""
    job = side.jobs[serial]
    return f"{job}:untuned" if side.ref.endswith(":untuned") else str(job)


def _noisy(serial: str, sides: Iterable[tuple[str, Side]], max_cv: float | None) -> str:
    """Why ``serial``'s samples are not to be trusted, per side (``A: ...; B: ...``)."""
    parts = []
    for name, side in sides:
        values = side.timings.get(serial)
        if not values:
            continue
        cv = spread(values).cv if max_cv is not None else 0.0
        reasons = noise_reasons(cv, max_cv or 0.0, side.thermal.get(serial))
        if reasons:
            parts.append(f"{name}: {', '.join(reasons)}")
    return "; ".join(parts)


def _one_library(comparison: Comparison, same: str, threshold: float) -> Comparison:
    """``comparison`` of two timings of one library (``same`` says why): never slower or faster.

    A change between them is the phones' (load, heat, another phone's
    speed), not a build's: no change where the CI lies inside the threshold,
    else undecided; the reason says so, then what the timings alone read.
    """
    verdict = comparison.verdict
    if verdict in (Verdict.SLOWER, Verdict.FASTER):
        inside = 1 - threshold <= comparison.ci_low and comparison.ci_high <= 1 + threshold
        verdict = Verdict.NO_CHANGE if inside else Verdict.UNDECIDED
    return replace(comparison, verdict=verdict,
                   reason=f"{same} (the timings read {comparison.verdict.value}: "
                          f"{comparison.reason})")


def compare_sides(a: Side, b: Side, *, threshold: float, alpha: float,
                  max_cv: float | None = None) -> CompareReport:
    """Compare each phone of ``b`` with the same phone of ``a`` (pure).

    Args:
        a: the baseline.
        b: the new side.
        threshold: the smallest relative change of the median that counts (0.05 = 5%).
        alpha: the p-value a change must be below.
        max_cv: a side's samples with a CV above this are flagged noisy, and
            with a robust CV above it cannot be called slower or faster
            (:func:`~farm.stats.compare_samples`); None flags only
            thermal changes.

    Where A and B ran one library under two labels
    (:func:`~farm.results.builds.same_library`), no common phone is slower or
    faster: see :func:`_one_library`.

    An emulated device's timings (:attr:`Side.emulated`) are the emulator's,
    not a CPU's: they compare only with the same device's emulated timings.

    Raises:
        UserFault: the sides measure different workloads, share no phone, or
            one side's emulated timings meet the other's real ones.
    """
    if not a.comparable(b):
        raise UserFault(f"{a.ref} and {b.ref} measure different workloads: "
                        f"{a.workload!r} and {b.workload!r}")
    refusal = emulation_refusal(a, b)
    if refusal:
        raise UserFault(refusal)
    common = sorted(set(a.timings) & set(b.timings))
    if not common:
        raise UserFault(f"{a.ref} and {b.ref} have no phone in common "
                        f"(A: {', '.join(sorted(a.timings)) or 'none'}; "
                        f"B: {', '.join(sorted(b.timings)) or 'none'})")
    same = same_library(a.build, b.build)
    comparisons = {
        serial: compare_samples(a.timings[serial], b.timings[serial], threshold=threshold,
                                alpha=alpha, max_cv=max_cv)
        for serial in common
    }
    if same:
        comparisons = {serial: _one_library(c, same, threshold)
                       for serial, c in comparisons.items()}
    phones = [
        PhoneComparison(
            serial, comparisons[serial],
            median(a.timings[serial]), median(b.timings[serial]),
            len(a.timings[serial]), len(b.timings[serial]),
            noisy=_noisy(serial, (("A", a), ("B", b)), max_cv),
        )
        for serial in common
    ]
    for name, side, other in (("a", a, b), ("b", b, a)):
        for serial in sorted(set(side.timings) - set(other.timings)):
            middle = median(side.timings[serial])
            phones.append(PhoneComparison(
                serial, None, middle if name == "a" else None, middle if name == "b" else None,
                len(side.timings[serial]) if name == "a" else 0,
                len(side.timings[serial]) if name == "b" else 0, only_in=name,
                noisy=_noisy(serial, ((name.upper(), side),), max_cv)))
    return CompareReport(a, b, threshold, alpha, tuple(phones))


def compare_refs(store: Store, a: str, b: str, *, threshold: float,
                 alpha: float, max_cv: float | None = None) -> CompareReport:
    """Read and compare two jobs or runs (see :func:`load_side`, :func:`compare_sides`).

    Raises:
        UserFault: as :func:`load_side` and :func:`compare_sides` say.
    """
    return compare_sides(load_side(store, a), load_side(store, b), threshold=threshold,
                         alpha=alpha, max_cv=max_cv)


def plot_report(report: CompareReport, path: Path) -> None:
    """Draw each common phone's ratio B/A as a bar with its 95% CI to ``path`` (PNG).

    A dashed line marks 1 (no change) and dotted ones the threshold either side;
    bars are red when slower, green when faster, orange when undecided, grey otherwise.

    Raises:
        UserFault: the file cannot be written.
    """
    import matplotlib as mpl

    mpl.use("Agg")  # no display: farmctl runs on servers and in CI
    import matplotlib.pyplot as plt

    common = [p for p in report.phones if p.comparison is not None]
    colours = {Verdict.SLOWER: "tab:red", Verdict.FASTER: "tab:green",
               Verdict.NO_CHANGE: "tab:grey", Verdict.UNDECIDED: "tab:orange"}
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(common) + 2), 4))
    try:
        xs = range(len(common))
        ratios = [p.comparison.ratio for p in common if p.comparison]
        lows = [p.comparison.ratio - p.comparison.ci_low for p in common if p.comparison]
        highs = [p.comparison.ci_high - p.comparison.ratio for p in common if p.comparison]
        ax.bar(xs, ratios, yerr=[lows, highs], capsize=6,
               color=[colours[p.comparison.verdict] for p in common if p.comparison])
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
        for level in (1 - report.threshold, 1 + report.threshold):
            ax.axhline(level, color="black", linestyle=":", linewidth=0.8)
        ax.set_xticks(list(xs), [p.serial for p in common], rotation=20)
        ax.set_ylabel("median time B / A (>1: slower)")
        ax.set_title(f"{report.b.shown} vs {report.a.shown}\n{report.a.workload}", fontsize=9)
        fig.tight_layout()
        try:
            fig.savefig(path, format="png", dpi=100)
        except OSError as exc:
            raise UserFault(f"cannot write the plot to {path}: {exc.strerror}") from exc
    finally:
        plt.close(fig)
