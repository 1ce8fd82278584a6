"""``python -m farm.virtual.qemu``: build (or find) the AArch64 runtime, print its folder.

setup.sh runs it so CI's first test finds the build in the cache.
"""

from __future__ import annotations

import sys

from farm.errors import ToolMissing
from farm.virtual.qemu.runtime import ensure_runtime


def main() -> int:
    """Build or find the runtime; 1 with a one-line error when a tool or wheel is missing."""
    try:
        runtime = ensure_runtime()
    except (ToolMissing, RuntimeError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    sys.stdout.write(f"{runtime.root}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
