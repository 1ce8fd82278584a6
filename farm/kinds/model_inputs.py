"""``enqueue model --inputs FILE.npz``: the user's inputs stored with the job, its outputs kept.

At enqueue the archive's bytes become a blob (:meth:`farm.queue.blobs.BlobOps.put_blob`)
and the spec names it (``params.inputs = {"sha256", "name"}``), as a model file is
(:mod:`farm.jobs.model_store`): a job never reads a path on the user's machine. The
arrays are checked against the model's inputs at enqueue
(:func:`farm.jobs.model_io.read_inputs`), so a wrong name, shape or dtype is refused
with the file's and the input's names before anything is queued; a symbolic
dimension (a batch) takes its array's size (:func:`shapes_of_inputs`), stored in
``params.input_shapes`` as if given by ``--input-shape``. The attempt
feeds them to the phone and to onnxruntime, and stores each phone's outputs as a
blob named in its run (``outputs_sha256``); ``farmctl results --job N --outputs
DIR`` writes them as ``.npy`` files.

Through the HTTP API the archive is uploaded (``POST /api/v1/blobs?type=inputs``,
checked by :func:`put_inputs`) and the spec names the blob; the outputs come back
per phone (``GET /api/v1/jobs/{id}/outputs/{serial}``, the blobs
:func:`outputs_by_serial` names).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from farm.errors import SpecError
from farm.queue.spec import Strict, Text

if TYPE_CHECKING:
    import numpy as np

    from farm.kinds.input_shapes import DeclaredInput
    from farm.kinds.model import ModelSpec
    from farm.queue.blobs import BlobOps
    from farm.queue.records import ResultView

__all__ = ["FIELD", "InputsBlob", "check_inputs", "outputs_by_serial", "put_inputs", "read_feeds",
           "shapes_of_inputs", "store_inputs"]

#: The spec field of the inputs (``--inputs``).
FIELD = "params.inputs"


class InputsBlob(Strict):
    """A stored ``.npz`` of inputs: its blob and the user's file name."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    name: Text


def put_inputs(store: BlobOps, data: bytes | Path, name: str, now: datetime,
               max_bytes: int) -> InputsBlob:
    """Check that ``data`` is a numpy ``.npz`` archive within bounds and store it as a blob.

    Only the archive's directory and its arrays' headers are read
    (:func:`farm.jobs.model_io.npz_members`); whether its arrays fit the model is
    checked when a spec names it (:func:`check_inputs`).

    Args:
        store: the queue.
        data: the archive's bytes, or a file holding them (an upload spooled to disk).
        name: the user's file name (shown in errors, never opened).
        now: when stored.
        max_bytes: the most bytes its arrays may declare (``[jobs] inputs_max_bytes``).

    Raises:
        SpecError: ``data`` is no ``.npz`` archive, or declares more than
            ``max_bytes`` (``params.inputs``).
        StoreError: the database refused the write.
    """
    from farm.jobs.model_io import npz_members

    npz_members(data, name, FIELD, max_bytes)
    return InputsBlob(sha256=store.put_blob(data, now), name=name)


def outputs_by_serial(view: ResultView) -> dict[str, str]:
    """Serial -> the outputs blob of that phone's last run that kept outputs."""
    runs = view.summary.get("runs")
    return {str(run.get("serial")): str(run["outputs_sha256"])
            for run in (runs if isinstance(runs, list) else [])
            if isinstance(run, dict) and isinstance(run.get("outputs_sha256"), str)}


def store_inputs(raw: Mapping[str, Any], put: Callable[[bytes, str], InputsBlob]
                 ) -> dict[str, Any]:
    """A raw spec whose ``params.inputs`` path is stored as a blob and named by it.

    Args:
        raw: the spec as built from flags; ``params.inputs`` a path, or absent.
        put: stores the file's bytes under its name: :func:`put_inputs` on a local
            farm, an upload to a remote one.

    Raises:
        SpecError: the file is missing, unreadable or no .npz archive (``params.inputs``).
    """
    params = raw.get("params")
    if not isinstance(params, Mapping) or not isinstance(params.get("inputs"), str):
        return dict(raw)
    path = Path(params["inputs"]).expanduser()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError(FIELD, f"cannot read {params['inputs']!r}: "
                               f"{exc.strerror or exc}") from None
    except ValueError as exc:  # a path with a NUL byte: the OS cannot be asked
        raise SpecError(FIELD, f"cannot read {params['inputs']!r}: {exc}") from None
    stored = put(data, path.name)
    return {**raw, "params": {**params, "inputs": stored.model_dump()}}


