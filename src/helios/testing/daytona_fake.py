"""A loopback Daytona for tests: an aiohttp server on 127.0.0.1 that speaks the part
of Daytona's REST API that its Python SDK (the version `environments.daytona.client.
SDK_VERSION` names) uses, each sandbox a local docker container. The real SDK runs
against it, so a request or an answer whose shape the SDK's models refuse fails
the tests.

The control plane (under `api_url`, `/api` as Daytona's):
- `POST /sandbox`: a sandbox from `buildInfo` (a Dockerfile: "FROM image" alone
  runs that image; anything else is built, with the contexts the SDK stored, see
  below), answered `creating` (or `pending_build`), then `started` once its
  container runs (the SDK polls `GET /sandbox/{id}`; its WebSocket of events
  finds no such endpoint here, as the SDK allows);
- `GET /sandbox/{id}`, `GET /sandbox` (by `labels`, paged by `cursor`),
  `DELETE /sandbox/{id}` (`destroying`, then `destroyed`), `GET
  /sandbox/{id}/toolbox-proxy-url`, `GET /object-storage/push-access`.

The toolbox, under each sandbox's `toolboxProxyUrl` + `/{id}`:
- `POST /process/execute` (`docker exec`, its output stdout and stderr mixed as
  Daytona's; past its `timeout` the command's process group is killed and the
  answer is 408),
- `GET /work-dir` (the image's WORKDIR, else its user's home),
- `POST /files/bulk-upload` (multipart, `files[i].path` / `files[i].file`) and
  `POST /files/bulk-download` (a multipart answer: a `file` part, or an `error` part).

Build contexts: the SDK uploads the files a Dockerfile copies to S3 (obstore),
which refuses a plain-http endpoint, so that one step is not spoken on the wire:
`local_object_storage()` makes the SDK store them in the fake's folder instead,
with the SDK's own hashing and archiving.

Faults: `quota_failures` (the next creates answer 403 "Sandbox resource limit
reached"), `start_delay` (seconds a create stays `creating`), and the
`LoopbackServer`'s `fail_sequence` for the control plane.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shlex
import shutil
import tarfile
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import MultipartWriter, web

from helios.environments.docker.cli import LABEL_MANAGED, LABEL_OWNER, ImageBuilds, docker
from helios.environments.shell.owner import current_owner
from helios.testing.loopback import LoopbackServer

ORGANIZATION = "helios-fake-org"
BUCKET = "daytona-volume-builds"
#: every container of a fake carries its token under this label
LABEL_FAKE = "helios.daytona-fake"
FAKE_IMAGE_REPO = "helios-daytona-fake"
#: the container's pid 1: blocked reading a stdin that stays open (`docker run -i`)
INIT = "while :; do read -r _ || exit 0; done"
#: the largest file the toolbox hands back here (the host's bound is 1 GiB)
FILE_CAP = 2 << 30
QUOTA_MESSAGE = "Sandbox resource limit reached (16), please try again later."


@dataclass
class FakeSandbox:
    id: str
    name: str
    user: str
    env: dict[str, str]
    labels: dict[str, str]
    cpu: int
    memory: int
    disk: int
    network_block_all: bool
    target: str
    build: dict[str, Any]
    state: str = "creating"
    error_reason: str | None = None
    container: str | None = None
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())


class DaytonaFake(LoopbackServer):
    """`with DaytonaFake(api_key=...) as fake:` then DAYTONA_API_URL=`fake.api_url`."""

    def __init__(self, *, api_key: str = "fake-daytona-key", start_delay: float = 0.0,
                 quota_failures: int = 0, **kwargs: Any) -> None:  # fmt: skip
        super().__init__(require_key=api_key, **kwargs)
        self.api_key = api_key
        self.start_delay = start_delay
        self.quota_failures = quota_failures
        self.token = uuid.uuid4().hex[:12]
        self.sandboxes: dict[str, FakeSandbox] = {}
        #: where the SDK's build contexts land (`local_object_storage`)
        self.storage = Path(tempfile.mkdtemp(prefix="helios-daytona-fake-"))
        self.creates = 0
        self._builds = ImageBuilds()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/api/sandbox", self._create)
        app.router.add_get("/api/sandbox", self._list)
        app.router.add_get("/api/sandbox/{id}", self._get)
        app.router.add_delete("/api/sandbox/{id}", self._delete)
        app.router.add_get("/api/sandbox/{id}/toolbox-proxy-url", self._proxy_url)
        app.router.add_get("/api/object-storage/push-access", self._push_access)
        app.router.add_post("/toolbox/{id}/process/execute", self._execute)
        app.router.add_post("/toolbox/{id}/files/bulk-upload", self._upload)
        app.router.add_post("/toolbox/{id}/files/bulk-download", self._download)
        app.router.add_get("/toolbox/{id}/work-dir", self._work_dir)
        app.on_shutdown.append(self._remove_all)

    # -- the shapes the SDK's models validate ---------------------------------------
    def _dto(self, box: FakeSandbox) -> dict[str, Any]:
        return {
            "id": box.id, "organizationId": ORGANIZATION, "name": box.name, "user": box.user,
            "env": box.env, "labels": box.labels, "public": False,
            "networkBlockAll": box.network_block_all, "kvm": False, "target": box.target,
            "cpu": box.cpu, "gpu": 0, "memory": box.memory, "disk": box.disk,
            "state": box.state, "desiredState": "destroyed" if box.state.startswith("destr")
            else "started", "errorReason": box.error_reason, "createdAt": box.created_at,
            "updatedAt": box.created_at, "toolboxProxyUrl": f"{self.base_url}/toolbox",
        }  # fmt: skip

    @staticmethod
    def _error(status: int, message: str) -> web.Response:
        body = {"statusCode": status, "message": message, "code": f"HTTP_{status}",
                "source": "api"}  # fmt: skip
        return web.json_response(body, status=status)

    async def _guard(self, request: web.Request) -> web.StreamResponse | None:
        body: Any = None
        if request.can_read_body and request.content_type == "application/json":
            body = await request.json()
        self.record(request, body)
        return await self.http_fault(request)

    def _box(self, request: web.Request) -> FakeSandbox | None:
        key = request.match_info["id"]
        found = self.sandboxes.get(key)
        if found is None:
            found = next((b for b in self.sandboxes.values() if b.name == key), None)
        return found

    # -- the control plane --------------------------------------------------------------
    async def _create(self, request: web.Request) -> web.StreamResponse:
        fault = await self._guard(request)
        if fault is not None:
            return fault
        body = await request.json()
        if self.quota_failures > 0:
            self.quota_failures -= 1
            return self._error(403, QUOTA_MESSAGE)
        self.creates += 1
        box_id = uuid.uuid4().hex
        box = FakeSandbox(
            id=box_id, name=body.get("name") or box_id, user=body.get("user") or "daytona",
            env=dict(body.get("env") or {}), labels=dict(body.get("labels") or {}),
            cpu=int(body.get("cpu") or 1), memory=int(body.get("memory") or 1),
            disk=int(body.get("disk") or 3), network_block_all=bool(body.get("networkBlockAll")),
            target=body.get("target") or "us", build=dict(body.get("buildInfo") or {}),
        )  # fmt: skip
        if not box.build.get("dockerfileContent"):
            return self._error(400, "the fake makes sandboxes from an image or a Dockerfile only")
        box.state = "creating" if _base_image(box.build) else "pending_build"
        self.sandboxes[box_id] = box
        self._spawn(self._bring_up(box))
        return web.json_response(self._dto(box))

    async def _list(self, request: web.Request) -> web.StreamResponse:
        fault = await self._guard(request)
        if fault is not None:
            return fault
        wanted = json.loads(request.query.get("labels") or "{}")
        chosen = [
            b for b in self.sandboxes.values()
            if b.state != "destroyed" and all(b.labels.get(k) == v for k, v in wanted.items())
        ]  # fmt: skip
        limit = int(request.query.get("limit") or 100)
        start = int(request.query.get("cursor") or 0)
        page = chosen[start : start + limit]
        following = str(start + limit) if start + limit < len(chosen) else None
        return web.json_response({"items": [self._dto(b) for b in page], "nextCursor": following})

    async def _get(self, request: web.Request) -> web.StreamResponse:
        fault = await self._guard(request)
        if fault is not None:
            return fault
        box = self._box(request)
        if box is None:
            return self._error(404, f"Sandbox with ID or name {request.match_info['id']} not found")
        return web.json_response(self._dto(box))

    async def _delete(self, request: web.Request) -> web.StreamResponse:
        fault = await self._guard(request)
        if fault is not None:
            return fault
        box = self._box(request)
        if box is None or box.state == "destroyed":
            return self._error(404, f"Sandbox with ID or name {request.match_info['id']} not found")
        box.state = "destroying"
        self._spawn(self._tear_down(box))
        return web.json_response(self._dto(box))

    async def _proxy_url(self, request: web.Request) -> web.StreamResponse:
        fault = await self._guard(request)
        return fault or web.json_response({"url": f"{self.base_url}/toolbox"})

    async def _push_access(self, request: web.Request) -> web.StreamResponse:
        fault = await self._guard(request)
        return fault or web.json_response({
            "accessKey": "fake", "secret": "fake", "sessionToken": "fake",
            "storageUrl": f"{self.base_url}/s3", "organizationId": ORGANIZATION,
            "bucket": BUCKET, "region": "us-east-1",
        })  # fmt: skip

    # -- sandboxes as containers ---------------------------------------------------------
    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _bring_up(self, box: FakeSandbox) -> None:
        try:
            if self.start_delay:
                await asyncio.sleep(self.start_delay)
            image = await self._image(box)
            if box.state.startswith("destr"):
                return
            box.state = "creating"
            network = ["--network", "none"] if box.network_block_all else []
            env = [arg for k, v in box.env.items() for arg in ("-e", f"{k}={v}")]
            # pid 1 waits in a builtin, with no child: a sandbox's `kill -9 -1` leaves
            # it alone, as Daytona's daemon
            code, out, err = await docker(
                "run", "-d", "-i", "--label", f"{LABEL_FAKE}={self.token}",
                "--label", f"{LABEL_MANAGED}=true", "--cpus", str(box.cpu),
                # owned by this process, as Helios's own containers: a `helios cleanup`
                # elsewhere takes them only once the fake is gone (no owner: at once)
                "--label", f"{LABEL_OWNER}={current_owner().label()}",
                "--memory", f"{box.memory}g", "--pids-limit", "4096", *network, *env,
                "--entrypoint", "sh", image, "-c", INIT,
            )  # fmt: skip
            if code != 0:
                box.state, box.error_reason = "error", err.strip()[-300:]
                return
            box.container = out.strip()
            if box.state.startswith("destr"):
                await self._tear_down(box)
                return
            box.state = "started"
        except Exception as exc:
            box.state, box.error_reason = "build_failed", str(exc)[:300]

    async def _image(self, box: FakeSandbox) -> str:
        base = _base_image(box.build)
        if base is not None:
            return base
        dockerfile = str(box.build["dockerfileContent"])
        hashes = [str(h) for h in box.build.get("contextHashes") or []]
        tag = (
            f"{FAKE_IMAGE_REPO}:"
            + hashlib.sha256("\n".join([dockerfile, *hashes]).encode()).hexdigest()[:16]
        )
        context = Path(tempfile.mkdtemp(prefix="helios-daytona-build-"))
        try:
            for item in hashes:
                archive = self.storage / BUCKET / ORGANIZATION / item / "context.tar"
                with tarfile.open(archive) as tar:
                    tar.extractall(context, filter="data")
            (context / "Dockerfile").write_text(dockerfile)
            await self._builds.ensure(tag, context, 600)
        finally:
            shutil.rmtree(context, ignore_errors=True)
        return tag

    async def _tear_down(self, box: FakeSandbox) -> None:
        container, box.container = box.container, None
        if container is not None:
            await docker("rm", "-f", "-v", container)
        box.state = "destroyed"

    async def _remove_all(self, app: web.Application) -> None:
        for task in list(self._tasks):
            task.cancel()
        code, out, _ = await docker("ps", "-aq", "--filter", f"label={LABEL_FAKE}={self.token}")
        if code == 0 and out.split():
            await docker("rm", "-f", "-v", *out.split())
        shutil.rmtree(self.storage, ignore_errors=True)

    # -- the toolbox -------------------------------------------------------------------
    def _running(self, request: web.Request) -> FakeSandbox | web.Response:
        if not self.key_ok(request):
            return web.json_response({"message": "unauthorized"}, status=401)
        box = self.sandboxes.get(request.match_info["id"])
        if box is None or box.container is None or box.state != "started":
            return self._error(404, "sandbox not found or not started")
        return box

    async def _execute(self, request: web.Request) -> web.StreamResponse:
        box = self._running(request)
        if isinstance(box, web.Response):
            return box
        body = await request.json()
        self.record(request, body)
        assert box.container is not None
        timeout = body.get("timeout")
        env = [arg for k, v in (body.get("envs") or {}).items() for arg in ("-e", f"{k}={v}")]
        cwd = ["-w", body["cwd"]] if body.get("cwd") else []
        command = ["sh", "-c", body["command"]]
        if timeout:  # the whole process group, as the toolbox stops a command
            command = ["timeout", "-s", "KILL", str(int(timeout)), *command]
        started = asyncio.get_running_loop().time()
        code, out, err = await docker("exec", "-u", box.user, *cwd, *env, box.container,
                                      *command, timeout=None)  # fmt: skip
        elapsed = asyncio.get_running_loop().time() - started
        if timeout and code in (124, 137) and elapsed >= int(timeout):
            return self._error(408, "command execution timeout")
        return web.json_response({"exitCode": code, "result": out + err})

    async def _work_dir(self, request: web.Request) -> web.StreamResponse:
        """The image's WORKDIR, else its user's home, as Daytona's daemon answers."""
        box = self._running(request)
        if isinstance(box, web.Response):
            return box
        self.record(request, None)
        assert box.container is not None
        code, out, err = await docker("inspect", "--format", "{{.Config.WorkingDir}}",
                                      box.container)  # fmt: skip
        if code != 0:
            return self._error(500, err.strip()[-300:])
        found = out.strip()
        if not found:
            _, home, _ = await docker("exec", "-u", box.user, box.container, "sh", "-c",
                                      'printf %s "$HOME"')  # fmt: skip
            found = home.strip() or "/"
        return web.json_response({"dir": found})

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        box = self._running(request)
        if isinstance(box, web.Response):
            return box
        assert box.container is not None
        reader = await request.multipart()
        paths: dict[str, str] = {}
        self.record(request, None)
        while (part := await reader.next()) is not None:
            name = str(getattr(part, "name", "") or "")
            data = await part.read()  # type: ignore[union-attr]
            index = name.split("]", 1)[0]
            if name.endswith(".path"):
                paths[index] = data.decode()
                continue
            target = paths.get(index) or str(getattr(part, "filename", ""))
            code, _, err = await docker(
                "exec", "-i", "-u", box.user, box.container, "sh", "-c",
                f"cat > {shlex.quote(target)}", stdin=bytes(data),
            )  # fmt: skip
            if code != 0:
                return web.json_response({"errors": [err.strip()[:300]]}, status=400)
        return web.Response(status=200)

    async def _download(self, request: web.Request) -> web.StreamResponse:
        box = self._running(request)
        if isinstance(box, web.Response):
            return box
        assert box.container is not None
        body = await request.json()
        self.record(request, body)
        with MultipartWriter("form-data") as writer:
            for path in body.get("paths") or []:
                code, _, _ = await docker("exec", "-u", box.user, box.container,
                                          "test", "-f", path)  # fmt: skip
                if code != 0:
                    error = json.dumps({"message": f"file not found: {path}", "statusCode": 404,
                                        "code": "FILE_NOT_FOUND"})  # fmt: skip
                    part = writer.append(error, {"Content-Type": "application/json"})
                    part.set_content_disposition("form-data", name="error", filename=path)
                    continue
                data = await _read_file(box.container, box.user, path)
                part = writer.append(data, {"Content-Type": "application/octet-stream"})
                part.set_content_disposition("form-data", name="file", filename=path)
        return web.Response(body=writer, headers={"Content-Type": writer.content_type})

    # -- for tests -------------------------------------------------------------------------
    def live(self) -> list[FakeSandbox]:
        """The sandboxes not destroyed."""
        return [b for b in self.sandboxes.values() if b.state != "destroyed"]

    def containers(self) -> list[str]:
        """This fake's containers that docker still has (running or not)."""
        import subprocess

        done = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label={LABEL_FAKE}={self.token}"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return done.stdout.split()


