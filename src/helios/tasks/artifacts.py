"""Artifacts: files a trial keeps from its sandbox, and the only files a separate
verifier gets from the agent's.

What is collected: the conventional /logs/artifacts (if it exists) and every
entry of the task's `artifacts` list (and a step's). Each lands under the
trial's `artifacts/` folder (at its `destination`, else at its source path)
through the provider's checked download: no link followed, bounded. A missing
or refused entry is recorded in `artifacts/manifest.json`, never an error of
the trial: a verifier that needed it fails on its own. So is what a download
left out (a link, a name too long for the host): the entry's `skipped` list.
Only the host's own failure (a full disk) fails the trial.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import posixpath
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from helios.environments.base import ROOT, Environment, User, kinds_script, read_kinds
from helios.environments.view import file_owner
from helios.errors import EnvironmentError_
from helios.tasks.collect import ServiceSandbox, service_sandbox
from helios.tasks.schema import ArtifactConfig

CONVENTION = "/logs/artifacts"
MANIFEST = "manifest.json"


@dataclass
class Collected:
    #: the path in the sandbox (absolute)
    source: str
    #: where it is under the trial's artifacts/ folder
    destination: str
    #: "ok", "missing" or "failed: <why>"
    status: str
    #: what the download left out: links, special files, entries the host refuses
    skipped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _entries(artifacts: tuple[ArtifactConfig, ...], workdir: str) -> list[ArtifactConfig]:
    entries = [ArtifactConfig(source=CONVENTION)]
    for item in artifacts:
        source = item.source
        if not source.startswith("/"):
            source = posixpath.join(workdir, source)
        entries.append(item.model_copy(update={"source": posixpath.normpath(source)}))
    return entries


async def collect(
    env: Environment, artifacts: tuple[ArtifactConfig, ...], host_dir: Path | None
) -> list[Collected]:
    """Download the artifacts into `host_dir` (a temporary folder when the trial
    keeps no files is the caller's business) and write the manifest."""
    if host_dir is None:
        return []
    found: list[Collected] = []
    entries = _entries(artifacts, env.workdir)
    services = list(dict.fromkeys(item.service or "main" for item in entries))
    for service in services:
        chosen = [item for item in entries if (item.service or "main") == service]
        try:
            where = await service_sandbox(env, service)
        except EnvironmentError_ as exc:
            found += [Collected(item.source, _destination(item), f"failed: {exc}")
                      for item in chosen]  # fmt: skip
            continue
        found += await _collect_from(where, chosen, host_dir)
    if found:
        await asyncio.to_thread(_write_manifest, host_dir, found)
    return found


def _destination(item: ArtifactConfig) -> str:
    return item.destination or PurePosixPath(item.source).relative_to("/").as_posix()


async def _collect_from(env: Environment | ServiceSandbox, entries: list[ArtifactConfig],
                        host_dir: Path) -> list[Collected]:  # fmt: skip
    """The entries of one service (`main`: the sandbox itself)."""
    found: list[Collected] = []
    kinds = await _kinds(env, [item.source for item in entries])
    for item, kind in zip(entries, kinds, strict=True):
        destination = _destination(item)
        record = Collected(item.source, destination, "ok")
        if kind == "missing":
            if item.source != CONVENTION:
                record.status = "missing"
                found.append(record)
            continue
        if kind not in ("file", "dir"):
            # A link, a fifo or a device: the checked download never follows or makes one.
            record.status = f"skipped: a {kind}, not a regular file or folder"
            found.append(record)
            continue
        target = host_dir / destination
        try:
            record.skipped = list(await env.download(item.source, target) or [])
            if item.exclude:
                await asyncio.to_thread(_drop_excluded, target, item.exclude)
        except EnvironmentError_ as exc:
            record.status = f"failed: {exc}"
        if record.ok and not await asyncio.to_thread(target.exists):
            record.status = "skipped: not a regular file or folder"
        found.append(record)
    return found


async def _kinds(env: Environment | ServiceSandbox, paths: list[str]) -> list[str]:
    """What each path is in the sandbox, in one command (its processes are stopped:
    nothing changes them between this and the download)."""
    if isinstance(env, Environment):
        return await env.path_kinds(paths)
    as_root: dict[str, Any] = {"user": ROOT} if env.supports_users else {}
    result = await env.exec(kinds_script(paths), cwd="/", timeout=60, **as_root)
    return read_kinds(result.stdout, len(paths))


async def transfer(
    env: Environment, host_dir: Path | None, collected: list[Collected], user: User | None
) -> None:
    """Put collected artifacts back at their source paths in a separate verifier's
    sandbox, owned by the verifier's user when it has one."""
    if host_dir is None:
        return
    owner = await file_owner(env, user)
    for item in collected:
        if not item.ok or not await asyncio.to_thread((host_dir / item.destination).exists):
            continue
        await env.upload(host_dir / item.destination, item.source)
        if owner is not None:
            await env.give_to(item.source, owner)


def _drop_excluded(target: Path, patterns: list[str]) -> None:
    """`tar --exclude` semantics, after the fact: a name or a relative path that
    matches a pattern is removed (a folder with everything in it)."""
    if not target.is_dir():
        return
    for path in sorted(target.rglob("*"), key=lambda p: len(p.parts)):
        if not path.exists() and not path.is_symlink():
            continue
        relative = path.relative_to(target).as_posix()
        if any(fnmatch.fnmatch(path.name, p) or fnmatch.fnmatch(relative, p) for p in patterns):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


def _write_manifest(host_dir: Path, found: list[Collected]) -> None:
    host_dir.mkdir(parents=True, exist_ok=True)
    data = [asdict(item) for item in found]
    (host_dir / MANIFEST).write_text(json.dumps(data, indent=2) + "\n", "utf-8")
