"""``POST /api/v1/blobs``: model uploads, and jobs that name them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from api_helpers import Api
from exported_models import write_computed_reshape

from farm.demo_model import write_small_cnn


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

    def test_not_onnx_is_refused(self, api: Api) -> None:
        """Bytes that are no ONNX model are a 400 naming the file; nothing is stored."""
        response = _upload(api, b"not a model", "x.onnx")
        assert response.status_code == 400  # type: ignore[attr-defined]
        assert "not an ONNX model: x.onnx" in response.json()["error"]  # type: ignore[attr-defined]

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
