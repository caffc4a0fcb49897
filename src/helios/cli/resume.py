"""`--resume RUN_DIR` alone: every setting but secrets comes from the run's run.json.

A run folder records what it was started with (`run.json`: the agent, the model,
the endpoint, the sandbox, attempts, generation settings, the tasks). A flag given
on the command line wins (a setting that changes results is then refused by the
engine's check, unless --force); a flag left at its default takes the run's value.
The API key is never recorded: it comes from the flag or the environment as usual.

A run that saved its config (run.json's `config_version` and `config`) is resumed from it
with one rule and no field list (`saved_settings`, `resume_saved`: the settings
object is read back field by field, `engine.saved_config`); a run of before is resumed
from its flat keys by the functions below them (`RECORDED_TYPES`, `resumed_options`,
`resume_settings`, `resume_several`), kept for those folders only.

A run folder is something people share, so its run.json is untrusted: the places it
says to connect to (the model's endpoint, a Ray cluster) are never taken from it
alone. Resuming a run that records one needs the flag again (`--base-url URL`,
`--ray-address ADDR`): otherwise the user's API key would go to whatever endpoint the
folder's author wrote, and the driver would unpickle whatever their cluster sends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from helios.cli.options import TrialOptions
from helios.engine.store import RUN_FILE
from helios.errors import InputError
from helios.models.base import GenerationConfig
from helios.models.services import ModelOptions
from helios.safe_json import parse_json
from helios.secrets import public_url
from helios.tasks.phases import TimeoutScale
from helios.tasks.settings import AgentChoice, TaskBatchSettings

#: the options of a generation setting: given one of them, the run's generation is not used
GENERATION_OPTIONS = ("max_tokens", "temperature", "reasoning_effort", "no_reasoning",
                      "openrouter_routing")  # fmt: skip


#: the run.json fields a resume takes, with the type each must have (a run folder is
#: input like any other: a hand-edited or hostile one gets one clear line)
RECORDED_TYPES: dict[str, type] = {
    "agent": str, "model": str, "provider": str, "base_url": str, "prices": str,
    "pattern": str, "dataset_file": str, "distribution": str, "n_attempts": int,
    "n_concurrent": int, "workers": int, "agent_settings": dict, "generation": dict,
    "settings": dict, "executor": str, "ray_address": str, "models": list, "agents": list,
}  # fmt: skip
#: the executors a run.json may name
EXECUTORS = ("local", "ray")
#: recorded settings that say where this machine connects, with the flag that names
#: each: a resume takes them only when this invocation names them too
ENDPOINTS = {"base_url": "--base-url", "ray_address": "--ray-address"}
#: a run.json larger than this is not read (100,000 tasks' hashes take about 10 MB)
MAX_RUN_FILE = 256 * 1024 * 1024


def recorded_run(run_dir: Path, kinds: tuple[str, ...]) -> dict[str, Any]:
    """The run.json of `run_dir`, which must be a run of one of `kinds`."""
    path = run_dir / RUN_FILE
    try:
        size = path.stat().st_size
        if size > MAX_RUN_FILE:
            raise InputError(f"too large to be a run's settings ({size:,} bytes, at most "
                             f"{MAX_RUN_FILE:,})", file=str(path))  # fmt: skip
        data = parse_json(path.read_bytes())
    except FileNotFoundError:
        raise InputError(f"{run_dir} is not a Helios run folder (no {RUN_FILE})") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the run's settings: {exc}", file=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("not a run's settings (expected an object)", file=str(path))
    kind = data.get("kind")
    if kind not in kinds:
        raise InputError(f"a run of `helios {kind}`, not of `helios {kinds[0]}`",
                         file=str(path), field="kind")  # fmt: skip
    for name, kind_of in RECORDED_TYPES.items():
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, kind_of):
            raise InputError(f"expected {kind_of.__name__}, got {type(value).__name__}",
                             file=str(path), field=name)  # fmt: skip
        if name == "executor" and value not in EXECUTORS:
            raise InputError(f"expected one of {', '.join(EXECUTORS)}, got {value!r}",
                             file=str(path), field=name)  # fmt: skip
        if isinstance(value, int) and value < (0 if name == "workers" else 1):
            raise InputError(f"expected a positive number, got {value}", file=str(path),
                             field=name)  # fmt: skip
    return data


def given(ctx: typer.Context, name: str) -> bool:
    """Whether the user set `name` (on the command line or from the environment)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def refuse_recorded_endpoints(
    ctx: typer.Context, recorded: Mapping[str, Any], where: Path, named: tuple[str, ...] = ()
) -> None:
    """InputError when the run records an endpoint (a model's URL, a Ray address) that
    this invocation does not name (on the command line, or in `named`: the ones a job
    file gives): a shared run folder must not choose where the user's API key is sent."""
    for name, flag in ENDPOINTS.items():
        value = recorded.get(name)
        if name in named:
            continue
        if isinstance(value, str) and value and name in ctx.params and not given(ctx, name):
            raise InputError(
                f"this run was started with {flag} {public_url(value)}; a run folder does not "
                f"choose where your key goes: resume with {flag} given again (the same "
                "or another)", file=str(where), field=name,
            )  # fmt: skip


