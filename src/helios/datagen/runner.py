"""`BatchRunner`: Hermes's batch-runner API on Helios's engine.

Every prompt is one unit of work on the engine's `BatchService` (scheduler,
limiter, retries, store, sandboxes); `batch_size` only groups output files and
checkpoint entries. The constructor takes Hermes's arguments; Helios's own
settings are keywords (see `GenerateSettings`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from helios.agents.registry import create_agent
from helios.agents.toolsets import get_toolset
from helios.agents.toolsets.hermes import HERMES_TOOLSET_TOOLS, all_hermes_tool_names
from helios.datagen.adopt import adopt_rows
from helios.datagen.dataset import Dataset, check_dataset_file, load_dataset
from helios.datagen.display import GenerateProgress, final_table
from helios.datagen.distributions import (
    Distribution,
    ToolsetSampler,
    load_distributions_file,
    resolve_distribution,
)
from helios.datagen.door import GenerateDoor, PromptResult
from helios.datagen.folder import STATISTICS, RowWriter
from helios.datagen.outputs import (
    TERMINAL,
    checkpoint_document,
    final_records,
    merge_rows,
    write_checkpoint,
    write_tombstones_and_failures,
)
from helios.datagen.routing import open_services
from helios.datagen.session import (
    RunSession,
    check_run_name,
    open_session,
    review_records,
    run_config,
)
from helios.datagen.settings import GenerateSettings
from helios.datagen.statistics import statistics_document, totals
from helios.datagen.units import PromptUnit, assign_batches, build_units
from helios.display.console import SafeConsole
from helios.display.progress import default_console, header_panel
from helios.engine.reported_models import record_models
from helios.engine.run import Run, RunOutcome
from helios.engine.store import write_json_atomic
from helios.environments.registry import sandbox_provider
from helios.models.services import ModelServices
from helios.secrets import public_url
from helios.text import visible

CHECKPOINT_INTERVAL = 2.0
MAX_BAD_LINE_WARNINGS = 20


@dataclass
class GenerateResult:
    run_dir: Path
    rows: int = 0
    discarded: int = 0
    failed: int = 0
    #: the prompts of the run (every prompt failed: `failed == prompts`)
    prompts: int = 0
    #: why the first failed prompt failed ("BadRequestError: ..."), None when none did
    first_failure: str | None = None
    bad_lines: int = 0
    interrupted: bool = False
    #: why the run stopped starting prompts early (a rejected key), if it did
    aborted: str | None = None
    statistics: dict[str, Any] = field(default_factory=dict)


def _reasoning_flags(config: dict[str, Any] | None) -> dict[str, Any]:
    """Hermes's reasoning_config ({"effort": "none"}, {"enabled": True, "effort": "high"})."""
    if not config:
        return {}
    if config.get("enabled") is False or config.get("effort") == "none":
        return {"reasoning_disabled": True}
    return {"reasoning_effort": config.get("effort")} if config.get("effort") else {}


