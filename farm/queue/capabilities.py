"""What a job needs of a phone beyond its device selection, and whether a phone has it.

A job's device selection (``--soc``, ``--abi``...) is what the user asked for;
its requirements are what its workload cannot run without::

    requirements(kind, spec) -> Requirements   read from the stored spec (the one place)
    unmet(needs, facts)      -> str | None     why a phone cannot run it; None if it can
    group_key(facts)         -> (model, soc)   phones of one kind, for jobs that need alike phones

The facts are those :func:`farm.provision.facts.facts_record` stores: ``has_opencl``
and ``has_vulkan`` (booleans), ``model`` (``ro.product.model``), ``soc``
(``ro.soc.model``, else ``ro.board.platform``), and ``gpu_limits``, read from the
phone's GPU through the RPC session when known::

    {"opencl": {"max_threads_per_block": 1024, ...}, "vulkan": {...}}

A CPU target needs nothing: every phone has a CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from farm.jobs.params import MAX_GPU_WORK_GROUP_THREADS

__all__ = [
    "ANY_PHONE", "CPU", "UNKNOWN_MODEL", "Requirements", "describe", "device_model", "group_key",
    "requirements", "unmet", "workload_needs",
]

CPU = "cpu"

# How a target is named in a reason; a target not listed here (one a newer farmd
# knows) is named as written, and its fact is ``has_<target>`` all the same.
_TARGET_NAMES = {"opencl": "OpenCL", "vulkan": "Vulkan"}


@dataclass(frozen=True)
class Requirements:
    """What every phone of an attempt must have.

    Attributes:
        target: where the kernels run: ``cpu``, ``opencl`` or ``vulkan``.
        work_group_threads: threads one GPU work-group needs (``bn * bn`` for a
            GPU gemm); 0 when the job needs no GPU.
        alike: all phones of one attempt must be of one kind (same
            :func:`group_key`): a tuning job measures candidates on several
            phones into one database, and its target comes from facts they share.
    """

    target: str = CPU
    work_group_threads: int = 0
    alike: bool = False


#: What a job needs that runs on any phone's CPU.
ANY_PHONE = Requirements()


def requirements(kind: str, spec: Mapping[str, Any]) -> Requirements:
    """Read a stored spec's requirements, as its kind declares them (``Kind.needs``).

    The spec is JSON as stored (``JobSpec.to_json()``). A kind this farm does
    not know (a newer farmd's row) needs nothing here: it is never started here
    (:func:`farm.queue.scheduler.plan`, rule 8), it waits for a host that knows it.

    Args:
        kind: the job kind, a key of :data:`farm.kinds.KINDS` (:mod:`farm.queue.catalog`).
        spec: the stored spec.

    Returns:
        The requirements; equal specs give equal (hashable) values.
    """
    from farm.queue.catalog import declared  # the catalog's types import this module

    found = declared(kind)
    return ANY_PHONE if found is None else found.needs(spec)


def workload_needs(workload: object, *, alike: bool = False) -> Requirements:
    """What a gemm-shaped workload (``{"target": ..., "bn": ...}``) needs of a phone.

    Total on any JSON: a field of the wrong type or missing (a spec written by
    another farmd version) reads as "needs nothing", since validating specs is
    not this function's job.

    Args:
        workload: the stored workload parameters, e.g. a gemm spec's ``params``.
        alike: every phone of an attempt must be of one kind (tuning).
    """
    if not isinstance(workload, Mapping):
        return Requirements(alike=alike)
    target = workload.get("target", CPU)
    if not isinstance(target, str) or target == CPU:
        return Requirements(alike=alike)
    bn = workload.get("bn")
    threads = bn * bn if isinstance(bn, int) and not isinstance(bn, bool) and bn > 0 else 0
    return Requirements(target, threads, alike)


def _work_group_limit(facts: Mapping[str, Any], target: str) -> int:
    """The phone's work-group limit on ``target``; 256 when it was never read.

    256 is the conservative limit every phone GPU the farm targets allows
    (:data:`farm.jobs.params.MAX_GPU_WORK_GROUP_THREADS`).
    """
    limits = facts.get("gpu_limits")
    if isinstance(limits, Mapping):
        of_target = limits.get(target)
        if isinstance(of_target, Mapping):
            value = of_target.get("max_threads_per_block")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return MAX_GPU_WORK_GROUP_THREADS


def unmet(needs: Requirements, facts: Mapping[str, Any]) -> str | None:
    """Why a phone with ``facts`` cannot run a job needing ``needs``.

    Returns:
        None if it can; else what it lacks, e.g. ``"no OpenCL"`` or
        ``"OpenCL work-group limit 256 threads, not 1024"``.
    """
    if needs.target == CPU:
        return None
    name = _TARGET_NAMES.get(needs.target, needs.target)
    if facts.get(f"has_{needs.target}") is not True:
        return f"no {name}"
    limit = _work_group_limit(facts, needs.target)
    if needs.work_group_threads > limit:
        return f"{name} work-group limit {limit} threads, not {needs.work_group_threads}"
    return None


def group_key(facts: Mapping[str, Any]) -> tuple[str, str]:
    """A phone's kind: its ``model`` and ``soc`` facts, lower-cased.

    Model decides (phones of one model share SoC, GPU, clocks and cooling, so
    their timings are comparable); the SoC is part of the key because a model
    name alone is not always unique across vendors, and it still separates
    phones whose model was never read. Phones with neither fact form one kind.
    """
    return (str(facts.get("model") or "").lower(), str(facts.get("soc") or "").lower())


#: The device model of a device with neither a ``model`` nor a ``soc`` fact.
UNKNOWN_MODEL = "unknown"


def device_model(facts: Mapping[str, Any]) -> str:
    """The device model tuning records are kept under: its ``model`` fact, else its ``soc``.

    Phones of one model share SoC, clocks and cooling (:func:`group_key`), so a
    record measured on one holds for the others; a helper attempt's phones are
    of its main attempt's device model (:mod:`farm.queue.helpers`).
    """
    return str(facts.get("model") or facts.get("soc") or UNKNOWN_MODEL)


def describe(needs: Requirements) -> list[str]:
    """The requirements as ``key=value`` words for a reason, e.g. ``["target=opencl"]``."""
    if needs.target == CPU:
        return []
    words = [f"target={needs.target}"]
    if needs.work_group_threads > MAX_GPU_WORK_GROUP_THREADS:
        words.append(f"work-group={needs.work_group_threads}")
    return words
