"""Importing TVM's tensor intrinsics: TVM's own way against farm's (farm.jobs.tvmscript).

::

    python bench/bench_tensor_intrin.py              # 1 run each way, after farm's job code
    python bench/bench_tensor_intrin.py --runs 3 --bare

Each run is a fresh Python that imports TVM and, unless ``--bare``, what an
attempt child imports (farm's job code, SQLAlchemy: the modules that make
``inspect.getmodule``'s scans long), then ``tvm.s_tir.tensor_intrin``:
plainly (what MetaSchedule's ``TuneContext`` and ``default_build`` do) or
through :func:`farm.jobs.tvmscript.import_light`. Printed: the
import's wall and CPU seconds each way (medians) and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_CHILD = """
import json, sys, time
import tvm
if {after_farm}:
    import farm.runner.child, farm.tuning.gemm, farm.jobs.model, farm.queue.store  # noqa: F401
wall, cpu = time.monotonic(), time.process_time()
if {farm}:
    from farm.jobs.tvmscript import import_light
    import_light()
else:
    import tvm.s_tir.tensor_intrin  # noqa: F401
print(json.dumps([time.monotonic() - wall, time.process_time() - cpu, len(sys.modules)]))
"""


def one_import(farm: bool, after_farm: bool) -> tuple[float, float, int]:
    """(wall s, CPU s, modules loaded) of one import in a fresh process."""
    code = _CHILD.format(farm=farm, after_farm=after_farm)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    wall_s, cpu_s, modules = json.loads(out.strip().splitlines()[-1])
    return float(wall_s), float(cpu_s), int(modules)


def main() -> None:
    """Time both ways ``--runs`` times, one after the other, and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="imports each way (default 1)")
    parser.add_argument("--bare", action="store_true",
                        help="import only TVM first, not farm's job code")
    args = parser.parse_args()
    print(f"host: {os.cpu_count()} cores, load average "
          + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    medians = {}
    for farm in (False, True):
        runs = [one_import(farm, not args.bare) for _ in range(args.runs)]
        wall_s = statistics.median(r[0] for r in runs)
        cpu_s = statistics.median(r[1] for r in runs)
        medians[farm] = (wall_s, cpu_s)
        name = "farm.jobs.tvmscript" if farm else "import tvm.s_tir.tensor_intrin"
        print(f"{name:32} wall {wall_s:7.1f} s  CPU {cpu_s:6.1f} s  "
              f"({runs[0][2]} modules loaded after)")
    print(f"CPU ratio plain/farm: {medians[False][1] / medians[True][1]:.1f}x")
    print("$ python bench/bench_tensor_intrin.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
