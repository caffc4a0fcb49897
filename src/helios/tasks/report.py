"""What a task run shows: its header's rows, each trial's result in `helios run`'s
view, and the final panels ("Batch Results" and, with k > 1, pass@k)."""

from __future__ import annotations

from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from helios.display.console import plain
from helios.display.presenter import RunPresenter
from helios.display.trial import TrialView
from helios.figures import out_tokens_per_second, percent
from helios.tasks.results import TrialResult
from helios.tasks.selection import selected_line
from helios.tasks.settings import TaskBatchSettings
from helios.tasks.summary import BatchResult, breakdown
from helios.usage import Usage


def header(
    show: RunPresenter, settings: TaskBatchSettings, *, task: str, agent: str,
    n_trials: int, n_pending: int, per_task: int, invalid: int = 0, unsupported: int = 0,
    found: int | None = None, retried: int = 0,
) -> tuple[str, dict[str, str]]:  # fmt: skip
    """The header's title and rows: `helios run`'s (one task) or the batch's. The
    agent line names the agent(s) and model(s); the rest the run's config holds."""
    s = settings
    endpoint = show.endpoint_row() if s.models.model else {}
    done = f" ({n_trials - n_pending} already done)" if n_pending < n_trials else ""
    if retried:  # --retry-failed-below: the done trials run again as new attempts
        below = f"{s.retry_failed_below:g}" if s.retry_failed_below is not None else "R"
        done = f" ({n_trials - n_pending + retried} done, {retried} retried: reward below {below})"
    if s.view == "trial":
        rows = {"Task": task, "Agent": agent, **endpoint, "Environment": show.environment}
        if s.n_attempts > 1:
            rows["Attempts"] = str(s.n_attempts) + done
        return "Helios run", {**rows, "Output": show.output}
    n_tasks = n_trials // per_task
    return "Helios batch", {
        "Tasks": (
            f"{n_tasks} found" if found is None
            else selected_line(n_tasks + invalid + unsupported, found)
        )
        + (f", {invalid} invalid" if invalid else "")
        + (f", {unsupported} unsupported" if unsupported else ""),
        "Attempts": str(s.n_attempts),
        "Trials": f"{n_trials}{done}",
        "Concurrency": show.concurrency,
        "Agent": agent,
        **endpoint,
        "Environment": show.environment,
        "Output": show.output,
    }


def show_result(view: TrialView, result: TrialResult) -> None:
    """A trial's result in `helios run`'s view."""
    errors = [e for e in (result.error, result.agent_error) if e is not None]
    usage = result.usage
    view.result(
        passed=result.passed, status=result.status,
        rewards=result.rewards or {"reward": result.reward}, duration=result.duration,
        error="; ".join(f"{e.type}: {e.message}" for e in errors) or None,
        usage=f"tokens {usage.input_tokens:,} in · {usage.output_tokens:,} out · "
        f"{usage.calls:,} model calls" if usage.calls else "",
    )  # fmt: skip


def _fmt_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"  # a short batch is not "00:00"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _tokens_in(usage: Usage) -> str:
    """Prompt tokens as the live line counts them: cache reads included."""
    cached = usage.cache_read_tokens
    return f"{usage.input_tokens + cached:,}" + (f" ({cached:,} cached)" if cached else "")


def results_panel(batch: BatchResult) -> Panel:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")  # a long output path wraps, never cut
    total = batch.total_trials
    rate = f" ({percent(batch.pass_rate)})" if total or batch.invalid else ""
    table.add_row("Trials", str(total))
    table.add_row("Passed", f"[green]{batch.passed}[/]{rate}")
    table.add_row(
        "Failed",
        f"[red]{batch.failed}[/]" + (f" ({batch.errored} errors)" if batch.errored else ""),
    )
    if batch.not_run:
        table.add_row("Not run", f"[yellow]{batch.not_run}[/] (finish with --resume)")
    if batch.budget_stopped:  # which budget, and the spend against it
        table.add_row("Budget", Text(batch.budget_stopped, style="yellow"))
    if batch.invalid:
        table.add_row("Invalid tasks", f"[yellow]{len(batch.invalid)}[/]")
    if batch.unsupported:
        table.add_row("Unsupported tasks", f"[yellow]{len(batch.unsupported)}[/]")
    table.add_row("Mean reward", f"{batch.mean_reward:.3f}")
    table.add_row("Duration", _fmt_duration(batch.duration))
    usage = batch.usage
    if usage.calls:
        # the live line's figure: output tokens per second of the run's wall time
        wall = batch.out_tokens_per_second
        if wall is None:
            wall = out_tokens_per_second(usage.output_tokens, batch.duration)
        table.add_row(
            "Tokens",
            f"{_tokens_in(usage)} in · {usage.output_tokens:,} out · {wall:,.0f} out tok/s"
            + (" (of the recorded trials)" if batch.interrupted else ""),
        )
        why = usage.cost_unknown_reason or "no price"
        cost = (
            usage.cost_text() if usage.cost_known else f"unknown: {why} (add it with --prices FILE)"
        )
        table.add_row("Cost", cost)
        table.add_row(
            "Model calls",
            f"{usage.calls:,} ({usage.retries:,} retries) · "
            f"{usage.output_tokens_per_second:,.0f} out tok/s per call",
        )
    if usage.cache_hits:  # --cache: answers replayed, at no cost and with no call
        table.add_row("Response cache", usage.cache_text().removeprefix("cache: "))
    stopped = batch.stopped_usage
    if stopped is not None and (stopped.calls or stopped.output_tokens):
        table.add_row(
            "Stopped trials",
            f"{_tokens_in(stopped)} in · {stopped.output_tokens:,} out tokens, counted live"
            " but not recorded",
        )
    if batch.output_dir is not None:
        table.add_row("Output", str(batch.output_dir))
    title = "Batch Results" + (" (interrupted)" if batch.interrupted else "")
    return Panel(
        table, title=title, expand=False, border_style="green" if not batch.failed else "yellow"
    )


