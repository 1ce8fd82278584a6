"""``python -m farm.zoo OUT_DIR [--small]``: write the zoo's ONNX files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from farm.zoo import MODELS, write_zoo


def main(argv: list[str] | None = None) -> int:
    """Write the zoo and its exporter-shaped variants; print a line per file with its input."""
    parser = argparse.ArgumentParser(description="Write farm's model zoo (ONNX, random weights).")
    parser.add_argument("out_dir", type=Path, help="folder for the .onnx files")
    parser.add_argument("--small", action="store_true", help="the small variants, for tests")
    args = parser.parse_args(argv)
    for model, path in zip(MODELS.values(), write_zoo(args.out_dir, args.small), strict=True):
        shape = model.input_shapes(args.small)["x"]
        notes = ["computed shape"] if model.computed_shape else []
        notes += [f"as {model.exporter} writes it"] if model.exporter else []
        note = f"  ({', '.join(notes)})" if notes else ""
        sys.stdout.write(f"{path}  x{list(shape)}{note}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
