"""``farmctl token create --owner NAME [--operator] | list | revoke ID``: the API's tokens.

Tokens are written to the database directly, so these commands run on a host
that can open it (not through ``--server``). A token is printed once, by
``create``; the database keeps only its SHA-256 (:mod:`farm.queue.tokens`).
An operator token may also cancel anyone's job, end anyone's reservation and
drain, undrain or release phones.
"""

from __future__ import annotations

import click

from farm.cli.output import Column, echo_json, note, print_table
from farm.cli.state import CliState, pass_state
from farm.click_types import TOKEN_ID
from farm.clock import SystemClock

__all__ = ["token"]


@click.group()
def token() -> None:
    """Create, list and revoke the HTTP API's tokens (writes the database)."""


@token.command()
@click.option("--owner", required=True, help="Who the token is for; stored on their jobs.")
@click.option("--operator", is_flag=True,
              help="Also cancel others' jobs and reservations, drain, undrain and release.")
@pass_state
def create(state: CliState, owner: str, operator: bool) -> None:
    """Make a token and print it, once: it is not stored, only its digest."""
    made = state.store.create_token(owner, SystemClock().now(), operator=operator)
    click.echo(made)
    note(f"token for {owner.strip()}{' (operator)' if operator else ''}: keep it secret; "
         "use it as FARM_TOKEN with farmctl --server URL")


@token.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@pass_state
def list_(state: CliState, as_json: bool) -> None:
    """List tokens (never the tokens themselves): owner, rights, last use, revocation."""
    tokens = state.store.list_tokens()
    if as_json:
        echo_json(tokens)
        return
    print_table([{**t.__dict__, "operator": "yes" if t.operator else ""} for t in tokens],
                [Column("id", justify="right"), Column("owner"), Column("operator"),
                 Column("created_at", "created"), Column("last_used_at", "last used"),
                 Column("revoked_at", "revoked")], "tokens")


@token.command()
@click.argument("token_id", type=TOKEN_ID)
@pass_state
def revoke(state: CliState, token_id: int) -> None:
    """Revoke a token by its id (see farmctl token list); requests with it are refused."""
    info = state.store.revoke_token(token_id, SystemClock().now())
    click.echo(f"token {info.id} of {info.owner} revoked")
