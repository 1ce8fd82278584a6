"""farmctl: the command line people use to reach the fleet.

::

    main.py      the click group, error mapping, the demo/doctor slots
    state.py     settings and store opened once per invocation; farmd liveness
    enqueue.py   farmctl enqueue gemm|model|tune
    jobs.py      jobs, job, cancel, logs, wait
    results.py   results: rows per sample, spread per phone, plots
    devices.py   devices, drain, undrain, release
    reserve.py   reserve, unreserve, reservations
    output.py    --json, CSV and rich tables
"""
