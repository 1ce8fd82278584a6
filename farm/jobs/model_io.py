"""The user's own model inputs (``.npz``) and the outputs a phone gave for them.

Inputs come as a numpy ``.npz`` archive whose array names are the ONNX graph's
input names (``np.savez("inputs.npz", x=array)``); every input must be given, with
the model's shape and dtype, and nothing else. The outputs are kept as an
``.npz`` too, keyed by the graph's output names (the Relax VM returns a tuple
in the graph's output order, so the names come from the ONNX file:
:func:`output_names`); outputs kept before were keyed ``output_0``, ``output_1``...
They are written out as one ``.npy`` each, named after the output.
"""

from __future__ import annotations

import io
import math
import re
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
from numpy.lib import format as npy_format

from farm.errors import SpecError

if TYPE_CHECKING:
    from farm.jobs.model import ModelInput

__all__ = ["NpyMember", "load_npz", "npz_members", "output_names", "outputs_npz", "read_inputs",
           "write_outputs"]

#: Characters kept in an output's file name; any other (``/``, ``:``...) becomes ``_``.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class NpyMember:
    """One array of an ``.npz`` as its ``.npy`` header declares it (its data unread).

    Attributes:
        key: the array's name (the member's file name less ``.npy``, as ``np.load`` names it).
        shape: the declared dimensions.
        dtype: the declared numpy dtype.
    """

    key: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    @property
    def nbytes(self) -> int:
        """Bytes the data takes once loaded: elements times the dtype's item size."""
        return math.prod(self.shape) * self.dtype.itemsize


def _archive(data: bytes | Path) -> zipfile.ZipFile:
    """``data`` opened as a zip (its central directory read, no member decompressed)."""
    return zipfile.ZipFile(data if isinstance(data, Path) else io.BytesIO(data))