class BatchRunner:
    """Run an agent over every prompt of a JSONL dataset; write Hermes's files."""

    def __init__(
        self,
        dataset_file: str | Path,
        batch_size: int,
        run_name: str,
        distribution: str = "default",
        max_iterations: int = 10,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        num_workers: int = 4,
        verbose: bool = False,
        ephemeral_system_prompt: str | None = None,
        log_prefix_chars: int = 100,
        providers_allowed: list[str] | None = None,
        providers_ignored: list[str] | None = None,
        providers_order: list[str] | None = None,
        provider_sort: str | None = None,
        openrouter_min_coding_score: float | None = None,
        max_tokens: int | None = None,
        reasoning_config: dict[str, Any] | None = None,
        prefill_messages: list[dict[str, Any]] | None = None,
        max_samples: int | None = None,
        *,
        console: Console | None = None,
        **helios: Any,
    ) -> None:
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
            **_reasoning_flags(reasoning_config), **helios,
        )  # fmt: skip
        s = self.settings
        s.check()
        sandbox_provider(s.provider)  # a prompt's tools run commands: not `null`
        check_dataset_file(s.dataset_file)  # read when the run starts (`_load_dataset`)
        self.console = console or default_console()
        #: warnings go apart from the output (stderr), unless a console is given
        self.warnings = console or SafeConsole(stderr=True)
        extra = load_distributions_file(s.distributions_file) if s.distributions_file else {}
        self.distribution: Distribution = resolve_distribution(s.distribution, extra)
        if openrouter_min_coding_score is not None:
            self._warn("openrouter_min_coding_score is not supported by Helios; ignored")
        self.services: ModelServices | None = None
        self.result = GenerateResult(s.run_dir)
        #: the prompts, read when the run starts (after the run folder is checked)
        self.dataset: Dataset

    def _load_dataset(self) -> None:
        s = self.settings
        self.dataset = load_dataset(s.dataset_file, s.max_samples)
        self.result.bad_lines = len(self.dataset.bad)
        self._warn_bad_lines()

    # -- messages ---------------------------------------------------------------------
    def _say(self, text: str, style: str = "") -> None:
        if self.settings.show_progress:
            shown = escape(visible(text))  # lines quote the dataset: its controls are shown
            markup = f"[{style}]{shown}[/]" if style else shown
            self.console.print(markup, highlight=False, soft_wrap=True)

    def _warn(self, text: str) -> None:
        if self.settings.show_progress:
            shown = escape(visible(f"warning: {text}"))  # it may quote the dataset
            self.warnings.print(f"[yellow]{shown}[/]", highlight=False, soft_wrap=True)

    def _warn_bad_lines(self) -> None:
        bad = self.dataset.bad
        for line in bad[:MAX_BAD_LINE_WARNINGS]:
            self._warn(line.render(self.dataset.path))
        if len(bad) > MAX_BAD_LINE_WARNINGS:
            self._warn(f"… and {len(bad) - MAX_BAD_LINE_WARNINGS} more bad lines (all counted "
                       "in statistics.json)")  # fmt: skip

    # -- planning ---------------------------------------------------------------------
    def _usable(self, toolset: str) -> str | None:
        if toolset not in HERMES_TOOLSET_TOOLS:
            return "Helios's generate does not provide it (it offers terminal, file, web)"
        return get_toolset(toolset).unavailable_reason()

    def _units(self, seed: int, services: ModelServices) -> list[PromptUnit]:
        s = self.settings
        sampler = ToolsetSampler(self.distribution, self._usable, self._warn)
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
            await self._run(run, open_session(run, s), run.services)
        return self.result

    async def _run(self, run: Run, session: RunSession, services: ModelServices) -> None:
        s = self.settings
        self.writer = RowWriter(session.run_dir)
        self.door = GenerateDoor(s, self.writer, all_hermes_tool_names())
        units = self._all_units = self._units(session.seed, services)
        if session.adopt:
            self._adopt(session, units)
        records = session.records.values()
        done = {r.get("prompt_key") for r in records if r.get("status") in TERMINAL}
        pending = assign_batches([u for u in units if u.key not in done], s.batch_size,
                                 session.first_batch)  # fmt: skip
        self._records = dict(session.records)
        self._remaining: dict[int, int] = {}
        for unit in pending:
            self._remaining[unit.batch_num] = self._remaining.get(unit.batch_num, 0) + 1
        self._checkpoint_at, self._checkpointing = 0.0, False
        self._print_header(len(units), len(pending), session)
        progress = GenerateProgress(self.console, quiet=not s.verbose, services=services)

        def finish(outcome: RunOutcome[PromptUnit, PromptResult]) -> None:
            self.writer.close()
            self.result.interrupted = outcome.interrupted
            self.result.aborted = outcome.aborted
            self._finish(outcome, session, units)

        # The reviewed records: a verdict that does not hold is pending again.
        await run.drive(
            self.door, pending, done=session.records, emit=progress.handle,
            on_recorded=self._recorded, display=progress if s.show_progress else None,
            finish=finish,
        )  # fmt: skip

    def _adopt(self, session: RunSession, units: list[PromptUnit]) -> None:
        adopted = adopt_rows(session.run_dir, units)
        for record in adopted:
            session.store.append(record)
            session.records[str(record["trial_id"])] = record
        matched = sum(1 for r in adopted if not str(r["trial_id"]).startswith("adopted-"))
        self._say(f"adopted {len(adopted)} rows from existing batch files ({matched} match "
                  "prompts of this dataset)", "cyan")  # fmt: skip

    async def _recorded(self, unit: PromptUnit, result: PromptResult) -> None:
        self._records[unit.trial_id] = self.door.to_record(unit, result)
        self._remaining[unit.batch_num] -= 1
        batch_done = self._remaining[unit.batch_num] == 0
        if batch_done:
            self.writer.close_batch(unit.batch_num)
        if self.settings.verbose and result.status == "ok":
            self._say(f"✓ {unit.label} {unit.row.prompt[: self.settings.log_prefix_chars]!r} "
                      f"toolsets={list(unit.toolsets)}", "green")  # fmt: skip
        due = time.monotonic() - self._checkpoint_at >= CHECKPOINT_INTERVAL
        if (batch_done or due) and not self._checkpointing:
            self._checkpointing = True
            try:
                document = checkpoint_document(self.settings.run_name, self._records.values(),
                                               self._all_units)  # fmt: skip
                await asyncio.to_thread(write_checkpoint, self.settings.run_dir, document)
                self._checkpoint_at = time.monotonic()
            finally:
                self._checkpointing = False

    def _print_header(self, total: int, pending: int, session: RunSession) -> None:
        s = self.settings
        done = total - pending
        rows = {
            "Dataset": f"{s.dataset_file} ({total} prompts"
            + (f", {len(self.dataset.bad)} bad lines" if self.dataset.bad else "")
            + ")",
            "Prompts": f"{pending} to run" + (f", {done} already done" if done else ""),
            "Batches": f"{s.batch_size} prompts each, from batch_{session.first_batch}",
            "Concurrency": f"{s.in_flight} prompts in flight",
            "Model": f"{s.model} @ {self._endpoint()}",
            "Distribution": s.distribution,
            "Sandbox": s.provider,
            "Output": str(session.run_dir),
        }
        if s.show_progress and not s.quiet:
            self.console.print(header_panel("Helios generate", rows))

    def _endpoint(self) -> str:
        url = self.services.spec.base_url if self.services is not None else None
        return public_url(url) if url else ""

    # -- finishing ----------------------------------------------------------------------
    def _finish(self, outcome: RunOutcome[PromptUnit, PromptResult], session: RunSession,
                units: list[PromptUnit]) -> None:  # fmt: skip
        s = self.settings
        records = review_records(session.run_dir, session.store.load_records())
        finals = final_records(records.values())
        merge = merge_rows(session.run_dir, finals.values(), set(all_hermes_tool_names()))
        n_tombstones, n_failures = write_tombstones_and_failures(
            session.run_dir, finals, merge.dropped, units
        )
        write_checkpoint(session.run_dir, checkpoint_document(s.run_name, records.values(), units))
        run = totals(finals.values(), n_failures)
        statistics = statistics_document(
            run_name=s.run_name, distribution=s.distribution, total_prompts=len(units),
            batch_size=s.batch_size, model=s.model, duration=outcome.invocation_seconds,
            total_duration=outcome.seconds, run=run, merge=merge, bad_lines=len(self.dataset.bad),
            failed_prompts=n_failures, tombstones=n_tombstones,
            orphan_rows=_orphans(session.run_dir, records.values()),
        )  # fmt: skip
        write_json_atomic(session.run_dir / STATISTICS, statistics)
        record_models(session.store.run_dir, run.reported_models)  # in run.json too
        self.result.rows, self.result.discarded, self.result.failed = (
            merge.rows,
            n_tombstones,
            n_failures,
        )
        self.result.statistics = statistics
        self.result.prompts = len(units)
        self.result.first_failure = first_failure(finals.values())
        if s.show_progress and not s.quiet:
            self.console.print(final_table(run, merged=merge.rows, failures=n_failures,
                                           tombstones=n_tombstones, seconds=outcome.seconds,
                                           interrupted=outcome.interrupted))  # fmt: skip


def first_failure(finals: Iterable[dict[str, Any]]) -> str | None:
    """The error of the failed prompt with the lowest index, in one line."""
    failed = [r for r in finals if r.get("status") == "error"]
    if not failed:
        return None
    record = min(failed, key=lambda r: (not isinstance(r.get("prompt_index"), int),
                                        r.get("prompt_index") or 0))  # fmt: skip
    error = record.get("error")
    if isinstance(error, dict):
        text = f"{error.get('type') or 'error'}: {error.get('message') or ''}".rstrip(": ")
    else:
        text = str(error or "no error message")
    return visible(" ".join(text.split()), one_line=True)[:300]


def _orphans(run_dir: Path, records: Any) -> int:
    """Rows in batch files that no record points at (left by a kill mid-prompt)."""
    from helios.datagen.folder import batch_files

    lines = 0
    for path in batch_files(run_dir).values():
        with path.open("rb") as handle:
            lines += sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    referenced = sum(1 for r in records if "file" in r)
    return max(lines - referenced, 0)