def resumed_options(
    ctx: typer.Context, options: TrialOptions, run: Mapping[str, Any]
) -> TrialOptions:
    """`options` with each one the user left at its default taken from the run (never
    an endpoint: see `refuse_recorded_endpoints`)."""
    taken: dict[str, Any] = {}
    agent = run.get("agent")
    # "tool, computer": no agent was named, each task chose its own
    if isinstance(agent, str) and "," not in agent:
        taken["agent"] = agent
    for name in ("model", "provider", "n_attempts", "prices"):
        if run.get(name) is not None:
            taken[name] = run[name]
    if "prices" in taken:
        taken["prices"] = Path(taken["prices"])
    return replace(options, **{k: v for k, v in taken.items() if not given(ctx, k)})


def resume_settings(
    ctx: typer.Context, settings: TaskBatchSettings, run: Mapping[str, Any]
) -> None:
    """The settings the options do not carry as they were recorded: the agent's
    settings (a system prompt is kept as its text), generation, concurrency, pattern."""
    if not (given(ctx, "max_turns") or given(ctx, "system_prompt_file")):
        recorded = run.get("agent_settings")
        if isinstance(recorded, dict):
            settings.agent_settings = dict(recorded)
    generation = run.get("generation")
    if isinstance(generation, dict) and not any(given(ctx, n) for n in GENERATION_OPTIONS):
        settings.models.generation = GenerationConfig.from_identity(generation)
    if run.get("timeouts") is not None:  # a job's multipliers (a job given again wins)
        settings.timeouts = TimeoutScale.from_identity(run["timeouts"])
    if not given(ctx, "network_default"):  # a run of before: a task's unset network was none
        settings.network_default = "none"
    for name, field in (("n_concurrent", "n_concurrent"), ("pattern", "pattern"),
                        ("workers", "workers"), ("executor", "executor"),
                        ("ray_address", "ray_address")):  # fmt: skip
        if run.get(name) is not None and name in ctx.params and not given(ctx, name):
            setattr(settings, field, run[name])


def resume_several(
    settings: TaskBatchSettings, run: Mapping[str, Any], where: Path,
    given: Callable[[str], bool],
) -> None:  # fmt: skip
    """A run over several models or agents: each of them as run.json records it,
    unless `given` says the user named others (-m, -a, a job file's). A recorded
    model's endpoint is never taken from the folder: --base-url given again sets
    every model's (or the job file names them)."""
    models = run.get("models")
    if models and not given("model"):
        urls = run.get("model_base_urls")
        urls = urls if isinstance(urls, list) else []
        every = [
            _recorded_model(settings.models, m, urls[i] if i < len(urls) else None, i, given, where)
            for i, m in enumerate(models)
        ]
        settings.models = replace(every[0], others=every[1:])
    agents = run.get("agents")
    if agents and not given("agent"):
        chosen = [_recorded_agent(a, i, where) for i, a in enumerate(agents)]
        settings.agent, settings.agent_settings = chosen[0].name, chosen[0].settings
        settings.other_agents = chosen[1:]
    pairs = run.get("pairs")
    if isinstance(pairs, list) and not (given("model") or given("agent")):
        if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
                   for p in pairs):  # fmt: skip
            raise InputError("expected [model, agent] pairs", file=str(where), field="pairs")
        settings.pairs = [(p[0], p[1]) for p in pairs]


