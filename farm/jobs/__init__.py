"""The benchmark jobs' TVM core: targets, linking, compile cache, GEMM, ONNX models, A/B.

Each job function takes plain parameters (:mod:`farm.jobs.params`), a target dict
and a tracker, and returns a result dataclass with every raw sample; the queue
runs it in a child process, so a crash inside TVM cannot take farmd down::

    params.py         frozen dataclasses the spec layer fills in
    targets.py        target_for(facts, device) -> TVM 0.27 target dict
    board_targets.py  targets and linkers for Linux boards, from ``uname -m``
    ndk.py, linker.py the NDK or host linker, checked first; export_library's fcompile
    cache.py          CompileCache: one build per (workload, schedule, target, TVM)
    session.py        RPC sessions by tracker key, thread pool, upload + load
    gemm.py           run_gemm(params, target, tracker, cache) -> GemmResult
    gemm_build.py     the GEMM kernel, its schedules and its build
    model.py          run_model(params, target, tracker, cache) -> ModelResult; with
                      params.database_dir, compiled with a tuning database applied
    model_graph.py    an ONNX model as farm reads it: inputs, Relax module, host outputs
    onnx_import.py    ONNX -> Relax that survives real exports
    graph_passes.py   BatchNormalization folded, no-op nodes removed, as onnxruntime does
    model_build.py    a model compiled into the compile cache, tuned or with defaults
    cpu_schedules/    farm's default CPU schedules (dlight rules) for the untuned build
    gpu_schedules.py  dlight's default GPU schedules, in one place
    schedule_rules.py one function scheduled by the first dlight rule that applies
    model_io.py       the user's inputs (.npz) and the outputs a phone gave
    model_store.py    store_model(src, data_dir) -> StoredModel: models by SHA-256
    profile.py        a model's per-kernel profile on the phone
    ab.py             two builds timed in turns on one phone until they decide
    tuning_db.py      a tuning job's work folder: MetaSchedule's JSON database
    bundle.py, bundle_cpp.py  write_bundle(tuned, out, cache): a tuned model for deployment
    tvm_errors.py     TVM's exceptions as farm's one-sentence reasons
    tvmscript.py      TVMScript-heavy modules imported in seconds
    local_cluster.py  a loopback tracker + RPC servers for tests and bench

Failure kinds follow :mod:`farm.errors`: SpecError, ToolMissing and CompileError are
the user's (never retried); SessionError is the phone's (retried elsewhere);
TrackerUnreachable is the host's.
"""
