"""The task front door's Python API: `ParallelRunner` and `AgentRunner`.

A thin adapter: it turns task folders into TrialSpecs, hands them to the
engine's batch service with the `TaskDoor`, and builds the summary. Planning,
resume, scheduling, recording and interrupts live in the engine.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from helios.agents.registry import agent_class, choose_agent, create_agent
from helios.display import watch
from helios.display.progress import BatchProgress, default_console, header_panel
from helios.display.trial import TrialView
from helios.engine.run import (
    ConcurrencyConfig,
    OutputsConfig,
    Run,
    RunConfig,
    RunOutcome,
    SandboxConfig,
)
from helios.engine.saved_config import dump_config
from helios.engine.store import KEEP_LEFTOVERS, RunStore, write_json_atomic
from helios.engine.workers import default_workers
from helios.environments.registry import sandbox_provider
from helios.errors import InputError
from helios.models.pricing import unknown_reason
from helios.models.routing import DEFAULT_MODEL, key_variable
from helios.models.services import ModelServices
from helios.secrets import public_url
from helios.tasks.door import TaskDoor
from helios.tasks.plan import (
    LoadedTasks,
    dedupe_folders,
    load_tasks,
    product_specs,
    refuse_for_agents,
    resolve_task_dirs,
)
from helios.tasks.report import final_panels, pass_at_k_panel
from helios.tasks.reproduce import MAX_IMAGES, RERUN_KEY, differences, ready_images, rerun_record
from helios.tasks.results import TrialResult
from helios.tasks.settings import TaskBatchSettings
from helios.tasks.summary import (
    BatchResult,
    InvalidTask,
    TaskResult,
    UnsupportedTask,
    build_batch_result,
    summary_document,
)
from helios.tasks.task import Task
from helios.tasks.trial import TrialSpec
from helios.usage import Usage

OnComplete = Callable[[str, Any], Awaitable[None] | None]
SUMMARY_FILE = "batch_summary.json"

__all__ = ["AgentRunner", "ParallelRunner", "default_console"]


class ParallelRunner:
    """Run many tasks × attempts with bounded concurrency; resumable.

    The documented keywords (task_paths, n_concurrent, n_attempts, model, provider,
    output_dir, quiet, on_complete) work as before; every other setting is a field
    of `TaskBatchSettings`, passed as `settings=` or as a keyword.
    """

    def __init__(
        self,
        task_paths: Sequence[str | Path] | str | Path,
        n_concurrent: int = 2,
        n_attempts: int = 1,
        model: str | None = None,
        agent: str | None = None,
        provider: str = "docker",
        output_dir: str | Path = "output",
        quiet: bool = False,
        on_complete: OnComplete | None = None,
        *,
        settings: TaskBatchSettings | None = None,
        console: Console | None = None,
        **more: Any,
    ) -> None:
        if settings is None:
            if quiet:  # the Python API's quiet prints nothing (the CLI's -q: one line)
                more.setdefault("show_progress", False)
            settings = TaskBatchSettings.from_kwargs(
                n_concurrent=n_concurrent, n_attempts=n_attempts, model=model, agent=agent,
                provider=provider, output_dir=Path(output_dir), quiet=quiet, **more,
            )  # fmt: skip
        self.settings = settings
        self.task_paths = task_paths
        self.on_complete = on_complete
        # The agent: the one named, else chosen by the model (a computer-use model
        # gets the computer agent) and, per task, by its desktop (see _plan). Its
        # settings are checked before any work.
        self._agent = choose_agent(settings.agent, settings.models.model)
        create_agent(self._agent, **settings.agent_settings)
        if settings.other_agents and settings.agent is None:
            settings.agent = self._agent  # several agents: each named (and recorded)
        for other in settings.other_agents:
            create_agent(choose_agent(other.name, settings.models.model), **other.settings)
        self.uses_model = agent_class(self._agent).uses_model or any(
            agent_class(other.name).uses_model for other in settings.other_agents
        )
        self.provider_class = sandbox_provider(settings.provider)  # a bad name fails first
        if (self.uses_model or settings.models.others) and settings.models.model is None:
            settings.models.model = DEFAULT_MODEL
        self.model = settings.models.model
        self.console = console or default_console()
        self.services: ModelServices | None = None
        self.invalid: list[InvalidTask] = []
        self.unsupported: list[UnsupportedTask] = []
        self.unknown_keys: dict[str, int] = {}
        #: why the batch stopped early (a fatal error), if it did
        self.aborted: str | None = None
        self.run_dir: Path | None = None
        #: `helios run`'s view, when it is the one shown (`TaskBatchSettings.view`)
        self._trial_view: TrialView | None = None
        #: what run.json records for a rerun (`helios.tasks.reproduce`), set as it plans
        self._tasks: list[Task] = []
        self._agent_identities: dict[str, Any] = {}
        self._images: dict[str, str | None] = {}

    # the documented attributes, read by callers and the CLI
    @property
    def n_attempts(self) -> int:
        return self.settings.n_attempts

    @property
    def agent(self) -> str:
        return self._agent

    @property
    def provider(self) -> str:
        return self.settings.provider

    @property
    def _combinations(self) -> int:
        """Models × agents: the trials of one task and attempt."""
        s = self.settings
        if s.pairs is not None:
            return len(s.pairs)
        return len(s.models.every()) * (1 + len(s.other_agents))

    # -- planning ------------------------------------------------------------
    def _plan(self) -> list[TrialSpec]:
        s = self.settings
        task_dirs = resolve_task_dirs(self.task_paths, s.pattern)
        if not task_dirs:
            where = ", ".join(str(p) for p in _as_list(self.task_paths))
            raise InputError(f"no task.toml matching {s.pattern!r} under {where}")
        loaded = load_tasks(task_dirs, self.provider_class,
                            network_default=s.network_default == "public")  # fmt: skip
        self.invalid, self.unsupported = loaded.invalid, loaded.unsupported
        self.unknown_keys = loaded.unknown_keys
        self._report_loading(loaded)
        if not loaded.tasks:
            skipped = [t.error for t in loaded.invalid] + [t.error for t in loaded.unsupported]
            first = skipped[0] if skipped else "none found"
            raise InputError(
                f"no task to run ({len(loaded.invalid)} invalid, "
                f"{len(loaded.unsupported)} unsupported): {first}"
            )
        self._tasks = loaded.tasks
        specs, refused = refuse_for_agents(self._specs(loaded.tasks))
        if refused:  # a task offers its agent what that agent does not take
            self.unsupported = [*self.unsupported, *refused]
            self._report_loading(LoadedTasks(unsupported=refused))
        if not specs:
            raise InputError(f"no task to run for the agent(s) {self._agent}: {refused[0].error}")
        return specs

    def _specs(self, tasks: list[Task]) -> list[TrialSpec]:
        """The trials: every model × agent × task × attempt (`plan.product_specs`)."""
        specs, agents = product_specs(tasks, self.settings, uses_model=self.uses_model)
        self._agent = ", ".join(agents)  # what the summary and the header name
        settings_of: dict[str, dict[str, Any]] = {}
        for spec in specs:
            settings_of.setdefault(spec.agent, spec.agent_settings)
            if len(settings_of) == len(agents):
                break
        self._agent_identities = {
            agent: create_agent(agent, **settings).identity()
            for agent, settings in settings_of.items()
        }
        return specs

    def _report_loading(self, loaded: LoadedTasks) -> None:
        """One line per invalid or unsupported task, one for unknown keys."""
        if not (self.settings.show_progress and self.settings.report_inputs):
            return
        lines = [("invalid task", bad.error) for bad in loaded.invalid]
        lines += [("unsupported task", task.error) for task in loaded.unsupported]
        unknown = loaded.unknown_keys_line()
        if unknown is not None:
            lines.append(("warning", unknown))
        for label, text in lines:
            self.console.print(
                f"[yellow]{label}[/] {escape(text)}", highlight=False, soft_wrap=True
            )

    def _identity(self) -> dict[str, Any]:
        """The settings a resume must match: they change results."""
        s = self.settings
        identity: dict[str, Any] = {
            "agent": self.agent, "model": self.model, "provider": s.provider,
            "n_attempts": s.n_attempts, "agent_settings": s.agent_settings,
        }  # fmt: skip
        if self.uses_model:
            identity["generation"] = s.models.generation.identity()
        # a run over several models or agents: each of them (a run of one keeps the
        # identity it always had, so its resumes still match)
        if s.models.others:
            identity["models"] = [
                {"model": m.model, "generation": m.generation.identity()} for m in s.models.every()
            ]
        if s.other_agents:
            identity["agents"] = self._agents_recorded()
        if s.pairs is not None:
            identity["pairs"] = [list(pair) for pair in s.pairs]
        if s.timeouts.identity() is not None:
            identity["timeouts"] = s.timeouts.identity()
        if s.network_default == "public":  # a run of before (unset: none) still matches "none"
            identity["network_default"] = s.network_default
        return json.loads(json.dumps(identity, default=str))  # type: ignore[no-any-return]

    def _agents_recorded(self) -> list[dict[str, Any]]:
        s = self.settings
        return [{"name": s.agent, "settings": s.agent_settings}] + [
            {"name": a.name, "settings": a.settings} for a in s.other_agents
        ]

    def _config(self) -> RunConfig:
        s = self.settings
        return RunConfig(
            kind=s.run_prefix,
            concurrency=ConcurrencyConfig(
                in_flight=s.n_concurrent,
                processes=s.workers or default_workers(s.n_concurrent),
                sandbox_starts=s.starts_at_once,
                retry_errors=s.retry_errors,
                executor=s.executor,
                ray_address=s.ray_address,
            ),
            sandbox=SandboxConfig(provider=s.provider),
            outputs=OutputsConfig(
                parent=s.output_dir, prefix=s.run_prefix, resume=s.resume, force=s.force
            ),
            identity=self._identity(),
            recorded=self._recorded(),
            config={
                "tasks": [str(Path(p).absolute()) for p in _as_list(self.task_paths)],
                "settings": dump_config(s),
                "api_key_env": self._key_variables(),
            },
            labels=s.labels,
        )

    def _key_variables(self) -> dict[str, str | None]:
        """Each model's key, named only by the variable it is read from (or --api-key)."""
        every = self.settings.models.every() if self.uses_model else []
        return {str(m.model): key_variable(str(m.model)) for m in every if m.model}

    def _recorded(self) -> dict[str, Any]:
        """What `--resume RUN_DIR` alone continues with (never a secret: the endpoint
        without a key in it, no API key)."""
        s = self.settings
        base_url = s.models.base_url
        return {
            "task_paths": [str(Path(p).absolute()) for p in _as_list(self.task_paths)],
            "n_concurrent": s.n_concurrent, "pattern": s.pattern, "workers": s.workers,
            "base_url": public_url(base_url) if base_url else None,
            "prices": str(s.models.prices.absolute()) if s.models.prices else None,
            # a run on a Ray cluster is resumed on it (a local one records nothing here)
            **({"executor": s.executor, "ray_address": s.ray_address}
               if s.executor == "ray" else {}),
            **({"rerun_of": {"run_id": s.rerun_of.get("run_id")}} if s.rerun_of else {}),
            RERUN_KEY: json.loads(json.dumps(rerun_record(
                self._tasks, images=self._images, agents=self._agent_identities,
            ), default=str)),
            # a run over several models: each one's endpoint (its model and generation
            # are in the identity's "models")
            **({"model_base_urls": [public_url(m.base_url) if m.base_url else None
                                    for m in s.models.every()]}
               if s.models.others else {}),
        }  # fmt: skip

    async def _ready_images(self) -> dict[str, str | None]:
        """The digest of each ready image the tasks name (docker only; else unknown)."""
        names = ready_images(self._tasks)
        resuming = self.settings.resume is not None  # its run.json is written already
        if self.settings.provider != "docker" or not names or resuming:
            return dict.fromkeys(names)
        from helios.environments.docker.cli import image_digests

        return await image_digests(names, MAX_IMAGES)

    def _report_differences(self) -> None:
        """With `rerun_of`: one line per thing that can no longer be as in that run."""
        earlier = self.settings.rerun_of
        if earlier is None or not self.settings.show_progress:
            return
        recorded = earlier.get(RERUN_KEY)
        lines = differences(recorded if isinstance(recorded, dict) else {}, self._tasks,
                            self._images, helios_version=earlier.get("helios_version"))  # fmt: skip
        for line in lines:
            self.console.print(f"[yellow]warning[/] not as in the run: {escape(line)}",
                               highlight=False, soft_wrap=True)  # fmt: skip

    # -- running -------------------------------------------------------------
    async def run(self) -> BatchResult:
        opener = self.settings.models.open if self.uses_model else None
        async with Run(open_services=opener) as run:  # a missing key stops us first
            self.services = run.services
            specs = self._plan()
            self._images = await self._ready_images()
            self._report_differences()
            await run.open(self._config())
            return await self._run_in(run, specs)

    async def _run_in(self, run: Run, specs: list[TrialSpec]) -> BatchResult:
        s = self.settings
        store = run.store
        self.run_dir = store.run_dir
        served = watch.active()
        if served is not None:  # --watch: `helios view` links the desktops in flight
            served.publish_in(store.run_dir)
        # Heads only (id, status, folder): a resume starts without parsing whole records.
        index = store.load_index()
        self._report_store_repairs(store)
        folders = {str(h.folder): tid for tid, h in index.items() if h.folder is not None}
        specs = dedupe_folders(specs, folders)
        quiet = s.quiet or not s.show_progress
        progress: BatchProgress | TrialView
        if s.view == "trial":
            progress = self._trial_view = TrialView(self.console, agent=self._agent_line(),
                                                    quiet=quiet)  # fmt: skip
        else:
            progress = BatchProgress(self.console, total=0, quiet=quiet)
            if self.services is not None:
                progress.extra_source = self.services.live_line
        # a batch of an earlier Helios kept its time only in its summary
        run.prior_seconds = run.prior_seconds or _prior_duration(store.run_dir)

        def finish(outcome: RunOutcome[TrialSpec, TrialResult]) -> BatchResult:
            self.aborted = outcome.aborted
            finished = [TrialResult.model_validate(r) for r in outcome.plan.finished]
            return self._finish(finished + outcome.recorded, len(specs), outcome, store)

        return await run.drive(
            TaskDoor(store.run_dir), specs, done=index, emit=progress.handle,
            on_recorded=self._notify, display=progress if s.show_progress else None,
            on_plan=lambda plan: self._print_header(len(specs), len(plan.pending), store),
            finish=finish,
        )  # fmt: skip

    def _report_store_repairs(self, store: RunStore) -> None:
        for bad in store.quarantined:
            self.console.print(
                f"[yellow]warning[/] {escape(str(store.results_path))}:{bad.line}: {bad.reason}; "
                f"moved to {escape(store.results.quarantine_path.name)}",
                highlight=False, soft_wrap=True,
            )  # fmt: skip

    async def _notify(self, spec: TrialSpec, result: TrialResult) -> None:
        if self._trial_view is not None:
            self._show_result(self._trial_view, result)
        if self.on_complete is None:
            return
        maybe = self.on_complete(spec.task.name, TaskResult.from_trial(result))
        if inspect.isawaitable(maybe):
            await maybe

    @staticmethod
    def _show_result(view: TrialView, result: TrialResult) -> None:
        errors = [e for e in (result.error, result.agent_error) if e is not None]
        usage = result.usage
        view.result(
            passed=result.passed, status=result.status,
            rewards=result.rewards or {"reward": result.reward}, duration=result.duration,
            error="; ".join(f"{e.type}: {e.message}" for e in errors) or None,
            usage=f"tokens {usage.input_tokens:,} in · {usage.output_tokens:,} out · "
            f"{usage.calls:,} model calls" if usage.calls else "",
        )  # fmt: skip

    def _endpoint_row(self) -> dict[str, str]:
        """Where the model's requests (and its key) go, always shown: a resumed run
        folder or a <PROVIDER>_BASE_URL may have chosen it (never a key in it)."""
        if self.services is None or not self.model:
            return {}
        every = [self.services, *self.services.others.values()]

        def endpoint(services: ModelServices) -> str:
            url = services.spec.base_url
            return public_url(url) if url else "the provider's default"

        if len(every) == 1:
            return {"Endpoint": endpoint(self.services)}
        return {"Endpoints": " · ".join(f"{s.name}: {endpoint(s)}" for s in every)}

    def _agent_line(self) -> str:
        models = ", ".join(str(m.model) for m in self.settings.models.every()) if self.model else ""
        return self.agent + (f" · {models}" if models else "")

    def _finish(
        self,
        trials: list[TrialResult],
        planned: int,
        outcome: RunOutcome[TrialSpec, TrialResult],
        store: RunStore,
    ) -> BatchResult:
        batch = build_batch_result(
            trials,
            n_attempts=self.settings.n_attempts,
            duration=outcome.seconds,
            invalid=self.invalid,
            unsupported=self.unsupported,
            unknown_keys=self.unknown_keys,
            output_dir=store.run_dir,
            model=", ".join(str(m.model) for m in self.settings.models.every())
            if self.model
            else None,
            agent=self.agent,
            planned=planned,
            combinations=self._combinations,
            interrupted=outcome.interrupted,
            aborted=self.aborted,
            stopped_usage=_stopped_usage(self.services, outcome.recorded)
            if outcome.interrupted
            else None,
        )
        if self.services is not None:
            batch.out_tokens_per_second = self.services.out_tokens_per_second()
            if not self.services.priced and batch.usage.cost_usd is not None:
                # no call was priced (every trial errored, or a resume of such a run)
                batch.usage.mark_cost_unknown(unknown_reason(self.services.spec.qualified))
        try:
            write_json_atomic(store.run_dir / SUMMARY_FILE, summary_document(batch))
        except OSError as exc:
            # The records are safe; only the summary is missing (a resume rewrites it).
            self.aborted = self.aborted or f"cannot write {SUMMARY_FILE}: {exc.strerror}"
            batch.aborted = self.aborted
            self.console.print(
                f"[yellow]warning[/] cannot write {escape(str(store.run_dir / SUMMARY_FILE))}: "
                f"{escape(str(exc.strerror))}", highlight=False, soft_wrap=True,
            )  # fmt: skip
        shown = self.settings.show_progress and not self.settings.quiet
        if self.settings.show_progress and self.settings.quiet:
            # -q: the aggregate line, then where the results are
            self.console.print(f"Output: {store.run_dir}", highlight=False, soft_wrap=True,
                               markup=False)  # fmt: skip
        if shown and self.settings.view == "batch":
            for panel in final_panels(batch):
                self.console.print(panel)
        elif shown and batch.n_attempts > 1:
            self.console.print(pass_at_k_panel(batch))
        return batch

    def _print_header(self, n_trials: int, n_pending: int, store: RunStore) -> None:
        s = self.settings
        if not s.show_progress or s.quiet:  # quiet: the aggregate line only
            return
        if store.pruned:  # the plan moved the pending trials' leftovers aside
            self.console.print(
                f"removed {len(store.pruned)} old leftover folder(s) from _incomplete/ "
                f"(the last {KEEP_LEFTOVERS} of each trial are kept)", highlight=False,
            )  # fmt: skip
        if s.view == "trial":
            self.console.print(header_panel("Helios run", self._trial_header(n_trials, n_pending,
                                                                            store)))  # fmt: skip
            return
        rows = {
            "Tasks": f"{n_trials // (s.n_attempts * self._combinations)} found"
            + (f", {len(self.invalid)} invalid" if self.invalid else "")
            + (f", {len(self.unsupported)} unsupported" if self.unsupported else ""),
            "Attempts": str(s.n_attempts),
            "Trials": f"{n_trials}"
            + (f" ({n_trials - n_pending} already done)" if n_pending < n_trials else ""),
            "Concurrency": str(s.n_concurrent),
            "Agent": self._agent_line(),
            **self._endpoint_row(),
            "Environment": s.provider,
            "Output": str(store.run_dir),
        }
        self.console.print(header_panel("Helios batch", rows))

    def _trial_header(self, n_trials: int, n_pending: int, store: RunStore) -> dict[str, str]:
        s = self.settings
        task = str(_as_list(self.task_paths)[0])
        rows = {"Task": task, "Agent": self._agent_line(), **self._endpoint_row(),
                "Environment": s.provider}  # fmt: skip
        if s.n_attempts > 1:
            rows["Attempts"] = str(s.n_attempts) + (
                f" ({n_trials - n_pending} already done)" if n_pending < n_trials else ""
            )
        rows["Output"] = str(store.run_dir)
        return rows


