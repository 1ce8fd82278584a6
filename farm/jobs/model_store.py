"""farm's own copies of the users' ONNX models, one file per content.

::

    <data_dir>/models/<sha256>.onnx     0600, in a 0700 folder

``farmctl enqueue`` copies every model file a spec names (the kind's
``Kind.input_files``) into this store and rewrites the spec to point at the copy,
so a job never reads a path on the user's machine: the user may edit, move or
delete the file while the job waits. The name is the SHA-256 of the bytes, so a
model enqueued a hundred times is stored once, and a stored file is never
changed: the digest recorded in the spec stays true.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from farm.errors import SpecError
from farm.privacy import private_dir, write_private

__all__ = ["MODELS_DIR", "StoredModel", "model_digest", "store_model"]

#: The store's folder under the data folder.
MODELS_DIR = "models"


@dataclass(frozen=True)
class StoredModel:
    """A model file in the store.

    Attributes:
        sha256: hex SHA-256 of the file's bytes.
        path: ``<data_dir>/models/<sha256>.onnx``.
    """

    sha256: str
    path: Path


def model_digest(path: Path) -> str:
    """Hex SHA-256 of a file's bytes.

    Raises:
        OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def store_model(src: Path, data_dir: Path, field: str = "params.path") -> StoredModel:
    """Copy a checked ONNX model into the store, once per content.

    Args:
        src: the user's ``.onnx`` file.
        data_dir: farm's data folder.
        field: the spec field that named ``src``, for errors (``farmctl`` turns it
            into the flag, e.g. ``--model``).

    Returns:
        The stored copy; the same for every file with the same bytes.

    Raises:
        SpecError: ``src`` is missing, unreadable, or not a valid ONNX model
            (``onnx.load`` and ``onnx.checker.check_model``).
        OSError: the store cannot be written.
    """
    import onnx
    from google.protobuf.message import Error as ProtobufError  # type: ignore[import-untyped]

    src = Path(src).expanduser()
    try:
        data = src.read_bytes()
    except OSError as exc:
        raise SpecError(field, f"cannot read {str(src)!r}: {exc.strerror}") from None
    try:
        onnx.checker.check_model(onnx.load_model_from_string(data))
    except (ProtobufError, onnx.checker.ValidationError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SpecError(field, f"not an ONNX model: {src.name}: {reason}") from None
    sha256 = hashlib.sha256(data).hexdigest()
    path = private_dir(Path(data_dir) / MODELS_DIR) / f"{sha256}.onnx"
    if not path.is_file():  # written atomically: a file there is whole
        write_private(path, data)
    return StoredModel(sha256, path)
