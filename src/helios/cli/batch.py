"""`helios batch` and `helios run`: the task front door on the command line."""

from __future__ import annotations

import itertools
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from helios.cli.options import (
    CategoryOpt,
    DatasetOpt,
    DifficultyOpt,
    ExcludeOpt,
    ExecutorOpt,
    FailUnderOpt,
    ForceOpt,
    IncludeOpt,
    InteractiveOpt,
    LimitOpt,
    QuietOpt,
    RayAddressOpt,
    RegistryOpt,
    RetryBelowOpt,
    RetryErrorsOpt,
    SampleOpt,
    SeedOpt,
    TaskTagOpt,
    TrialOptions,
    trial_options,
)

# What runs a batch is imported when one runs: `helios batch --help` builds the
# command from its options alone.
if TYPE_CHECKING:
    from helios.environments.desktop.view_mode import ViewMode
    from helios.tasks.job import JobConfig
    from helios.tasks.selection import TaskSelection
    from helios.tasks.settings import TaskBatchSettings
    from helios.tasks.summary import BatchResult


def _settings(options: TrialOptions, **fields: Any) -> TaskBatchSettings:
    """The batch settings of a command: its shared options, parsed once, and `fields`."""
    from helios.cli.common import handle_errors
    from helios.engine.labels import labels_of
    from helios.tasks.settings import TaskBatchSettings

    try:
        parsed = options.agent_and_model()
        return TaskBatchSettings(
            n_attempts=options.n_attempts, agent=options.agent, provider=options.provider,
            network_default=cast(Any, options.network_default), output_dir=options.output,
            pass_env=list(options.pass_env or []),
            agent_settings=parsed.agent_settings, models=parsed.models,
            labels=labels_of(options.name, options.tags), budget=options.budget(), **fields,
        )  # fmt: skip
    except Exception as exc:
        handle_errors(exc, options.debug)


def _not_a_task(folder: Path) -> str:
    """Why `helios run FOLDER` cannot run it; a folder of tasks is for `helios batch`."""
    message = f"{folder}/task.toml not found: not a task folder"
    if folder.is_dir():
        inside = sum(1 for _ in itertools.islice(folder.glob("**/task.toml"), 1000))
        if inside:
            message += (f"; it holds {inside}{'+' if inside == 1000 else ''} task(s): "
                        f"run them with `helios batch {folder}`")  # fmt: skip
    return message


WATCH_WITH_ATTEMPTS = "The -k option is incompatible with --watch and --interactive modes"


def _view_mode(watch: bool, interactive: bool) -> ViewMode | None:
    return "control" if interactive else "view" if watch else None


async def _watched(work: Coroutine[Any, Any, BatchResult], mode: ViewMode | None) -> BatchResult:
    """`work` with its GUI trials' desktops served on 127.0.0.1 (`mode`), or as is."""
    if mode is None:
        return await work
    from helios.cli.common import err_console
    from helios.display import watch as watching

    async with watching.serving() as server:
        err_console.print(
            f"watching: the desktops are listed at {server.base}/{server.token}/",
            highlight=False, soft_wrap=True, markup=False,
        )  # fmt: skip
        return await work


