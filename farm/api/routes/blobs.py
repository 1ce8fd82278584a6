"""``/api/v1/blobs``: upload a model's bytes; a job spec then names it by its SHA-256.

``POST /api/v1/blobs?name=model.onnx`` with the file's raw bytes as the body
(``application/octet-stream``) checks them as ONNX, stores them once by their
SHA-256 (the ``blobs`` table) and answers ``{"sha256", "name", "size"}``; a
spec names the model with ``{"sha256": ..., "name": ...}`` in place of a path
(:func:`farm.jobs.model_store.spec_with_blob`), as ``farmctl --server
enqueue`` does.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, status
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from farm.api.errors import TooLarge
from farm.api.routes import ServiceDep

__all__ = ["BlobOut", "router"]

router = APIRouter(prefix="/api/v1/blobs", tags=["blobs"])


class BlobOut(BaseModel):
    """A stored upload: its SHA-256 (the name a spec uses), the file name, its size in bytes."""

    sha256: str
    name: str
    size: int


@router.post("", status_code=status.HTTP_201_CREATED)
async def upload(request: Request, svc: ServiceDep,
                 name: Annotated[str, Query(min_length=1, max_length=255)]) -> BlobOut:
    """Store an ONNX model's bytes (the body); refused with 400 when it is no ONNX model.

    Bodies over ``[api] upload_max_bytes`` are refused with 413 while they arrive.
    """
    limit = svc.settings.api.upload_max_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the upload is {int(declared)} bytes; at most {limit} are taken "
                       "([api] upload_max_bytes)")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise TooLarge(f"the upload is over {limit} bytes ([api] upload_max_bytes)")
    stored = await run_in_threadpool(svc.upload_model, bytes(data), name)
    return BlobOut(sha256=stored.sha256, name=stored.name, size=len(data))
