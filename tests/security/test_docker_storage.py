"""Docker storage: `--storage-opt size=` where the engine takes it (overlay2 only on
xfs with pquota); elsewhere the container still starts and the limit is a stated
one (README, Security)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from helios.environments.docker import DockerEnvironment
from helios.environments.spec import SandboxSpec

pytestmark = pytest.mark.usefixtures("need_docker")


def test_a_storage_limit_is_applied_where_the_engine_supports_it() -> None:
    spec = SandboxSpec(image="debian:bookworm-slim", storage_mb=64)
    env = DockerEnvironment(spec, trial_id=uuid.uuid4().hex[:8], run_id="storage")

    async def go() -> tuple[int, str]:
        await env.start()  # starts whether or not the engine takes the option
        try:
            filled = await env.exec(
                "head -c 200M /dev/zero > /tmp/fill; du -sm /tmp/fill | cut -f1", timeout=60
            )
            return filled.exit_code, filled.stdout.strip()
        finally:
            await env.stop()

    _, written_mb = asyncio.run(go())
    if DockerEnvironment.storage_opt is not True:
        assert DockerEnvironment.storage_opt is False
        pytest.skip("this engine has no --storage-opt size (e.g. overlay2 on ext4): stated limit")
    assert int(written_mb) <= 64