def _execute(
    tasks: list[Path],
    settings: TaskBatchSettings,
    fail_under: float | None,
    debug: bool,
) -> BatchResult:
    from helios.cli.common import (
        EXIT_BAD_INPUT,
        EXIT_BELOW_THRESHOLD,
        EXIT_BUDGET,
        Interrupted,
        err_console,
        handle_errors,
        run_coroutine,
        shown,
    )
    from helios.engine import default_workers
    from helios.figures import percent
    from helios.tasks.runner import ParallelRunner

    runner: ParallelRunner | None = None
    try:
        runner = ParallelRunner(tasks, settings=settings)
        # On Ray the trials run on the cluster's nodes: no worker process here.
        local = settings.executor == "local"
        workers = (settings.workers or default_workers(settings.n_concurrent)) if local else 1
        batch = run_coroutine(_watched(runner.run(), settings.watch), workers=workers)
    except Interrupted as exc:
        if runner is not None and runner.run_dir is not None:
            err_console.print(
                f"resume with the same command plus [bold]--resume {shown(str(runner.run_dir))}[/]",
                highlight=False,
                soft_wrap=True,
            )
        handle_errors(exc, debug)
    except Exception as exc:
        handle_errors(exc, debug)
    if batch.aborted:
        err_console.print(
            f"[red]stopped early:[/] {shown(batch.aborted)}; fix it, then rerun with "
            f"--resume {shown(str(batch.output_dir))} --retry-errors",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_BAD_INPUT)
    if batch.budget_stopped:
        err_console.print(
            f"[yellow]stopped by a budget:[/] {shown(batch.budget_stopped)}; to go on, rerun "
            f"with --resume {shown(str(batch.output_dir))} and a higher budget",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
        raise typer.Exit(EXIT_BUDGET)
    if batch.results and batch.errored == len(batch.results):
        # nothing was measured: as with a batch of invalid tasks, not a result
        first = next((r.error for r in batch.results if r.error), None) or "no error message"
        err_console.print(
            f"[red]every trial errored[/] ({batch.errored}); the first: {shown(first)}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_BAD_INPUT)
    if fail_under is not None and batch.pass_rate < fail_under:
        err_console.print(
            f"pass rate {percent(batch.pass_rate)} (invalid and unsupported tasks and trials "
            f"not run count as failed) is below --fail-under {percent(fail_under)}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_BELOW_THRESHOLD)
    return batch


@trial_options(
    "ctx", "tasks_dir", "config", "n_concurrent", "n_attempts", "model", "output", "quiet",
    "pattern", "include", "exclude", "task_tags", "difficulty", "category", "limit", "sample",
    "seed", "dataset", "registry", "provider", "network_default", "pass_env", "agent", "resume",
    "retry_errors", "retry_failed_below", "force", "fail_under", "workers", "executor",
    "ray_address", "base_url",
    "api_key", "max_turns", "agent_version", "system_prompt_file", "max_tokens", "temperature",
    "reasoning_effort",
    "no_reasoning", "openrouter_routing", "prices", "watch", "debug", "name", "tags",
    "cache",
    "max_cost", "max_total_tokens", "max_duration", "budget_hard",
)  # fmt: skip
def batch_command(
    options: TrialOptions,
    ctx: typer.Context,
    tasks_dir: Annotated[
        Path | None,
        typer.Argument(help="Folder searched for task.toml files (with --resume: the run's)."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="A job file (.yaml, .toml, .json; or Harbor's JobConfig as it is): tasks, "
            "models, agents and any option below. A flag given here wins over the file's "
            "value. Several models or agents (here: -m a,b, -a a,b) run every combination.",
        ),
    ] = None,
    n_concurrent: Annotated[
        int, typer.Option("--n-concurrent", "-n", min=1, help="Trials in flight.")
    ] = 2,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the aggregate line.")] = False,
    pattern: Annotated[
        str, typer.Option("--pattern", "-p", help="Glob for task.toml files.")
    ] = "**/task.toml",
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            help="A batch folder to finish, with the settings it was run with (flags given "
            "here win; the API key comes from the flag or the environment).",
        ),
    ] = None,
    retry_errors: Annotated[
        bool, typer.Option("--retry-errors", help="With --resume, re-run errored trials too.")
    ] = False,
    retry_failed_below: RetryBelowOpt = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="With --resume, accept settings that differ from the run's."),
    ] = False,
    fail_under: Annotated[
        float | None,
        typer.Option("--fail-under", min=0.0, max=1.0, help="Exit 1 below this pass rate."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", min=1, help="Processes that run trials (default: the cores, at most -n)."
        ),
    ] = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    include: IncludeOpt = None,
    exclude: ExcludeOpt = None,
    task_tags: TaskTagOpt = None,
    difficulty: DifficultyOpt = None,
    category: CategoryOpt = None,
    limit: LimitOpt = None,
    sample: SampleOpt = None,
    seed: SeedOpt = 0,
    dataset: DatasetOpt = None,
    registry: RegistryOpt = None,
) -> None:
    """Run every task under TASKS_DIR, k attempts each, n at a time."""
    from helios.cli.common import fail, handle_errors
    from helios.cli.resume import given, resume_settings, resumed_options

    selection = _selection(
        include=include, exclude=exclude, task_tags=task_tags, difficulty=difficulty,
        category=category, limit=limit, sample=sample, seed=seed, debug=options.debug,
    )  # fmt: skip

    _retry_needs_resume(retry_failed_below, resume)
    job = _job(config, options.debug)
    named = ("base_url",) if job is not None and job.models else ()
    run = _recorded(ctx, resume, ("batch",), options.debug, named)
    saved = _saved(ctx, run, resume, options.debug, named)
    if run is not None and saved is None:  # a run of before config_version: its flat keys
        options = resumed_options(ctx, options, run)
        if isinstance(run.get("executor"), str) and not given(ctx, "executor"):
            executor = run["executor"]  # before the settings check --ray-address against it
    if saved is not None and not given(ctx, "executor"):
        executor = saved[0].get("executor", executor)  # as above
    own = dict(
        n_concurrent=n_concurrent, quiet=quiet, pattern=pattern, resume=resume,
        retry_errors=retry_errors, retry_failed_below=retry_failed_below, force=force,
        workers=workers, executor=executor,
        ray_address=ray_address, watch=_view_mode(options.watch, False), selection=selection,
    )  # fmt: skip
    settings = _settings(options, **own)
    if run is not None and saved is None:
        resume_settings(ctx, settings, run)
    try:
        settings = _several(ctx, settings, run if saved is None else None, job, config)
        if saved is not None:
            settings = _resume_saved(ctx, settings, saved[0], own, resume)
    except Exception as exc:
        handle_errors(exc, options.debug)
    if settings.watch is not None and settings.n_attempts > 1:
        fail(WATCH_WITH_ATTEMPTS)
    if job is not None and job.fail_under is not None and not given(ctx, "fail_under"):
        fail_under = job.fail_under
    reference = dataset or (job.dataset if job is not None else None)
    if reference is not None and tasks_dir is not None:
        fail("give TASKS_DIR or -d/--dataset, not both")
    if reference is not None:
        where = registry or (job.registry if job is not None else None)
        tasks, settings.dataset = _dataset(reference, where, options.debug)
        settings.pattern = "**/task.toml"  # each task folder is itself
    elif tasks_dir is not None:
        tasks = [tasks_dir]
    elif job is not None and job.tasks:
        try:
            tasks = _job_tasks(job, settings.pattern)
        except Exception as exc:
            handle_errors(exc, options.debug)
        if any(source.pattern for source in job.tasks):
            settings.pattern = "**/task.toml"  # the task folders found: each is itself
    elif saved is not None and saved[1]:
        tasks = saved[1]
        if isinstance(settings.dataset, dict) and not all(path.is_dir() for path in tasks):
            tasks = _dataset_again(settings.dataset, resume, options.debug)  # cache cleared
    else:
        tasks = _recorded_tasks(run, "TASKS_DIR (or a job file's tasks)")
    _execute(tasks, settings, fail_under, options.debug)


