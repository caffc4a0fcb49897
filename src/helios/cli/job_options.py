"""`helios batch --config JOB`, and `-m a,b` / `-a a,b`: a batch over several models
and agents.

One rule: a flag given on the command line wins over the job file's value, and the
job file's over the run's recorded one (`--resume`) and the default. Each model of
a job has its own endpoint, key variable and generation settings; each agent its
own settings. `-m a,b` is the same as a job that lists the models a and b, each
with the flags' endpoint, key and generation settings.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helios.cli.options import SELECTION_OPTIONS, _routing
from helios.engine.budget import BudgetConfig
from helios.engine.labels import RunLabels, checked
from helios.errors import ConfigError, InputError
from helios.models.base import GenerationConfig
from helios.models.services import ModelOptions
from helios.tasks.phases import TimeoutScale
from helios.tasks.plan import resolve_task_dirs
from helios.tasks.settings import AgentChoice, TaskBatchSettings

if TYPE_CHECKING:  # the job's models are built when a job file is read (--config)
    from helios.tasks.job import JobAgent, JobConfig, JobModel

#: a flag's name → the TaskBatchSettings field a job's value of the same name sets
SIMPLE = {
    "n_attempts": "n_attempts", "n_concurrent": "n_concurrent", "provider": "provider",
    "output": "output_dir", "pattern": "pattern", "workers": "workers",
    "executor": "executor", "ray_address": "ray_address", "quiet": "quiet",
    "retry_errors": "retry_errors", "network_default": "network_default",
    "pass_env": "pass_env",
}  # fmt: skip
#: the generation settings a job may give: its field → the GenerationConfig field
GENERATION = {"max_tokens": "max_tokens", "temperature": "temperature",
              "reasoning_effort": "reasoning_effort"}  # fmt: skip

Given = Callable[[str], bool]


def apply_job(
    settings: TaskBatchSettings, job: JobConfig, given: Given, source: Path
) -> TaskBatchSettings:
    """`settings` (the flags', and a resumed run's) with every value the job gives
    whose flag was not `given`. Agents that carry their own model run with it only
    (`pairs`), unless -m or -a name others."""
    pinned = any(a.model for a in job.agents) and not (given("model") or given("agent"))
    if pinned:
        from helios.tasks.job import JobModel

        listed = [m.model for m in job.models]
        extra = [JobModel(model=m) for m in dict.fromkeys(a.model for a in job.agents if a.model)
                 if m not in listed]  # fmt: skip
        job = job.model_copy(update={"models": [*job.models, *extra]})
    changes: dict[str, Any] = {
        field: getattr(job, name) if name != "output" else Path(str(job.output))
        for name, field in SIMPLE.items()
        if getattr(job, name) is not None and not given(name)
    }
    models = settings.models
    if job.prices is not None and not given("prices"):
        models = replace(models, prices=Path(job.prices))
    if job.cache is not None and not given("cache"):
        models = replace(models, cache=job.cache)
    models = replace(models, generation=_generation(models.generation, given, job))
    if job.models and not given("model"):
        every = [_model(models, entry, job, given, source, i) for i, entry in enumerate(job.models)]
        models = replace(every[0], others=every[1:])
    changes["models"] = models
    agent_settings = _agent_settings(settings.agent_settings, None, job, given, source, None)
    changes["agent_settings"] = agent_settings
    if job.agents and not given("agent"):
        first = {a.name: i for i, a in reversed(list(enumerate(job.agents)))}
        chosen = [
            AgentChoice(a.name, _agent_settings(settings.agent_settings, a, job, given, source, i))
            for i, a in enumerate(job.agents)
            if first[a.name] == i  # an agent listed once per model: its first entry's settings
        ]
        changes |= {"agent": chosen[0].name, "agent_settings": chosen[0].settings,
                    "other_agents": chosen[1:]}  # fmt: skip
    if job.name is not None or job.tags:
        name = settings.labels.name if given("name") else job.name or settings.labels.name
        tags = {**job.tags, **settings.labels.tags} if given("tags") else {
            **settings.labels.tags, **job.tags}  # fmt: skip
        try:
            changes["labels"] = checked(RunLabels(name=name, tags=tags))
        except ConfigError as exc:
            raise InputError(exc.message, file=str(source),
                             field="tags" if "tag" in (exc.field or "") else "name") from None
    selected: dict[str, Any] = {
        name: tuple(value) if isinstance(value, list) else value
        for name in SELECTION_OPTIONS
        if (value := getattr(job, name)) not in (None, []) and not given(name)
    }
    if selected:  # the job's selection where no flag gave it (issue 33)
        changes["selection"] = replace(settings.selection, **selected)
    changes["budget"] = _budget(settings, job, given, source)
    factors = (job.timeout_multiplier, job.agent_timeout_multiplier,
               job.verifier_timeout_multiplier)  # fmt: skip
    if any(f is not None for f in factors):
        changes["timeouts"] = TimeoutScale(factors[0] or 1.0, factors[1], factors[2])
    if pinned:
        names = [m.model for m in job.models]
        changes["pairs"] = list(dict.fromkeys(
            (model, a.name) for a in job.agents for model in ([a.model] if a.model else names)
        ))  # fmt: skip
    return replace(settings, **changes)


def _budget(settings: TaskBatchSettings, job: JobConfig, given: Given,
            source: Path) -> BudgetConfig:  # fmt: skip
    """The flags' budgets, with the job's where no flag was given."""
    b = settings.budget

    def pick(name: str, flag: Any) -> Any:
        value = getattr(job, name)
        return value if value is not None and not given(name) else flag

    try:
        return BudgetConfig.of(pick("max_cost", b.max_cost),
                               pick("max_total_tokens", b.max_tokens),
                               pick("max_duration", b.max_seconds),
                               pick("budget_hard", b.hard))  # fmt: skip
    except ConfigError as exc:
        raise InputError(exc.message, file=str(source), field="max_duration") from None


def _generation(
    base: GenerationConfig, given: Given, *levels: JobConfig | JobModel
) -> GenerationConfig:
    """`base` with each setting the levels give (the last that gives it wins) whose
    flag was not given."""
    changes: dict[str, Any] = {}
    for level in levels:
        for name, field in GENERATION.items():
            value = getattr(level, name)
            flag_given = given(name) or (name == "reasoning_effort" and given("no_reasoning"))
            if value is not None and not flag_given:
                changes[field] = value
        if level.openrouter_routing is not None and not given("openrouter_routing"):
            changes["openrouter_provider"] = _routing(level.openrouter_routing)
    return replace(base, **changes)


def _model(
    flags: ModelOptions, entry: JobModel, job: JobConfig, given: Given, source: Path, index: int
) -> ModelOptions:
    api_key = flags.api_key
    if entry.api_key_env is not None and not given("api_key"):
        api_key = os.environ.get(entry.api_key_env)
        if not api_key:
            raise InputError(f"the variable {entry.api_key_env} is not set", file=str(source),
                             field=f"models[{index}].api_key_env")  # fmt: skip
    return replace(
        flags,
        model=entry.model,
        base_url=flags.base_url if given("base_url") else entry.base_url,
        api_key=api_key,
        generation=_generation(flags.generation, given, job, entry),
        others=[],
    )


def _agent_settings(
    base: dict[str, Any], entry: JobAgent | None, job: JobConfig, given: Given, source: Path,
    index: int | None,
) -> dict[str, Any]:  # fmt: skip
    settings = dict(base)
    if entry is not None:  # a listed agent's own: not a resumed run's first agent's
        flags = {"max_turns": "max_turns", "system_prompt": "system_prompt_file",
                 "version": "agent_version"}  # fmt: skip
        settings = {k: v for k, v in settings.items() if k not in flags or given(flags[k])}
    if entry is not None:
        settings.update(entry.settings)
        if entry.system_prompt is not None and not given("system_prompt_file"):
            settings["system_prompt"] = entry.system_prompt
        if entry.version is not None and not given("agent_version"):
            settings["version"] = entry.version
    turns = (entry.max_turns if entry else None) or job.max_turns
    if turns is not None and not given("max_turns"):
        settings["max_turns"] = turns
    prompt = (entry.system_prompt_file if entry else None) or job.system_prompt_file
    if prompt is not None and not given("system_prompt_file"):
        where = "system_prompt_file"
        if entry is not None and entry.system_prompt_file:
            where = f"agents[{index}].system_prompt_file"
        try:
            settings["system_prompt"] = Path(prompt).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not valid UTF-8"
            raise InputError(f"cannot read {prompt}: {reason}", file=str(source),
                             field=where) from None  # fmt: skip
    return settings


def job_tasks(job: JobConfig, pattern: str) -> list[Path]:
    """The job's task sources: each folder as it is, or, when a source has its own
    pattern, the task folders found under it."""
    if not any(t.pattern for t in job.tasks):
        return [Path(t.path) for t in job.tasks]
    found: list[Path] = []
    for source in job.tasks:
        found += [d for d in resolve_task_dirs(source.path, source.pattern or pattern)
                  if d not in found]  # fmt: skip
    return found


def several(settings: TaskBatchSettings, given: Given) -> TaskBatchSettings:
    """`-m a,b` and `-a a,b` given on the command line: a run over each of them, all
    with the flags' endpoint, key and settings."""
    changes: dict[str, Any] = {}
    model = settings.models.model
    if given("model") and model is not None and "," in model:
        names = _names(model, "--model")
        every = [replace(settings.models, model=name, others=[]) for name in names]
        changes["models"] = replace(every[0], others=every[1:])
    agent = settings.agent
    if given("agent") and agent is not None and "," in agent:
        names = _names(agent, "--agent")
        changes |= {"agent": names[0], "other_agents": [
            AgentChoice(name, dict(settings.agent_settings)) for name in names[1:]
        ]}  # fmt: skip
    return replace(settings, **changes) if changes else settings


def _names(text: str, flag: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise InputError(f"an empty name in {text!r}", field=flag)
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise InputError(f"{', '.join(twice)} given twice in {flag} {text}", field=flag)
    return names


def read_job(path: Path) -> tuple[JobConfig, list[str]]:
    """The job in `path`: a Helios job file, or Harbor's JobConfig (YAML or JSON) as
    it is, translated (`tasks.harbor_job`); and, for Harbor's, one line per field
    Helios does not run, to show before anything runs."""
    from helios.safe_yaml import load_yaml
    from helios.tasks.job import load_job

    if path.suffix.lower() in (".yaml", ".yml", ".json") and path.is_file():
        from helios.agents.registry import available_agents
        from helios.tasks.harbor_job import as_job_config, load_harbor_job, looks_like_harbor_job

        try:
            data = load_yaml(path.read_text("utf-8"))
        except Exception:  # not parsed: load_job names the file, line and reason
            data = None
        if looks_like_harbor_job(data):
            harbor = load_harbor_job(path, known_agents=available_agents())
            return as_job_config(harbor, str(path)), harbor.unsupported
    return load_job(path), []