async def _read_file(container: str, user: str, path: str) -> bytes:
    from helios._proc import run_process

    result = await run_process(["docker", "exec", "-u", user, container, "cat", "--", path],
                               timeout=None, cap=FILE_CAP)  # fmt: skip
    return result.stdout


def _base_image(build: dict[str, Any]) -> str | None:
    """The image a Dockerfile that is only `FROM image` names (nothing to build)."""
    lines = [ln.strip() for ln in str(build.get("dockerfileContent") or "").splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    if len(lines) == 1 and lines[0].upper().startswith("FROM ") and not build.get("contextHashes"):
        return lines[0].split(None, 1)[1].strip()
    return None


_patch_lock = threading.Lock()


@contextlib.contextmanager
def local_object_storage(fake: DaytonaFake) -> Iterator[None]:
    """Make the SDK store a Dockerfile's build contexts in `fake`'s folder rather than
    S3 (see the module's doc), with its own hashing and archiving."""
    import daytona._async.snapshot as snapshot
    from daytona._async.object_storage import AsyncObjectStorage

    root = fake.storage

    class LocalObjectStorage(AsyncObjectStorage):
        def __init__(self, *args: Any, bucket_name: str = BUCKET, region: str = "",
                     **kwargs: Any) -> None:  # fmt: skip
            if len(args) > 4:
                bucket_name = args[4]
            self.bucket_name = bucket_name
            self.region = region

        async def _file_exists_in_s3(self, file_path: str) -> bool:
            return (root / self.bucket_name / file_path).is_file()

        async def _upload_as_tar(self, s3_key: str, source_path: str,
                                 archive_base_path: str | None = None) -> None:  # fmt: skip
            await asyncio.to_thread(self._write, s3_key, source_path, archive_base_path)

        def _write(self, s3_key: str, source_path: str, archive_base_path: str | None) -> None:
            source_path = os.path.normpath(source_path)
            if archive_base_path is None:
                archive_base_path = self.compute_archive_base_path(source_path)
            target = root / self.bucket_name / s3_key
            target.parent.mkdir(parents=True, exist_ok=True)
            with tarfile.open(target, "w") as tar:
                tar.add(source_path, arcname=archive_base_path)

    with _patch_lock:
        saved = getattr(snapshot, "AsyncObjectStorage")  # noqa: B009 - not re-exported
        setattr(snapshot, "AsyncObjectStorage", LocalObjectStorage)  # noqa: B010
    try:
        yield
    finally:
        with _patch_lock:
            setattr(snapshot, "AsyncObjectStorage", saved)  # noqa: B010
