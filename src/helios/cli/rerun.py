"""`helios rerun RUN_DIR` and `helios config show RUN_DIR`: a task run again from the
settings its run.json saved.

A rerun is a new run (a new folder, under `-o` or beside RUN_DIR) started with every
setting of the old one, as `--resume RUN_DIR` would continue it (`helios.cli.resume`):
the same tasks, agent, model, attempts, generation and concurrency, so the same trial
ids. Before it runs, it names one line per thing that can no longer be the same
(`helios.tasks.reproduce`): a task whose content changed, one that is gone or new, a
ready image whose digest changed, another Helios version, an agent of another version
or package. At its end, one line per model the provider reported under other ids
than in the run (known only once it has answered).

As with a resume, a run folder is untrusted input: the API key comes only from the
environment or `--api-key`, and an endpoint it records (a model's URL, a Ray
address) must be named again (`--base-url`, `--ray-address`), or the folder's author
would choose where the user's key goes. Whatever is wrong in its run.json is one line
naming the file and field.

`helios config show RUN_DIR` prints the same settings as a job file (YAML), with the
names of `helios batch`'s options; the API key only by the variable it is read from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from helios.cli.options import ApiKeyOpt, BaseUrlOpt, DebugOpt, RayAddressOpt, TrialOptions
from helios.engine.store import RUN_FILE
from helios.errors import InputError
from helios.tasks.reproduce import RERUN_KEY

#: the runs a rerun starts again: those of `helios batch` and `helios run`
KINDS = ("batch", "run")
#: a run id or version shown in a comment line as it is (nothing that could end the line)
_PLAIN = re.compile(r"[A-Za-z0-9._+-]{1,64}")
#: the generation settings run.json records, with the types each may have
GENERATION_TYPES: dict[str, tuple[type, ...]] = {
    "max_tokens": (int,), "temperature": (int, float), "reasoning_effort": (str,),
    "openrouter_provider": (dict,), "keep_images": (int,),
}  # fmt: skip


def saved_run(run_dir: Path) -> dict[str, Any]:
    """The run.json of a task run, checked as a resume checks it and further: the task
    folders it names, its pattern, its generation settings and its rerun record."""
    from helios.cli.resume import recorded_run

    run = recorded_run(run_dir, KINDS)
    where = str(run_dir / RUN_FILE)
    paths = run.get("task_paths")
    if not (isinstance(paths, list) and paths and all(isinstance(p, str) and p for p in paths)):
        raise InputError("expected a list of task folders", file=where, field="task_paths")
    for path in paths:
        if not Path(path).is_absolute() or "\0" in path:
            raise InputError(f"expected an absolute path, got {path!r}", file=where,
                             field="task_paths")  # fmt: skip
    pattern = run.get("pattern")
    if isinstance(pattern, str) and ".." in Path(pattern).parts:
        raise InputError(f"the pattern {pattern!r} leaves the tasks folder", file=where,
                         field="pattern")  # fmt: skip
    for name, value in (run.get("generation") or {}).items():
        kinds = GENERATION_TYPES.get(name)
        if (
            value is not None
            and kinds is not None
            and (isinstance(value, bool) or not isinstance(value, kinds))
        ):
            raise InputError(f"expected {kinds[0].__name__}, got {type(value).__name__}",
                             file=where, field=f"generation.{name}")  # fmt: skip
    record = run.get(RERUN_KEY)
    if record is not None and not isinstance(record, dict):
        raise InputError(f"expected an object, got {type(record).__name__}", file=where,
                         field=RERUN_KEY)  # fmt: skip
    for name in ("tasks", "images"):
        value = (record or {}).get(name)
        if value is not None and not (
            isinstance(value, dict) and all(v is None or isinstance(v, str) for v in value.values())
        ):
            raise InputError("expected an object of names to hashes", file=where,
                             field=f"{RERUN_KEY}.{name}")  # fmt: skip
    models = (record or {}).get("models")
    if models is not None and not (
        isinstance(models, dict)
        and all(isinstance(v, list) and all(isinstance(i, str) for i in v)
                for v in models.values())
    ):  # fmt: skip
        raise InputError("expected an object of models to the ids reported", file=where,
                         field=f"{RERUN_KEY}.models")  # fmt: skip
    return run


def rerun_command(
    ctx: typer.Context,
    run_dir: Annotated[Path, typer.Argument(help="The run folder to run again.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Folder that receives the new run's folder (default: the folder "
            "that holds RUN_DIR).",
        ),
    ] = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = None,
    ray_address: RayAddressOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the aggregate line.")] = False,
    fail_under: Annotated[
        float | None,
        typer.Option("--fail-under", min=0.0, max=1.0, help="Exit 1 below this pass rate."),
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """Run a task run again, in a new folder, with the settings it saved.

    First it names each task, image, agent or Helios version that is no longer the
    same; at the end, each model the provider now reports under another id."""
    from helios.cli.batch import _execute, _settings
    from helios.cli.common import handle_errors
    from helios.cli.resume import (
        refuse_recorded_endpoints,
        resume_saved,
        resume_settings,
        resumed_options,
        saved_settings,
    )

    try:
        run = saved_run(run_dir)
        refuse_recorded_endpoints(ctx, run, run_dir / RUN_FILE)
        _check_agent_settings(run, run_dir / RUN_FILE)
    except Exception as exc:
        handle_errors(exc, debug)
    kind = str(run["kind"])
    given = TrialOptions(
        output=output if output is not None else run_dir.absolute().parent,
        base_url=base_url, api_key=api_key, debug=debug,
    )  # fmt: skip
    view = "trial" if kind == "run" else "batch"
    try:
        saved = saved_settings(ctx, run, run_dir / RUN_FILE)
    except Exception as exc:
        handle_errors(exc, debug)
    if saved is not None:  # the saved config: every setting, several models and agents too
        fields, tasks = saved
        current = _settings(given, quiet=quiet, ray_address=ray_address, run_prefix=kind,
                            view=view, rerun_of=run)  # fmt: skip
        baseline = _settings(TrialOptions(), run_prefix=kind, view=view)
        try:
            settings = resume_saved(ctx, current, baseline, fields, run_dir / RUN_FILE)
        except Exception as exc:
            handle_errors(exc, debug)
        _execute(tasks, settings, fail_under, debug)
        return
    # a run of before config_version: its flat keys
    options = resumed_options(ctx, given, run)
    executor = run.get("executor") or "local"
    settings = _settings(
        options, n_concurrent=run.get("n_concurrent") or 1, quiet=quiet,
        pattern=run.get("pattern") or "**/task.toml", workers=run.get("workers"),
        executor=executor, ray_address=ray_address, run_prefix=kind,
        view=view, rerun_of=run,
    )  # fmt: skip
    resume_settings(ctx, settings, run)
    _execute([Path(p) for p in run["task_paths"]], settings, fail_under, debug)


def _check_agent_settings(run: Mapping[str, Any], where: Path) -> None:
    """The recorded agent takes the recorded settings (one line naming the field if
    not, where a run would end in an internal error)."""
    from helios.agents.registry import available_agents, create_agent

    known = available_agents()
    for agent in str(run.get("agent") or "tool").split(", "):
        if agent not in known:
            continue  # the run names it itself, as an unknown agent
        try:
            create_agent(agent, **(run.get("agent_settings") or {}))
        except (TypeError, ValueError) as exc:
            raise InputError(f"not settings of the {agent} agent: {exc}", file=str(where),
                             field="agent_settings") from None  # fmt: skip


def job_file(run: Mapping[str, Any], saved: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A task run's saved settings as a job file that `helios batch --config` runs:
    the job file's keys (`helios.tasks.job`), no secret (each key by its variable),
    nothing left unset. `saved`: the settings its `config` saved (every model and
    agent), else the flat keys of a run of before (one model, one agent)."""
    from helios.secrets import public_url

    if saved is not None:
        models = saved["models"]
        entries = [(models.model, models.base_url, models.generation),
                   *((m.model, m.base_url, m.generation) for m in models.others)]  # fmt: skip
        agents = [(saved["agent"] or _one_agent(run), dict(saved["agent_settings"])),
                  *((a.name, dict(a.settings)) for a in saved["other_agents"])]  # fmt: skip
        pairs = saved.get("pairs")
        labels = saved.get("labels")
        timeouts = saved.get("timeouts")
        prices = models.prices
        n_concurrent, workers = saved.get("n_concurrent"), saved.get("workers")
        executor = saved.get("executor")
        network_default = saved.get("network_default", "none")  # lacking: a run of before
    else:
        generation = run.get("generation") or {}
        entries = [(run.get("model"), run.get("base_url"), generation)]
        agents = [(_one_agent(run), dict(run.get("agent_settings") or {}))]
        pairs, labels, timeouts, prices = None, None, None, run.get("prices")
        n_concurrent, workers = run.get("n_concurrent"), run.get("workers")
        executor = run.get("executor")
        network_default = "none"  # a run of before the setting: a task's unset network
    job: dict[str, Any] = {
        "tasks": [str(p) for p in run["task_paths"]],
        "pattern": run.get("pattern"),
        "models": [_model_entry(*entry) for entry in entries if entry[0]] or None,
        "agents": [_agent_entry(name, settings) for name, settings in agents if name]
        or None,
        "provider": run.get("provider"),
        "network_default": network_default if network_default != "public" else None,
        "n_attempts": run.get("n_attempts"),
        "n_concurrent": n_concurrent,
        "workers": workers,
        "executor": executor if executor != "local" else None,
        "prices": str(prices) if prices else None,
        "cache": True if saved is not None and saved["models"].cache else None,
        "name": getattr(labels, "name", None),
        "tags": dict(getattr(labels, "tags", None) or {}) or None,
    }
    if agents[0][0] is None:  # each task chose its agent: the settings are every agent's
        job["max_turns"] = agents[0][1].get("max_turns")
    if timeouts is not None and (timeouts.all != 1.0 or timeouts.agent or timeouts.verifier):
        job["timeout_multiplier"] = timeouts.all if timeouts.all != 1.0 else None
        job["agent_timeout_multiplier"] = timeouts.agent
        job["verifier_timeout_multiplier"] = timeouts.verifier
    selection = saved.get("selection") if saved is not None else None
    if selection is not None and selection.active:  # which tasks ran (issue 33)
        from helios.cli.options import SELECTION_OPTIONS

        for option in SELECTION_OPTIONS:
            value = getattr(selection, option)
            if value not in ((), None) and (option != "seed" or selection.sample is not None):
                job[option] = list(value) if isinstance(value, tuple) else value
    if pairs is not None:  # an agent with its own model: listed once per model it ran with
        job["agents"] = [
            _agent_entry(agent, settings) | {"model": model}
            for model, agent in pairs
            for name, settings in agents
            if name == agent
        ]
    for entry in job.get("models") or []:
        if entry.get("base_url"):
            entry["base_url"] = public_url(entry["base_url"])
    return {name: value for name, value in job.items() if value is not None}


