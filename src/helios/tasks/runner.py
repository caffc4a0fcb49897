"""The task front door's Python API: `ParallelRunner` and `AgentRunner`.

A thin adapter: it turns task folders into TrialSpecs (its units), hands them to
the engine's run with the `TaskDoor`, and builds the summary (its finish). The run's
config is `tasks.run_config`'s; what it shows, the display presenter's.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from helios.display.presenter import RunPresenter
from helios.display.progress import default_console
from helios.display.trial import TrialView
from helios.engine.run import Run, RunOutcome
from helios.environments.registry import sandbox_provider
from helios.models.services import ModelServices
from helios.tasks import run_config as config
from helios.tasks import summary
from helios.tasks.door import TaskDoor
from helios.tasks.plan import dedupe_folders, load_batch, product_specs, refuse_for_agents
from helios.tasks.report import closing_panels, header, show_result
from helios.tasks.reproduce import models_at_end
from helios.tasks.results import TrialResult
from helios.tasks.settings import TaskBatchSettings
from helios.tasks.summary import SUMMARY_FILE, BatchResult, InvalidTask, TaskResult, UnsupportedTask
from helios.tasks.trial import TrialSpec

OnComplete = Callable[[str, Any], Awaitable[None] | None]

__all__ = ["SUMMARY_FILE", "AgentRunner", "ParallelRunner", "default_console"]


class ParallelRunner:
    """Run many tasks × attempts with bounded concurrency; resumable.

    The documented keywords (task_paths, n_concurrent, n_attempts, model, provider,
    output_dir, quiet, on_complete) work as before; every other setting is a field
    of `TaskBatchSettings`, passed as `settings=` or as a keyword.
    """

    def __init__(
        self, task_paths: Sequence[str | Path] | str | Path = (), n_concurrent: int = 2,
        n_attempts: int = 1, model: str | None = None, agent: str | None = None,
        provider: str = "docker", output_dir: str | Path = "output", quiet: bool = False,
        on_complete: OnComplete | None = None, *, settings: TaskBatchSettings | None = None,
        console: Console | None = None, **more: Any,
    ) -> None:  # fmt: skip
        if settings is None:
            if quiet:  # the Python API's quiet prints nothing (the CLI's -q: one line)
                more.setdefault("show_progress", False)
            settings = TaskBatchSettings.from_kwargs(
                n_concurrent=n_concurrent, n_attempts=n_attempts, model=model, agent=agent,
                provider=provider, output_dir=Path(output_dir), quiet=quiet, **more,
            )  # fmt: skip
        self.settings, self.task_paths, self.on_complete = settings, task_paths, on_complete
        self._agent, self.uses_model = config.settle_agents(settings)  # checked before work
        self.provider_class = sandbox_provider(settings.provider)  # a bad name fails first
        self.model = settings.models.model
        self.console = console or default_console()
        self.screen = RunPresenter(self.console, show=settings.show_progress, quiet=settings.quiet)
        self.services: ModelServices | None = None
        self.invalid: list[InvalidTask] = []
        self.unsupported: list[UnsupportedTask] = []
        self.unknown_keys: dict[str, int] = {}
        self.aborted: str | None = None  #: why the batch stopped early, if it did
        self.run_dir: Path | None = None
        self.planned = config.Planned()  #: what run.json records for a rerun

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

    # -- units -----------------------------------------------------------------------
    def _plan(self) -> list[TrialSpec]:
        """The trials: every model × agent × task × attempt (`plan.product_specs`)."""
        s = self.settings
        self.task_paths = config.dataset_paths(s, self.task_paths)  # dataset="NAME@VERSION"
        report = self.screen.warn_lines if s.report_inputs else None
        host_env = {name: os.environ[name] for name in s.pass_env if name in os.environ}
        loaded = load_batch(self.task_paths, s.pattern, self.provider_class, report,
                            network_default=s.network_default == "public",
                            host_env=host_env, selection=s.selection)  # fmt: skip
        specs, agents = product_specs(loaded.tasks, s, uses_model=self.uses_model)
        self._agent = ", ".join(agents)  # what the summary and the header name
        self.planned.tasks, self.planned.found = loaded.tasks, loaded.found
        self.planned.agents = config.agent_identities(specs, agents)
        specs, refused = refuse_for_agents(specs, self._agent, report)  # skills, MCP
        self.invalid, self.unsupported = loaded.invalid, [*loaded.unsupported, *refused]
        self.unknown_keys = loaded.unknown_keys
        return specs

    # -- the door ----------------------------------------------------------------------
    async def run(self) -> BatchResult:
        s = self.settings
        async with Run(open_services=s.models.open if self.uses_model else None) as run:
            self.services = run.services  # a missing key stopped us first
            specs = self._plan()
            self.planned.images = await config.ready_image_digests(s, self.planned.tasks)
            for line in config.rerun_differences(s, self.planned):
                self.screen.warn("warning", f"not as in the run: {line}")
            await run.open(config.run_config(
                s, self.task_paths, agent=self._agent, uses_model=self.uses_model,
                planned=self.planned,
            ))  # fmt: skip
            self.screen.attach(run)
            return await self._drive(run, specs)

    async def _drive(self, run: Run, specs: list[TrialSpec]) -> BatchResult:
        store, s = run.store, self.settings
        self.run_dir = store.run_dir
        if s.watch is not None:  # --watch: `helios view` links the desktops being served
            self.screen.list_desktops(store.run_dir)
        index = store.load_index()  # heads only: a resume starts without whole records
        self.screen.store_repairs(store)
        folders = {str(h.folder): t for t, h in index.items() if h.folder is not None}
        specs = dedupe_folders(specs, folders)
        models = ", ".join(str(m.model) for m in s.models.every()) if self.model else ""
        agent = self._agent + (f" · {models}" if models else "")
        live = self.screen.live(s.view, agent=agent)
        run.prior_seconds = run.prior_seconds or summary.prior_duration(store.run_dir)  # older

        async def notify(spec: TrialSpec, result: TrialResult) -> None:
            if isinstance(live, TrialView):
                show_result(live, result)
            if self.on_complete is not None:
                maybe = self.on_complete(spec.task.name, TaskResult.from_trial(result))
                if inspect.isawaitable(maybe):
                    await maybe

        def on_plan(n_trials: int, n_pending: int, retried: int) -> None:
            self.screen.header(*header(
                self.screen, s, task=str(config.as_list(self.task_paths)[0]), agent=agent,
                n_trials=n_trials, n_pending=n_pending,
                per_task=s.n_attempts * config.combinations(s), invalid=len(self.invalid),
                unsupported=len(self.unsupported), found=self.planned.found, retried=retried,
            ))  # fmt: skip

        def finish(outcome: RunOutcome[TrialSpec, TrialResult]) -> BatchResult:
            finished = [TrialResult.model_validate(r) for r in outcome.counted()]
            return self._finish(finished + outcome.recorded, len(specs), outcome, models)

        return await run.drive(
            TaskDoor(store.run_dir), specs, done=index, emit=live.handle, on_recorded=notify,
            display=self.screen.shown(live), finish=finish,
            on_plan=lambda plan: on_plan(len(specs), len(plan.pending), plan.retried),
        )  # fmt: skip

    def _finish(
        self, trials: list[TrialResult], planned: int,
        outcome: RunOutcome[TrialSpec, TrialResult], models: str,
    ) -> BatchResult:  # fmt: skip
        run_dir, interrupted = self.run_dir or Path(), outcome.interrupted
        self.aborted = outcome.aborted
        batch = summary.build_batch_result(
            trials, n_attempts=self.settings.n_attempts, duration=outcome.seconds,
            invalid=self.invalid, unsupported=self.unsupported, unknown_keys=self.unknown_keys,
            output_dir=run_dir, model=models or None, agent=self.agent, planned=planned,
            combinations=config.combinations(self.settings), interrupted=interrupted,
            aborted=self.aborted, budget=outcome.budget, stopped_usage=summary.stopped_usage(
                self.services, outcome.recorded) if interrupted else None,
        )  # fmt: skip
        summary.add_service_figures(batch, self.services)
        if (why := summary.write_summary(batch, run_dir)) is not None:
            self.aborted = batch.aborted = self.aborted or f"cannot write {SUMMARY_FILE}: {why}"
            self.screen.warn("warning", f"cannot write {run_dir / SUMMARY_FILE}: {why}",
                             always=True)  # fmt: skip
        self.screen.finish(closing_panels(batch, self.settings.view), output=run_dir)
        # the model ids the provider reported (known only now): a rerun names a changed one
        for line in models_at_end(run_dir, batch.usage.reported_models, self.settings.rerun_of):
            self.screen.warn("warning", f"not as in the run: {line}")
        return batch


class AgentRunner:
    """Run one task (optionally k attempts) and return its `BatchResult`."""

    def __init__(self, task_path: str | Path, **kwargs: Any) -> None:
        kwargs.setdefault("run_prefix", "run")
        kwargs.setdefault("view", "trial")
        self._runner = ParallelRunner([task_path], **kwargs)

    async def run(self) -> BatchResult:
        return await self._runner.run()
