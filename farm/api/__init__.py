"""farm's HTTP API and dashboard, served by farmd (FastAPI on uvicorn).

* :mod:`farm.api.auth`: who a request comes from (a token, from the
  ``Authorization: Bearer`` header or the dashboard's cookie).

The application that serves these routes beside the dashboard's pages
(:mod:`farm.web`), and its uvicorn thread, are :mod:`farm.serve`: the pages use
this package's auth and context, so the assembly sits above both.
"""