def _header(member: IO[bytes]) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and dtype an ``.npy`` stream's header declares; reads only the header.

    Raises:
        ValueError: not an ``.npy`` header of format 1.0 or 2.0 (what ``np.save`` writes
            unless a structured dtype needs UTF-8 field names).
    """
    version = npy_format.read_magic(member)
    if version == (1, 0):
        shape, _, dtype = npy_format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, _, dtype = npy_format.read_array_header_2_0(member)
    else:
        raise ValueError(f".npy format {version[0]}.{version[1]} is not read")
    return tuple(int(d) for d in shape), dtype


def npz_members(data: bytes | Path, name: str, field: str = "params.inputs",
                max_bytes: int | None = None) -> list[NpyMember]:
    """The arrays an ``.npz`` declares, read from its zip directory and ``.npy`` headers only.

    Nothing is decompressed but each member's header (a few hundred bytes), so a
    small archive declaring gigabytes of zeros is refused before any is made.

    Args:
        data: the archive's bytes, or a file holding them.
        name: the user's file name, for errors.
        field: the spec field naming the file, for errors.
        max_bytes: the most bytes all arrays may take once loaded, by their
            declared shapes and by the zip's uncompressed sizes; None: unbounded.

    Returns:
        Each member in the archive's order.

    Raises:
        SpecError: ``data`` is no ``.npz`` archive (a member that is no ``.npy``
            file, or holds Python objects), or it declares more than ``max_bytes``.
    """
    head = data[:2] if isinstance(data, bytes) else _first_bytes(data, 2)
    if head != b"PK":  # np.load would take a .npy or unpickle instead: an .npz is a zip
        raise SpecError(field, f"{name} is not a numpy .npz archive (np.savez writes one)")
    members = []
    total = 0
    try:
        with _archive(data) as archive:
            for info in archive.infolist():
                key = info.filename.removesuffix(".npy")
                with archive.open(info) as member:
                    shape, dtype = _header(member)
                if dtype.hasobject:  # allow_pickle=False would refuse it; say so up front
                    raise SpecError(field, f"{name} is not a numpy .npz archive of plain "
                                           f"arrays: {key!r} holds Python objects")
                item = NpyMember(key, shape, dtype)
                total += item.nbytes
                if max_bytes is not None:
                    _bound(item, info.file_size, total, max_bytes, name, field)
                members.append(item)
    except _DAMAGED as exc:
        raise SpecError(field, f"{name} is not a numpy .npz archive: "
                               f"{_without_path(exc, data, name)}") from None
    return members


#: What a damaged or unusual archive raises while read: a bad zip or deflate
#: stream, an encrypted member (RuntimeError), a compression zipfile lacks.
_DAMAGED = (OSError, ValueError, EOFError, RuntimeError, NotImplementedError, zlib.error,
            zipfile.BadZipFile)


def _bound(item: NpyMember, file_size: int, total: int, max_bytes: int, name: str,
           field: str) -> None:
    """Refuse a member, or the members so far, over ``max_bytes``.

    Raises:
        SpecError: the member declares more (by its header, or by the zip's
            uncompressed size), or all so far do together.
    """
    size = max(item.nbytes, file_size)
    if size > max_bytes:
        raise SpecError(field, f"{name}: {item.key!r} declares {list(item.shape)} {item.dtype} "
                               f"({size} bytes); at most {max_bytes} bytes of inputs are "
                               "taken ([jobs] inputs_max_bytes)")
    if total > max_bytes:
        raise SpecError(field, f"{name}: its arrays declare {total} bytes together; at most "
                               f"{max_bytes} bytes of inputs are taken ([jobs] inputs_max_bytes)")


def _without_path(exc: BaseException, data: bytes | Path, name: str) -> str:
    """``exc``'s message with ``data``'s path (a server's spooled upload) put as ``name``."""
    return str(exc).replace(str(data), name) if isinstance(data, Path) else str(exc)


def _first_bytes(path: Path, count: int) -> bytes:
    with path.open("rb") as handle:
        return handle.read(count)


def load_npz(data: bytes | Path, name: str, field: str = "params.inputs",
             max_bytes: int | None = None) -> dict[str, np.ndarray]:
    """The arrays of a numpy ``.npz`` archive, by name, once their headers are checked.

    Args:
        data: the archive's bytes, or a file holding them.
        name: the user's file name, for errors.
        field: the spec field naming the file, for errors.
        max_bytes: the most bytes the arrays may take (:func:`npz_members`); None: unbounded.

    Raises:
        SpecError: see :func:`npz_members`; a member's data is damaged or cut short.
    """
    npz_members(data, name, field, max_bytes)
    return _load(data, name, field)


def _load(data: bytes | Path, name: str, field: str) -> dict[str, np.ndarray]:
    """Every array of an archive whose members :func:`npz_members` passed."""
    try:
        # allow_pickle=False: an archive of object arrays could run code on load.
        with np.load(data if isinstance(data, Path) else io.BytesIO(data),
                     allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except _DAMAGED as exc:
        raise SpecError(field, f"{name} is not a numpy .npz archive: "
                               f"{_without_path(exc, data, name)}") from None


def read_inputs(data: bytes, name: str, inputs: list[ModelInput],
                field: str = "params.inputs") -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` checked against the model's inputs.

    Names, shapes and dtypes are checked from the archive's headers before any
    data is read (:func:`npz_members`), so no more than the model's own inputs
    are ever loaded.

    Args:
        data: the archive's bytes.
        name: the user's file name, for errors.
        inputs: the model's resolved inputs (:func:`farm.jobs.model.load_model`).
        field: the spec field naming the file, for errors.

    Returns:
        Input name -> array, e.g. ``{"x": float32[1, 3, 16, 16]}``.

    Raises:
        SpecError: not an ``.npz``; an input missing, unknown, or of another
            shape or dtype than the model's (naming the file and the input).
    """
    members = {item.key: item for item in npz_members(data, name, field)}
    wanted = {item.name: item for item in inputs}
    if unknown := sorted(set(members) - set(wanted)):
        raise SpecError(field, f"{name} has {unknown}, which the model does not take "
                               f"(its inputs: {sorted(wanted)})")
    if missing := sorted(set(wanted) - set(members)):
        raise SpecError(field, f"{name} lacks the model's input {missing}")
    for key, member in members.items():
        item = wanted[key]
        if member.shape != item.shape:
            raise SpecError(field, f"{name}: input {key!r} has shape {member.shape}, "
                                   f"the model takes {item.shape}")
        if str(member.dtype) != item.dtype:
            raise SpecError(field, f"{name}: input {key!r} is {member.dtype}, "
                                   f"the model takes {item.dtype}")
    return _load(data, name, field)


def output_names(model_path: Path) -> list[str]:
    """The graph's output names, in order, read from the ONNX file (weights not loaded).

    Raises:
        SpecError: the file is no ONNX model (``params.model_path``).
    """
    import onnx
    from google.protobuf.message import Error as ProtobufError  # type: ignore[import-untyped]

    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except (ProtobufError, OSError, ValueError) as exc:
        raise SpecError("params.model_path", f"cannot read {model_path.name}: {exc}") from None
    return [output.name for output in model.graph.output]


def outputs_npz(outputs: list[np.ndarray], names: Sequence[str] | None = None) -> bytes:
    """The outputs as an ``.npz`` archive keyed by ``names`` (the graph's output names).

    Without names, or with names that do not match the outputs one to one,
    ``output_0``, ``output_1``...
    """
    if names is None or len(names) != len(outputs) or len(set(names)) != len(names):
        names = [f"output_{i}" for i in range(len(outputs))]
    buffer = io.BytesIO()
    named: dict[str, Any] = dict(zip(names, outputs, strict=True))
    np.savez(buffer, allow_pickle=False, **named)
    return buffer.getvalue()


def _file_name(key: str, taken: set[str]) -> str:
    """``<key>.npy`` with only safe characters (an ONNX name may hold ``/`` or ``..``), unique."""
    stem = _UNSAFE.sub("_", key).lstrip(".") or "output"
    name, n = f"{stem}.npy", 1
    while name in taken:
        n += 1
        name = f"{stem}_{n}.npy"
    taken.add(name)
    return name


def write_outputs(data: bytes, folder: Path) -> list[Path]:
    """Write each array of an outputs archive as ``<folder>/<name>.npy``.

    The name is the output's, each character other than letters, digits,
    ``.``, ``_`` and ``-`` made ``_`` (so a name never leaves ``folder``).

    Returns:
        The files written, in the archive's order.

    Raises:
        OSError: the folder cannot be made or written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    taken: set[str] = set()
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        for key in archive.files:
            path = folder / _file_name(key, taken)
            np.save(path, archive[key], allow_pickle=False)
            written.append(path)
    return written
