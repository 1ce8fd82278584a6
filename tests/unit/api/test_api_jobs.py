"""``/api/v1/jobs``: enqueue with an owner, cancel by owner or operator, errors as one line."""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import Api

from farm.queue import DeviceState

GEMM: dict[str, Any] = {"kind": "gemm", "params": {"n": 64}}


def _submit(api: Api, token: str, spec: dict[str, Any] | None = None, **flags: Any) -> Any:
    return api.client.post("/api/v1/jobs", json={"spec": spec or GEMM, **flags},
                           headers=api.auth(token))


class TestSubmit:
    """POST /api/v1/jobs."""

    def test_job_lands_with_its_owner(self, api: Api) -> None:
        """The stored job belongs to the token's owner, and farmd is woken."""
        response = _submit(api, api.alice)
        assert response.status_code == 201, response.text
        job = response.json()["jobs"][0]
        assert job["owner"] == "alice"
        assert api.store.get_job(job["id"]).owner == "alice"  # type: ignore[union-attr]
        assert api.wakes == [1]

    def test_bad_spec_is_a_400_naming_the_field(self, api: Api) -> None:
        """The spec is validated as farmctl enqueue does; nothing is stored."""
        response = _submit(api, api.alice, {"kind": "gemm", "params": {"n": 3}})
        assert response.status_code == 400
        body = response.json()
        assert body["field"].startswith("params")
        assert body["error"].startswith(body["field"] + ": ")
        assert "\n" not in body["error"]
        assert api.store.list_jobs() == []

    def test_unknown_kind(self, api: Api) -> None:
        """A kind farm does not know is refused as the spec's ``kind``."""
        response = _submit(api, api.alice, {"kind": "nope"})
        assert (response.status_code, response.json()["field"]) == (400, "kind")

    def test_no_phone_can_run_it(self, api: Api) -> None:
        """A selection no known phone fits is refused unless asked to wait for one."""
        api.store.upsert_device("p1", api.clock.now(), {"abi": "arm64-v8a", "soc": "SM8150"})
        spec = {**GEMM, "devices": {"soc": "SM9999"}}
        response = _submit(api, api.alice, spec)
        assert response.status_code == 400
        assert "no known phone can run this job" in response.json()["error"]
        assert _submit(api, api.alice, spec, wait_for_device=True).status_code == 201

    def test_each_fans_out_under_one_run(self, api: Api) -> None:
        """``each`` stores one job per phone in service, pinned to it, all the caller's."""
        from device_states import put_state

        for serial in ("p1", "p2"):
            api.store.upsert_device(serial, api.clock.now(), {"abi": "arm64-v8a", "sdk": 30})
            put_state(api.store, serial, DeviceState.READY, "test", api.clock.now())
        body = _submit(api, api.bob, each=True).json()
        assert body["run_id"].startswith("r-")
        assert sorted(j["spec"]["devices"]["serials"][0] for j in body["jobs"]) == ["p1", "p2"]
        assert {j["owner"] for j in body["jobs"]} == {"bob"}


class TestCancel:
    """POST /api/v1/jobs/{id}/cancel."""

    def test_owner_cancels_own_job(self, api: Api) -> None:
        """The owner's token cancels the owner's job."""
        job_id = _submit(api, api.alice).json()["jobs"][0]["id"]
        response = api.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=api.auth(api.alice))
        assert response.status_code == 200
        assert response.json()["job"]["state"] == "cancelled"

    def test_other_owner_is_forbidden(self, api: Api) -> None:
        """Bob cannot cancel alice's job; the job stays queued."""
        job_id = _submit(api, api.alice).json()["jobs"][0]["id"]
        response = api.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=api.auth(api.bob))
        assert response.status_code == 403
        assert "alice" in response.json()["error"]
        assert api.store.get_job(job_id).state.value == "queued"  # type: ignore[union-attr]

    def test_operator_cancels_any(self, api: Api) -> None:
        """An operator token cancels anyone's job, a local user's too."""
        job_id = api.store.enqueue(GEMM, api.clock.now())
        response = api.client.post(f"/api/v1/jobs/{job_id}/cancel",
                                   headers=api.auth(api.operator))
        assert response.status_code == 200

    def test_ended_job_is_a_conflict(self, api: Api) -> None:
        """Cancelling twice is a 409 saying the job has ended."""
        job_id = _submit(api, api.alice).json()["jobs"][0]["id"]
        api.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=api.auth(api.alice))
        response = api.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=api.auth(api.alice))
        assert response.status_code == 409
        assert "already ended" in response.json()["error"]


class TestRead:
    """GET /api/v1/jobs, /jobs/{id}, /jobs/{id}/results."""

    def test_list_filters_and_says_why_it_waits(self, api: Api) -> None:
        """Queued jobs carry their wait reason; a state filter keeps only that state."""
        first = api.store.enqueue(GEMM, api.clock.now())
        second = api.store.enqueue(GEMM, api.clock.now())
        api.store.cancel(second, api.clock.now())
        rows = api.client.get("/api/v1/jobs?state=queued", headers=api.auth(api.bob)).json()
        assert [r["job"]["id"] for r in rows] == [first]
        assert rows[0]["waiting"]
        assert len(api.client.get("/api/v1/jobs?limit=1", headers=api.auth(api.bob)).json()) == 1

    def test_job_detail(self, api: Api) -> None:
        """A job shows its spec, attempts, result and tuning progress (none yet)."""
        job_id = api.store.enqueue(GEMM, api.clock.now())
        body = api.client.get(f"/api/v1/jobs/{job_id}", headers=api.auth(api.bob)).json()
        assert body["job"]["spec"]["params"]["n"] == 64
        assert (body["attempts"], body["result"], body["tuning"]) == ([], None, None)

    @pytest.mark.parametrize("path", ["/api/v1/jobs/99", "/api/v1/jobs/99/results",
                                      "/api/v1/results?job=99"])
    def test_unknown_job_is_404(self, api: Api, path: str) -> None:
        """An unknown job id is a 404 with a one-line error."""
        response = api.client.get(path, headers=api.auth(api.bob))
        assert (response.status_code, response.json()) == (404, {"error": "no job 99"})

    def test_results_of_a_job_without_any(self, api: Api) -> None:
        """A job with no result yet has no spreads and no samples, and names the readings either
        would carry."""
        job_id = api.store.enqueue(GEMM, api.clock.now())
        body = api.client.get(f"/api/v1/jobs/{job_id}/results", headers=api.auth(api.bob)).json()
        assert (body["spreads"], body["samples"]) == ([], [])
        assert [r["name"] for r in body["readings"]] == ["battery_temp_c", "thermal_status"]


def test_model_path_on_the_server_is_refused(api: Api) -> None:
    """A spec naming a model by a server path is refused: a token must not read farmd's files."""
    spec = {"kind": "model", "params": {"path": "/etc/passwd", "sha256": "0" * 64}}
    response = _submit(api, api.alice, spec, wait_for_device=True)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == "params.path"
    assert "upload" in response.json()["error"]
    assert api.store.list_jobs() == []