def _retry_needs_resume(below: float | None, resume: Path | None) -> None:
    """`--retry-failed-below` reruns a run's trials: one line without `--resume`."""
    if below is not None and resume is None:
        from helios.cli.common import fail

        fail("--retry-failed-below needs --resume RUN_DIR (the run whose trials to retry)")


def _selection(*, debug: bool, **values: Any) -> TaskSelection:
    """The selection flags as one `TaskSelection` (lists as tuples)."""
    from helios.cli.common import handle_errors
    from helios.tasks.selection import TaskSelection

    chosen: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                              for k, v in values.items()}  # fmt: skip
    try:
        return TaskSelection(**chosen)
    except Exception as exc:
        handle_errors(exc, debug)


def _dataset(
    reference: str, registry: str | None, debug: bool
) -> tuple[list[Path], dict[str, Any]]:
    """The task folders of the dataset `reference` names (fetched into the cache
    where missing) and its record for run.json. No registry: `HELIOS_REGISTRY`, else
    Harbor's (`datasets.default_registry`)."""
    from helios.cli.common import err_console, handle_errors, shown
    from helios.tasks.datasets import dataset_tasks

    try:
        fetched = dataset_tasks(reference, registry)
    except Exception as exc:
        handle_errors(exc, debug)
    d = fetched.dataset
    cached = f"; the registry's cached copy, as {d.from_cache}" if d.from_cache else ""
    err_console.print(
        f"dataset {shown(d.name)}@{shown(d.version)}: {len(fetched.task_dirs)} task(s), "
        f"{fetched.fetched} checkout(s) fetched now{shown(cached)}", highlight=False,
        soft_wrap=True,
    )  # fmt: skip
    return fetched.task_dirs, fetched.record()


