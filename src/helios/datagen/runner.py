"""`BatchRunner`: Hermes's batch-runner API on Helios's engine.

Every prompt is one unit of work on the engine's `BatchService` (scheduler,
limiter, retries, store, sandboxes); `batch_size` only groups output files and
checkpoint entries. The constructor takes Hermes's arguments; Helios's own
settings are keywords (see `GenerateSettings`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rich.console import Console

from helios.agents.registry import create_agent
from helios.agents.toolsets import get_toolset
from helios.agents.toolsets.hermes import HERMES_TOOLSET_TOOLS, all_hermes_tool_names
from helios.datagen.adopt import adopt_rows
from helios.datagen.dataset import Dataset, check_dataset_file, load_dataset
from helios.datagen.display import GenerateProgress, final_table, header_rows
from helios.datagen.distributions import Distribution, ToolsetSampler, chosen_distribution
from helios.datagen.door import GenerateDoor, PromptResult
from helios.datagen.finish import write_outputs
from helios.datagen.folder import RowWriter
from helios.datagen.outputs import TERMINAL, RunningCheckpoint
from helios.datagen.result import GenerateResult, first_failure
from helios.datagen.routing import open_services
from helios.datagen.run_config import reasoning_flags, run_config
from helios.datagen.session import RunSession, check_run_name, open_session
from helios.datagen.settings import GenerateSettings
from helios.datagen.units import PromptUnit, assign_batches, build_units
from helios.display.console import SafeConsole
from helios.display.presenter import RunPresenter
from helios.display.progress import default_console
from helios.engine.reported_models import record_models
from helios.engine.run import Run, RunOutcome
from helios.environments.registry import sandbox_provider
from helios.models.services import ModelServices

__all__ = ["BatchRunner", "GenerateResult", "first_failure"]


class BatchRunner:
    """Run an agent over every prompt of a JSONL dataset; write Hermes's files."""

    def __init__(
        self, dataset_file: str | Path, batch_size: int, run_name: str,
        distribution: str = "default", max_iterations: int = 10, base_url: str | None = None,
        api_key: str | None = None, model: str | None = None, num_workers: int = 4,
        verbose: bool = False, ephemeral_system_prompt: str | None = None,
        log_prefix_chars: int = 100, providers_allowed: list[str] | None = None,
        providers_ignored: list[str] | None = None, providers_order: list[str] | None = None,
        provider_sort: str | None = None, openrouter_min_coding_score: float | None = None,
        max_tokens: int | None = None, reasoning_config: dict[str, Any] | None = None,
        prefill_messages: list[dict[str, Any]] | None = None, max_samples: int | None = None,
        *, console: Console | None = None, **helios: Any,
    ) -> None:  # fmt: skip
        if helios.get("quiet"):  # the Python API's quiet prints nothing (the CLI's -q: a line)
            helios.setdefault("show_progress", False)
        self.settings = GenerateSettings(
            dataset_file=Path(dataset_file), batch_size=batch_size, run_name=run_name,
            distribution=distribution, max_turns=max_iterations, base_url=base_url,
            api_key=api_key, model=model or "", num_workers=num_workers, verbose=verbose,
            ephemeral_system_prompt=ephemeral_system_prompt, log_prefix_chars=log_prefix_chars,
            providers_allowed=providers_allowed, providers_ignored=providers_ignored,
            providers_order=providers_order, provider_sort=provider_sort, max_tokens=max_tokens,
            prefill_messages=prefill_messages, max_samples=max_samples,
            **reasoning_flags(reasoning_config), **helios,
        )  # fmt: skip
        s = self.settings
        s.check()
        sandbox_provider(s.provider)  # a prompt's tools run commands: not `null`
        check_dataset_file(s.dataset_file)  # read when the run starts (`_load_dataset`)
        self.console = console or default_console()
        #: warnings go apart from the output (stderr), unless a console is given
        self.screen = RunPresenter(self.console, show=s.show_progress, quiet=s.quiet,
                                   warnings=console or SafeConsole(stderr=True))  # fmt: skip
        self.distribution: Distribution = chosen_distribution(s.distribution, s.distributions_file)
        if openrouter_min_coding_score is not None:
            self.screen.caution("openrouter_min_coding_score is not supported by Helios; ignored")
        self.services: ModelServices | None = None
        self.result = GenerateResult(s.run_dir)
        #: the prompts, read when the run starts (after the run folder is checked)
        self.dataset: Dataset

    def _load_dataset(self) -> None:
        self.dataset = load_dataset(self.settings.dataset_file, self.settings.max_samples)
        self.result.bad_lines = len(self.dataset.bad)
        for line in self.dataset.bad_line_warnings():
            self.screen.caution(line)

    # -- planning ---------------------------------------------------------------------
    def _usable(self, toolset: str) -> str | None:
        if toolset not in HERMES_TOOLSET_TOOLS:
            return "Helios's generate does not provide it (it offers terminal, file, web)"
        return get_toolset(toolset).unavailable_reason()

    def _units(self, seed: int, services: ModelServices) -> list[PromptUnit]:
        s = self.settings
        sampler = ToolsetSampler(self.distribution, self._usable, self.screen.caution)
        agent = create_agent("tool", **self.door.agent_settings()).identity()
        settings = {"generation": services.config.identity(), "provider": s.provider}
        return build_units(self.dataset.rows, sampler, seed=seed, agent=agent,
                           model=services.spec.qualified, settings=settings)  # fmt: skip

    # -- running ----------------------------------------------------------------------
    def run(self, resume: bool = False) -> GenerateResult:
        """Hermes's synchronous entry point; use `arun` inside a running event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(resume))
        raise RuntimeError("BatchRunner.run() cannot run inside an event loop: await arun()")

    async def arun(self, resume: bool = False) -> GenerateResult:
        s = self.settings
        s.resume = s.resume or resume
        async with Run(open_services=lambda: open_services(s)) as run:
            assert run.services is not None
            self.services = run.services
            check_run_name(s)  # before the dataset is read: it may be large
            self._load_dataset()
            await run.open(run_config(s))
            self.screen.attach(run)
            await self._run(run, open_session(run, s), run.services)
        return self.result

    async def _run(self, run: Run, session: RunSession, services: ModelServices) -> None:
        s = self.settings
        self.screen.store_repairs(session.store)  # a torn or bad line: moved aside, named
        self.writer = RowWriter(session.run_dir)
        self.door = GenerateDoor(s, self.writer, all_hermes_tool_names())
        units = self._units(session.seed, services)
        if session.adopt:
            self._adopt(session, units)
        records = session.records.values()
        done = {r.get("prompt_key") for r in records if r.get("status") in TERMINAL}
        pending = assign_batches([u for u in units if u.key not in done], s.batch_size,
                                 session.first_batch)  # fmt: skip
        self.checkpoint = RunningCheckpoint(s.run_dir, s.run_name, session.records, units, pending)
        self.screen.header("Helios generate", header_rows(
            self.screen, s, total=len(units), pending=len(pending),
            bad_lines=len(self.dataset.bad), first_batch=session.first_batch,
            run_dir=session.run_dir,
        ))  # fmt: skip
        progress = GenerateProgress(self.console, quiet=not s.verbose, services=services)
        progress.extra_source = self.screen.with_budget(progress.money_line)

        def finish(outcome: RunOutcome[PromptUnit, PromptResult]) -> None:
            self.writer.close()
            self.result.interrupted, self.result.aborted = outcome.interrupted, outcome.aborted
            self.result.budget_stopped = outcome.budget_stopped
            self._finish(outcome, session, units)

        # The reviewed records: a verdict that does not hold is pending again.
        await run.drive(
            self.door, pending, done=session.records, emit=progress.handle,
            on_recorded=self._recorded, display=self.screen.shown(progress),
            finish=finish,
        )  # fmt: skip

    def _adopt(self, session: RunSession, units: list[PromptUnit]) -> None:
        adopted = adopt_rows(session.run_dir, units)
        for record in adopted:
            session.store.append(record)
            session.records[str(record["trial_id"])] = record
        matched = sum(1 for r in adopted if not str(r["trial_id"]).startswith("adopted-"))
        self.screen.say(f"adopted {len(adopted)} rows from existing batch files ({matched} "
                        "match prompts of this dataset)", "cyan")  # fmt: skip

    async def _recorded(self, unit: PromptUnit, result: PromptResult) -> None:
        batch_done = self.checkpoint.record(unit, self.door.to_record(unit, result))
        if batch_done:
            self.writer.close_batch(unit.batch_num)
        if self.settings.verbose and result.status == "ok":
            self.screen.say(f"✓ {unit.label} {unit.row.prompt[: self.settings.log_prefix_chars]!r}"
                            f" toolsets={list(unit.toolsets)}", "green")  # fmt: skip
        await self.checkpoint.update(batch_done)

    # -- finishing ----------------------------------------------------------------------
    def _finish(self, outcome: RunOutcome[PromptUnit, PromptResult], session: RunSession,
                units: list[PromptUnit]) -> None:  # fmt: skip
        written = write_outputs(
            self.settings, session.run_dir, session.store, units, bad_lines=len(self.dataset.bad),
            seconds=outcome.seconds, invocation_seconds=outcome.invocation_seconds,
            budget=outcome.budget,
        )  # fmt: skip
        record_models(session.store.run_dir, written.totals.reported_models)  # run.json too
        result = self.result
        result.rows, result.discarded = written.merge.rows, written.tombstones
        result.failed, result.prompts = written.failures, len(units)
        result.statistics = written.statistics
        result.first_failure = first_failure(written.finals.values())
        self.screen.finish([final_table(
            written.totals, merged=written.merge.rows, failures=written.failures,
            tombstones=written.tombstones, seconds=outcome.seconds,
            interrupted=outcome.interrupted,
        )], output=session.run_dir)  # fmt: skip
