"""AArch64 code under QEMU user-mode emulation: the runtime virtual ARM boards run.

:func:`~farm.virtual.qemu.runtime.ensure_runtime` fetches the aarch64
``apache-tvm`` and ``apache-tvm-ffi`` wheels of the installed versions, takes
their ``libtvm_runtime.so``, ``libtvm_ffi.so`` and headers, and cross-builds
``tvm_rpc.cc`` (a TVM RPC server) and ``uname.c`` with Debian's
``aarch64-linux-gnu-g++``, once per version, in a cache folder.
"""

from farm.virtual.qemu.runtime import QEMU, SYSROOT, Aarch64Runtime, ensure_runtime

__all__ = ["QEMU", "SYSROOT", "Aarch64Runtime", "ensure_runtime"]
