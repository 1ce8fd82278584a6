"""The benchmark jobs' TVM core: targets, linking, compile cache, GEMM, ONNX models, tuning.

Each job function takes plain parameters (:mod:`farm.jobs.params`), a target dict
and a tracker, and returns a result dataclass with every raw sample; the queue
runs it in a child process, so a crash inside TVM cannot take farmd down::

    params.py         frozen dataclasses the spec layer fills in
    targets.py        target_for(facts, device) -> TVM 0.27 target dict
    ndk.py            linker_for(target) -> Linker (NDK clang or host), checked first
    cache.py          CompileCache: one build per (workload, schedule, target, TVM)
    session.py        RPC sessions by tracker key, thread pool, upload + load
    gemm.py           run_gemm(params, target, tracker, cache) -> GemmResult
    model.py          run_model(params, target, tracker, cache) -> ModelResult; with
                      params.database_dir, compiled with a tuning database applied
    model_store.py    store_model(src, data_dir) -> StoredModel: models by SHA-256
    tune.py           tune_gemm(params, target, tracker) -> TuneResult, export_records
    tune_model.py     tune_model(params, target, tracker, cache) -> ModelTuneResult
    tune_tasks.py     a model's tasks, ranked, planned, committed to the work folder
    tune_run.py       the search over a model's tasks in rounds, the picks re-checked
    tune_result.py    ModelTuneResult and the tuned build (model_tuned.so)
    tune_progress.py  per-task trials, best times, ETA and counters in the work folder
    tune_eta.py       estimate_eta_s: the search's seconds left, per task, and the budget
    tune_tail.py      TailPrice, Stages: the tuned build and timing after the check, priced
    tune_check_cost.py  CheckPrice: the picks' check priced from the attempt's measured runs
    bundle.py         write_bundle(tuned, out, cache): a tuned model for deployment
    local_cluster.py  a loopback tracker + RPC servers for tests and bench

Failure kinds follow :mod:`farm.errors`: SpecError, ToolMissing and CompileError are
the user's (never retried); SessionError is the phone's (retried elsewhere);
TrackerUnreachable is the host's.
"""
