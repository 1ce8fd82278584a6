"""Results as numbers you can compare: spread of one result, verdicts between two.

::

    stats.py     spread(samples), compare_samples(a, b): pure, from scipy
    rows.py      sample_rows(store, job_ids=, run_id=): one row per raw sample, with its
                 phone and the phone's temperature before its run
    spreads.py   phone_spreads(rows, max_cv): one figure per job and phone, never pooled
    plots.py     PNGs: per-phone medians with CI bars beside temperature; history
"""
