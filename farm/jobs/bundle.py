"""A tuning job's deployment bundle: what a phone app needs, usable without farm.

::

    <out>/model_tuned.so        the job's best build of the model, for the phones'
                                ABI (NDK-linked for real phones): compiled with the
                                tuning records applied, or the untuned build where
                                the tuned one was not faster or applied none
                                (:mod:`farm.tuning.outcome`; the README says which)
    <out>/database/             the MetaSchedule database, as TVM loads it:
                                JSONDatabase(work_dir="<out>/database")
    <out>/model.onnx            the model that was tuned
    <out>/manifest.json         model sha256, inputs, target, TVM version, phones
                                and latencies measured
    <out>/README.md             loading it in Python and in C++, on the host and
                                on an Android phone
    <out>/CMakeLists.txt, main.cc, android-arm64-v8a.cmake, linux-aarch64.cmake,
    <out>/inputs/, expected/
                                the C++ example (:mod:`farm.jobs.bundle_cpp`)

The bundle is written to a temporary folder beside ``out`` and renamed into
place, so ``out`` is either absent (or the empty folder it was) or complete.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm.errors import SpecError
from farm.jobs.bundle_cpp import write_checks, write_project
from farm.jobs.cache import CompileCache
from farm.jobs.model import build_model, load_model, tvm_version
from farm.jobs.params import DeviceKind, ModelParams
from farm.jobs.targets import runtime_device_name
from farm.jobs.tuning_db import TUNED_LIBRARY, count_trials, export_records
from farm.stats import spread

__all__ = ["LIBRARY", "MANIFEST", "TunedModel", "write_bundle"]

#: File names in the bundle.
LIBRARY = "model_tuned.so"
MANIFEST = "manifest.json"
DATABASE = "database"
MODEL = "model.onnx"


@dataclass(frozen=True)
class TunedModel:
    """What a finished model-tuning job left.

    Attributes:
        job_id: the tune job.
        model_path: the ONNX file it tuned (farm's stored copy).
        model_sha256: that file's SHA-256.
        model_name: the user's file name.
        input_shapes: name -> shape given at enqueue, or None for the model's own.
        target: the target dict it tuned and measured for.
        work_dir: its work folder (database, ``model_tuned.so``).
        summary: its result summary (JSON data): the phones and their latencies.
    """

    job_id: int
    model_path: Path
    model_sha256: str
    model_name: str
    input_shapes: dict[str, tuple[int, ...]] | None
    target: dict[str, Any]
    work_dir: Path
    summary: Mapping[str, Any]


def _phones(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per phone: serial, median untuned/tuned latency (ms) and raw samples, from ``runs``."""
    phones = []
    runs = summary.get("runs")
    for run in runs if isinstance(runs, list) else []:
        if not isinstance(run, Mapping) or "serial" not in run:
            continue
        row: dict[str, Any] = {"serial": run["serial"]}
        for name in ("untuned", "tuned"):
            samples = run.get(f"{name}_samples_s")
            if isinstance(samples, list) and samples:
                row[f"{name}_latency_ms"] = spread(samples).median * 1e3
                row[f"{name}_samples_s"] = samples
        if "untuned_latency_ms" in row and "tuned_latency_ms" in row:
            row["speedup"] = row["untuned_latency_ms"] / row["tuned_latency_ms"]
        phones.append(row)
    return phones


def manifest(tuned: TunedModel, inputs: list[Any]) -> dict[str, Any]:
    """The bundle's ``manifest.json`` content (JSON data).

    ``best_build`` (``"tuned"``, ``"untuned"``; None for a result stored before
    it), ``best_note`` and ``records_applied`` say what the library is.
    """
    measured, _ = count_trials(tuned.work_dir)
    summary = tuned.summary
    return {
        "model": tuned.model_name,
        "model_sha256": tuned.model_sha256,
        "inputs": [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype} for i in inputs],
        "target": tuned.target,
        "device": runtime_device_name(tuned.target),
        "tvm_version": tvm_version(),
        "tune_job": tuned.job_id,
        "trials_measured": measured,
        "library": LIBRARY,
        "database": DATABASE,
        "phones": _phones(tuned.summary),
        "best_build": summary.get("best_build"),
        "best_note": summary.get("best_note"),
        "records_applied": summary.get("records_applied"),
    }


