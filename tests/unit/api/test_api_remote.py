"""``farmctl --server`` end to end: a real ApiServer on a temp database, farmctl as a subprocess."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_helpers import T0
from device_states import put_state

from farm.api.context import ApiContext
from farm.api.errors import Forbidden
from farm.client.remote import RemoteService
from farm.clock import FakeClock
from farm.config import Settings
from farm.demo_model import write_small_cnn
from farm.netaddr import free_port
from farm.queue import DeviceState, Store
from farm.serve.server import ApiServer

FACTS = {"abi": "arm64-v8a", "soc": "SM8150", "sdk": 30}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Store]]:
    """An ApiServer on a free loopback port over a fresh SQLite database with one ready phone."""
    store = Store(f"sqlite:///{tmp_path / 'farm.db'}")
    store.upsert_device("phone-1", T0, FACTS)
    put_state(store, "phone-1", DeviceState.READY, "test", T0)
    settings = Settings(data_dir=tmp_path / "server", database_url=store.url)
    api = ApiServer(ApiContext(store, settings, FakeClock(T0)), "127.0.0.1", 0)
    api.start()
    try:
        yield api.url, store
    finally:
        api.stop()
        store.close()


def farmctl(tmp_path: Path, *args: str, url: str,
            token: str | None) -> subprocess.CompletedProcess[str]:
    """Run ``farmctl`` in a subprocess with FARM_SERVER and FARM_TOKEN and an empty config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FARM_")}
    client = tmp_path / "client"  # the client machine's own (empty) config and data folder
    client.mkdir(exist_ok=True)
    config = client / "farm.toml"
    config.write_text(f'data_dir = "{client / "data"}"\n', encoding="utf-8")
    env.update(FARM_SERVER=url, FARM_CONFIG=str(config))
    if token is not None:
        env["FARM_TOKEN"] = token
    argv = [sys.executable, "-c", "from farm.cli.main import main; main()", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


class TestRemoteFarmctl:
    """farmctl on "another machine": nothing but the URL and a token."""

    def test_lists_devices_and_enqueues(self, server: tuple[str, Store], tmp_path: Path) -> None:
        """devices lists the server's phone; enqueue stores a job owned by the token's owner."""
        url, store = server
        token = store.create_token("carol", T0)
        listed = farmctl(tmp_path, "devices", "--json", url=url, token=token)
        assert listed.returncode == 0, listed.stderr
        assert [d["serial"] for d in json.loads(listed.stdout)] == ["phone-1"]
        queued = farmctl(tmp_path, "enqueue", "gemm", "--n", "64", "--json", url=url, token=token)
        assert queued.returncode == 0, queued.stderr
        job_id = json.loads(queued.stdout)["id"]
        assert store.get_job(job_id).owner == "carol"  # type: ignore[union-attr]
        shown = farmctl(tmp_path, "job", str(job_id), "--json", url=url, token=token)
        assert json.loads(shown.stdout)["job"]["state"] == "queued"
        assert json.loads(shown.stdout)["waiting"]
        samples = farmctl(tmp_path, "results", "--job", str(job_id), "--format", "json", url=url,
                          token=token)
        assert (samples.returncode, json.loads(samples.stdout)) == (0, [])
        assert not (tmp_path / "client" / "data" / "farm.db").exists()  # no local database

    def test_enqueue_uploads_the_model(self, server: tuple[str, Store], tmp_path: Path) -> None:
        """enqueue model --model FILE uploads the file: the job names its blob, not a path."""
        url, store = server
        model = write_small_cnn(tmp_path / "cnn.onnx")
        queued = farmctl(tmp_path, "enqueue", "model", "--model", str(model), "--json", url=url,
                         token=store.create_token("carol", T0))
        assert queued.returncode == 0, queued.stderr
        params = json.loads(queued.stdout)["spec"]["params"]
        assert params["sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
        assert params["name"] == "cnn.onnx" and params.get("path") is None
        assert store.blob_exists(params["sha256"])

    def test_spec_error_names_the_flag(self, server: tuple[str, Store], tmp_path: Path) -> None:
        """A bad value is refused in the words of the flag, as locally, with exit code 2."""
        url, store = server
        token = store.create_token("carol", T0)
        result = farmctl(tmp_path, "enqueue", "gemm", "--n", "3", url=url, token=token)
        assert result.returncode == 2
        assert result.stderr.startswith("Error: --n")
        assert store.list_jobs() == []

    def test_other_owners_job_cannot_be_cancelled(self, server: tuple[str, Store],
                                                  tmp_path: Path) -> None:
        """cancel of another owner's job is a one-line refusal; the job stays queued."""
        url, store = server
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0, owner="alice")
        result = farmctl(tmp_path, "cancel", str(job_id), url=url,
                         token=store.create_token("carol", T0))
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1 and "alice" in result.stderr
        assert store.get_job(job_id).state.value == "queued"  # type: ignore[union-attr]

    def test_reserve_and_another_owner_cannot_unreserve(self, server: tuple[str, Store],
                                                        tmp_path: Path) -> None:
        """reserve through the API is the token's owner's; another owner's unreserve is refused."""
        url, store = server
        carol, dave = store.create_token("carol", T0), store.create_token("dave", T0)
        made = farmctl(tmp_path, "reserve", "phone-1", "--for", "1h", "--json", url=url,
                       token=carol)
        assert made.returncode == 0, made.stderr
        row = json.loads(made.stdout)
        assert (row["owner"], row["tracker_key"]) == ("carol", "android-phone-1")
        refused = farmctl(tmp_path, "unreserve", "phone-1", url=url, token=dave)
        assert refused.returncode == 2
        assert refused.stderr.count("\n") == 1 and "carol" in refused.stderr
        assert [r.owner for r in store.reservations(now=T0)] == ["carol"]

    @pytest.mark.parametrize("token", [None, "farm_wrong"])
    def test_missing_or_wrong_token(self, server: tuple[str, Store], tmp_path: Path,
                                    token: str | None) -> None:
        """No token or a wrong one: one line saying so, exit code 2, no traceback."""
        url, _ = server
        result = farmctl(tmp_path, "devices", url=url, token=token)
        assert result.returncode == 2
        assert result.stderr.startswith("Error: the server")
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr

    def test_unreachable_server(self, tmp_path: Path) -> None:
        """A server nobody listens on: one line naming it, exit code 1."""
        url = f"http://127.0.0.1:{free_port()}"
        result = farmctl(tmp_path, "jobs", url=url, token="farm_x")
        assert result.returncode == 1
        assert result.stderr.startswith(f"Error: cannot reach the farm server {url}")
        assert result.stderr.count("\n") == 1

    def test_database_commands_refuse_server(self, tmp_path: Path) -> None:
        """A command that needs the database says so under --server, touching nothing."""
        result = farmctl(tmp_path, "logs", url="http://127.0.0.1:1", token="farm_x")
        assert result.returncode == 2
        assert "not through --server" in result.stderr


class TestRemoteService:
    """The client farmctl --server uses, in process, against the real server."""

    def test_reservations_and_owners(self, server: tuple[str, Store]) -> None:
        """A reservation made through the client is the token's; another owner gets Forbidden."""
        url, store = server
        carol = RemoteService(url, store.create_token("carol", T0))
        dave = RemoteService(url, store.create_token("dave", T0))
        try:
            made = carol.reserve("phone-1", 600)
            assert (made.owner, made.serial) == ("carol", "phone-1")
            assert made.tracker_key.endswith("-phone-1")
            assert [r.owner for r in dave.reservations()] == ["carol"]
            with pytest.raises(Forbidden, match="carol"):
                dave.unreserve("phone-1")
            assert carol.unreserve("phone-1").ended_at is not None
            [device] = dave.devices()
            assert device.serial == "phone-1" and device.facts["soc"] == "SM8150"
        finally:
            carol.close()
            dave.close()