def _dataset_again(record: dict[str, Any], resume: Path | None, debug: bool) -> list[Path]:
    """The task folders of the dataset a resumed run recorded, fetched again."""
    from helios.cli.common import handle_errors
    from helios.tasks.datasets import dataset_of_record, fetch_dataset

    try:
        return fetch_dataset(dataset_of_record(record, str(resume))).task_dirs
    except Exception as exc:
        handle_errors(exc, debug)


def _saved(
    ctx: typer.Context, run: dict[str, Any] | None, resume: Path | None, debug: bool,
    named: tuple[str, ...] = (),
) -> tuple[dict[str, Any], list[Path]] | None:  # fmt: skip
    """The settings and tasks the resumed run saved (run.json's `config`), or None (no
    resume, or a run of before config_version)."""
    if run is None or resume is None:
        return None
    from helios.cli.common import handle_errors
    from helios.cli.resume import saved_settings
    from helios.engine.store import RUN_FILE

    try:
        return saved_settings(ctx, run, resume / RUN_FILE, named)
    except Exception as exc:
        handle_errors(exc, debug)


def _resume_saved(
    ctx: typer.Context, settings: TaskBatchSettings, saved: dict[str, Any], own: dict[str, Any],
    resume: Path | None,
) -> TaskBatchSettings:  # fmt: skip
    """`settings` with every setting no flag changed taken from the saved run: the
    baseline is what the command makes with every flag at its default."""
    from helios.cli.options import TrialOptions
    from helios.cli.resume import command_defaults, resume_saved
    from helios.engine.store import RUN_FILE

    assert resume is not None  # a saved config is read only with --resume
    baseline = _settings(TrialOptions(), **command_defaults(ctx, own))
    return resume_saved(ctx, settings, baseline, saved, resume / RUN_FILE)


def _job(config: Path | None, debug: bool) -> JobConfig | None:
    if config is None:
        return None
    from helios.cli.common import err_console, handle_errors
    from helios.cli.job_options import read_job

    try:
        job, unsupported = read_job(config)
    except Exception as exc:
        handle_errors(exc, debug)
    from rich.markup import escape

    for line in unsupported:  # a Harbor job's fields Helios does not run, before it runs
        err_console.print(f"[yellow]unsupported[/] {escape(line)}", highlight=False,
                          soft_wrap=True)  # fmt: skip
    return job


def _several(
    ctx: typer.Context, settings: TaskBatchSettings, run: dict[str, Any] | None,
    job: JobConfig | None, config: Path | None,
) -> TaskBatchSettings:  # fmt: skip
    """The run's models and agents: -m a,b / -a a,b, else the job's, else a resumed
    run's; and the job's other values where no flag was given."""
    from helios.cli.job_options import apply_job, several
    from helios.cli.resume import given, resume_several
    from helios.engine.store import RUN_FILE

    def flag(name: str) -> bool:
        return given(ctx, name)

    def named(name: str) -> bool:  # on the command line or in the job file
        listed = {"model": job.models, "agent": job.agents} if job is not None else {}
        return flag(name) or bool(listed.get(name))

    if run is not None and settings.resume is not None:
        resume_several(settings, run, settings.resume / RUN_FILE, named)
    if job is not None and config is not None:
        settings = apply_job(settings, job, flag, config)
    return several(settings, flag)


def _job_tasks(job: JobConfig, pattern: str) -> list[Path]:
    from helios.cli.job_options import job_tasks

    return job_tasks(job, pattern)