def write_bundle(tuned: TunedModel, out: Path, cache: CompileCache) -> Path:
    """Write the bundle of ``tuned`` into the folder ``out``.

    The library is the tuning job's own ``model_tuned.so`` when its work folder
    has one, else the model compiled here with the database applied (through
    the compile cache, so a second export is a copy).

    Args:
        tuned: the finished tuning job.
        out: a folder that does not exist or is empty.
        cache: the compile cache.

    Returns:
        ``out``.

    Raises:
        SpecError: ``out`` exists and is not an empty folder (field ``--out``), or
            the job's result has no target.
        CompileError, ToolMissing: the model cannot be compiled.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SpecError("--out", f"{out} exists and is not an empty folder")
    if "kind" not in tuned.target:
        raise SpecError("JOB_ID", f"job {tuned.job_id}'s result names no target")
    _, inputs = load_model(tuned.model_path, tuned.input_shapes)
    library = tuned.work_dir / TUNED_LIBRARY
    if not library.is_file():
        params = ModelParams(tuned.model_path, input_shapes=tuned.input_shapes,
                             device=DeviceKind(runtime_device_name(tuned.target)),
                             database_dir=tuned.work_dir)
        library, _ = build_model(params, tuned.target, cache)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        shutil.copyfile(library, staging / LIBRARY)
        shutil.copyfile(tuned.model_path, staging / MODEL)
        export_records(tuned.work_dir, staging / DATABASE)
        content = manifest(tuned, inputs)
        content.update(write_checks(staging, tuned.model_path, inputs))
        write_project(staging, content["device"])
        (staging / MANIFEST).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
        (staging / "README.md").write_text(readme(content), encoding="utf-8")
        os.replace(staging, out)  # over an empty folder, too (rename(2))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _built(content: Mapping[str, Any]) -> str:
    """How the library was compiled, in the README's words: which build it is, and why."""
    tvm = content["tvm_version"]
    build, note = content.get("best_build"), content.get("best_note")
    if build == "untuned":
        return (f"compiled by TVM {tvm} without tuning records: the job's best build is the "
                f"untuned one ({note})")
    records = content.get("records_applied")
    applied = (f"with {records} tuning record{'s' if records != 1 else ''} applied"
               if isinstance(records, int) else "with the tuning records applied")
    why = f" ({note})" if build == "tuned" and note else ""
    return f"compiled by TVM {tvm} {applied}{why}"


def readme(content: Mapping[str, Any]) -> str:
    """The bundle's README.md for a manifest's ``content``."""
    first = content["inputs"][0] if content["inputs"] else {"shape": [1], "dtype": "float32"}
    device = content["device"]
    dl_device = {"cpu": "kDLCPU", "opencl": "kDLOpenCL", "vulkan": "kDLVulkan"}.get(device, device)
    # relax.VirtualMachine adds the host CPU after a GPU (it runs the shape functions).
    devices = ["kDLCPU"] if device == "cpu" else [dl_device, "kDLCPU"]
    init_args = ", ".join(f"static_cast<int>({d}), 0, 2" for d in devices)
    return _README.format(
        model=content["model"], sha256=content["model_sha256"], job=content["tune_job"],
        built=_built(content), tvm=content["tvm_version"], library=LIBRARY, database=DATABASE,
        device=device,
        shape=tuple(first["shape"]), dtype=first["dtype"], init_args=init_args,
        tvm_tag=content["tvm_version"].split(".post")[0].split(".dev")[0],
    )


