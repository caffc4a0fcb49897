"""Installed agents: third-party agents (Claude Code, ...) that Helios installs from
their authors' registry and runs headless inside the trial's sandbox.

A subclass says four things, and the base does the rest:

- **how to install**: `registry` ("npm" or "pip"), `package` and `default_version`
  (`--agent-version` / `agent_settings={"version": ...}` pins another), and
  `payload`, the part of the install the sandbox needs;
- **the command line**: `command(instruction, model, home)`, a shell command run
  in the task's working directory as the task's agent user, under the agent timeout;
- **the environment**: `environment(model)`, the variables that carry the model's
  endpoint and key (`key_variable`) to that one process;
- **the log to ATIF**: `convert(log, ctx)`, the agent's own log turned into Helios
  messages (the trial writes them as `agent/trajectory.json`) with usage added to
  `ctx.usage`.

The install is made once per agent and version in the host's cache
(`installed.cache`), before the sandbox is built (`prepare_sandbox`), and shown
to the sandbox at `/opt/helios-agents/<name>-<version>`: bound read-only on
local, baked into an image derived from the task's on docker (once per image and
install), uploaded where a provider can do neither.

**The model route.** The agent calls its model (`endpoint`) from inside the
sandbox. Where the sandbox's network is not public (none, or an allowlist) the
agent's one process gets a route to that `host:port` alone, for the agent's run
only: the sandbox's egress proxy (`environments.egress`) takes the phase's
allowlist plus that endpoint, and the process gets the proxy's variables with
the endpoint's host out of NO_PROXY (so a loopback endpoint, the host's, goes
through the proxy; the sandbox's own services on `localhost` stay direct). A provider
that cannot switch networks on a running sandbox (docker) is started behind a
proxy that denies everything, and the agent's run opens the endpoint on it.
An install that fails is an infrastructure error that ends with the installer's
last lines. The agent's exit code proves nothing: the verifier decides. Its raw
log is kept in `agent/<name>.log`, with the key redacted; `agent/install.json` says
what the install cost the trial (nothing when it was cached). An agent stopped at its
timeout keeps its steps so far: a streamed log as it is, and a log written to a file
in the sandbox through `salvage`, a command run once the agent is stopped.
"""

from __future__ import annotations

import json
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from helios.agents.base import Agent, AgentContext, AgentOutcome
from helios.agents.installed.cache import (
    Installed,
    Package,
    check_reachable,
    ensure_installed,
)
from helios.environments.base import Environment
from helios.environments.egress import DENY_ALL, NO_PROXY_HOSTS, AllowList, Network
from helios.environments.registry import provider_class
from helios.environments.spec import SandboxSpec
from helios.errors import ConfigError, EnvironmentExecError, HeliosError, UnsupportedFeature
from helios.failures import ErrorInfo
from helios.models.base import Message
from helios.models.routing import ModelSpec
from helios.secrets import redact

if TYPE_CHECKING:
    from helios.models.services import ModelServices

#: where an install is shown inside the sandbox
MOUNT_ROOT = "/opt/helios-agents"
#: how long before the agent timeout the agent is stopped (at most a tenth of it)
STOP_MARGIN = 5.0
#: at least this long (at most a quarter of the timeout) for an agent whose log is
#: salvaged after it was stopped (`InstalledAgent.salvage`)
SALVAGE_MARGIN = 2.0
#: the settings every installed agent takes
SETTINGS = frozenset({"version"})