def _recorded(
    ctx: typer.Context,
    resume: Path | None,
    kinds: tuple[str, ...],
    debug: bool,
    named: tuple[str, ...] = (),
) -> dict[str, Any] | None:
    if resume is None:
        return None
    from helios.cli.common import handle_errors
    from helios.cli.resume import recorded_run, refuse_recorded_endpoints
    from helios.engine.store import RUN_FILE

    try:
        run = recorded_run(resume, kinds)
        refuse_recorded_endpoints(ctx, run, resume / RUN_FILE, named)
    except Exception as exc:
        handle_errors(exc, debug)
    return run


def _recorded_tasks(run: dict[str, Any] | None, argument: str) -> list[Path]:
    from helios.cli.common import fail

    paths = run.get("task_paths") if run is not None else None
    if not paths or not isinstance(paths, list):
        fail(f"missing {argument} (or --resume RUN_DIR of a run that records its tasks)")
    return [Path(str(p)) for p in paths]


@trial_options(
    "ctx", "task", "model", "agent", "provider", "network_default", "pass_env", "output",
    "n_attempts", "quiet", "resume", "retry_errors", "retry_failed_below", "force", "fail_under",
    "name", "tags",
    "base_url", "api_key", "max_turns", "agent_version", "system_prompt_file", "max_tokens",
    "temperature", "reasoning_effort", "no_reasoning", "openrouter_routing", "prices", "watch",
    "interactive", "debug", "cache", "max_cost", "max_total_tokens", "max_duration",
    "budget_hard", "executor", "ray_address",
)  # fmt: skip
def run_command(
    options: TrialOptions,
    ctx: typer.Context,
    task: Annotated[
        Path | None,
        typer.Argument(help="A task folder (with task.toml; with --resume: the run's)."),
    ] = None,
    quiet: QuietOpt = False,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="A run folder to finish, with its settings (as batch's)."),
    ] = None,
    retry_errors: RetryErrorsOpt = False,
    retry_failed_below: RetryBelowOpt = None,
    force: ForceOpt = False,
    fail_under: FailUnderOpt = None,
    interactive: InteractiveOpt = False,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Run one task and show its result."""
    from helios.cli.common import err_console, fail, handle_errors, shown
    from helios.cli.resume import given, resume_settings, resumed_options

    _retry_needs_resume(retry_failed_below, resume)

    run = _recorded(ctx, resume, ("run",), options.debug)
    saved = _saved(ctx, run, resume, options.debug)
    if run is not None and saved is None:  # a run of before config_version: its flat keys
        options = resumed_options(ctx, options, run)
        if isinstance(run.get("executor"), str) and not given(ctx, "executor"):
            executor = run["executor"]  # before the settings check --ray-address against it
    if saved is not None and not given(ctx, "executor"):
        executor = saved[0].get("executor", executor)  # as above
    if task is None:
        task = saved[1][0] if saved is not None and saved[1] else _recorded_tasks(run, "TASK")[0]
    if not (task / "task.toml").is_file():
        fail(_not_a_task(task))
    own = dict(
        n_concurrent=1, run_prefix="run", view="trial", resume=resume, quiet=quiet,
        retry_errors=retry_errors, retry_failed_below=retry_failed_below, force=force,
        watch=_view_mode(options.watch, interactive),
        executor=executor, ray_address=ray_address,
    )  # fmt: skip
    settings = _settings(options, **own)
    if run is not None and saved is None:
        resume_settings(ctx, settings, run)
    if saved is not None:
        try:
            settings = _resume_saved(ctx, settings, saved[0], own, resume)
        except Exception as exc:
            handle_errors(exc, options.debug)
    if (options.watch or interactive) and settings.n_attempts > 1:
        fail(WATCH_WITH_ATTEMPTS)
    if interactive and settings.executor == "ray":  # no node serves its desktop here
        fail("-i/--interactive takes control of a desktop on this machine: not with "
             "--executor ray")  # fmt: skip
    batch = _execute([task], settings, fail_under, options.debug)
    if batch.output_dir is not None and not quiet:
        for result in batch.results:
            folder = batch.output_dir / result.folder
            err_console.print(f"trial files: {shown(str(folder))}", highlight=False, soft_wrap=True)
