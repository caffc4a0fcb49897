"""Finding and deleting Helios's Daytona sandboxes by their labels: one run's,
those whose owner is gone (`helios cleanup`), or one environment's own (its
instance label: a create that was cancelled or failed half-way)."""

from __future__ import annotations

import contextlib
from typing import Any

from helios.environments.daytona.client import Keys, keys, open_client, sdk
from helios.environments.daytona.retry import with_retries
from helios.environments.docker.cleanup import Container
from helios.environments.docker.cli import LABEL_INSTANCE, LABEL_MANAGED, LABEL_OWNER, LABEL_RUN
from helios.environments.shell.owner import Owner

#: states of a sandbox that is already on its way out
GONE = frozenset({"destroyed", "destroying"})
DELETE_TIMEOUT = 60.0


async def labelled(client: Any, wanted: dict[str, str]) -> list[Any]:
    """Helios's sandboxes that carry every label in `wanted`, short of those gone."""
    query = sdk().ListSandboxesQuery(labels={LABEL_MANAGED: "true", **wanted})
    found: list[Any] = []
    async for sandbox in client.list(query):
        state = getattr(sandbox.state, "value", sandbox.state)
        if str(state) not in GONE:
            found.append(sandbox)
    return found


async def delete(sandbox: Any, found: Keys) -> None:
    async def call() -> None:
        await sandbox.delete(DELETE_TIMEOUT)

    try:
        await with_retries(call, f"delete {sandbox.id}", found.shown_url, quota_patience=60)
    except Exception as exc:
        if getattr(exc, "status_code", None) != 404:  # already gone
            raise


async def remove_instance(client: Any, found: Keys, instance: str) -> list[str]:
    """Delete the sandboxes made for one environment object (its instance label)."""
    chosen = await labelled(client, {LABEL_INSTANCE: instance})
    for sandbox in chosen:
        await delete(sandbox, found)
    return [sandbox.id for sandbox in chosen]


async def cleanup_sandboxes(run_id: str | None, *, force: bool = False) -> list[str]:
    """Delete one run's sandboxes (or, with None, those whose owner is gone; `force`:
    every Helios sandbox), as `docker.cleanup` chooses containers. Without
    DAYTONA_API_KEY there is nothing to ask: an empty list."""
    found = keys()
    if found is None:
        return []
    client = open_client(found)
    try:
        wanted = {} if run_id is None else {LABEL_RUN: run_id}
        sandboxes = await with_retries(lambda: labelled(client, wanted), "list sandboxes",
                                       found.shown_url, quota_patience=60)  # fmt: skip
        chosen = []
        for sandbox in sandboxes:
            labels: dict[str, str] = dict(sandbox.labels or {})
            owner = Owner.parse(labels[LABEL_OWNER]) if labels.get(LABEL_OWNER) else None
            candidate = Container(sandbox.id, labels.get(LABEL_RUN, ""), owner,
                                  labels.get(LABEL_INSTANCE, ""))  # fmt: skip
            if candidate.removable(run_id, force):
                chosen.append(sandbox)
        for sandbox in chosen:
            await delete(sandbox, found)
        return [sandbox.id for sandbox in chosen]
    finally:
        with contextlib.suppress(Exception):
            await client.close()
