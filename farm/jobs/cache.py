"""A content-addressed compile cache on disk: one build serves every phone of a target.

Layout under the cache root::

    <root>/<sha256 of the key>/lib.so      the exported library
    <root>/<sha256 of the key>/key.json    the key, for people reading the folder
    <root>/<sha256 of the key>.lock        held (flock) while the entry is built

A hit touches ``lib.so``, so its mtime is its last use: retention
(:mod:`farm.retention`) removes entries unused for long, or the least
recently used when the cache is over its size.

The key is (workload, schedule, target, TVM version), canonical JSON. Concurrent
builds of one key, from threads or from the job child processes of several
phones, serialise on the lock file; the library is written to a temporary name in
the entry folder and moved into place with ``os.replace``, so a reader sees either
nothing or a whole file, and a build killed halfway leaves no entry.

A hand-rolled cache rather than ``joblib.Memory`` or ``diskcache``: the value is a
file TVM writes itself (``export_library``) and uploads by path, and the one
extra guarantee needed, one build per key across processes, is a ``flock``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm import logs

log = logs.get_logger(__name__)

LIBRARY_NAME = "lib.so"


@dataclass(frozen=True)
class CacheKey:
    """What a compiled library depends on.

    Attributes:
        workload: e.g. ``"gemm n=128 dtype=float32"`` or ``"onnx sha256=... shapes=..."``.
        schedule: e.g. ``"cpu bn=32 v1"``; bump the version when a schedule changes.
        target: the target dict.
        tvm_version: ``tvm.__version__`` of the compiler.
    """

    workload: str
    schedule: str
    target: Mapping[str, Any]
    tvm_version: str

    def digest(self) -> str:
        """The hex SHA-256 of the key's canonical JSON."""
        text = json.dumps(
            {
                "workload": self.workload,
                "schedule": self.schedule,
                "target": self.target,
                "tvm_version": self.tvm_version,
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(text.encode()).hexdigest()


class CompileCache:
    """Compiled libraries on disk, built at most once per key.

    Attributes:
        root: the cache folder.
        hits: lookups served from disk by this instance.
        misses: builds this instance ran.
    """

    def __init__(self, root: Path) -> None:
        """Open (and create) the cache at ``root``."""
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self._count_lock = threading.Lock()

    def path_for(self, key: CacheKey) -> Path:
        """Where the library of ``key`` lives (it may not exist yet)."""
        return self.root / key.digest() / LIBRARY_NAME

    @contextmanager
    def _locked(self, digest: str) -> Iterator[None]:
        lock_path = self.root / f"{digest}.lock"
        with lock_path.open("a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    def get_or_build(self, key: CacheKey, build: Callable[[Path], None]) -> Path:
        """The library for ``key``, calling ``build(tmp_path)`` only if it is missing.

        Args:
            key: what the library depends on.
            build: writes the library to the path it is given (e.g. with
                ``export_library``); it may raise, and then nothing is cached.

        Returns:
            The path of the cached library.

        Raises:
            Whatever ``build`` raises (farm's CompileError, ToolMissing).
        """
        final = self.path_for(key)
        if final.is_file():
            self._touch(final)
            self._count(hit=True, key=key)
            return final
        digest = key.digest()
        with self._locked(digest):
            if final.is_file():  # another process built it while we waited
                self._touch(final)
                self._count(hit=True, key=key)
                return final
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = final.parent / f".{LIBRARY_NAME}.{os.getpid()}.{threading.get_ident()}.so"
            try:
                build(tmp)
                (final.parent / "key.json").write_text(
                    json.dumps(
                        {
                            "workload": key.workload,
                            "schedule": key.schedule,
                            "target": key.target,
                            "tvm_version": key.tvm_version,
                        },
                        indent=1,
                        sort_keys=True,
                    )
                )
                os.replace(tmp, final)
            finally:
                tmp.unlink(missing_ok=True)
            self._count(hit=False, key=key)
            return final

    @staticmethod
    def _touch(library: Path) -> None:
        """Mark a use: retention (:mod:`farm.retention`) ages entries by their last use."""
        with contextlib.suppress(OSError):
            os.utime(library)

    def _count(self, *, hit: bool, key: CacheKey) -> None:
        with self._count_lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1
        log.info(
            "compile_cache_hit" if hit else "compile_cache_built",
            workload=key.workload,
            schedule=key.schedule,
            digest=key.digest()[:12],
        )

    def entries(self) -> list[Path]:
        """Every cached library, sorted by path."""
        return sorted(self.root.glob(f"*/{LIBRARY_NAME}"))
