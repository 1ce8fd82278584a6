"""Results as numbers you can compare: spread of one result, verdicts between two.

::

    rows.py      sample_rows(store, job_ids=, run_id=): one row per raw sample, with its
                 phone and the phone's temperature before its run
    spreads.py   phone_spreads(rows, max_cv): one figure per job and phone, never pooled
    plots.py     PNGs: per-phone medians with CI bars beside temperature; history

The pure statistics (``spread``, ``compare_samples``) are :mod:`farm.stats`, and the
sampling rule :mod:`farm.sampling`: the jobs below the queue use them too.
"""
