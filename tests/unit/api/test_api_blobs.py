"""``POST /api/v1/blobs``: model uploads, and jobs that name them."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from api_helpers import Api
from exported_models import write_computed_reshape
from fastapi.testclient import TestClient
from npz_bombs import zeros_npz

from farm.api.context import ApiContext
from farm.api.uploads import UPLOADS_DIR, UploadSlots
from farm.config import ApiSettings, JobSettings, Settings
from farm.demo_model import write_small_cnn
from farm.serve.app import create_app


def _upload(api: Api, data: bytes, name: str = "m.onnx") -> object:
    return api.client.post(f"/api/v1/blobs?name={name}", content=data,
                           headers={**api.auth(api.alice),
                                    "Content-Type": "application/octet-stream"})


class TestUpload:
    """Uploads are checked as ONNX and stored once by their SHA-256."""

    def test_model_is_stored_and_a_job_names_it(self, api: Api, tmp_path: Path) -> None:
        """An ONNX upload answers its sha256; a model job naming it is queued, the caller's."""
        data = write_small_cnn(tmp_path / "cnn.onnx").read_bytes()
        response = _upload(api, data, "cnn.onnx")
        assert response.status_code == 201, response.text  # type: ignore[attr-defined]
        body = response.json()  # type: ignore[attr-defined]
        assert body == {"sha256": hashlib.sha256(data).hexdigest(), "name": "cnn.onnx",
                        "size": len(data)}
        assert api.store.blob_exists(body["sha256"])
        spec = {"kind": "model", "params": {"sha256": body["sha256"], "name": "cnn.onnx"}}
        queued = api.client.post("/api/v1/jobs", json={"spec": spec, "wait_for_device": True},
                                 headers=api.auth(api.alice))
        assert queued.status_code == 201, queued.text
        assert queued.json()["jobs"][0]["owner"] == "alice"

    @pytest.mark.parametrize(("body", "reason"), [
        (b"not a model", "not an ONNX model: x.onnx: "),
        (b"", "not an ONNX model: x.onnx is empty"),
    ])
    def test_not_onnx_is_refused(self, api: Api, body: bytes, reason: str) -> None:
        """Bytes that are no ONNX model (none at all too) are a 400 naming the file."""
        response = _upload(api, body, "x.onnx")
        assert response.status_code == 400  # type: ignore[attr-defined]
        assert reason in response.json()["error"]  # type: ignore[attr-defined]

    def test_a_refusal_names_the_users_file_not_the_servers(self, api: Api, tmp_path: Path
                                                            ) -> None:
        """A multipart form cut short, sent as the body: the 400 names m.onnx, no server path."""
        data = write_small_cnn(tmp_path / "cnn.onnx").read_bytes()
        body = (b'--b\r\nContent-Disposition: form-data; name="file"; filename="m.onnx"\r\n'
                b"Content-Type: application/octet-stream\r\n\r\n" + data[: len(data) // 2])
        response = api.client.post("/api/v1/blobs?name=m.onnx", content=body,
                                   headers={**api.auth(api.alice),
                                            "Content-Type": "multipart/form-data; boundary=b"})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert "m.onnx" in error
        assert str(tmp_path) not in error and UPLOADS_DIR not in error and ".part" not in error

    def test_inputs_declaring_too_much_are_refused_unread(self, api: Api, tmp_path: Path
                                                           ) -> None:
        """2 MB declaring 2 GiB of zeros: a 400 naming the file and the limit; nothing stored."""
        data = zeros_npz(tmp_path / "zeros.npz", "x", (1 << 29,)).read_bytes()
        response = api.client.post("/api/v1/blobs?name=zeros.npz&type=inputs", content=data,
                                   headers={**api.auth(api.alice),
                                            "Content-Type": "application/octet-stream"})
        assert response.status_code == 400, response.text
        assert response.json()["reason"] == (
            f"zeros.npz: 'x' declares [536870912] float32 (2147483776 bytes); at most "
            f"{JobSettings().inputs_max_bytes} bytes of inputs are taken ([jobs] inputs_max_bytes)")
        assert not api.store.blob_exists(hashlib.sha256(data).hexdigest())

    def test_unknown_blob_is_refused(self, api: Api) -> None:
        """A spec naming a sha256 nobody uploaded is refused at enqueue."""
        spec = {"kind": "model", "params": {"sha256": "0" * 64, "name": "m.onnx"}}
        response = api.client.post("/api/v1/jobs", json={"spec": spec, "wait_for_device": True},
                                   headers=api.auth(api.alice))
        assert response.status_code == 400
        assert "upload" in response.json()["error"]
        assert api.store.list_jobs() == []


#: The input write_computed_reshape declares.
_DECLARED = "[batch,3,8,8]"


class TestInputShapes:
    """``POST /api/v1/jobs`` checks input shapes against the uploaded model, as farmctl does."""

    @pytest.mark.parametrize(("shapes", "reason"), [
        ({"image": [1, 3, 8, 8]}, f"m.onnx has no input 'image'; its inputs: 'images' {_DECLARED}"),
        ({"images": [3, 8, 8]}, f"input 'images' has rank 4 in m.onnx ({_DECLARED}); 3 dims given"),
        (None, (f"input 'images' has symbolic dimension 'batch' in m.onnx ({_DECLARED}); "
                "give its shape, e.g. images=1,3,8,8")),
    ])
    def test_wrong_shapes_are_a_400_naming_the_input(self, api: Api, tmp_path: Path,
                                                     shapes: dict | None, reason: str) -> None:
        """A wrong name, a wrong rank, an unset symbolic dimension: 400 on the field, no job."""
        data = write_computed_reshape(tmp_path / "m.onnx").read_bytes()
        sha256 = _upload(api, data, "m.onnx").json()["sha256"]  # type: ignore[attr-defined]
        model = {"sha256": sha256, "name": "m.onnx", "input_shapes": shapes}
        for spec, field in (({"kind": "model", "params": model}, "params.input_shapes"),
                            ({"kind": "tune", "params": {"model": model, "trials": 2,
                                                         "trials_per_batch": 2}},
                             "params.model.input_shapes")):
            response = api.client.post("/api/v1/jobs",
                                       json={"spec": spec, "wait_for_device": True},
                                       headers=api.auth(api.alice))
            assert response.status_code == 400, response.text
            assert response.json()["field"] == field
            assert response.json()["reason"] == reason
        assert api.store.list_jobs() == []
class TestSpooling:
    """Uploads go to a private file, bounded, removed once answered (farm/api/uploads.py)."""

    def test_over_the_limit_while_arriving(self, api: Api, tmp_path: Path) -> None:
        """A body without a length that passes ``upload_max_bytes`` is a 413; no file is left."""
        settings = Settings(data_dir=tmp_path / "small", database_url=api.store.url,
                            api={"upload_max_bytes": 1000})
        app = create_app(ApiContext(api.store, settings, api.clock))

        def chunks() -> Iterator[bytes]:
            for _ in range(100):
                yield bytes(100)

        with TestClient(app) as client:
            response = client.post("/api/v1/blobs?name=big.onnx", content=chunks(),
                                   headers=api.auth(api.alice))
        assert response.status_code == 413
        assert response.json()["error"] == "the upload is over 1000 bytes ([api] upload_max_bytes)"
        assert not list((tmp_path / "small" / UPLOADS_DIR).iterdir())

    def test_slots_per_token(self) -> None:
        """With one slot per token a token's second upload waits; another token's does not."""
        slots = UploadSlots(per_token=1)
        order: list[str] = []

        async def hold(token_id: int, name: str) -> None:
            async with slots.slot(token_id):
                order.append(f"{name} in")
                await asyncio.sleep(0.01)
                order.append(f"{name} out")

        async def main() -> None:
            await asyncio.gather(hold(1, "a1"), hold(1, "a2"), hold(2, "b"))

        asyncio.run(main())
        assert order.index("a1 out") < order.index("a2 in")
        assert order.index("b in") < order.index("a1 out")

    def test_stalled_uploads_are_cut_off_and_block_no_other(self, api: Api, tmp_path: Path
                                                            ) -> None:
        """Three bodies that declare 1 MB and stall get 408s; the token's next upload goes in."""
        settings = Settings(data_dir=tmp_path / "stalls", database_url=api.store.url,
                            api={"upload_read_timeout_s": 0.5})
        app = create_app(ApiContext(api.store, settings, api.clock))
        model = write_small_cnn(tmp_path / "cnn.onnx").read_bytes()
        never = asyncio.Event()

        async def stalled() -> AsyncIterator[bytes]:
            yield bytes(10)
            await never.wait()

        async def main() -> list[int]:
            headers = {**api.auth(api.alice), "Content-Type": "application/octet-stream"}
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://farm") as client:
                stalls = [asyncio.create_task(client.post(
                    "/api/v1/blobs?name=s.onnx", content=stalled(),
                    headers={**headers, "Content-Length": "1000000"})) for _ in range(3)]
                spooling = tmp_path / "stalls" / UPLOADS_DIR
                while not spooling.is_dir() or len(list(spooling.iterdir())) < 2:
                    await asyncio.sleep(0.01)  # both of alice's slots are held by stalls
                last = await client.post("/api/v1/blobs?name=cnn.onnx", content=model,
                                         headers=headers)
                answers = [response.status_code for response in await asyncio.gather(*stalls)]
                return [*answers, last.status_code]

        statuses = asyncio.run(asyncio.wait_for(main(), 30))
        assert statuses == [408, 408, 408, 201]
        assert ApiSettings().upload_read_timeout_s == 30.0
        assert not list((tmp_path / "stalls" / UPLOADS_DIR).iterdir())