def read_feeds(p: ModelSpec, inputs: InputsBlob, model_path: Path, store: BlobOps | None
               ) -> dict[str, np.ndarray]:
    """The stored inputs, checked against the model at ``model_path``.

    Raises:
        SpecError: the blob is not stored, or does not fit the model (naming the
            file and the input, :func:`farm.jobs.model_io.read_inputs`).
    """
    from farm.jobs.model import load_model
    from farm.jobs.model_io import read_inputs

    data = None if store is None else store.get_blob(inputs.sha256)
    if data is None:
        raise SpecError(FIELD, f"inputs {inputs.name} are not stored in the database")
    shapes = None if p.input_shapes is None else {k: tuple(v) for k, v in p.input_shapes.items()}
    _, model_inputs = load_model(model_path, shapes, p.shown_name)
    return read_inputs(data, inputs.name, model_inputs, FIELD)


def shapes_of_inputs(declared: Sequence[DeclaredInput], inputs: InputsBlob,
                     store: BlobOps | None, given: Mapping[str, Sequence[int]]
                     ) -> dict[str, list[int]]:
    """The shapes the arrays of ``--inputs`` give the model's symbolic inputs.

    An input with a symbolic dimension (``[batch,3,224,224]``) takes the shape
    of its array, unless ``--input-shape`` gave one: the arrays already say
    the shape, and asking for it twice was a refusal users could not follow.
    The archive's names are checked first, so a misnamed array is refused as
    such, not as a shape the model lacks. Each shape is the one its ``.npy``
    header declares (:func:`farm.jobs.model_io.npz_members`): no array's data is read.

    Args:
        declared: the model's inputs (:func:`farm.kinds.input_shapes.declared_inputs`).
        inputs: the stored archive.
        store: the queue holding it.
        given: input name -> shape from ``--input-shape``.

    Returns:
        Input name -> shape for each symbolic input ``given`` lacks (empty: none).

    Raises:
        SpecError: on ``params.inputs``: the archive is not stored or no ``.npz``,
            names an input the model lacks, lacks one it has, or has an empty
            or too many dimensions.
    """
    from farm.jobs.model_io import npz_members
    from farm.kinds.model import MAX_RANK

    data = None if store is None else store.get_blob(inputs.sha256)
    if data is None:
        raise SpecError(FIELD, f"inputs {inputs.name} are not stored in the database")
    arrays = {member.key: member for member in npz_members(data, inputs.name, FIELD)}
    wanted = sorted(item.name for item in declared)
    if unknown := sorted(set(arrays) - set(wanted)):
        raise SpecError(FIELD, f"{inputs.name} has {unknown}, which the model does not take "
                               f"(its inputs: {wanted})")
    if missing := sorted(set(wanted) - set(arrays)):
        raise SpecError(FIELD, f"{inputs.name} lacks the model's input {missing}")
    shapes = {}
    for item in declared:
        if item.name in given or all(isinstance(d, int) for d in item.dims):
            continue
        shape = arrays[item.name].shape
        if len(shape) > MAX_RANK or 0 in shape:
            raise SpecError(FIELD, f"{inputs.name}: input {item.name!r} has shape {shape}, "
                                   f"which no model input takes")
        shapes[item.name] = [int(d) for d in shape]
    return shapes


def check_inputs(p: ModelSpec, inputs: InputsBlob | None, store: BlobOps | None) -> None:
    """At enqueue: the stored inputs fit the stored model (a no-op without inputs).

    Raises:
        SpecError: see :func:`read_feeds`; the model is not stored.
    """
    if inputs is None:
        return
    if p.sha256 is None:
        read_feeds(p, inputs, Path(str(p.path)), store)
        return
    model = None if store is None else store.get_blob(p.sha256)
    if model is None:
        raise SpecError("params.sha256", f"model {p.shown_name} is not stored in the database")
    # load_model reads a file; the blob goes to a private temporary one, not the cache.
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        path.write_bytes(model)
        read_feeds(p, inputs, path, store)
