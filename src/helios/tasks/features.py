"""Which schema features a task uses, and which of them Helios cannot honour.

A task that needs something Helios cannot give (a GPU...) is
not run: it is reported as "unsupported: <field>", one line, and counted apart
from invalid tasks. What a task offers its agent (skills, MCP servers) limits
only the agents that cannot take it (`agent_limits`, judged per agent when a run
is planned). Some limits depend on the provider: a network that changes between
phases needs one that can switch it (local can; docker cannot, as in Harbor, but
for an allowlisted sandbox, whose proxy takes each phase's allowlist or none), an
allowlist one with an egress proxy (`Environment.supports_allowlist`), users need
one that can run commands as another user, and compose services (a task's
`environment/docker-compose.yaml`) need docker.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from helios.agents.base import Agent
from helios.environments.base import Environment
from helios.environments.egress import AllowList, Network
from helios.models.routing import PROVIDER_KEYS
from helios.tasks.dockerfile import dockerfile_entrypoint
from helios.tasks.network import phase_network, sandbox_network
from helios.tasks.phases import network_override
from helios.tasks.schema import (
    AgentConfig,
    ArtifactConfig,
    EnvironmentConfig,
    StepConfig,
    TaskConfig,
    VerifierConfig,
    as_artifact,
)
from helios.tasks.schema_env import host_variables
from helios.tasks.task import Task
from helios.tasks.task_layout import has_compose, step_verifier

SUPPORTED_MAJOR = "1"


@dataclass(frozen=True)
class Unsupported:
    field: str
    reason: str

    def __str__(self) -> str:
        return f"unsupported: {self.field} ({self.reason})"


def features_used(task: Task) -> list[str]:
    """Short names of the schema features beyond the basics that the task uses."""
    c = task.config
    verifiers = [c.verifier, *(step_verifier(c, s) for s in c.steps or [])]
    agents = [c.agent, *(s.agent for s in c.steps or [])]
    checks = {
        "multi-step": bool(c.steps),
        "min_reward": any(s.min_reward is not None for s in c.steps or []),
        "agent user": any(a.user is not None for a in agents),
        "verifier user": any(v.user is not None for v in verifiers),
        "workdir": c.environment.workdir is not None,
        "environment env": bool(c.environment.env),
        "solution env": bool(c.solution.env),
        "verifier env": any(v.env for v in verifiers),
        "separate verifier": any(v.separate for v in verifiers),
        "artifacts": bool(c.artifacts) or any(s.artifacts for s in c.steps or []),
        "healthcheck": c.environment.healthcheck is not None
        or any(s.healthcheck is not None for s in c.steps or []),
        "network_mode": c.environment.network_mode is not None
        or any(x.network_mode is not None for x in [*agents, *verifiers]),
        "allowlist": any(isinstance(n, AllowList) for _, n in _networks(c)),
        "docker_image": c.environment.docker_image is not None,
        "skills_dir": c.environment.skills_dir is not None,
        "mcp_servers": bool(c.environment.mcp_servers),
        "desktop": c.desktop is not None,
        "compose": has_compose(task.environment_dir),
        "verifier collect": any(v.collect for v in verifiers),
    }
    return [name for name, used in checks.items() if used]


def unsupported(task: Task, provider: type[Environment] | None = None) -> list[Unsupported]:
    """What the task asks for that Helios (or `provider`) cannot honour."""
    found = list(_task_limits(task))
    if provider is not None:
        found += _provider_limits(task, provider)
    return found


def _task_limits(task: Task) -> Iterator[Unsupported]:
    c = task.config
    major = c.schema_version.split(".", 1)[0]
    if major != SUPPORTED_MAJOR:
        yield Unsupported("schema_version", f"{c.schema_version}: Helios reads 1.x")
    yield from _environment_limits(c.environment, "environment", task.host_env)
    for where, verifier in _verifiers(c):
        if verifier.environment is not None:
            yield from _environment_limits(
                verifier.environment, f"{where}.environment", task.host_env
            )
            if verifier.environment.desktop is not None:
                yield Unsupported(f"{where}.environment.desktop", "a separate verifier has none")


def _environment_limits(
    env: EnvironmentConfig, where: str, host_env: Mapping[str, str]
) -> Iterator[Unsupported]:
    if env.os == "windows":
        yield Unsupported(f"{where}.os", "windows containers")
    if env.gpus:
        yield Unsupported(f"{where}.gpus", "no GPU scheduling")
    if env.gpu_types:
        yield Unsupported(f"{where}.gpu_types", "no GPU scheduling")
    if env.tpu is not None:
        yield Unsupported(f"{where}.tpu", "no TPU scheduling")
    for key, variable in host_variables(env.env).items():
        if variable in PROVIDER_KEYS:
            yield Unsupported(
                f"{where}.env.{key}",
                f"${{{variable}}} is a model provider's key: Helios never passes one in",
            )
        elif variable not in host_env:
            yield Unsupported(
                f"{where}.env.{key}",
                f"${{{variable}}} from the host: pass it with --pass-env {variable} "
                "(set on the host)",
            )


def agent_limits(task: Task, agent: type[Agent]) -> list[Unsupported]:
    """What the task offers its agent that `agent` does not take (`Agent.takes`):
    the task is unsupported for that agent alone."""
    c = task.config
    found: list[Unsupported] = []
    tables = [("environment", c.environment)] + [
        (f"{where}.environment", v.environment) for where, v in _verifiers(c)
        if v.environment is not None
    ]  # fmt: skip
    for where, env in tables:
        if env.skills_dir is not None and "skills" not in agent.takes:
            found.append(
                Unsupported(f"{where}.skills_dir", f"the {agent.name} agent takes no skills")
            )
        if env.mcp_servers and "mcp" not in agent.takes:
            found.append(
                Unsupported(f"{where}.mcp_servers", f"the {agent.name} agent takes no MCP servers")
            )
        elif "mcp-http" not in agent.takes:
            found += [
                Unsupported(
                    f"{where}.mcp_servers[{i}].url",
                    f"the {agent.name} agent reaches MCP servers over stdio only "
                    "(`command`), not over HTTP",
                )
                for i, m in enumerate(env.mcp_servers) if m.url is not None or m.command is None
            ]  # fmt: skip
    return found


def _provider_limits(task: Task, provider: type[Environment]) -> list[Unsupported]:
    c = task.config
    found: list[Unsupported] = []
    compose = _compose_use(task)
    if compose is not None and not provider.supports_compose:
        found.append(Unsupported(compose, f"the {provider.name} provider cannot run compose "
                                          "services; docker can"))  # fmt: skip
    if provider.ignores_entrypoint:
        separate = any(verifier.separate for _, verifier in _verifiers(c))
        dockerfiles = (task.dockerfile, task.tests_dir / "Dockerfile" if separate else None)
        for dockerfile in dockerfiles:
            if dockerfile is not None and dockerfile_entrypoint(dockerfile) is not None:
                found.append(Unsupported(
                    f"{dockerfile.parent.name}/Dockerfile ENTRYPOINT",
                    f"the {provider.name} provider does not run an image's ENTRYPOINT (its "
                    "daemon is the sandbox's first process); docker runs it, as Harbor does",
                ))  # fmt: skip
    if c.desktop is not None and not provider.supports_services:
        found.append(Unsupported(
            "environment.desktop", f"the {provider.name} provider cannot run desktop services"
        ))  # fmt: skip
    if not provider.supports_users:
        for where, phase in _phases(c):
            if getattr(phase, "user", None) is not None:
                found.append(
                    Unsupported(f"{where}.user", f"the {provider.name} provider has no users")
                )
    if not provider.supports_allowlist:
        why = f"the {provider.name} provider has no proxy"
        found += [Unsupported(f"{where}.allowed_hosts", why)
                  for where, network in _networks(c) if isinstance(network, AllowList)]  # fmt: skip
    if not provider.dynamic_network:
        baseline = task.sandbox_spec().network
        for where, phase in [(w, p) for w, p in _phases(c) if isinstance(p, AgentConfig)]:
            change = network_override(phase.network_mode, baseline, phase.allowed_hosts)
            if not _switchable(provider, baseline, change):
                found.append(_switch(where, provider))
        for where, verifier in _verifiers(c):
            own = baseline
            if verifier.separate:  # its own sandbox starts with its own network
                own = sandbox_network(verifier.environment or c.environment, task.network_default)
            change = network_override(verifier.network_mode, own, verifier.allowed_hosts)
            if not _switchable(provider, own, change):
                found.append(_switch(where, provider))
    return found


def _switchable(provider: type[Environment], baseline: Network, change: Network | None) -> bool:
    """No change, or one the sandbox's egress proxy makes (an allowlisted sandbox's
    phase with an allowlist or no network)."""
    if change is None:
        return True
    return provider.supports_allowlist and isinstance(baseline, AllowList) and change is not True


def _networks(c: TaskConfig) -> Iterator[tuple[str, Network | None]]:
    """Each table's own network (None: it names none)."""
    yield "environment", phase_network(c.environment.network_mode, c.environment.allowed_hosts)
    for where, phase in _phases(c):
        yield where, phase_network(phase.network_mode, phase.allowed_hosts)
    for where, verifier in _verifiers(c):
        if verifier.environment is not None:
            env = verifier.environment
            yield f"{where}.environment", phase_network(env.network_mode, env.allowed_hosts)


