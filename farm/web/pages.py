"""The dashboard's pages: fleet, device, queue, job, compare and history.

``/``, ``/devices/{serial}``, ``/queue``, ``/jobs/{id}``, ``/compare``, ``/history``.

Each page is an HTML shell whose script (``/static/<page>.js``) polls the JSON
routes named in the body's ``data-sources`` (name -> URL) every ``data-poll-ms``
(``[web] poll_s``, or ``slow_poll_s`` for the statistics pages) and redraws
without a reload: the API's own routes (``/api/v1/devices``, ``/api/v1/jobs...``)
and, for what they do not carry, the dashboard's (:mod:`farm.web.data`). A request
without a valid token is redirected to the login (:func:`farm.web.login.page_caller`).
Operator tokens also get drain, undrain and release buttons, which call the API's
POST routes with the same cookie.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from starlette.responses import Response

from farm.api.bounds import JobIdPath
from farm.api.context import ApiContext, context
from farm.queue.models import JobState
from farm.queue.tokens import Caller
from farm.web.login import page_caller
from farm.web.profile_chart import BAR_H_PX, LABEL_W_PX, LINE_H_PX, PLOT_W_PX, profile_charts
from farm.web.render import render

__all__ = ["ENDED", "QUEUE_LIMIT", "router"]

#: The most running or queued jobs one queue page lists.
QUEUE_LIMIT = 500
#: The states of the queue page's recent ends, with those this farm does not know (a
#: newer farm's, e.g. ``paused``): neither running nor queued here, they are listed there.
ENDED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.UNKNOWN)

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)

PageCaller = Annotated[Caller, Depends(page_caller)]
ContextDep = Annotated[ApiContext, Depends(context)]


def _page(request: Request, ctx: ApiContext, who: Caller, page: str,
          sources: dict[str, str], *, slow: bool = False, **extra: object) -> Response:
    """Render ``page``.html polling ``sources`` (name -> URL; none: nothing to show yet)."""
    web = ctx.settings.web
    poll_s = web.slow_poll_s if slow else web.poll_s
    return render(request, f"{page}.html", {
        "page": page, "sources": sources, "poll_ms": round(poll_s * 1000), "owner": who.owner,
        "operator": who.operator, "host_id": ctx.settings.host_id, **extra})


@router.get("/")
def fleet(request: Request, ctx: ContextDep, who: PageCaller) -> Response:
    """Every phone and board: state, health, battery, temperatures, job, incidents."""
    return _page(request, ctx, who, "fleet", {"devices": "/api/v1/devices",
                                              "incidents": "/api/v1/dashboard/incidents"})


@router.get("/devices/{serial}")
def device(request: Request, ctx: ContextDep, who: PageCaller, serial: str) -> Response:
    """One device: state, health, facts, readings over time, events, the tail of its log."""
    quoted = quote(serial, safe="")
    return _page(request, ctx, who, "device", {
        "device": f"/api/v1/devices/{quoted}",
        "readings": f"/api/v1/dashboard/devices/{quoted}/readings",
        "log": f"/api/v1/dashboard/devices/{quoted}/log"}, serial=serial)


@router.get("/queue")
def queue(request: Request, ctx: ContextDep, who: PageCaller) -> Response:
    """Running jobs, queued ones with why each waits, recent ends."""
    ended = urlencode([("state", s.value) for s in ENDED]
                      + [("limit", ctx.settings.web.recent_ends)])
    return _page(request, ctx, who, "queue", {
        "running": f"/api/v1/jobs?state=running&limit={QUEUE_LIMIT}",
        "queued": f"/api/v1/jobs?state=queued&limit={QUEUE_LIMIT}",
        "ended": f"/api/v1/jobs?{ended}", "devices": "/api/v1/devices"})


@router.get("/jobs/{job_id}")
def job(request: Request, ctx: ContextDep, who: PageCaller, job_id: JobIdPath) -> Response:
    """One job: spec, attempts, tuning chart, results per phone, A/B verdicts, kernel profile.

    An A/B job shows each phone's verdict of B against A and a chart of its
    rounds' ratios B/A against the threshold band (:mod:`farm.web.ab_view`).

    A profiled model job's chart (:mod:`farm.web.profile_chart`) is drawn when
    the page is opened: the profile is fixed once the job has finished (a page
    open while a profiled job succeeds reloads itself once: ``job.js``).
    """
    return _page(request, ctx, who, "job", {
        "job": f"/api/v1/jobs/{job_id}", "results": f"/api/v1/jobs/{job_id}/results",
        "trials": f"/api/v1/dashboard/jobs/{job_id}/trials",
        "speedups": f"/api/v1/dashboard/jobs/{job_id}/speedups",
        "ab": f"/api/v1/dashboard/jobs/{job_id}/ab",
        "export": f"/api/v1/dashboard/jobs/{job_id}/export"}, job_id=job_id,
        profiles=profile_charts(ctx.store, job_id), label_w=LABEL_W_PX, plot_w=PLOT_W_PX,
        bar_h=BAR_H_PX, line_h=LINE_H_PX)


@router.get("/compare")
def compare(request: Request, ctx: ContextDep, who: PageCaller, a: str = "",
            b: str = "") -> Response:
    """Two jobs or runs compared per phone (``farmctl compare``), as a chart."""
    sources = {"view": "/api/v1/dashboard/compare?" + urlencode({"a": a, "b": b})} if a and b \
        else {}
    return _page(request, ctx, who, "compare", sources, slow=True, a=a, b=b)


@router.get("/history")
def history(request: Request, ctx: ContextDep, who: PageCaller, workload: str = "") -> Response:
    """A workload's per-phone medians over time (``farmctl results --history``)."""
    query = "?" + urlencode({"workload": workload}) if workload else ""
    return _page(request, ctx, who, "history", {"view": "/api/v1/dashboard/history" + query},
                 slow=True, workload=workload)