def _recorded_model(
    flags: ModelOptions, entry: Any, url: Any, index: int, given: Callable[[str], bool],
    where: Path,
) -> ModelOptions:  # fmt: skip
    field = f"models[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("model"), str):
        raise InputError("expected {model, generation}", file=str(where), field=field)
    if url and not given("base_url"):
        raise InputError(
            f"this run's model {entry['model']} was started with its own endpoint; a run "
            "folder does not choose where your key goes: resume with --config JOB_FILE "
            "(the job names the endpoints) or --base-url URL", file=str(where), field=field,
        )  # fmt: skip
    generation = entry.get("generation")
    return replace(
        flags, model=entry["model"], others=[],
        generation=GenerationConfig.from_identity(generation)
        if isinstance(generation, dict) and not any(given(n) for n in GENERATION_OPTIONS)
        else flags.generation,
    )  # fmt: skip


def _recorded_agent(entry: Any, index: int, where: Path) -> AgentChoice:
    if (not isinstance(entry, dict) or not isinstance(entry.get("name"), str)
            or not isinstance(entry.get("settings", {}), dict)):  # fmt: skip
        raise InputError("expected {name, settings}", file=str(where), field=f"agents[{index}]")
    return AgentChoice(entry["name"], dict(entry.get("settings") or {}))


# -- a run that saved its config (run.json's config_version) -----------------------------
def saved_settings(
    ctx: typer.Context, run: Mapping[str, Any], where: Path, named: tuple[str, ...] = ()
) -> tuple[dict[str, Any], list[Path]] | None:
    """The task settings and task folders a run saved (`config`), read against
    `TaskBatchSettings`'s own fields: None for a run of before (its flat keys are read
    as before). Any endpoint the config names anywhere must be named again."""
    from helios.engine.saved_config import load_fields, saved_config, saved_endpoints

    config = saved_config(run, str(where))
    if config is None:
        return None
    settings = load_fields(TaskBatchSettings, config.get("settings", {}), str(where),
                           "config.settings")  # fmt: skip
    # made before the setting, when a task's unset network meant none
    settings.setdefault("network_default", "none")
    refuse_recorded_endpoints(ctx, saved_endpoints(config), where, named)
    tasks = config.get("tasks", [])
    if not isinstance(tasks, list) or not all(isinstance(t, str) and t for t in tasks):
        raise InputError("expected a list of task folders", file=str(where), field="config.tasks")
    return settings, [Path(t) for t in tasks]


def resume_saved(
    ctx: typer.Context, current: TaskBatchSettings, baseline: TaskBatchSettings,
    saved: Mapping[str, Any], where: Path,
) -> TaskBatchSettings:  # fmt: skip
    """The one rule of a resume (`saved_config.merged`): each setting this invocation
    changed is kept, every other one is the run's. Saved values the settings refuse
    together (the flags' own were checked already) are one line naming the file."""
    from helios.engine.saved_config import merged

    try:
        return merged(current, baseline, saved,
                      lambda name: name in ctx.params and given(ctx, name))  # fmt: skip
    except (ValueError, TypeError, InputError) as exc:
        message = getattr(exc, "message", str(exc))
        raise InputError(f"not valid: {message}", file=str(where),
                         field="config.settings") from None  # fmt: skip


def command_defaults(ctx: typer.Context, values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` (a command's settings by option name) with each option at its default:
    what the command makes when no flag is given (`resume_saved`'s baseline)."""
    defaults = {p.name: p.default for p in ctx.command.params if p.name is not None}
    return {name: defaults.get(name, value) for name, value in values.items()}