def _compose_use(task: Task) -> str | None:
    """The first field or file that needs compose services, if any."""
    c = task.config
    if has_compose(task.environment_dir):
        return "environment/docker-compose.yaml"
    for where, verifier in _verifiers(c):
        if verifier.separate and has_compose(task.tests_dir):
            return "tests/docker-compose.yaml"
        if any(item.service != "main" for item in verifier.collect):
            return f"{where}.collect"
    for index, item in enumerate(_all_artifacts(c)):
        if item.service not in (None, "main"):
            return f"artifacts[{index}].service"
    return None


def _switch(where: str, provider: type[Environment]) -> Unsupported:
    return Unsupported(
        f"{where}.network_mode",
        f"the {provider.name} provider cannot change a running sandbox's network",
    )


def _phases(c: TaskConfig) -> Iterator[tuple[str, AgentConfig | VerifierConfig]]:
    yield "agent", c.agent
    yield "verifier", c.verifier
    for index, step in enumerate(c.steps or []):
        yield f"steps[{index}].agent", step.agent
        yield f"steps[{index}].verifier", step.verifier


def _verifiers(c: TaskConfig) -> Iterator[tuple[str, VerifierConfig]]:
    yield "verifier", c.verifier
    for index, step in enumerate(c.steps or []):
        yield f"steps[{index}].verifier", step_verifier(c, step)


def _all_artifacts(c: TaskConfig) -> list[ArtifactConfig]:
    steps: list[StepConfig] = c.steps or []
    return [as_artifact(a) for a in [*c.artifacts, *(a for s in steps for a in s.artifacts)]]


def caveats(task: Task, provider: type[Environment]) -> list[str]:
    """What the provider honours only in part for this task (the task still runs)."""
    notes: list[str] = []
    if provider.name != "local":
        return notes
    c = task.config
    if task.dockerfile is not None:
        notes.append("environment/Dockerfile is not run (its folder's files are copied)")
    if any(getattr(p, "user", None) is not None for _, p in _phases(c)):
        notes.append("users are identities only: one host user owns the sandbox")
    if any(v.separate for _, v in _verifiers(c)) and task.tests_hashes:
        notes.append("tests/Dockerfile is not run (tests/ is uploaded to /tests)")
    if c.desktop is not None:
        notes.append("the desktop runs the host's programs (Xvfb, chromium, xdotool...)")
    return notes
