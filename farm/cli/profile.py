"""``farmctl profile JOB``: where a ``model --profile`` job's time went, per phone.

The same kernel tables ``farmctl results --job`` prints after the spread
(:mod:`farm.cli.profile_table`): each phone's heaviest kernels, their calls,
time per call, total and share, and the kernels' sum against the model's
time. ``--json`` gives each phone's whole profile.
"""

from __future__ import annotations

import click

from farm.cli.output import echo_json
from farm.cli.profile_table import print_profiles
from farm.cli.state import CliState, pass_state
from farm.click_types import JOB_ID
from farm.errors import UserFault
from farm.results.profiles import last_profiles

__all__ = ["profile"]


@click.command(epilog="Example: farmctl enqueue model net.onnx --profile; farmctl profile 12")
@click.argument("job_id", type=JOB_ID)
@click.option("--json", "as_json", is_flag=True, help="Print each phone's profile as JSON.")
@pass_state
def profile(state: CliState, job_id: int, as_json: bool) -> None:
    """The heaviest kernels of a profiled model job, per phone.

    Raises:
        UserFault: the job has no result with a profile (it was not enqueued
            with ``--profile``, or has not finished).
    """
    profiles = {serial: data for view in state.queue.results(job_id)
                for serial, data in last_profiles(view).items()}
    if not profiles:
        raise UserFault(f"job {job_id} has no kernel profile: only a finished model job "
                        "enqueued with --profile has one")
    if as_json:
        echo_json({"job_id": job_id, "phones": profiles})
        return
    for view in state.queue.results(job_id):
        print_profiles(view)
