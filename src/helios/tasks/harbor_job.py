"""Harbor's job config (its `JobConfig`, as YAML or JSON) read as Helios settings.

A pure translation, for `helios batch --config` to accept a Harbor user's job file as it
is: `translate_harbor_job(data)` takes the parsed file and returns a `HarborJob`:

- `settings`: a plain dict of what Helios can run:
  `job_name`, `jobs_dir` (the output folder), `n_attempts`, `n_concurrent_trials`,
  `timeout_multipliers` (`all`, `agent`, `verifier`, `agent_setup`, `environment_build`;
  None where unset), `agents` (`name`, `model_name`, `kwargs`, `base_url`; Harbor's ACP
  agent, `acp:ID` or `acp` with `kwargs.registry_spec`, is Helios's `acp:ID`), `datasets`
  (`path`), `tasks` (`path`), `artifacts` (a path, or `source` and `destination`),
  `provider` (the sandbox, when Harbor's environment type is one Helios has) and `quiet`;
- `unsupported`: one line per field the file sets that Helios does not run, to be shown
  before anything runs. A field left at Harbor's default is not named.

A value of the wrong type is an InputError naming the file and the field. Nothing is
read from disk here but the file itself (`load_harbor_job`): paths stay as written,
relative to where the job runs, as Harbor reads them.

Harbor's field names and defaults are those of Harbor 0.25's `JobConfig` (PyPI `harbor`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helios.errors import InputError
from helios.tasks.job import JobConfig

#: Harbor's agent name -> the Helios agent that runs it (a name not here is kept as it is)
AGENTS = {
    "oracle": "oracle",
    "nop": "nop",
    "terminus": "tool",
    "terminus-1": "tool",
    "terminus-2": "tool",
}
#: Harbor's ACP agent: `name: acp` with `kwargs.registry_spec: ID[@VERSION]`, or the
#: shorthand `name: acp:ID[@VERSION]`, which is Helios's own `--agent acp:ID` too
ACP = "acp"
ACP_PREFIX = "acp:"
#: Harbor's ACP agent's other kwargs -> their default (Helios allows every permission
#: and picks an API-key auth method, as Harbor's defaults do)
ACP_KWARGS: dict[str, Any] = {
    "registry_entry": None, "registry_entry_path": None, "registry_ref": "main",
    "registry_cache_dir": None, "distribution_preference": None, "target_platform": None,
    "source": None, "permission_mode": "allow", "authenticate_method_id": None,
    "auth_policy": "auto",
}  # fmt: skip
#: Harbor's environment types Helios has a provider for (the same name)
PROVIDERS = ("docker", "daytona")
#: the multipliers' names in Harbor -> in `settings["timeout_multipliers"]`
MULTIPLIERS = {
    "timeout_multiplier": "all",
    "agent_timeout_multiplier": "agent",
    "verifier_timeout_multiplier": "verifier",
    "agent_setup_timeout_multiplier": "agent_setup",
    "environment_build_timeout_multiplier": "environment_build",
}
#: a top-level field Helios does not run -> its Harbor default (set to it, it is not named)
_UNSUPPORTED_TOP: dict[str, Any] = {
    "install_only": False,
    "skip_credential_checks": False,
    "debug": False,
    "verifier": {},
    "metrics": [],
    "user_agent": None,
    "extra_instruction_paths": [],
    "extra_instructions": [],
    "source_jobs": [],
    "plugins": None,
}
#: Harbor's retry defaults: anything else is named
_RETRY_DEFAULTS: dict[str, Any] = {"max_retries": 0}
_AGENT_FIELDS = ("name", "model_name", "kwargs", "base_url")
_DATASET_FIELDS = ("path",)
_TASK_FIELDS = ("path", "source")
#: environment fields at these values say nothing Helios would do otherwise
_ENVIRONMENT_DEFAULTS: dict[str, Any] = {
    "force_build": False,
    "delete": True,
    "stream": False,
    "cpu_enforcement_policy": "auto",
    "memory_enforcement_policy": "auto",
    "suppress_override_warnings": False,
}


@dataclass
class HarborJob:
    """A Harbor job config as Helios settings, and the fields Helios leaves out."""

    settings: dict[str, Any]
    #: one line per field set that Helios does not run ("FILE: field X: …; ignored")
    unsupported: list[str] = field(default_factory=list)


def looks_like_harbor_job(data: object) -> bool:
    """Whether a parsed job file is Harbor's (its own field names), not Helios's."""
    if not isinstance(data, Mapping):
        return False
    harbor_only = {"n_concurrent_trials", "jobs_dir", "orchestrator", "datasets",
                   "timeout_multiplier", "job_name"}  # fmt: skip
    if harbor_only & set(data):
        return True
    agents = data.get("agents")
    return isinstance(agents, list) and any(
        isinstance(agent, Mapping) and "model_name" in agent for agent in agents
    )


def load_harbor_job(path: Path, *, known_agents: Collection[str] | None = None) -> HarborJob:
    """The Harbor job config in `path` (.yaml, .yml or .json), translated."""
    from helios.safe_json import JsonValueError, parse_json
    from helios.safe_yaml import load_yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read it ({exc})", file=str(path)) from None
    try:
        data = parse_json(text) if path.suffix == ".json" else load_yaml(text)
    except JsonValueError as exc:
        raise InputError(str(exc), file=str(path)) from None
    except Exception as exc:  # yaml.YAMLError and its bounds
        raise InputError(f"not YAML ({' '.join(str(exc).split())})", file=str(path)) from None
    return translate_harbor_job(data, source=str(path), known_agents=known_agents)


def translate_harbor_job(
    data: object, *, source: str = "job config", known_agents: Collection[str] | None = None
) -> HarborJob:
    """`data` (a parsed Harbor JobConfig) as Helios settings; `source` names the file in
    every message. With `known_agents`, an agent Helios does not have is named too."""
    return _Translation(source, known_agents).run(data)


class _Translation:
    def __init__(self, source: str, known_agents: Collection[str] | None) -> None:
        self.source = source
        self.known_agents = known_agents
        self.unsupported: list[str] = []

    # -- messages ---------------------------------------------------------------------
    def error(self, where: str, message: str) -> InputError:
        return InputError(message, file=self.source, field=where)

    def leave_out(self, where: str, why: str) -> None:
        self.unsupported.append(f"{self.source}: field {where}: {why}; ignored")

    # -- typed reads --------------------------------------------------------------------
    def mapping(self, value: object, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.error(where, f"must be a mapping, not {type(value).__name__}")
        for key in value:
            if not isinstance(key, str):
                raise self.error(where, f"has a key that is not text: {key!r}")
        return value

    def items(self, value: object, where: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(where, f"must be a list, not {type(value).__name__}")
        return value

    def text(self, value: object, where: str, *, optional: bool = True) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value:
            raise self.error(where, f"must be a non-empty string, not {value!r}")
        return value

    def integer(self, value: object, where: str, default: int) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.error(where, f"must be an integer >= 1, not {value!r}")
        return value

    def number(self, value: object, where: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.error(where, f"must be a number > 0, not {value!r}")
        return float(value)

    # -- the job ------------------------------------------------------------------------
    def run(self, data: object) -> HarborJob:
        job = dict(self.mapping(data, "(top)"))
        self._migrate_orchestrator(job)
        settings: dict[str, Any] = {
            "job_name": self.text(job.pop("job_name", None), "job_name"),
            "jobs_dir": self.text(job.pop("jobs_dir", None), "jobs_dir"),
            "n_attempts": self.integer(job.pop("n_attempts", None), "n_attempts", 1),
            "n_concurrent_trials": self.integer(
                job.pop("n_concurrent_trials", None), "n_concurrent_trials", 4
            ),
            "timeout_multipliers": {
                name: self.number(job.pop(key, None), key) for key, name in MULTIPLIERS.items()
            },
            "quiet": bool(job.pop("quiet", False)),
        }
        if settings["timeout_multipliers"]["all"] is None:
            settings["timeout_multipliers"]["all"] = 1.0
        settings["provider"] = self._environment(job.pop("environment", None))
        settings["agents"] = self._agents(job.pop("agents", None))
        settings["datasets"] = self._datasets(job.pop("datasets", None))
        settings["tasks"] = self._tasks(job.pop("tasks", None))
        settings["artifacts"] = self._artifacts(job.pop("artifacts", None))
        self._retry(job.pop("retry", None))
        for key, value in job.items():
            if key in _UNSUPPORTED_TOP:
                if not _is_default(value, _UNSUPPORTED_TOP[key]):
                    self.leave_out(key, "not supported by Helios")
            else:
                self.leave_out(key, "not a field of Harbor's JobConfig")
        return HarborJob(settings=settings, unsupported=self.unsupported)

    def _migrate_orchestrator(self, job: dict[str, Any]) -> None:
        """Harbor's older `orchestrator:` block holds n_concurrent_trials, quiet, retry."""
        if "orchestrator" not in job:
            return
        block = self.mapping(job.pop("orchestrator"), "orchestrator")
        for key in ("n_concurrent_trials", "quiet", "retry"):
            if key in block:
                job.setdefault(key, block[key])
        for key in block:
            if key not in ("n_concurrent_trials", "quiet", "retry", "type", "kwargs"):
                self.leave_out(f"orchestrator.{key}", "not supported by Helios")

    def _retry(self, value: object) -> None:
        if value is None:
            return
        retry = self.mapping(value, "retry")
        if not _is_default(retry.get("max_retries", 0), 0):
            self.leave_out(
                "retry.max_retries",
                "Helios reruns errored trials with `--resume RUN --retry-errors` instead",
            )

    def _environment(self, value: object) -> str | None:
        if value is None:
            return None
        env = self.mapping(value, "environment")
        kind = env.get("type")
        provider: str | None = None
        if kind is not None:
            kind = self.text(kind, "environment.type")
            if kind in PROVIDERS:
                provider = kind
            else:
                self.leave_out(
                    "environment.type",
                    f"Helios has no {kind!r} sandbox (it has {', '.join(PROVIDERS)} and local)",
                )
        for key, item in env.items():
            if key == "type":
                continue
            if not _is_default(item, _ENVIRONMENT_DEFAULTS.get(key, _NO_DEFAULT)):
                self.leave_out(f"environment.{key}", "not supported by Helios")
        return provider

    def _agents(self, value: object) -> list[dict[str, Any]]:
        listed = self.items(value, "agents") if value is not None else [{}]
        agents: list[dict[str, Any]] = []
        for index, item in enumerate(listed):
            where = f"agents[{index}]"
            agent = self.mapping(item, where)
            name = self.text(agent.get("name"), f"{where}.name")
            if name is None:
                if agent.get("import_path") is not None:
                    self.leave_out(
                        f"{where}.import_path",
                        "Helios runs its own agents and its plugins', not a Python import path",
                    )
                    continue
                name = "oracle"  # Harbor's default agent
            kwargs = agent.get("kwargs")
            kwargs = {} if kwargs is None else dict(self.mapping(kwargs, f"{where}.kwargs"))
            if name == ACP:
                name = self._acp_name(kwargs, where)
                if name is None:
                    continue
            helios_name = AGENTS.get(name, name)
            known = self.known_agents
            if known is not None and helios_name not in known and not name.startswith(ACP_PREFIX):
                self.leave_out(
                    f"{where}.name",
                    f"Helios has no agent {name!r} (it has {', '.join(sorted(known))})",
                )
                continue
            agents.append(
                {
                    "name": helios_name,
                    "model_name": self.text(agent.get("model_name"), f"{where}.model_name"),
                    "kwargs": kwargs,
                    "base_url": self.text(agent.get("base_url"), f"{where}.base_url"),
                }
            )
            for key, item in agent.items():
                if key not in _AGENT_FIELDS and key != "import_path" and not _is_default(item):
                    self.leave_out(f"{where}.{key}", "not supported by Helios")
        return agents

    def _acp_name(self, kwargs: dict[str, Any], where: str) -> str | None:
        """Harbor's `name: acp` agent as Helios's `acp:ID[@VERSION]`: its
        `kwargs.registry_spec` (the ID `acp:ID` names; Harbor's ACP-only kwargs go);
        None, and a line, for an entry or git source Helios cannot run."""
        spec = self.text(kwargs.pop("registry_spec", None), f"{where}.kwargs.registry_spec")
        for key in [k for k in kwargs if k in ACP_KWARGS]:
            if not _is_default(kwargs.pop(key), ACP_KWARGS[key]):
                self.leave_out(f"{where}.kwargs.{key}",
                               "Helios runs an ACP agent from its package (acp:ID)")  # fmt: skip
        if spec is None:
            self.leave_out(f"{where}.name", "Harbor's `acp` agent without `kwargs.registry_spec` "
                           "(Helios runs `acp:ID[@VERSION]`)")  # fmt: skip
            return None
        return spec if spec.startswith(ACP_PREFIX) else ACP_PREFIX + spec

    def _datasets(self, value: object) -> list[dict[str, Any]]:
        datasets: list[dict[str, Any]] = []
        for index, item in enumerate(self.items(value, "datasets")):
            where = f"datasets[{index}]"
            dataset = self.mapping(item, where)
            path = self.text(dataset.get("path"), f"{where}.path")
            if path is None:
                named = dataset.get("name")
                self.leave_out(
                    where,
                    f"the registry dataset {named!r}: Helios runs a "
                    "dataset from a folder; give its `path`",
                )
                continue
            datasets.append({"path": path})
            for key, entry in dataset.items():
                if key not in _DATASET_FIELDS and not _is_default(entry):
                    self.leave_out(
                        f"{where}.{key}",
                        "not supported by Helios (it runs every task under the path)",
                    )
        return datasets

    def _tasks(self, value: object) -> list[dict[str, Any]]:
        tasks: list[dict[str, Any]] = []
        for index, item in enumerate(self.items(value, "tasks")):
            where = f"tasks[{index}]"
            task = self.mapping(item, where)
            path = self.text(task.get("path"), f"{where}.path")
            if path is None or task.get("git_url") is not None:
                what = task.get("git_url") or task.get("name")
                self.leave_out(
                    where,
                    f"the task {what!r} from git or a registry: Helios "
                    "runs a task from a folder; give its `path`",
                )
                continue
            tasks.append({"path": path})
            for key, entry in task.items():
                if key not in _TASK_FIELDS and not _is_default(entry):
                    self.leave_out(f"{where}.{key}", "not supported by Helios")
        return tasks

    def _artifacts(self, value: object) -> list[str | dict[str, str]]:
        artifacts: list[str | dict[str, str]] = []
        for index, item in enumerate(self.items(value, "artifacts")):
            where = f"artifacts[{index}]"
            if isinstance(item, str):
                artifacts.append(self.text(item, where) or "")
                continue
            entry = self.mapping(item, where)
            source = self.text(entry.get("source"), f"{where}.source", optional=False)
            destination = self.text(entry.get("destination"), f"{where}.destination")
            assert source is not None
            artifacts.append(
                {"source": source}
                if destination is None
                else {"source": source, "destination": destination}
            )
            for key, part in entry.items():
                if key not in ("source", "destination") and not _is_default(part):
                    self.leave_out(f"{where}.{key}", "not supported by Helios")
        return artifacts


