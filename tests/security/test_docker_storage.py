"""Docker storage: `--storage-opt size=` where the engine takes it (overlay2 only on
xfs with pquota); elsewhere the container still starts, the limit is a stated one
(README, Security), and the user is told once that it is not enforced."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from helios.environments.docker import DockerEnvironment
from helios.environments.spec import SandboxSpec

pytestmark = pytest.mark.usefixtures("need_docker")


def test_a_storage_limit_is_applied_or_its_absence_is_said(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # what an earlier test found out about this engine must not hide the warning
    monkeypatch.setattr(DockerEnvironment, "storage_opt", None)
    spec = SandboxSpec(image="debian:bookworm-slim", storage_mb=64)

    async def fill() -> str:
        env = DockerEnvironment(spec, trial_id=uuid.uuid4().hex[:8], run_id="storage")
        await env.start()  # starts whether or not the engine takes the option
        try:
            filled = await env.exec(
                "head -c 200M /dev/zero > /tmp/fill; du -sm /tmp/fill | cut -f1", timeout=60
            )
            return filled.stdout.strip()
        finally:
            await env.stop()

    with caplog.at_level(logging.WARNING, logger="helios.environments.docker"):
        written_mb = asyncio.run(fill())
        asyncio.run(fill())  # a second trial: the engine is not asked (or warned about) again
    warnings = [r.getMessage() for r in caplog.records if "storage_mb" in r.getMessage()]
    if DockerEnvironment.storage_opt is True:
        assert int(written_mb) <= 64
        assert warnings == []
    else:
        assert DockerEnvironment.storage_opt is False
        assert int(written_mb) >= 199, written_mb  # the trial ran, unbounded
        assert len(warnings) == 1, warnings
        assert "not enforced" in warnings[0] and "storage_mb=64" in warnings[0]