class InstalledAgent(Agent):
    uses_model: ClassVar[bool] = True
    #: "npm" or "pip"
    registry: ClassVar[str] = "npm"
    #: the package's name in its registry
    package: ClassVar[str]
    default_version: ClassVar[str]
    #: the part of the install the sandbox needs, relative to the install folder
    payload: ClassVar[str] = "."
    #: the variable that carries the model's key (redacted from every output)
    key_variable: ClassVar[str]
    #: pinned packages installed beside `package` (a runtime the image may lack)
    extras: ClassVar[tuple[str, ...]] = ()
    #: the Python a pip package is installed with and runs on ("3.13"; "": Helios's own)
    python_version: ClassVar[str] = ""

    def __init__(self, **settings: Any) -> None:
        unknown = sorted(set(settings) - SETTINGS)
        if unknown:
            raise ConfigError(f"{self.name} takes no setting {unknown[0]!r} (it takes: version)",
                              field="agent_settings")  # fmt: skip
        version = settings.get("version") or self.default_version
        if not isinstance(version, str) or not version.strip() or " " in version:
            raise ConfigError(f"bad {self.name} version {version!r}", field="--agent-version")
        super().__init__(**settings)
        self.agent_version = version

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version,
                "package": self._package().pinned,
                "settings": self.settings}  # fmt: skip

    @property
    def home(self) -> str:
        """Where the install is, inside the sandbox."""
        return f"{MOUNT_ROOT}/{self.name}-{self.agent_version}"

    @abstractmethod
    def command(self, instruction: str, model: ModelSpec, home: str) -> str:
        """The shell command that runs the agent headless on `instruction`; its
        standard output is the log `convert` reads."""

    @abstractmethod
    def environment(self, model: ModelSpec) -> dict[str, str]:
        """The variables the agent needs for `model` (endpoint, key)."""

    @abstractmethod
    def convert(self, log: str, ctx: AgentContext) -> list[Message]:
        """The agent's log as Helios messages; adds the usage it reports to `ctx.usage`."""

    def salvage(self, home: str) -> str | None:
        """A shell command that prints the structured log the agent had written so
        far (what `convert` reads), run after the agent was stopped at its timeout;
        None when its standard output is the whole log (a streamed one, kept anyway)."""
        return None

    def endpoint(self, model: ModelSpec) -> str | None:
        """The URL the agent calls its model at, from inside the sandbox: what
        opens its route (None: no route is needed). The model's base URL, else its
        provider's public API, unless a subclass says otherwise."""
        return model.url

    def _package(self) -> Package:
        return Package(self.registry, self.package, self.agent_version, self.extras,
                       self.python_version)  # fmt: skip

    async def _install(self) -> tuple[Installed, Path]:
        """The install (made now if the cache has none) and its payload's folder."""
        installed = await ensure_installed(self.name, self._package())
        payload = (installed.folder / self.payload).resolve()
        check_reachable(payload)
        return installed, payload

    def _record_install(self, logs_dir: Path | None, installed: Installed,
                        **more: Any) -> None:  # fmt: skip
        """`install.json`: what the install cost the trial (`seconds`, 0 when
        cached; the first record of a trial stands, the one made before the
        sandbox) and `more` (how it reached the sandbox, and in how long)."""
        if logs_dir is None:
            return
        logs_dir.mkdir(parents=True, exist_ok=True)
        path = logs_dir / "install.json"
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            record = {"package": self._package().pinned, "cached": installed.seconds == 0.0,
                      "seconds": round(installed.seconds, 3)}  # fmt: skip
        path.write_text(json.dumps({**record, **more}) + "\n")

    async def prepare_sandbox(
        self,
        sandbox: SandboxSpec,
        *,
        provider: str,
        services: ModelServices | None,
        logs_dir: Path | None,
    ) -> SandboxSpec:
        """Install before the sandbox is built (an install failure is then an
        infrastructure error of the environment phase), name the install among the
        sandbox's `agent_installs`, and, where the network cannot be switched on a
        running sandbox, start it behind a proxy that denies all (the run opens the
        model's endpoint on it)."""
        installed, payload = await self._install()
        self._record_install(logs_dir, installed)
        installs = (*sandbox.agent_installs, (payload, self.home))
        network = sandbox.network
        if services is not None and network is False and self.endpoint(services.spec):
            try:
                kind = provider_class(provider)
            except ConfigError:
                kind = None
            if kind is not None and kind.supports_allowlist and not kind.dynamic_network:
                network = DENY_ALL
        return replace(sandbox, agent_installs=installs, network=network)

    async def _open_route(self, env: Environment, model: ModelSpec) -> Network | None:
        """Open the model's route for the agent's run: the network to return to
        after it, or None when nothing was changed (a public network, no endpoint)."""
        url = self.endpoint(model)
        network = env.network
        if not url or network is True:
            return None
        parts = urlsplit(url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = None
        if not parts.hostname or port is None:
            raise ConfigError(f"the {self.name} agent's model endpoint {url!r} names no host",
                              field="--base-url")  # fmt: skip
        refused = (f"the {env.name} provider cannot give the {self.name} agent a route to "
                   f"its model ({parts.hostname}:{port}) in this sandbox, which has no public "
                   "network")  # fmt: skip
        if not env.supports_allowlist:
            raise EnvironmentExecError(refused)
        own = (network if isinstance(network, AllowList) else DENY_ALL).with_endpoint(
            parts.hostname, port)  # fmt: skip
        for host, more in self._more_routes(env):
            own = own.with_endpoint(host, more)
        try:
            await env.set_network(own)
        except UnsupportedFeature as exc:  # a compose task's, on docker
            raise EnvironmentExecError(f"{refused}: {exc}") from None
        return network

    def more_routes(self) -> list[str]:
        """URLs besides its model's that the agent calls from the sandbox (a task's
        HTTP MCP servers): routed as its model's endpoint is, for its run only."""
        return []

    def _more_routes(self, env: Environment) -> list[tuple[str, int]]:
        """`more_routes`' host and port each, less the sandbox's own services (a
        compose sidecar is reached directly) and a URL that names no host."""
        own = set(env.direct_hosts()) - set(NO_PROXY_HOSTS)
        found: list[tuple[str, int]] = []
        for url in self.more_routes():
            parts = urlsplit(url)
            try:
                port = parts.port or (443 if parts.scheme == "https" else 80)
            except ValueError:
                continue
            if parts.hostname and parts.hostname not in own:
                found.append((parts.hostname.lower(), port))
        return found

    async def run(self, instruction: str, env: Environment, ctx: AgentContext) -> AgentOutcome:
        if ctx.services is None:
            raise ConfigError(f"the {self.name} agent needs a model (--model)", field="--model")
        spec = ctx.services.spec
        started = time.monotonic()
        installed, payload = await self._install()
        # in the sandbox: bound (local), in its image (docker), else uploaded now
        placed = "mounted"
        if not await env.mount_readonly(payload, self.home):
            await env.upload(payload, self.home)
            placed = "uploaded"
        self._record_install(ctx.logs_dir, installed, placed=placed,
                             place_seconds=round(time.monotonic() - started, 3))  # fmt: skip
        variables = {**ctx.exec_env, **self.environment(spec)}
        command = self.command(instruction, spec, self.home)
        before = await self._open_route(env, spec)
        if before is not None:
            # the proxy's variables (the sandbox's, under an allowlist) carry the
            # model's calls; a loopback endpoint (the host's, not the sandbox's) is
            # taken out of NO_PROXY, which keeps the sandbox's own services direct
            routed = {(urlsplit(self.endpoint(spec) or "").hostname or "").lower(),
                      *(host for host, _ in self._more_routes(env))}  # fmt: skip
            direct = ",".join(h for h in env.direct_hosts() if h not in routed)
            variables.update({"NO_PROXY": direct, "no_proxy": direct})
        # stopped a little before the trial's own timeout, so its log is still read
        deadline = started + ctx.timeout
        salvage = self.salvage(self.home)
        margin = min(STOP_MARGIN, 0.1 * ctx.timeout)
        if salvage is not None:
            margin = min(STOP_MARGIN, max(margin, min(SALVAGE_MARGIN, 0.25 * ctx.timeout)))
        try:
            result = await env.exec(
                command, cwd=ctx.workdir, env=variables,
                timeout=max(1.0, deadline - time.monotonic() - margin),
            )  # fmt: skip
        finally:
            if before is not None:
                await env.set_network(before)
        stdout = result.stdout
        if result.timed_out and salvage is not None:
            stdout += await self._salvaged(env, salvage, ctx, variables, deadline)
        log = redact(stdout)
        if ctx.logs_dir is not None:
            ctx.logs_dir.mkdir(parents=True, exist_ok=True)
            (ctx.logs_dir / f"{self.name}.log").write_text(log)
            # the exit code proves nothing (the verifier decides) but helps a reader
            ending = "timed out" if result.timed_out else f"exit code {result.exit_code}"
            (ctx.logs_dir / f"{self.name}.stderr").write_text(
                redact(result.stderr) + f"\n[helios] {self.name} ended: {ending}\n"
            )
        messages = [Message("user", instruction), *self.convert(log, ctx)]
        ctx.conversation.extend(messages)
        error = None
        if result.timed_out:
            error = ErrorInfo(type="AgentTimeout", message=f"{self.name} ran past the "
                              f"agent timeout ({ctx.timeout:.0f} s) and was stopped",
                              phase="agent")  # fmt: skip
        turns = sum(1 for m in messages if m.role == "assistant")
        return AgentOutcome(error=error, n_turns=turns, conversation=ctx.conversation)


    async def _salvaged(self, env: Environment, command: str, ctx: AgentContext,
                        variables: dict[str, str], deadline: float) -> str:  # fmt: skip
        """What `salvage` prints, within the time left before the trial's timeout; ""
        when it cannot be had (the raw log is kept all the same)."""
        left = deadline - time.monotonic() - 0.25
        try:
            done = await env.exec(command, cwd=ctx.workdir, env=variables,
                                  timeout=max(0.5, left))  # fmt: skip
        except HeliosError:
            return ""
        return "" if done.timed_out else "\n" + done.stdout


def content_text(content: Any) -> str:
    """A logged message's content as text: a string, the text parts of a list, else JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else json.dumps(content)


def counts(raw: Any) -> Callable[[str], int]:
    """A reader of the token counts in a log's usage object: a key's integer, else 0."""
    found = raw if isinstance(raw, dict) else {}

    def count(key: str) -> int:
        value = found.get(key)
        return value if isinstance(value, int) else 0

    return count


def tool_arguments(arguments: Any) -> dict[str, Any] | None:
    """A logged tool call's arguments: an object, or a string of one (a string that is
    not JSON is kept as `{"raw": …}`); None for anything else."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {"raw": arguments}
    return arguments if isinstance(arguments, dict) else None


def json_record(line: str) -> dict[str, Any] | None:
    """One line of a JSON-lines log as an object; None for a line that is not one."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