def _check_acp(name: str, source: str) -> None:
    """InputError (naming the file and the agent) for an `acp:` name Helios cannot run."""
    from helios.agents.installed.acp import parse_acp
    from helios.errors import ConfigError

    try:
        parse_acp(name)
    except ConfigError as exc:
        raise InputError(exc.message, file=source, field=f"agents ({name}).name") from None


_NO_DEFAULT = object()


def _is_default(value: object, default: object = _NO_DEFAULT) -> bool:
    """Whether `value` says nothing beyond Harbor's default: unset (None), the default
    when one is given, else an empty value (False, "", an empty list or mapping)."""
    if value is None or value == default:
        return True
    if default is not _NO_DEFAULT:
        return False
    return value is False or value == "" or value == [] or value == {}


def as_job_config(harbor: HarborJob, source: str) -> JobConfig:
    """The Helios job that runs `harbor`; what it cannot run is added to
    `harbor.unsupported`. Each agent keeps its own model (`JobAgent.model`): the run is
    Harbor's list of (agent, model) pairs, not every model × every agent. An agent
    without `model_name` (the oracle) runs once, beside the job's first model (which
    it does not use). The agent's and verifier's timeout multipliers are the job's; the
    agent setup's and environment build's are named. Paths are relative to the working
    folder, as Harbor reads them; one that does not exist is an InputError."""
    from pydantic import ValidationError

    s = harbor.settings

    def leave_out(where: str, why: str) -> None:
        harbor.unsupported.append(f"{source}: field {where}: {why}; ignored")

    sources = [("datasets", d["path"]) for d in s["datasets"]]
    sources += [("tasks", t["path"]) for t in s["tasks"]]
    for where, path in sources:
        if not Path(path).expanduser().exists():
            raise InputError(f"no such folder: {path}", file=source, field=f"{where}.path")
    factors = s["timeout_multipliers"]
    for name in ("agent_setup", "environment_build"):
        if factors[name] is not None and factors[name] != 1.0:
            key = next(k for k, n in MULTIPLIERS.items() if n == name)
            leave_out(key, "Helios scales the agent's and verifier's timeouts only")
    if factors["all"] != 1.0:
        harbor.unsupported.append(
            f"{source}: field timeout_multiplier: scales the agent's and verifier's timeouts "
            "only; the environment build keeps its task.toml timeout"
        )
    if s["artifacts"]:
        leave_out("artifacts", "Helios collects the artifacts a task.toml names, not a job's")
    models: dict[str, str | None] = {}
    for agent in s["agents"]:
        model, url = agent["model_name"], agent["base_url"]
        if model is None:
            if url is not None:
                leave_out(f"agents ({agent['name']}).base_url", "an endpoint needs a model_name")
            continue
        if model in models and url != models[model]:
            leave_out(f"agents ({agent['name']}).base_url",
                      f"{model} is given another endpoint first")  # fmt: skip
            continue
        models[model] = url
    first = next(iter(models), None)
    agents: list[dict[str, Any]] = []
    for agent in s["agents"]:
        entry: dict[str, Any] = {"name": agent["name"], "model": agent["model_name"] or first}
        if entry["name"].startswith(ACP_PREFIX):
            _check_acp(entry["name"], source)
        for key, value in agent["kwargs"].items():
            if key == "version" and isinstance(value, str) and value.strip():
                entry["version"] = value  # Harbor's installed agents' release, as --agent-version
            elif key == "max_turns":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    where = f"agents ({agent['name']}).kwargs.max_turns"
                    raise InputError(f"must be an integer >= 1, not {value!r}", file=source,
                                     field=where)  # fmt: skip
                entry["max_turns"] = value
            else:
                leave_out(f"agents ({agent['name']}).kwargs.{key}",
                          "Helios's agents take max_turns and version only from a job")  # fmt: skip
        agents.append(entry)
    output: str | None = s["jobs_dir"]
    if s["job_name"] is not None:
        output = str(Path(output or "jobs") / s["job_name"])
    try:
        return JobConfig.model_validate({
            "tasks": [{"path": path} for _, path in sources],
            "models": [{"model": m, **({"base_url": u} if u else {})} for m, u in models.items()],
            "agents": agents,
            "n_attempts": s["n_attempts"], "n_concurrent": s["n_concurrent_trials"],
            "provider": s["provider"], "output": output, "quiet": s["quiet"] or None,
            "name": s["job_name"],
            "timeout_multiplier": factors["all"],
            "agent_timeout_multiplier": factors["agent"],
            "verifier_timeout_multiplier": factors["verifier"],
        })  # fmt: skip
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        raise InputError(message, file=source, field=where) from None
