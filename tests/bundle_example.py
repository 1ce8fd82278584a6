"""The C++ example of a ``farmctl export`` bundle, built and run as its README says (host build).

Imported by name (``tests/`` is on ``sys.path`` through its ``conftest.py``). The
bundle's ``CMakeLists.txt`` builds ``run_model`` against the TVM wheel's runtime
(``TVM_ROOT``, ``TVM_FFI_ROOT``: the folders of the installed ``tvm`` and
``tvm_ffi`` packages); ``run_model BUNDLE --repeat N`` loads the library, runs
it on the shipped ``inputs/*.npy``, prints ``output K: matches`` (or ``DIFFERS``,
exit 1) against ``expected/*.npy`` and ``latency: median ...``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["build_example", "example_env", "run_example"]

#: Seconds one cmake step or run may take (a build on 2 loaded cores takes tens).
STEP_TIMEOUT_S = 600


def example_env(home: Path) -> dict[str, str]:
    """A bare environment for the build: ``PATH`` and a private ``HOME``, no ``PYTHONPATH``."""
    return {"PATH": os.environ["PATH"], "HOME": str(home)}


def build_example(bundle: Path, build: Path, env: dict[str, str],
                  configure: list[str] | None = None) -> Path:
    """Configure and build the bundle's CMake project in ``build``; the ``run_model`` binary.

    ``configure``: cmake's ``-D`` options instead of the host wheel's ``TVM_ROOT``
    and ``TVM_FFI_ROOT`` (a cross build names its toolchain file and runtime).

    Raises:
        AssertionError: a cmake step failed (its output in the message).
    """
    import tvm
    import tvm_ffi

    if configure is None:
        configure = [f"-DTVM_ROOT={Path(tvm.__file__).parent}",
                     f"-DTVM_FFI_ROOT={Path(tvm_ffi.__file__).parent}"]
    for argv in (
        ["cmake", "-S", str(bundle), "-B", str(build), *configure],
        ["cmake", "--build", str(build)],
    ):
        proc = subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=STEP_TIMEOUT_S, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return build / "run_model"


def run_example(binary: Path, bundle: Path, env: dict[str, str],
                repeat: int = 3) -> subprocess.CompletedProcess[str]:
    """``run_model BUNDLE --repeat N``, its exit code left to the caller."""
    return subprocess.run([str(binary), str(bundle), "--repeat", str(repeat)], env=env,
                          capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=False)
