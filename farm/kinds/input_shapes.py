"""``--input-shape`` (and the shapes of ``--inputs``) checked against the model's inputs at enqueue.

A wrong input name, a wrong rank or a symbolic dimension left unset would
otherwise be accepted and fail minutes later in the attempt, with TVM's or
onnxruntime's message about something else. ``farmctl enqueue model|tune`` and
``POST /api/v1/jobs`` both reach :func:`check_spec_shapes` through the kinds'
``check`` (:func:`farm.api.submitting.submit_spec`), after the model is stored,
so it reads the stored blob (or the spec's own ``path``).

Each refusal is one line naming the input and what the model declares, e.g.
``input 'images' has rank 4 in m.onnx ([batch,3,224,224]); 3 dims given``.

The shapes are then bounded by what a phone can hold (:func:`check_input_sizes`):
at most :data:`MAX_INPUT_ELEMENTS` elements per input, and all inputs together
no more bytes than the largest memory (``MemTotal``) of the farm's devices. A
model declaring a dimension of 10**12, or ``--input-shape`` giving 2**31
float32 elements (8 GiB), was queued and failed in its attempt.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from farm.errors import SpecError

if TYPE_CHECKING:
    from farm.kinds.model import ModelSpec
    from farm.queue.blobs import BlobOps
    from farm.queue.store import Store

__all__ = ["MAX_INPUT_ELEMENTS", "DeclaredInput", "check_farm_sizes", "check_input_shapes",
           "check_input_sizes", "check_spec_shapes", "declared_inputs", "model_inputs_of"]

#: The most elements one input may have: TVM indexes a buffer with int32 unless
#: a shape needs int64 (``tir.Buffer``'s default index dtype), and no phone's
#: memory holds 2**31 float32 elements (8 GiB) beside a model anyway.
MAX_INPUT_ELEMENTS = 2**31 - 1


@dataclass(frozen=True)
class DeclaredInput:
    """A graph input as the ONNX file declares it.

    Attributes:
        name: the input's name.
        dims: each dimension: an int, or the symbol's name (``"batch"``; ``"?"`` when unnamed).
        itemsize: bytes per element of its element type (4 for float32).
    """

    name: str
    dims: tuple[int | str, ...]
    itemsize: int = 4

    @property
    def shown(self) -> str:
        """``[batch,3,224,224]``."""
        return "[" + ",".join(str(d) for d in self.dims) + "]"

    @property
    def example(self) -> str:
        """``images=1,3,224,224``: the declared shape with 1 for each symbolic dimension."""
        return f"{self.name}=" + ",".join(str(d) if isinstance(d, int) else "1" for d in self.dims)


def declared_inputs(model: Any) -> list[DeclaredInput]:
    """The inputs an ``onnx.ModelProto`` declares, initializers (old IR's weights) left out."""
    from onnx.helper import tensor_dtype_to_np_dtype

    initializers = {init.name for init in model.graph.initializer}
    out = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims: list[int | str] = []
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_value") and dim.dim_value > 0:
                dims.append(int(dim.dim_value))
            else:
                dims.append(dim.dim_param or "?")
        try:
            itemsize = tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type).itemsize
        except KeyError:  # no element type (UNDEFINED), or one numpy lacks: count a byte
            itemsize = 1
        out.append(DeclaredInput(value.name, tuple(dims), itemsize))
    return out


def check_input_shapes(declared: Sequence[DeclaredInput], given: Mapping[str, Sequence[int]],
                       name: str, field: str, filled: Mapping[str, Sequence[int]] | None = None,
                       filled_field: str | None = None) -> None:
    """Refuse shapes the model cannot take.

    Args:
        declared: the model's inputs (:func:`declared_inputs`).
        given: input name -> shape from ``--input-shape`` (empty: none given).
        name: the user's file name, e.g. ``m.onnx``.
        field: the spec field of the shapes, e.g. ``params.input_shapes``.
        filled: input name -> shape taken from elsewhere for inputs ``given``
            lacks (the arrays of ``--inputs``: :func:`farm.kinds.model_inputs.shapes_of_inputs`).
        filled_field: the spec field ``filled`` came from, named in its refusals.

    Raises:
        SpecError: on ``field`` (``filled_field`` for a ``filled`` shape): an input
            the model lacks, a shape of another rank, a fixed dimension given
            another size; on ``field``: a symbolic dimension given by neither.
    """
    _check_given(declared, given, name, field)
    _check_given(declared, filled or {}, name, filled_field or field)
    known = {**(filled or {}), **given}
    for item in declared:
        symbols = [d for d in item.dims if isinstance(d, str)]
        if item.name not in known and symbols:
            raise SpecError(field, f"input {item.name!r} has symbolic dimension {symbols[0]!r} "
                                   f"in {name} ({item.shown}); give its shape, e.g. "
                                   f"{item.example}")


