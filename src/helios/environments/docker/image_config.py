"""What an image says about the containers made from it (`docker image inspect`'s
`Config`): its USER, its working directory and its ENTRYPOINT.

A task's sandbox keeps the image's meaning, as Harbor's docker provider does:
- its commands run in the image's WORKDIR (`/`, docker's own, when it has none)
  unless the task names one (`[environment] workdir`);
- its ENTRYPOINT runs, with the command Harbor gives every task's main service
  (`sh -c "sleep infinity"`, in place of the image's CMD: Harbor's compose base
  files), as a service of the container's init, Helios's shell server, which stays
  pid 1. A service lives on through the agent's end and the verifier (the stop of
  the agent's processes spares it) and goes with the container. An image without
  an ENTRYPOINT gets no service: the container is what it was before.
- an ENTRYPOINT that exits (any status) within its first half second, which
  would stop Harbor's container, fails the start (`DockerEnvironment._check_entrypoint`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

#: the command Harbor's docker provider gives a task's main service, whatever the CMD
HARBOR_COMMAND = ("sh", "-c", "sleep infinity")
#: the name of the service that runs the image's ENTRYPOINT (its log:
#: /logs/helios/services/entrypoint.log)
ENTRYPOINT_SERVICE = "entrypoint"


@dataclass(frozen=True)
class ImageConfig:
    #: `user[:group]`; "" for root
    user: str = ""
    #: "" when the image sets none
    workdir: str = ""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> ImageConfig:
        """From `docker image inspect --format '{{json .Config}}'`'s output."""
        data = json.loads(text or "null") or {}
        if not isinstance(data, dict):
            return cls()
        return cls(
            user=str(data.get("User") or ""),
            workdir=str(data.get("WorkingDir") or ""),
            entrypoint=tuple(str(a) for a in data.get("Entrypoint") or ()),
            cmd=tuple(str(a) for a in data.get("Cmd") or ()),
        )

    def main_argv(self, entrypoint: Sequence[str] | None = None,
                  command: Sequence[str] | None = None) -> tuple[str, ...]:  # fmt: skip
        """What docker runs as the container's process: the ENTRYPOINT (a compose file's
        `entrypoint` for `main` in place of the image's) with Harbor's command (or the
        file's `command`); () when that is Harbor's command alone (nothing to run)."""
        entry = self.entrypoint if entrypoint is None else tuple(entrypoint)
        if command is None:
            return (*entry, *HARBOR_COMMAND) if entry else ()
        return (*entry, *command)

    def entrypoint_command(self, entrypoint: Sequence[str] | None = None,
                           command: Sequence[str] | None = None) -> str | None:  # fmt: skip
        """The shell command that runs the ENTRYPOINT as docker would (in the image's
        working directory, with Harbor's command as its arguments); None without one."""
        argv = self.main_argv(entrypoint, command)
        if not argv:
            return None
        return f"cd -- {shlex.quote(self.workdir or '/')} && exec {shlex.join(argv)}"
