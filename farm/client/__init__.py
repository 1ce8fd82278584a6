"""``farm.client``: the farm from Python, over its HTTP API.

::

    from farm.client import Farm

    farm = Farm("http://127.0.0.1:9465", token="farm_...")
    job = farm.submit_model("small_cnn.onnx", inputs={"x": x}, profile=True,
                            devices={"soc": "SM8150"})
    result = job.wait(timeout_s=600).result()
    print(result.summary["per_serial"], job.profile(), job.outputs())
    tune = farm.submit_tune("small_cnn.onnx", trials=64, for_s=3600).wait()
    print(tune.outcome(), farm.compare(f"{tune.id}:untuned", tune))
    tune.export("bundle")
    for phone in farm.submit_ab("gemm:n=256", "gemm:n=256,bn=16").wait().ab():
        print(phone["serial"], phone["verdict"], phone["ratio"], phone["why"])

It is a thin layer over :class:`farm.client.remote.RemoteService`, the client
``farmctl --server`` uses, so there is one implementation of the wire: model
files are uploaded as blobs, specs are checked by the server, and errors are
the classes the server raised, with its one-line messages:

- :class:`~farm.errors.SpecError` (a :class:`~farm.errors.UserFault`): the spec
  or a file is refused, naming the field;
- :class:`~farm.api.errors.Unauthorized`, :class:`~farm.api.errors.Forbidden`: the token;
- :class:`~farm.errors.InfraFault`: the server cannot be reached;
- :class:`JobFailed`: a waited-for job failed or was cancelled;
- :class:`WaitTimedOut` (as ``farmctl wait --timeout``): :meth:`Job.wait`
  past its timeout;
- :class:`~farm.api.errors.NotFound`: :meth:`Job.outputs` of a job that kept none,
  :meth:`Job.export` of a job with no bundle to download.

A job given ``inputs`` keeps each phone's outputs on them, by the graph's
output names (:meth:`Job.outputs`, ``GET /api/v1/jobs/{id}/outputs/{serial}``);
a symbolic input takes its shape from its array, as ``--inputs`` does. One
given ``profile=True`` times each kernel on each phone (:meth:`Job.profile`,
read from the result). A finished tune of a model says its outcome as
``farmctl job`` does (:meth:`Job.outcome`) and is exported as ``farmctl export``
writes it (:meth:`Job.export`, the dashboard's download of the bundle).
:meth:`Job.cancel` is ``farmctl cancel``; :meth:`Farm.compare` is ``farmctl
compare A B --json`` (the dashboard's comparison, with the server's threshold
and alpha). An A/B job (:meth:`Farm.submit_ab`, ``farmctl enqueue ab``) gives each
phone's verdict of B against A (:meth:`Job.ab`); its raw samples carry their
build and round (``result().arms``, ``result().rounds``).

The package::

    server.py   Farm: a server reached with a token; submit_model, submit_tune, submit_ab
    job.py      Job: one job's state, wait, result, profile, outputs, outcome, export
    remote.py   RemoteService: farm.api.interface.Queue over /api/v1 (farmctl --server too)
    bundle.py   a tune's bundle, downloaded as a zip and unpacked
    errors.py   JobFailed, WaitTimedOut (farmctl wait's too)

Its names load on first use (:mod:`farm.lazy`): ``farmctl wait`` imports
:mod:`farm.client.errors` without httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.lazy import lazy_names

if TYPE_CHECKING:
    from farm.client.errors import JobFailed, WaitTimedOut
    from farm.client.job import Job
    from farm.client.server import Farm

__all__ = ["Farm", "Job", "JobFailed", "WaitTimedOut"]

__getattr__ = lazy_names(__name__, {
    "Farm": "farm.client.server",
    "Job": "farm.client.job",
    "JobFailed": "farm.client.errors",
    "WaitTimedOut": "farm.client.errors",
})