def pass_at_k_panel(batch: BatchResult) -> Panel:
    lines: list[str] = []
    k_max = batch.n_attempts
    for key, value in batch.pass_at_k_table.items():
        suffix = ""
        if key == f"pass@{k_max}":
            # pass@n with n attempts is the share of tasks with any passing attempt (with
            # several models or agents: of the tasks with each of them)
            groups = batch.n_unique_tasks * batch.combinations
            what = "tasks" if batch.combinations == 1 else "task × model × agent"
            suffix = f" ({round(value * groups)}/{groups} {what})"
        lines.append(f"{key}: {percent(value)}{suffix}")
    lines.append(f"Raw: {batch.passed}/{batch.total_trials} ({percent(batch.raw_pass_rate)})")
    return Panel("\n".join(lines), title="pass@k", expand=False, border_style="cyan")


#: failed trials listed in the final panel; batch_summary.json has them all
MAX_FAILED_SHOWN = 10


def failed_panel(batch: BatchResult, limit: int = MAX_FAILED_SHOWN) -> Panel | None:
    """The trials that did not pass, each with why (the verifier's line or the
    error), the first `limit` of them; None when every trial passed."""
    failed = [r for r in batch.results if not r.passed]
    if not failed:
        return None
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for result in failed[:limit]:
        attempt = f" #{result.attempt}" if batch.n_attempts > 1 else ""
        if batch.combinations > 1:  # which model and agent
            attempt += f" ({result.model or 'no model'} · {result.agent})"
        mark = "[red]✗[/]" if result.status != "error" else "[red]![/]"
        table.add_row(
            Text.from_markup(mark) + plain(f" {result.name}{attempt}"),
            plain(result.reason or f"reward={result.reward:g}", "dim"),
        )
    if len(failed) > limit:
        table.add_row("", Text(f"… and {len(failed) - limit} more (batch_summary.json lists all)"))
    return Panel(table, title="Failed trials", expand=False, border_style="red")


def breakdown_panel(batch: BatchResult) -> Panel | None:
    """Pass rate, trials, errors and cost per model and per agent, when the run has
    more than one of either; None otherwise."""
    table = Table(box=None, padding=(0, 2), show_edge=False)
    for column in ("", "Trials", "Passed", "Errors", "Cost"):
        table.add_column(column, justify="left" if not column else "right", overflow="fold")
    rows = 0
    for by in ("model", "agent"):
        sections = breakdown(batch, by)
        if len(sections) < 2:
            continue
        for name, row in sections.items():
            cost = "unknown" if row["cost_usd"] is None else f"${row['cost_usd']:.4f}"
            table.add_row(plain(f"{by} {name}"), str(row["trials"]),
                          f"{row['passed']} ({percent(row['pass_rate'])})",
                          str(row["errored"]), cost)  # fmt: skip
            rows += 1
    if not rows:
        return None
    return Panel(table, title="By model and agent", expand=False, border_style="cyan")


def closing_panels(batch: BatchResult, view: str) -> list[Panel]:
    """What a finished run shows: the batch's final panels; `helios run`'s view has
    shown each trial already, so only pass@k (with k > 1)."""
    if view == "batch":
        return final_panels(batch)
    return [pass_at_k_panel(batch)] if batch.n_attempts > 1 else []


def final_panels(batch: BatchResult) -> list[Panel]:
    panels = [results_panel(batch)]
    several = breakdown_panel(batch)
    if several is not None:
        panels.append(several)
    if batch.n_attempts > 1:
        panels.append(pass_at_k_panel(batch))
    failed = failed_panel(batch)
    if failed is not None:
        panels.append(failed)
    return panels
