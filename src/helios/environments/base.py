"""The Environment contract every provider implements."""

from __future__ import annotations

import re
import shlex
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from helios.environments.egress import NO_PROXY_HOSTS
from helios.environments.egress.policy import Network
from helios.environments.shell.safe_copy import DownloadMissing, UnsafeDownload
from helios.environments.spec import SandboxSpec
from helios.errors import EnvironmentExecError, UnsupportedFeature

#: a user inside the sandbox: a name or a uid
User = str | int
#: who runs Helios's own housekeeping (resets, ownership) whatever the image's USER
ROOT: User = 0
#: a service's name: it names its log file, /logs/helios/services/<name>.log
SERVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def check_service_name(name: str) -> None:
    if not SERVICE_NAME.fullmatch(name):
        raise ValueError(f"a service's name is a word of letters, digits, - and _: {name!r}")


@dataclass(frozen=True, slots=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True, slots=True)
class ExecDownload:
    """`exec_then_download`'s answer: the command's result; what the download
    skipped (None: nothing was downloaded, the command timed out or the download
    was refused); the download's refusal (a `DownloadMissing` or `UnsafeDownload`)."""

    result: ExecResult
    skipped: list[str] | None = None
    refused: EnvironmentExecError | None = None


@dataclass(frozen=True, slots=True)
class FileSteps:
    """File work as root before an upload (`prepare_and_upload`): trees removed as
    `rm -rf` removes them, folders made as `mkdir -p`, then new folders only root
    may enter (`mkdir -m 700`: each must not exist yet). A provider with a shell
    server does them there without a process (`shell/server.c`, "steps"); the
    others run `script()`."""

    remove: tuple[str, ...] = ()
    make: tuple[str, ...] = ()
    private: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for path in (*self.remove, *self.make, *self.private):
            if not path.startswith("/") or "\0" in path:
                raise ValueError(f"a file step's path must be absolute: {path!r}")

    def script(self) -> str:
        """The same work as one `sh` command line."""
        parts = [f"rm -rf -- {shlex.join(self.remove)}"] if self.remove else []
        if self.make:
            parts.append(f"mkdir -p -- {shlex.join(self.make)}")
        parts += [f"mkdir -m 700 -- {shlex.quote(path)}" for path in self.private]
        return " && ".join(parts) or "true"

    def words(self) -> list[str]:
        """The shell server's "steps" words for it."""
        verbs = [("rm", self.remove), ("mkdir", self.make), ("private", self.private)]
        return [word for verb, paths in verbs for path in paths for word in (verb, path)]


#: what `Environment.path_kinds` answers for each path
PATH_KINDS = ("link", "file", "dir", "special", "missing")


def kinds_script(paths: Sequence[str]) -> str:
    """A `sh` script that prints what each path is (`PATH_KINDS`, one a line), as
    lstat says: a link is a link, whatever it points at."""
    lines = []
    for path in paths:
        p = shlex.quote(path)
        lines.append(
            f"if [ -L {p} ]; then echo link; elif [ -f {p} ]; then echo file; "
            f"elif [ -d {p} ]; then echo dir; elif [ -e {p} ]; then echo special; "
            "else echo missing; fi"
        )
    return "\n".join(lines)


def read_kinds(stdout: str, count: int) -> list[str]:
    """`kinds_script`'s answer; every path "missing" when it is not whole."""
    kinds = stdout.split()
    whole = len(kinds) == count and all(kind in PATH_KINDS for kind in kinds)
    return kinds if whole else ["missing"] * count


@dataclass(frozen=True, slots=True)
class Capabilities:
    network: Network
    cpus: float
    memory_mb: int


