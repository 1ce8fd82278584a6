"""``/api/v1/blobs``: upload a model's bytes; a job spec then names it by its SHA-256.

``POST /api/v1/blobs?name=model.onnx`` with the file's raw bytes as the body
(``application/octet-stream``) checks them as ONNX, stores them once by their
SHA-256 (the ``blobs`` table) and answers ``{"sha256", "name", "size"}``; a
spec names the model with ``{"sha256": ..., "name": ...}`` in place of a path
(:func:`farm.jobs.model_store.spec_with_blob`), as ``farmctl --server
enqueue`` does.

``?type=inputs`` takes a numpy ``.npz`` of a model's inputs instead (checked as
an archive; against the model once a spec names it in ``params.inputs`` as
``{"sha256": ..., "name": ...}``, :mod:`farm.kinds.model_inputs`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, status
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from farm.api.errors import TooLarge
from farm.api.routes import ServiceDep
from farm.api.uploads import UploadSlots, spool
from farm.jobs.model_store import StoredModel
from farm.kinds.model_inputs import InputsBlob

__all__ = ["BlobOut", "router"]

router = APIRouter(prefix="/api/v1/blobs", tags=["blobs"])


class BlobOut(BaseModel):
    """A stored upload: its SHA-256 (the name a spec uses), the file name, its size in bytes."""

    sha256: str
    name: str
    size: int


def _slots(request: Request, per_token: int) -> UploadSlots:
    """The app's :class:`UploadSlots`, made on the first upload."""
    slots: UploadSlots | None = getattr(request.app.state, "upload_slots", None)
    if slots is None:
        slots = request.app.state.upload_slots = UploadSlots(per_token)
    return slots


@router.post("", status_code=status.HTTP_201_CREATED)
async def upload(request: Request, svc: ServiceDep,
                 name: Annotated[str, Query(min_length=1, max_length=255)],
                 kind: Annotated[Literal["model", "inputs"], Query(alias="type")] = "model",
                 ) -> BlobOut:
    """Store an ONNX model's bytes (the body); refused with 400 when it is no ONNX model.

    With ``type=inputs`` the body is a numpy ``.npz`` of a model's inputs, refused
    with 400 when it is no such archive.

    Bodies over ``[api] upload_max_bytes`` are refused with 413 while they arrive;
    the body is spooled to disk, never held in memory (:mod:`farm.api.uploads`), and
    a token runs at most ``[api] uploads_per_token`` uploads at once (more wait);
    a body that pauses for ``[api] upload_read_timeout_s`` is a 408, freeing its slot.
    """
    settings = svc.settings.api
    limit = settings.upload_max_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the upload is {int(declared)} bytes; at most {limit} are taken "
                       "([api] upload_max_bytes)")
    token_id = svc.caller.token_id if svc.caller is not None else 0
    async with _slots(request, settings.uploads_per_token).slot(token_id):
        spooled = await spool(request.stream(), Path(svc.settings.data_dir), limit,
                              settings.upload_read_timeout_s)
        try:
            check: Callable[[Path, str], StoredModel | InputsBlob] = (
                svc.upload_inputs if kind == "inputs" else svc.upload_model)
            stored = await run_in_threadpool(check, spooled.path, name)
        finally:
            spooled.path.unlink(missing_ok=True)
    return BlobOut(sha256=stored.sha256, name=stored.name, size=spooled.size)
