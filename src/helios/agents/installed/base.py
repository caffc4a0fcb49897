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
(`installed.cache`), and shown read-only to the sandbox at `/opt/helios-agents/
<name>-<version>` (bound on local; uploaded where the provider cannot bind).
An install that fails is an infrastructure error that ends with the installer's
last lines. The agent's exit code proves nothing: the verifier decides. Its raw
log is kept in `agent/<name>.log`, with the key redacted; `agent/install.json` says
what the install cost the trial (nothing when it was cached).
"""

from __future__ import annotations

import json
import time
from abc import abstractmethod
from typing import Any, ClassVar

from helios.agents.base import Agent, AgentContext, AgentOutcome
from helios.agents.installed.cache import Package, check_reachable, ensure_installed
from helios.environments.base import Environment
from helios.errors import ConfigError
from helios.failures import ErrorInfo
from helios.models.base import Message
from helios.models.routing import ModelSpec
from helios.secrets import redact

#: where an install is shown inside the sandbox
MOUNT_ROOT = "/opt/helios-agents"
#: how long before the agent timeout the agent is stopped (at most a tenth of it)
STOP_MARGIN = 5.0
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
                "package": self.install_package().pinned,
                "settings": self.settings}  # fmt: skip

    def install_package(self) -> Package:
        """What the cache installs for this agent and version."""
        return Package(self.registry, self.package, self.agent_version, self.extras)

    async def install_package_for(self, env: Environment) -> Package:
        """What the cache installs for this sandbox: `install_package()`, unless the
        agent asks the sandbox first (mini-swe-agent: the version of its Python)."""
        return self.install_package()

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

    async def run(self, instruction: str, env: Environment, ctx: AgentContext) -> AgentOutcome:
        if ctx.services is None:
            raise ConfigError(f"the {self.name} agent needs a model (--model)", field="--model")
        spec = ctx.services.spec
        started = time.monotonic()
        package = await self.install_package_for(env)
        installed = await ensure_installed(self.name, package)
        if ctx.logs_dir is not None:  # what the install cost this trial (0 when cached)
            ctx.logs_dir.mkdir(parents=True, exist_ok=True)
            record = {"package": package.pinned, "cached": installed.seconds == 0.0,
                      "seconds": round(installed.seconds, 3)}  # fmt: skip
            (ctx.logs_dir / "install.json").write_text(json.dumps(record) + "\n")
        payload = (installed.folder / self.payload).resolve()
        check_reachable(payload)
        if not await env.mount_readonly(payload, self.home):
            await env.upload(payload, self.home)
        variables = {**ctx.exec_env, **self.environment(spec)}
        # stopped a little before the trial's own timeout, so its log is still read
        left = ctx.timeout - (time.monotonic() - started)
        result = await env.exec(
            self.command(instruction, spec, self.home), cwd=ctx.workdir, env=variables,
            timeout=max(1.0, left - min(STOP_MARGIN, 0.1 * ctx.timeout)),
        )  # fmt: skip
        log = redact(result.stdout)
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
