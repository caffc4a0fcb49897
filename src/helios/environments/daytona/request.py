"""The create request a task's `SandboxSpec` makes: its image (a ready image, or
its Dockerfile with the files the Dockerfile copies, read only from the task's
environment folder), its resources in Daytona's units (whole CPUs, GiB), its
network, its variables, and Helios's labels (run, trial, owner, instance), by
which `helios cleanup` and a cancelled create find their sandboxes."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from helios.environments.docker.cli import (
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_RUN,
    LABEL_TRIAL,
)
from helios.environments.shell.owner import current_owner
from helios.environments.spec import SandboxSpec
from helios.errors import EnvironmentStartError

#: idle minutes after which Daytona stops a sandbox Helios lost track of (a
#: killed host); a stopped one is deleted at once (`AUTO_DELETE`)
AUTO_STOP = 60
AUTO_DELETE = 0
#: the sandbox's user: Helios's housekeeping (its /logs folders) needs root, as
#: on docker, whatever the image's USER
OS_USER = "root"


def labels(run_id: str, trial_id: str, instance: str) -> dict[str, str]:
    return {
        LABEL_MANAGED: "true",
        LABEL_RUN: run_id,
        LABEL_TRIAL: trial_id,
        LABEL_OWNER: current_owner().label(),
        LABEL_INSTANCE: instance,
    }


def resources(spec: SandboxSpec) -> dict[str, int]:
    """cpu, memory and disk as Daytona counts them: whole CPUs and GiB, rounded up
    (a task's 0.5 CPU and 256 MB get 1 and 1)."""
    found = {
        "cpu": max(1, math.ceil(spec.cpus)),
        "memory": max(1, math.ceil(spec.memory_mb / 1024)),
    }
    if spec.storage_mb is not None:
        found["disk"] = max(1, math.ceil(spec.storage_mb / 1024))
    return found


def image(spec: SandboxSpec, sdk: ModuleType) -> Any:
    """The image argument: the Dockerfile (its COPY sources from its own folder
    alone), else the image's name."""
    dockerfile = spec.dockerfile
    if dockerfile is not None:
        try:
            return sdk.Image.from_dockerfile(dockerfile.resolve(), strict_context=True)
        except Exception as exc:
            raise EnvironmentStartError(f"{dockerfile}: {str(exc)[:300]}") from None
    if spec.image is None:
        raise EnvironmentStartError("the sandbox spec names no image and no build context")
    return spec.image


def create_params(spec: SandboxSpec, sdk: ModuleType, *, run_id: str, trial_id: str,
                  instance: str) -> Any:  # fmt: skip
    """`CreateSandboxFromImageParams` for this spec."""
    return sdk.CreateSandboxFromImageParams(
        image=image(spec, sdk),
        resources=sdk.Resources(**resources(spec)),
        env_vars=dict(spec.env),
        labels=labels(run_id, trial_id, instance),
        os_user=OS_USER,
        network_block_all=not spec.network,
        auto_stop_interval=AUTO_STOP,
        auto_delete_interval=AUTO_DELETE,
    )
