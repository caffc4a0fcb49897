"""Daytona provider: one cloud sandbox per trial, through Daytona's async SDK.

`start` creates the sandbox from the task's image or Dockerfile with its
resources (`request`), retrying transient errors and waiting out quota errors
(`retry`). The create is shielded from cancellation: a trial cancelled while
its sandbox is being made lets the create finish, then deletes what it made,
and also any sandbox carrying this object's instance label (a request cut off
after Daytona accepted it), so no sandbox leaks. Commands go through the
toolbox (`commands`), files as one archive each way with the host-side checks
of the other providers (`transfer`); `stop` deletes the sandbox whatever
happened before. `helios cleanup` finds leftovers by label (`cleanup`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import helios.environments.daytona.commands as commands
import helios.environments.daytona.transfer as transfer
from helios._proc import run_to_end
from helios.environments.base import ROOT, Environment, ExecResult, FileSteps, User
from helios.environments.daytona.cleanup import cleanup_sandboxes, delete, labelled, remove_instance
from helios.environments.daytona.client import Keys, open_client, require_keys, sdk
from helios.environments.daytona.request import create_params
from helios.environments.daytona.retry import is_unreachable, unreachable, with_retries
from helios.environments.spec import SandboxSpec
from helios.errors import (
    EnvironmentExecError,
    EnvironmentStartError,
    EnvironmentUnavailable,
    UnsupportedFeature,
)

log = logging.getLogger(__name__)

#: seconds a create may take beyond the task's build timeout (the sandbox's start)
START_GRACE = 120.0
#: `kill -9 -1` and a look, until nothing is left
STOP_ROUNDS = 5
#: a transfer's commands (archive, unpack, remove) in the sandbox
TRANSFER_TIMEOUT = 600.0


class DaytonaEnvironment(Environment):
    name: ClassVar[str] = "daytona"
    #: Daytona's daemon is the sandbox's first process: the image's ENTRYPOINT never
    #: runs, and its stop of the agent's processes (`kill -9 -1`) spares nothing
    ignores_entrypoint: ClassVar[bool] = True

    def __init__(self, spec: SandboxSpec, *, trial_id: str, run_id: str) -> None:
        super().__init__(spec, trial_id=trial_id, run_id=run_id)
        #: ours alone: a sandbox is removed by label only if it carries this token
        self.instance = secrets.token_hex(6)
        self._keys: Keys | None = None
        self._client: Any = None
        self._sandbox: Any = None
        #: the image's working directory, as Daytona reads it (`workdir_from_image`)
        self._image_workdir: str | None = None

    @classmethod
    async def preflight(cls) -> None:
        found = require_keys()
        sdk()
        client = open_client(found)
        try:
            await with_retries(lambda: labelled(client, {"helios.preflight": "1"}),
                               "list sandboxes", found.shown_url, quota_patience=60)  # fmt: skip
        except EnvironmentUnavailable:
            raise
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if status in (401, 403):
                raise EnvironmentUnavailable(
                    f"Daytona refused the key at {found.shown_url} ({status}): "
                    "check DAYTONA_API_KEY"
                ) from None
            raise EnvironmentUnavailable(
                f"Daytona API at {found.shown_url} failed: {str(exc)[:200]}"
            ) from None
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    @classmethod
    async def cleanup_run(cls, run_id: str | None, *, force: bool = False) -> list[str]:
        return await cleanup_sandboxes(run_id, force=force)

    @property
    def sandbox_id(self) -> str | None:
        return None if self._sandbox is None else str(self._sandbox.id)

    async def start(self) -> None:
        found = self._keys = require_keys()
        module = sdk()
        params = create_params(self.spec, module, run_id=self.run_id, trial_id=self.trial_id,
                               instance=self.instance)  # fmt: skip
        self._client = open_client(found)
        self._sandbox = await self._create(params, found)
        if self.spec.workdir_from_image:
            self._image_workdir = await self._work_dir()
        setup = await self.exec(f"mkdir -p /logs/agent /logs/verifier {shlex.quote(self.workdir)}",
                                cwd="/", timeout=120)  # fmt: skip
        if not setup.ok:
            raise EnvironmentStartError(f"sandbox setup failed: {setup.stderr.strip()[:200]}")

    @property
    def workdir(self) -> str:
        return self._image_workdir or self.spec.workdir

    async def _work_dir(self) -> str | None:
        """The image's WORKDIR as Daytona reads it from the image (its user's home
        when it has none, as Harbor's Daytona runs it); None when it cannot say."""
        try:
            found = await self._require().get_work_dir()
        except Exception as exc:
            log.warning("daytona: the image's working directory is unknown (%s): %s is used",
                        str(exc)[:200], self.spec.workdir)  # fmt: skip
            return None
        return found if isinstance(found, str) and found.startswith("/") else None

    async def _create(self, params: Any, found: Keys) -> Any:
        """The sandbox, shielded: a cancel during a create request waits for it, then
        deletes what it made; a cancel between tries (a quota's back-off) stops at once."""
        timeout = self.spec.build_timeout + START_GRACE
        tries = 0
        in_flight = False
        abandoned = False

        async def attempt() -> Any:
            nonlocal tries, in_flight
            tries += 1
            if tries > 1:  # a failed try may have left a sandbox behind
                await remove_instance(self._client, found, self.instance)
            in_flight = True
            try:
                return await self._client.create(params, timeout=timeout)
            finally:
                in_flight = False

        task = asyncio.ensure_future(
            with_retries(attempt, "create sandbox", found.shown_url, given_up=lambda: abandoned)
        )
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            abandoned = True  # the try in flight ends; a failed one is not tried again
            if not in_flight:  # waiting to try again: nothing is being made
                task.cancel()
            await run_to_end(self._abandon(task, found))
            raise
        except EnvironmentUnavailable:
            raise
        except Exception as exc:
            with contextlib.suppress(Exception):
                await run_to_end(remove_instance(self._client, found, self.instance))
            raise EnvironmentStartError(f"daytona: {str(exc)[:300]}") from None

    async def _abandon(self, task: asyncio.Future[Any], found: Keys) -> None:
        """After a cancel: let the create end, then delete what it made (and any
        sandbox with this instance's label: a try cut off after Daytona took it)."""
        try:
            sandbox = await task
        except BaseException:
            sandbox = None
        if sandbox is not None:
            with contextlib.suppress(Exception):
                await delete(sandbox, found)
        with contextlib.suppress(Exception):
            await remove_instance(self._client, found, self.instance)

    def _require(self) -> Any:
        if self._sandbox is None:
            raise EnvironmentExecError("sandbox is not running")
        return self._sandbox

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        user: User | None = None,
    ) -> ExecResult:
        if user not in (None, ROOT, "root", "0"):
            raise UnsupportedFeature(f"the daytona provider cannot run commands as {user!r}")
        sandbox = self._require()
        marker = commands.new_marker()
        bound = None if timeout is None else timeout + commands.REQUEST_GRACE
        try:
            async with asyncio.timeout(bound):  # the request's own bound, past the toolbox's
                response = await sandbox.process.exec(
                    commands.wrapped(command, marker),
                    cwd=cwd or self.workdir,
                    env=env or None,
                    timeout=commands.timeout_seconds(timeout),
                )
        except TimeoutError:
            return commands.timed_out()
        except Exception as exc:
            if commands.is_timeout(exc):
                return commands.timed_out()
            if is_unreachable(exc) and self._keys is not None:
                raise EnvironmentExecError(str(unreachable(self._keys.shown_url, exc))) from None
            raise EnvironmentExecError(f"daytona exec failed: {str(exc)[:300]}") from None
        stdout, stderr = commands.split(response.result or "", marker)
        code = response.exit_code
        return ExecResult(stdout, stderr, int(code) if isinstance(code, int) else -1)

    async def stop_processes(self) -> None:
        """`kill -9 -1` from the toolbox (all but pid 1, Daytona's daemon), until a
        look at /proc finds none left (`commands.SURVIVORS`)."""
        for _ in range(STOP_ROUNDS):
            await self.exec(commands.KILL_ALL, cwd="/", timeout=60)
            left = await self.exec(commands.SURVIVORS, cwd="/", timeout=60)
            if left.ok and not left.stdout.split():
                return
        raise EnvironmentExecError(
            f"could not stop the agent's processes: {' '.join(left.stdout.split()[:20])}"
        )

    async def _as_root(self, command: str) -> ExecResult:
        return await self.exec(command, cwd="/", timeout=TRANSFER_TIMEOUT)

    async def upload(self, src: Path, dst: str) -> None:
        await transfer.upload(self._require().fs, self._as_root, src, dst)

    async def prepare_and_upload(
        self, prepare: str | FileSteps, uploads: Sequence[tuple[Path, str]]
    ) -> ExecResult:
        if uploads:  # the first upload in the same command as `prepare`
            (src, dst), rest = uploads[0], uploads[1:]
            script = prepare.script() if isinstance(prepare, FileSteps) else prepare
            done = await transfer.prepare_and_upload(self._require().fs, self._as_root,
                                                     script, src, dst)  # fmt: skip
            if done is not None:
                for more_src, more_dst in rest:
                    await self.upload(more_src, more_dst)
                return done
        return await super().prepare_and_upload(prepare, uploads)

    async def download(self, src: str, dst: Path) -> list[str]:
        return await transfer.download(self._require().fs, self._as_root, src, dst)

    async def stop(self) -> None:
        # To its end: a Ctrl-C arriving now must not leave the sandbox behind.
        await run_to_end(self._stop())

    async def _stop(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        client, self._client = self._client, None
        found = self._keys
        try:
            if found is not None and sandbox is not None:
                await delete(sandbox, found)
            elif found is not None and client is not None:
                await remove_instance(client, found, self.instance)
        except Exception as exc:
            log.warning("daytona: could not delete sandbox %s: %s", self.instance, exc)
        finally:
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()