def _one_agent(run: Mapping[str, Any]) -> str | None:
    """The agent the run recorded; None when each task chose its own ("tool, computer")."""
    agent = run.get("agent")
    return agent if isinstance(agent, str) and agent and "," not in agent else None


def _model_entry(model: str, base_url: str | None, generation: Any) -> dict[str, Any]:
    from helios.models.routing import PROVIDERS, split_name

    def get(name: str) -> Any:
        return generation.get(name) if isinstance(generation, Mapping) else getattr(
            generation, name, None)  # fmt: skip

    try:
        info = PROVIDERS.get(split_name(model)[0])
    except Exception:  # a name no provider routes: no variable to name
        info = None
    entry = {
        "model": model,
        "base_url": base_url,
        "api_key_env": info.key_env if info is not None else None,
        "max_tokens": get("max_tokens"),
        "temperature": get("temperature"),
        "reasoning_effort": get("reasoning_effort"),
        "openrouter_routing": _routing_text(get("openrouter_provider")),
    }
    return {k: v for k, v in entry.items() if v is not None}


def _agent_entry(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    settings = dict(settings)
    entry = {
        "name": name,
        "max_turns": settings.pop("max_turns", None),
        "system_prompt": settings.pop("system_prompt", None),
        "settings": settings or None,
    }
    return {k: v for k, v in entry.items() if v is not None}


def _routing_text(routing: object) -> str | None:
    """OpenRouter's provider object as `--openrouter-routing` takes it."""
    if not isinstance(routing, dict) or not routing:
        return None
    names = {"order": "order", "only": "allowed", "ignore": "ignored", "sort": "sort"}
    parts = []
    for key, value in routing.items():
        items = value if isinstance(value, list) else [value]
        parts.append(f"{names.get(str(key), str(key))}={','.join(str(v) for v in items)}")
    return ";".join(parts)


def saved_fields(run: Mapping[str, Any], where: Path) -> dict[str, Any] | None:
    """The task settings a run's `config` saved, checked and typed; None for a run of
    before config_version."""
    from helios.engine.saved_config import load_fields, saved_config
    from helios.tasks.settings import TaskBatchSettings

    config = saved_config(run, str(where))
    if config is None:
        return None
    return load_fields(TaskBatchSettings, config.get("settings", {}), str(where),
                       "config.settings")  # fmt: skip


def config_show_command(
    run_dir: Annotated[Path, typer.Argument(help="A run folder of helios batch or helios run.")],
    debug: DebugOpt = False,
) -> None:
    """Print the settings a run saved, as a job file (YAML) that runs it again."""
    import yaml

    from helios.cli.common import handle_errors

    try:
        run = saved_run(run_dir)
        saved = saved_fields(run, run_dir / RUN_FILE)
        job = job_file(run, saved)
        text = yaml.safe_dump(job, sort_keys=False, allow_unicode=True, width=100)
    except Exception as exc:
        handle_errors(exc, debug)
    run_id, version = run.get("run_id"), run.get("helios_version")
    named = all(isinstance(v, str) and _PLAIN.fullmatch(v) for v in (run_id, version))
    typer.echo("# the saved settings of a Helios run"
               + (f" (run {run_id}, Helios {version})" if named else "")
               + ("; the API key is read from the variable api_key_env names"
                  if "api_key_env" in job else ""))  # fmt: skip
    typer.echo(text, nl=False)