class Environment(ABC):
    """One trial's sandbox. Created per trial; `stop` must always be safe to call."""

    #: the provider name used on the command line (`--provider NAME`)
    name: ClassVar[str]
    #: `exec(..., user=)` runs the command as that user
    supports_users: ClassVar[bool] = False
    #: `set_network` can open or close the network of a running sandbox
    dynamic_network: ClassVar[bool] = False
    #: a `network` that is an `AllowList` is honoured (an egress proxy, `egress`); a
    #: sandbox that starts allowlisted may then switch its policy (or to none) per phase
    supports_allowlist: ClassVar[bool] = False
    #: `start_service` can start long-lived processes that Helios owns (see there);
    #: a provider may answer for this host (local: whether its shell server runs here)
    supports_services: ClassVar[bool] = False
    #: runs a spec's `compose_file` (sidecar services beside the sandbox)
    supports_compose: ClassVar[bool] = False
    #: runs the task's image but not its ENTRYPOINT (such a task is unsupported)
    ignores_entrypoint: ClassVar[bool] = False

    def __init__(self, spec: SandboxSpec, *, trial_id: str, run_id: str) -> None:
        self.spec = spec
        self.trial_id = trial_id
        self.run_id = run_id
        #: the network the next commands get (the spec's until `set_network`)
        self.network = spec.network

    @property
    def capabilities(self) -> Capabilities:
        spec = self.spec
        return Capabilities(network=spec.network, cpus=spec.cpus, memory_mb=spec.memory_mb)

    @property
    def workdir(self) -> str:
        return self.spec.workdir

    @classmethod
    async def preflight(cls) -> None:
        """Raise `EnvironmentUnavailable` with a how-to-fix line if unusable here."""

    async def build(self) -> None:
        """Prepare what `start` needs (an image); shared work is done once."""

    @classmethod
    async def cleanup_run(cls, run_id: str | None, *, force: bool = False) -> list[str]:
        """Remove what this provider left behind for one run (or, with None, every run
        whose owner is gone; `force` also takes live ones). Returns what was removed.

        The batch service calls it after an interrupt; `helios cleanup` calls it too."""
        return []

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        user: User | None = None,
    ) -> ExecResult:
        """Run `command` with `sh -c` inside the sandbox, as `user` if given (None:
        the sandbox's default user). Never raises on a non-zero exit."""

    @abstractmethod
    async def upload(self, src: Path, dst: str) -> None:
        """Copy a host file or directory to `dst`; a directory's contents land in `dst`."""

    async def prepare_and_upload(
        self, prepare: str | FileSteps, uploads: Sequence[tuple[Path, str]]
    ) -> ExecResult:
        """Run `prepare` (a `sh` script, or `FileSteps`) as root from `/`; if it
        succeeds, the uploads in order (an upload that fails raises, as `upload`
        does). The result is `prepare`'s.

        `prepare` must leave each upload's `dst` an empty folder that nothing else
        in the sandbox can reach (the verifier's fresh /tests): a provider may then
        do both in one command, unpacking straight into it."""
        who = ROOT if self.supports_users else None
        script = prepare.script() if isinstance(prepare, FileSteps) else prepare
        result = await self.exec(script, cwd="/", timeout=60, user=who)
        if result.ok:
            for src, dst in uploads:
                await self.upload(src, dst)
        return result

    async def path_kinds(self, paths: Sequence[str]) -> list[str]:
        """What each path is in the sandbox (`PATH_KINDS`), as root sees it with
        lstat, in one command."""
        if not paths:
            return []
        who = ROOT if self.supports_users else None
        result = await self.exec(kinds_script(paths), cwd="/", timeout=60, user=who)
        return read_kinds(result.stdout, len(paths))

    async def mount_readonly(self, host: Path, dst: str) -> bool:
        """Show the host folder `host` read-only at `dst` to the commands that follow,
        without copying it (an installed agent's cached install). False when this
        provider cannot: the caller uploads it instead."""
        return False

    @abstractmethod
    async def download(self, src: str, dst: Path) -> list[str]:
        """Copy a sandbox file or directory to the host path `dst` (checked: no link
        followed, bounded); return what was skipped (links, special files, entries
        the host cannot hold). `DownloadMissing`: `src` does not exist.
        `UnsafeDownload`: what the sandbox handed back is refused (past a bound, an
        unreadable archive): the sandbox's doing, not the host's."""

    async def exec_then_download(
        self, command: str, src: str, dst: Path, *, env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecDownload:  # fmt: skip
        """Run `command` as `exec` does (the default user, from the workdir, under
        `timeout`), then, unless it timed out, `download` `src` to `dst` (the
        verifier's test.sh and its /logs/verifier). A refused download is returned,
        not raised: the command's output is kept either way.

        A provider may do both in one command: what the command started must then
        be gone before the download reads `src`, as when they are two commands."""
        result = await self.exec(command, env=env, timeout=timeout)
        if result.timed_out:
            return ExecDownload(result)
        try:
            skipped = await self.download(src, dst)
        except (DownloadMissing, UnsafeDownload) as exc:
            return ExecDownload(result, refused=exc)
        return ExecDownload(result, skipped)

    async def set_network(self, network: Network) -> None:
        """Open or close the network for the commands that follow (a phase's own
        network: public, none or an allowlist). Providers without `dynamic_network`
        refuse a change."""
        if network == self.network:
            return
        if not self.dynamic_network:
            raise UnsupportedFeature(
                f"the {self.name} provider cannot change the network of a running sandbox"
            )
        self.network = network

    def direct_hosts(self) -> tuple[str, ...]:
        """The hosts the sandbox's processes reach without its egress proxy (their
        NO_PROXY): its loopback; a compose sandbox's services too."""
        return NO_PROXY_HOSTS

    def egress_denials(self) -> list[str]:
        """The requests its egress proxy denied so far, one line each (oldest
        first); empty without an allowlisted network."""
        return []

    async def default_owner(self) -> User | None:
        """Who must own files Helios uploads for a phase that runs as the sandbox's
        default user: that user, or None when it is root (it reads everything)."""
        if not self.supports_users:
            return None
        probe = await self.exec("id -u", cwd="/", timeout=60)
        uid = probe.stdout.strip()
        if not probe.ok or not uid.isdigit():
            raise EnvironmentExecError(f"cannot tell the sandbox's user: {probe.stderr[:200]}")
        return None if uid == "0" else int(uid)

    async def give_to(self, path: str, user: User) -> None:
        """Make `path` (recursively) the user's, so files Helios uploaded for a phase
        that runs as `user` are theirs to read (and write)."""
        if not self.supports_users:
            raise UnsupportedFeature(f"the {self.name} provider cannot run commands as {user!r}")
        quoted = shlex.quote(str(user))
        result = await self.exec(f"chown -R -- {quoted} {shlex.quote(path)}", cwd="/", user=ROOT)
        if not result.ok:
            raise EnvironmentExecError(
                f"cannot give {path} to user {user!r}: {result.stderr.strip()[:200]}"
            )

    async def stop_processes(self) -> None:
        """Kill every process in the sandbox, except the services (`start_service`),
        and check that none is left.

        The episode calls it after the agent and before the scorer, so nothing
        the agent started can run while it is scored. Raise
        `EnvironmentExecError` if a process survives."""

    async def start_service(
        self,
        name: str,
        command: str,
        *,
        env: dict[str, str] | None = None,
        user: User | None = None,
    ) -> None:
        """Start `command` (`sh -c`, from /) as a long-lived process that Helios owns,
        not the agent: it outlives every command, and `stop_processes` spares it and
        those of its descendants that run one of its own processes' programs (the
        same executable file, along a chain of spared parents); a shell or any other
        program it spawned dies. Its own processes are the one started and, while
        that is still the `sh` running `command` (Debian's dash does not exec a
        command's last program: write `exec PROGRAM ...`), the programs that `sh`
        started. Its output goes to `/logs/helios/services/<name>.log`. It runs as
        `user` (None: the sandbox's default user, never the phase's: one user's
        processes may signal and trace each other) with the sandbox's variables
        plus `env`.

        `name` is a short word (letters, digits, `-`, `_`), unique in the sandbox.
        A service that dies stays dead (`service_running` tells). Raise
        `UnsupportedFeature` where the provider (or this path of it) has none,
        `EnvironmentExecError` if it cannot start."""
        raise UnsupportedFeature(f"the {self.name} provider cannot run services")

    async def service_running(self, name: str) -> bool:
        """Whether the service `name` started by `start_service` is still alive
        (the process Helios started, never another one with its pid)."""
        return False

    def exchange_dir(self) -> tuple[str, Path] | None:
        """A folder for sockets shared with the host: its path inside the sandbox
        and the same folder's path on the host (None: the provider has none), so a
        host process can connect to a unix socket a service creates there.

        The sandbox's processes can write it: anything in it may have been
        replaced by the agent (a symlink, another socket, a file). A caller must
        check what it opens (`lstat`: a socket, not a link; served by a process
        of this sandbox) and never follow a link out of it."""
        return None

    @abstractmethod
    async def stop(self) -> None:
        """Tear the sandbox down. Idempotent; safe after a failed or cancelled start."""