class AgentRunner:
    """Run one task (optionally k attempts) and return its `BatchResult`."""

    def __init__(self, task_path: str | Path, **kwargs: Any) -> None:
        kwargs.setdefault("run_prefix", "run")
        kwargs.setdefault("view", "trial")
        self._runner = ParallelRunner([task_path], **kwargs)

    async def run(self) -> BatchResult:
        return await self._runner.run()


def _as_list(paths: Sequence[str | Path] | str | Path) -> list[str | Path]:
    return [paths] if isinstance(paths, str | Path) else list(paths)


def _stopped_usage(services: ModelServices | None, recorded: list[TrialResult]) -> Usage | None:
    """The tokens and calls this invocation's live line counted that no recorded trial
    holds: those of the trials the interrupt stopped."""
    if services is None:
        return None
    live, kept = services.totals, Usage.sum([r.usage for r in recorded])
    return Usage(
        input_tokens=max(0, live.input_tokens - kept.input_tokens),
        cache_read_tokens=max(0, live.cache_read_tokens - kept.cache_read_tokens),
        output_tokens=max(0, live.output_tokens - kept.output_tokens),
        calls=max(0, live.calls - kept.calls),
    )


def _prior_duration(run_dir: Path) -> float:
    path = run_dir / SUMMARY_FILE
    if not path.is_file():
        return 0.0
    try:
        return float(json.loads(path.read_text("utf-8")).get("duration_seconds", 0.0))
    except (ValueError, OSError, AttributeError):
        return 0.0
