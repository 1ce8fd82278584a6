"""farm: an Android device farm for Apache TVM.

Layers, bottom up (each folder has one job)::

    farm/virtual/   virtual phones: the demo fleet and the fault injector (speaks real ADB)
    farm/adb/       the only importer of adbutils: calls with deadlines, device tracking
    farm/device/    pure parsers of phone output -> dataclasses
    farm/tvm/       tracker supervision, session probe
    farm/queue/     jobs, attempts, results; the pure scheduler
    farm/daemon/    farmd wiring; farm/cli/ farmctl

Code above ``farm/adb`` never learns whether a phone is virtual.
"""

__version__ = "0.1.0"