_README = """# {model}, tuned by farm job {job}

- `{library}`: the model (sha256 `{sha256}`) {built}, for the phones' ABI; it runs
  on `{device}`.
- `{database}/`: the MetaSchedule tuning records
  (`database_workload.json`, `database_tuning_record.json`).
- `model.onnx`: the model that was tuned. `manifest.json`: inputs, target, phones
  and the latencies they measured.

## Python

```python
import numpy as np
import tvm
from tvm import relax

lib = tvm.runtime.load_module("{library}")
dev = tvm.device("{device}", 0)
vm = relax.VirtualMachine(lib, dev)
x = tvm.runtime.tensor(np.zeros({shape}, "{dtype}"), dev)
print(vm["main"](x))

# The records, e.g. to compile the model again (tvm.s_tir.meta_schedule.relax_integration):
from tvm.s_tir import meta_schedule as ms
database = ms.database.JSONDatabase(work_dir="{database}")
```

## C++

`main.cc` is a complete program: it loads `{library}` with the TVM runtime's
Relax VM, reads the inputs from `inputs/*.npy` (in the model's input order, see
`manifest.json`), runs `main`, checks every output against `expected/*.npy`
(onnxruntime's outputs on the same inputs) and prints the load time and the
median latency. Its core is these calls:

```cpp
tvm::ffi::Module lib = tvm::ffi::Module::LoadFromFile("{library}");
// The Relax VM: load the executable, then initialise it per device (device type,
// device id, allocator: 2 = pooled), as python/tvm/runtime/vm.py does.
tvm::ffi::Module vm = lib->GetFunction("vm_load_executable").value()().cast<tvm::ffi::Module>();
vm->GetFunction("vm_initialization").value()({init_args});
tvm::ffi::Function main = vm->GetFunction("main").value();
// auto output = main(input);  // input: a tvm::runtime::Tensor of shape {shape}, {dtype}
```

### On this computer, against the `apache-tvm` wheel

The wheel ships the runtime (`tvm/lib/libtvm_runtime.so`, `tvm_ffi/lib/libtvm_ffi.so`)
and the headers (`tvm/include`, `tvm_ffi/include`). This runs on the host only
when the library was built for it (phones that run host code); a library for an
Android phone needs the phone (below).

```sh
TVM_ROOT=$(python -c "import os, tvm; print(os.path.dirname(tvm.__file__))")
TVM_FFI_ROOT=$(python -c "import os, tvm_ffi; print(os.path.dirname(tvm_ffi.__file__))")
cmake -S . -B build -DTVM_ROOT=$TVM_ROOT -DTVM_FFI_ROOT=$TVM_FFI_ROOT
cmake --build build
./build/run_model .
```

or with the compiler alone:

```sh
g++ -std=c++17 -O2 main.cc -o run_model -DFARM_DEVICE='"{device}"' \\
  -I$TVM_ROOT/include -I$TVM_FFI_ROOT/include -L$TVM_ROOT/lib -L$TVM_FFI_ROOT/lib \\
  -ltvm_runtime -ltvm_ffi -ldl -pthread -Wl,-rpath,$TVM_ROOT/lib:$TVM_FFI_ROOT/lib
./run_model .
```

### On an Android phone (arm64-v8a)

The wheel's runtime is for the host; the phone needs `libtvm_runtime.so` and
`libtvm_ffi.so` built from TVM's source with the Android NDK (r23 or newer), at
the version that compiled the library (TVM {tvm}; the runtime and the library
must match). Build the runtime target only, without LLVM:

```sh
git clone --recursive --branch v{tvm_tag} https://github.com/apache/tvm
export ANDROID_NDK=$HOME/Android/Sdk/ndk/<version>
cmake -S tvm -B tvm/build-android \\
  -DCMAKE_TOOLCHAIN_FILE=$ANDROID_NDK/build/cmake/android.toolchain.cmake \\
  -DANDROID_ABI=arm64-v8a -DANDROID_PLATFORM=android-28 -DANDROID_STL=c++_shared \\
  -DCMAKE_BUILD_TYPE=Release -DUSE_LLVM=OFF -DUSE_LIBBACKTRACE=OFF \\
  -DTVM_FFI_USE_LIBBACKTRACE=OFF
cmake --build tvm/build-android --target tvm_runtime -j
```

A library for the phone's GPU needs its API in the runtime: add `-DUSE_OPENCL=ON`
(with the OpenCL headers and the phone's `libOpenCL.so` to link against) or
`-DUSE_VULKAN=ON`, and run `run_model --device opencl` (or `vulkan`).

`libtvm_runtime.so` lands in `tvm/build-android/`, `libtvm_ffi.so` in
`tvm/build-android/lib/` (tvm-ffi is the `3rdparty/tvm-ffi` submodule, hence
`--recursive`). Then build `run_model` with the toolchain file shipped here
(it sets `arm64-v8a`, API level 28 and the shared C++ runtime, the same STL as
the TVM runtime above: exceptions cross the libraries) and push everything:

```sh
cmake -S . -B build-android -DCMAKE_TOOLCHAIN_FILE=android-arm64-v8a.cmake \\
  -DTVM_ROOT=$PWD/tvm -DTVM_RUNTIME_LIB_DIR=$PWD/tvm/build-android \\
  -DTVM_FFI_LIB_DIR=$PWD/tvm/build-android/lib
cmake --build build-android
STL=$ANDROID_NDK/toolchains/llvm/prebuilt/linux-x86_64/sysroot/usr/lib/aarch64-linux-android
adb shell mkdir -p /data/local/tmp/model/inputs /data/local/tmp/model/expected
adb push build-android/run_model {library} tvm/build-android/libtvm_runtime.so \\
  tvm/build-android/lib/libtvm_ffi.so $STL/libc++_shared.so /data/local/tmp/model/
adb push inputs/. /data/local/tmp/model/inputs/
adb push expected/. /data/local/tmp/model/expected/
adb shell "cd /data/local/tmp/model && LD_LIBRARY_PATH=. ./run_model ."
```

### On a Linux ARM board (aarch64)

A board with glibc (Debian, Ubuntu, Armbian, Raspberry Pi OS 64-bit) runs the
`apache-tvm` wheel's own aarch64 runtime: fetch the two wheels of TVM {tvm} for
`manylinux_2_28_aarch64` on this computer, unpack them, and cross-build
`run_model` with Debian's `g++-aarch64-linux-gnu` and the toolchain file shipped
here:

```sh
pip download --no-deps --only-binary=:all: --platform manylinux_2_28_aarch64 \
  --python-version 3.11 --dest wheels apache-tvm=={tvm} apache-tvm-ffi
mkdir -p aarch64 && for w in wheels/*.whl; do python -m zipfile -e $w aarch64; done
cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=linux-aarch64.cmake \
  -DTVM_ROOT=$PWD/aarch64/tvm -DTVM_FFI_ROOT=$PWD/aarch64/tvm_ffi
cmake --build build-aarch64
scp -r build-aarch64/run_model {library} aarch64/tvm/lib/libtvm_runtime.so \
  aarch64/tvm_ffi/lib/libtvm_ffi.so inputs expected board:model/
ssh board "cd model && LD_LIBRARY_PATH=. ./run_model ."
```

Without a board, QEMU user mode runs it here (Debian: `qemu-user-static`):
`qemu-aarch64-static -L /usr/aarch64-linux-gnu build-aarch64/run_model .`

In an app, the same calls run from JNI with the three libraries packaged in
`jniLibs/arm64-v8a/`.

In TVM releases before the FFI split (0.20 and older) the same calls are
`tvm::runtime::Module::LoadFromFile` and `tvm::runtime::PackedFunc`.
"""
