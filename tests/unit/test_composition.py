"""The composition root: it alone fills the registries, and a plain script can call it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from farm import composition
from farm.controllers import kinds, register, unregister
from farm.health.kind_readings import BUILT_IN
from farm.health.readings import declared
from farm.queue import catalog

#: A script that opens a Store and enqueues, as a user writes one: first without the
#: root (the one-line error), then after it (the job).
_SCRIPT = textwrap.dedent(
    """
    import sys
    from datetime import datetime, timezone
    from farm.queue.store import Store

    now = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
    store = Store("sqlite:///" + sys.argv[1])
    try:
        store.enqueue({"kind": "gemm", "params": {"n": 64}}, now)
    except RuntimeError as exc:
        print("refused:", exc)
    import farm.composition
    farm.composition.install()
    print("job", store.enqueue({"kind": "gemm", "params": {"n": 64}}, now))
    store.close()
    """
)

#: Imports every module that used to register on import, then reports the registries.
_IMPORTS_ONLY = textwrap.dedent(
    """
    import json
    import farm.controllers, farm.health.kind_readings, farm.kinds
    from farm.controllers import kinds
    from farm.health.readings import declared
    from farm.queue import catalog

    def refused(read):
        try:
            read()
        except RuntimeError as exc:
            return str(exc)
        return None

    print(json.dumps({"catalog": refused(lambda: catalog.declared("gemm")),
                      "controllers": kinds(),
                      "readings": refused(lambda: declared("android"))}))
    """
)


def _python(script: str, *args: str) -> str:
    """``script`` run in a fresh interpreter; its stdout."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, timeout=120, check=True)
    return done.stdout


class TestInstall:
    def test_a_script_that_opens_a_store_enqueues_after_the_root(self, tmp_path: Path) -> None:
        """Without the root enqueue says in one line what to call; with it the job is queued."""
        out = _python(_SCRIPT, str(tmp_path / "farm.db")).splitlines()
        lines = [line for line in out if line.startswith(("refused:", "job "))]  # not the logs
        assert lines[0] == ("refused: no job kinds installed in farm.queue.catalog: call "
                            "farm.composition.install() once before reading job specs")
        assert lines[1] == "job 1"

    def test_importing_the_kinds_controllers_and_readings_registers_nothing(self) -> None:
        """The tables are data: importing their modules leaves every registry empty."""
        seen = json.loads(_python(_IMPORTS_ONLY))
        assert "farm.composition.install()" in seen["catalog"]
        assert seen["controllers"] == []
        assert "farm.composition.install()" in seen["readings"]

    def test_install_fills_each_registry_and_a_second_call_keeps_what_was_added(self) -> None:
        """The built-in kinds, controllers and readings are in; an added controller stays."""
        register("toaster", lambda context: None)  # type: ignore[arg-type, return-value]
        try:
            composition.install()
            assert kinds()[:4] == list(composition.CONTROLLERS)
            assert "toaster" in kinds()
        finally:
            unregister("toaster")
        assert catalog.declared("gemm") is not None
        assert [declared(d.kind) for d in BUILT_IN] == list(BUILT_IN)
