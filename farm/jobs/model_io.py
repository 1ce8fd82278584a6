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
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from farm.errors import SpecError

if TYPE_CHECKING:
    from farm.jobs.model import ModelInput

__all__ = ["load_npz", "output_names", "outputs_npz", "read_inputs", "write_outputs"]

#: Characters kept in an output's file name; any other (``/``, ``:``...) becomes ``_``.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def load_npz(data: bytes | Path, name: str, field: str = "params.inputs") -> dict[str, np.ndarray]:
    """The arrays of a numpy ``.npz`` archive, by name.

    Args:
        data: the archive's bytes, or a file holding them.
        name: the user's file name, for errors.
        field: the spec field naming the file, for errors.

    Raises:
        SpecError: ``data`` is no ``.npz`` archive, or holds object arrays.
    """
    if isinstance(data, Path):
        with data.open("rb") as handle:
            head = handle.read(2)
    else:
        head = data[:2]
    if head != b"PK":  # np.load would take a .npy or unpickle instead: an .npz is a zip
        raise SpecError(field, f"{name} is not a numpy .npz archive (np.savez writes one)")
    try:
        # allow_pickle=False: an archive of object arrays could run code on load.
        with np.load(data if isinstance(data, Path) else io.BytesIO(data),
                     allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise SpecError(field, f"{name} is not a numpy .npz archive: {exc}") from None
    for key, array in arrays.items():
        if not isinstance(array, np.ndarray):  # np.load gives a non-.npy member's raw bytes
            raise SpecError(field, f"{name}: {key!r} is no numpy array")
    return arrays


def read_inputs(data: bytes, name: str, inputs: list[ModelInput],
                field: str = "params.inputs") -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` checked against the model's inputs.

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
    arrays = load_npz(data, name, field)
    wanted = {item.name: item for item in inputs}
    if unknown := sorted(set(arrays) - set(wanted)):
        raise SpecError(field, f"{name} has {unknown}, which the model does not take "
                               f"(its inputs: {sorted(wanted)})")
    if missing := sorted(set(wanted) - set(arrays)):
        raise SpecError(field, f"{name} lacks the model's input {missing}")
    for key, array in arrays.items():
        item = wanted[key]
        if tuple(array.shape) != item.shape:
            raise SpecError(field, f"{name}: input {key!r} has shape {tuple(array.shape)}, "
                                   f"the model takes {item.shape}")
        if str(array.dtype) != item.dtype:
            raise SpecError(field, f"{name}: input {key!r} is {array.dtype}, "
                                   f"the model takes {item.dtype}")
    return arrays


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
