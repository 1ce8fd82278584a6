"""farm's HTTP API and dashboard, served by farmd (FastAPI on uvicorn).

* :mod:`farm.api.auth`: who a request comes from (a token, from the
  ``Authorization: Bearer`` header or the dashboard's cookie).
* :mod:`farm.api.app`: the application: ``/api/v1/...`` routes and the pages.
* :mod:`farm.api.server`: uvicorn on a thread of farmd.
"""