def _check_given(declared: Sequence[DeclaredInput], given: Mapping[str, Sequence[int]],
                 name: str, field: str) -> None:
    """Each given shape names an input of the model, with its rank and its fixed sizes."""
    inputs = {item.name: item for item in declared}
    for input_name, shape in given.items():
        item = inputs.get(input_name)
        if item is None:
            known = ", ".join(f"{i.name!r} {i.shown}" for i in declared) or "none"
            raise SpecError(field, f"{name} has no input {input_name!r}; its inputs: {known}")
        if len(shape) != len(item.dims):
            raise SpecError(field, f"input {input_name!r} has rank {len(item.dims)} in {name} "
                                   f"({item.shown}); {len(shape)} dims given")
        for axis, (want, got) in enumerate(zip(item.dims, shape, strict=True)):
            if isinstance(want, int) and want != got:
                raise SpecError(field, f"input {input_name!r} has dimension {axis} = {want} in "
                                       f"{name} ({item.shown}); {got} given")


def model_inputs_of(model: ModelSpec, store: BlobOps | None, sha_field: str
                    ) -> list[DeclaredInput]:
    """The inputs a validated spec's model declares, read from its blob or path.

    Args:
        model: the spec's model (``sha256`` of a stored blob, or a ``path``).
        store: the queue holding the blob.
        sha_field: the spec field of the blob's digest, for errors.

    Raises:
        SpecError: on ``sha_field``: the blob is not stored, or the model cannot be read.
    """
    import onnx
    from google.protobuf.message import Error as ProtobufError  # type: ignore[import-untyped]

    try:
        if model.sha256 is None:
            # Only the graph's declarations are read: external weights stay where they are.
            proto = onnx.load(str(model.path), load_external_data=False)
        else:  # the stored blob, not this host's cache: enqueue leaves the cache alone
            data = None if store is None else store.get_blob(model.sha256)
            if data is None:
                raise SpecError(sha_field, f"model {model.sha256[:12]} is not stored in the "
                                           "database; upload it first")
            proto = onnx.load_model_from_string(data)
    except (ProtobufError, OSError, ValueError) as exc:
        raise SpecError(sha_field, f"cannot read {model.shown_name}: {exc}") from None
    return declared_inputs(proto)


def check_input_sizes(declared: Sequence[DeclaredInput], given: Mapping[str, Sequence[int]],
                      name: str, field: str, memory_kb: int | None) -> None:
    """Refuse inputs a phone cannot hold, once :func:`check_input_shapes` passed.

    Args:
        declared: the model's inputs (:func:`declared_inputs`).
        given: input name -> shape from ``--input-shape`` (the rest as declared).
        name: the user's file name, e.g. ``m.onnx``.
        field: the spec field of the shapes, e.g. ``params.input_shapes``.
        memory_kb: the largest ``MemTotal`` of the farm's devices; None: none known.

    Raises:
        SpecError: on ``field``: an input of more than :data:`MAX_INPUT_ELEMENTS`
            elements, or inputs of more bytes than ``memory_kb``.
    """
    total_bytes = 0
    for item in declared:
        shape = tuple(given.get(item.name) or (d if isinstance(d, int) else 1 for d in item.dims))
        elements = math.prod(shape)
        shown = "[" + ",".join(str(d) for d in shape) + "]"
        if elements > MAX_INPUT_ELEMENTS:
            raise SpecError(field, f"input {item.name!r} of {name} has {elements} elements "
                                   f"({shown}); at most {MAX_INPUT_ELEMENTS} fit a phone")
        total_bytes += elements * item.itemsize
    if memory_kb is not None and total_bytes > memory_kb * 1024:
        raise SpecError(field, f"the inputs of {name} take {total_bytes} bytes; the farm's "
                               f"largest device has {memory_kb * 1024} bytes of memory")


def _largest_memory_kb(facts: Iterable[Mapping[str, Any]]) -> int | None:
    """The largest ``mem_total_kb`` among devices' facts; None when none records one."""
    known = [f["mem_total_kb"] for f in facts if isinstance(f.get("mem_total_kb"), int)]
    return max(known, default=None)


def check_farm_sizes(declared: Sequence[DeclaredInput], given: Mapping[str, Sequence[int]],
                     name: str, field: str, store: Store | None) -> None:
    """:func:`check_input_sizes` against the largest memory of the store's devices.

    Raises:
        SpecError: see :func:`check_input_sizes`.
    """
    memory_kb = None if store is None else _largest_memory_kb(
        d.facts for d in store.list_devices())
    check_input_sizes(declared, given, name, field, memory_kb)


def check_spec_shapes(model: ModelSpec, store: Store | None, field: str) -> None:
    """:func:`check_input_shapes` and :func:`check_input_sizes` for a validated spec's model.

    The model is read from its blob or path; the devices' memory from the store.

    Args:
        model: the spec's model (``sha256`` of a stored blob, or a ``path``).
        store: the queue holding the blob and the devices.
        field: the spec field of the shapes, e.g. ``params.model.input_shapes``.

    Raises:
        SpecError: the shapes do not fit the model (see :func:`check_input_shapes`)
            or no phone (:func:`check_input_sizes`), or the model cannot be read.
    """
    declared = model_inputs_of(model, store, field.rsplit(".", 1)[0] + ".sha256")
    check_input_shapes(declared, model.input_shapes or {}, model.shown_name, field)
    check_farm_sizes(declared, model.input_shapes or {}, model.shown_name, field, store)
