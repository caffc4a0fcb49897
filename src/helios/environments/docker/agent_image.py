"""Installed agents on docker: an image derived from the task's, with the agent's
install copied in (`FROM <task image>` + `COPY` to /opt/helios-agents/<name>-
<version>), built once per task image and install and then found by its tag, in
this run and the next.

The tag is `helios-agent:<key>`, the key a hash of the task image's id, the
install's host folder and its path inside: a rebuilt task image or another
release is another image. Each carries `helios.managed=true` (so `helios cleanup
--images` removes it with the task images) and `helios.agent-install` naming
the install. Copying the install into the image costs its size once (about 3 s
for Claude Code's 384 MB); a trial then starts from the image with nothing to
upload.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

from helios._proc import decode, run_process
from helios.environments.docker.builder import detect as detect_builder
from helios.environments.docker.cli import LABEL_MANAGED, docker, docker_binary
from helios.errors import EnvironmentBuildError, PhaseTimeout
from helios.settings import current as helios_settings

#: the derived images' repository
AGENT_IMAGE_REPO = "helios-agent"
#: names the install an image was derived with
LABEL_AGENT_INSTALL = "helios.agent-install"

_locks: dict[str, asyncio.Lock] = {}


def _dockerfile(base: str, dst: str, label: str) -> bytes:
    return (
        f"FROM {base}\n"
        f"COPY . {json.dumps(dst)}\n"
        f"LABEL {LABEL_MANAGED}=true {LABEL_AGENT_INSTALL}={json.dumps(label)}\n"
    ).encode()


async def _image_id(image: str) -> str:
    code, out, err = await docker("image", "inspect", "--format", "{{.Id}}", image)
    if code != 0:
        raise EnvironmentBuildError(f"cannot inspect image {image}: {err.strip()[:200]}")
    return out.strip()


async def derived_image(base: str, installs: tuple[tuple[Path, str], ...], timeout: float) -> str:
    """`base` with each install copied in at its path (one layer each), built now
    unless an earlier trial or run built it; its tag."""
    image = base
    for host, dst in installs:
        image = await _derive(image, host, dst, timeout)
    return image


async def _derive(base: str, host: Path, dst: str, timeout: float) -> str:
    base_id = await _image_id(base)
    key = hashlib.sha256(f"{base_id}\n{host}\n{dst}".encode()).hexdigest()[:16]
    tag = f"{AGENT_IMAGE_REPO}:{key}"
    lock = _locks.setdefault(tag, asyncio.Lock())
    async with lock:
        if (await docker("image", "inspect", "--format", "{{.Id}}", tag))[0] == 0:
            return tag
        builder = await detect_builder(docker_binary(), helios_settings().docker_builder)
        argv = [docker_binary(), *builder.argv(builder.network(None)), "-q", "-t", tag,
                "-f", "-", str(host)]  # fmt: skip
        text = _dockerfile(base, dst, dst.rstrip("/").rsplit("/", 1)[-1])
        result = await run_process(argv, stdin=text, timeout=timeout, env=builder.env())
        if result.timed_out:
            raise PhaseTimeout("build", timeout)
        if result.returncode != 0:
            tail = " | ".join(decode(result.stderr).strip().splitlines()[-3:])
            raise EnvironmentBuildError(
                f"cannot derive the agent's image from {base} (install {host}): {tail}"
            )
    return tag
