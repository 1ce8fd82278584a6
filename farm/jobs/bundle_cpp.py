"""The bundle's C++ example: a CMake project, its inputs and the outputs it must give.

::

    <out>/CMakeLists.txt          builds run_model against a TVM runtime
    <out>/main.cc                 loads model_tuned.so with the Relax VM, runs
                                  it on inputs/*.npy, checks expected/*.npy
    <out>/android-arm64-v8a.cmake toolchain file for a phone, over the NDK's own
    <out>/linux-aarch64.cmake     toolchain file for a Linux ARM board (Debian's
                                  aarch64-linux-gnu-g++)
    <out>/inputs/<i>.npy          the model's i-th input (seeded random values)
    <out>/expected/<i>.npy        onnxruntime's i-th output on those inputs

The sources are package data (``farm/jobs/cpp/``); only the device name is
filled into ``CMakeLists.txt``. Inputs and outputs are numbered in the model's
order so that ``main.cc`` needs no JSON parser; ``manifest.json`` maps them to
names.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from farm.jobs.model import ModelInput, random_inputs, reference_outputs

__all__ = ["EXPECTED", "INPUTS", "write_checks", "write_project"]

INPUTS = "inputs"
EXPECTED = "expected"
#: Seed of the shipped inputs: any fixed value; fixed so a second export is identical.
INPUT_SEED = 0
_SOURCES = ("main.cc", "CMakeLists.txt", "android-arm64-v8a.cmake", "linux-aarch64.cmake")


def write_project(folder: Path, device: str) -> None:
    """Copy the C++ sources into ``folder``, ``CMakeLists.txt`` defaulting to ``device``.

    Args:
        folder: the bundle's staging folder.
        device: ``cpu``, ``opencl`` or ``vulkan``: where ``run_model`` runs the model
            unless told ``--device``.
    """
    sources = resources.files("farm.jobs") / "cpp"
    for name in _SOURCES:
        text = (sources / name).read_text(encoding="utf-8")
        (folder / name).write_text(text.replace("@DEVICE@", device), encoding="utf-8")


def write_checks(
    folder: Path, model_path: Path, inputs: list[ModelInput],
    feeds: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Write the inputs and onnxruntime's outputs on them as numbered ``.npy`` files.

    Args:
        folder: the bundle's staging folder.
        model_path: the ONNX model.
        inputs: its inputs, in order.
        feeds: input name -> array to ship; None for seeded random values.

    Returns:
        The manifest's entries (JSON data): ``input_files`` (name -> relative path)
        and ``expected_outputs`` (relative paths, in output order).
    """
    feeds = feeds if feeds is not None else random_inputs(inputs, seed=INPUT_SEED)
    (folder / INPUTS).mkdir()
    (folder / EXPECTED).mkdir()
    input_files = {}
    for index, item in enumerate(inputs):
        name = f"{INPUTS}/{index}.npy"
        np.save(folder / name, np.ascontiguousarray(feeds[item.name]))
        input_files[item.name] = name
    expected = []
    for index, output in enumerate(reference_outputs(model_path, feeds)):
        name = f"{EXPECTED}/{index}.npy"
        np.save(folder / name, np.ascontiguousarray(output))
        expected.append(name)
    return {"input_files": input_files, "expected_outputs": expected}
