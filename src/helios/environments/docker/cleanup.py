"""Removing leftover Helios containers without touching a live batch's."""

from __future__ import annotations

from dataclasses import dataclass

from helios.environments.docker.agent_image import LABEL_AGENT_INSTALL
from helios.environments.docker.cli import (
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_RUN,
    docker,
)
from helios.environments.shell.owner import Owner
from helios.errors import EnvironmentUnavailable

_FORMAT = (
    '{{.ID}}\t{{.Label "' + LABEL_RUN + '"}}\t{{.Label "' + LABEL_OWNER + '"}}'
    '\t{{.Label "' + LABEL_INSTANCE + '"}}'
)


@dataclass(frozen=True, slots=True)
class Container:
    id: str
    run: str
    owner: Owner | None
    instance: str

    def removable(self, run_id: str | None, force: bool) -> bool:
        if run_id is not None:
            return self.run == run_id
        # No owner label: left by an older Helios; nobody can still need it.
        return force or self.owner is None or not self.owner.alive()


async def managed_containers() -> list[Container]:
    code, out, err = await docker(
        "ps", "-a", "--no-trunc", "--filter", f"label={LABEL_MANAGED}=true", "--format", _FORMAT
    )
    if code != 0:
        raise EnvironmentUnavailable(f"docker ps failed: {err.strip()[:200]}")
    found: list[Container] = []
    for line in out.splitlines():
        cid, run, owner, instance = [*line.split("\t"), "", "", ""][:4]
        if cid:
            found.append(Container(cid, run, Owner.parse(owner) if owner else None, instance))
    return found


async def cleanup_containers(run_id: str | None, *, force: bool = False) -> list[str]:
    """Remove the containers of one run (or, with None, those whose owner is gone;
    `force`: every Helios container). Returns their ids."""
    chosen = [c.id for c in await managed_containers() if c.removable(run_id, force)]
    if chosen:
        await docker("rm", "-f", "-v", *chosen)
    return chosen


async def remove_images() -> list[str]:
    """Every image Helios built: the installed agents' derived images first (an
    image with a child is not removed, even with -f), then the task images."""
    removed: list[str] = []
    for label in (LABEL_AGENT_INSTALL, f"{LABEL_MANAGED}=true"):
        code, out, _ = await docker("images", "-q", "--filter", f"label={label}")
        ids = sorted(set(out.split()) - set(removed))
        if code == 0 and ids:
            await docker("rmi", "-f", *ids)
            removed += ids
    return removed
