"""The HTTP application farmd serves: the API's routes and the dashboard's pages.

* :mod:`farm.serve.app`: the application: ``/api/v1/...`` routes (:mod:`farm.api`)
  and the pages (:mod:`farm.web`).
* :mod:`farm.serve.server`: uvicorn on a thread of farmd.

It sits above both packages because it assembles them: the pages use the API's
auth and context, so the assembly cannot live in :mod:`farm.api` without a cycle.
"""
