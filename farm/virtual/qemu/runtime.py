"""Fetch, cross-build and cache the AArch64 TVM runtime and RPC server (see the package doc).

Why a C++ server and not an arm64 Python: the aarch64 wheel's
``libtvm_runtime.so`` already holds TVM's whole RPC endpoint
(``tvm::runtime::RPCServerLoop``, the ``tvm.rpc.server.upload``/``download``/
``remove`` functions, ``runtime.RPCTimeEvaluator``), so a ~300-line program
linked against it is a complete board server: it starts in a fraction of a
second under QEMU, where an emulated CPython importing ``tvm`` takes minutes,
and it needs nothing but the cross compiler Debian ships and two wheels (an
arm64 Python would need an arm64 userland: python-build-standalone or a
debootstrap'd Debian). It is also what an ARM board without Python runs
(apache/tvm ``apps/cpp_rpc``, whose command line it takes).

Layout of one build, ``<cache>/tvm-<version>-<digest>/``: ``tvm_rpc.aarch64``,
``uname.aarch64``, ``lib/libtvm_runtime.so``, ``lib/libtvm_ffi.so`` (found
through the programs' ``$ORIGIN/lib`` run path) and ``include/`` (TVM's,
tvm-ffi's and DLPack's headers, for the export bundle's C++ example).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from farm.errors import ToolMissing

__all__ = ["QEMU", "SYSROOT", "Aarch64Runtime", "default_cache_dir", "ensure_runtime"]

#: Debian's ``qemu-user-static``: runs one AArch64 Linux program on this host.
QEMU = "qemu-aarch64-static"
#: Where Debian's ``libc6-arm64-cross`` (pulled in by ``g++-aarch64-linux-gnu``) keeps the
#: AArch64 loader and libc; QEMU's ``-L`` prefix.
SYSROOT = "/usr/aarch64-linux-gnu"
CXX = "aarch64-linux-gnu-g++"
#: The wheels' platform tag (both publish ``manylinux_2_28_aarch64``).
WHEEL_PLATFORM = "manylinux_2_28_aarch64"
DOWNLOAD_TIMEOUT_S = 600.0
BUILD_TIMEOUT_S = 300.0
_SOURCES = ("tvm_rpc.cc", "uname.c")
_MEMBERS = {  # wheel member prefix -> folder in the build
    "tvm/lib/libtvm_runtime.so": "lib",
    "tvm_ffi/lib/libtvm_ffi.so": "lib",
    "tvm/include/": "include",
    "tvm_ffi/include/": "include",
    "tvm_ffi/3rdparty/dlpack/include/": "include",
}


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/farm/aarch64`` (``~/.cache/farm/aarch64``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "farm" / "aarch64"


@dataclass(frozen=True)
class Aarch64Runtime:
    """One cached build (layout in the module doc).

    Attributes:
        root: its folder.
        tvm_version: the ``apache-tvm`` version its runtime comes from.
    """

    root: Path
    tvm_version: str

    @property
    def server(self) -> Path:
        """The AArch64 ``tvm_rpc`` (``server --tracker=H:P --key=K ...``, as apps/cpp_rpc)."""
        return self.root / "tvm_rpc.aarch64"

    @property
    def uname(self) -> Path:
        """An AArch64 ``uname`` (``-m``, ``-r``): what the kernel tells an emulated process."""
        return self.root / "uname.aarch64"

    @property
    def lib_dir(self) -> Path:
        """``libtvm_runtime.so`` and ``libtvm_ffi.so`` for AArch64."""
        return self.root / "lib"

    @property
    def include_dir(self) -> Path:
        """TVM's, tvm-ffi's and DLPack's headers."""
        return self.root / "include"

    def argv(self, program: Path | str, *args: str) -> list[str]:
        """The host argv that runs an AArch64 ``program`` under QEMU user mode."""
        return [QEMU, "-L", SYSROOT, str(program), *args]


def _versions() -> tuple[str, str]:
    return importlib.metadata.version("apache-tvm"), importlib.metadata.version("apache-tvm-ffi")


def _digest(tvm_version: str, ffi_version: str) -> str:
    sha = hashlib.sha256(f"{tvm_version} {ffi_version}\n".encode())
    for name in _SOURCES:
        sha.update((Path(__file__).parent / name).read_bytes())
    return sha.hexdigest()[:12]


def _check_tools() -> None:
    if shutil.which(QEMU) is None:
        raise ToolMissing(QEMU, "install qemu-user-static (setup.sh does)")
    if shutil.which(CXX) is None or not Path(SYSROOT, "lib").is_dir():
        raise ToolMissing(CXX, "install g++-aarch64-linux-gnu (setup.sh does)")


def _wheels(cache: Path, tvm_version: str, ffi_version: str) -> list[Path]:
    """The two aarch64 wheels, downloaded once into ``cache/wheels``."""
    folder = cache / "wheels"
    wanted = {"apache_tvm": tvm_version, "apache_tvm_ffi": ffi_version}
    try:
        return _wheels_found(folder, wanted)
    except ToolMissing:
        pass
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "--only-binary=:all:", "--platform", WHEEL_PLATFORM, "--python-version", "3.11",
            "--dest", str(folder), f"apache-tvm=={tvm_version}", f"apache-tvm-ffi=={ffi_version}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise ToolMissing(f"apache-tvm {tvm_version} for aarch64",
                          f"pip download failed ({last}); put the wheels in {folder}")
    return _wheels_found(folder, wanted)


def _wheels_found(folder: Path, wanted: dict[str, str]) -> list[Path]:
    paths = [next(iter(sorted(folder.glob(f"{name}-{version}-*.whl"))), None)
             for name, version in wanted.items()]
    missing = [name for name, path in zip(wanted, paths, strict=True) if path is None]
    if missing:
        raise ToolMissing(", ".join(missing), f"no aarch64 wheel in {folder}")
    return [path for path in paths if path is not None]


def _extract(wheel: Path, into: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            for prefix, folder in _MEMBERS.items():
                if member.is_dir() or not member.filename.startswith(prefix):
                    continue
                relative = (Path(member.filename).name if folder == "lib"
                            else member.filename[len(prefix):])
                target = into / folder / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst)


def _compile(build: Path) -> None:
    here = Path(__file__).parent
    common = ["-O2", "-Wl,-rpath,$ORIGIN/lib"]
    steps = [
        [CXX, "-std=c++17", *common, f"-I{build / 'include'}", str(here / "tvm_rpc.cc"),
         "-o", str(build / "tvm_rpc.aarch64"), f"-L{build / 'lib'}", "-ltvm_runtime",
         "-ltvm_ffi"],
        [CXX, "-x", "c", *common, str(here / "uname.c"), "-o", str(build / "uname.aarch64")],
    ]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                              check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(argv)} failed:\n{done.stderr.strip()}")



def ensure_runtime(cache_dir: Path | None = None) -> Aarch64Runtime:
    """The AArch64 runtime build for the installed TVM, made on first use.

    A build is keyed by the ``apache-tvm``/``apache-tvm-ffi`` versions and the
    sources, built in a temporary folder and renamed into place, so concurrent
    callers never see half a build. The first call downloads ~100 MB of wheels
    and compiles for a few seconds; later calls only check a folder.

    Raises:
        ToolMissing: QEMU or the cross compiler is not installed, or the wheels
            could not be downloaded.
        RuntimeError: the cross-build failed (the compiler's output is in the message).
    """
    cache = cache_dir or default_cache_dir()
    tvm_version, ffi_version = _versions()
    runtime = Aarch64Runtime(cache / f"tvm-{tvm_version}-{_digest(tvm_version, ffi_version)}",
                             tvm_version)
    _check_tools()
    if runtime.server.exists():
        return runtime
    wheels = _wheels(cache, tvm_version, ffi_version)
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=cache))
    try:
        for wheel in wheels:
            _extract(wheel, staging)
        _compile(staging)
        try:
            staging.rename(runtime.root)
        except OSError:  # another process finished the same build first
            if not runtime.server.exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return runtime
