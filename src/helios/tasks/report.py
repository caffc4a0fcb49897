"""Final panels: "Batch Results" and, with k > 1, pass@k."""

from __future__ import annotations

from rich.panel import Panel
from rich.table import Table

from helios.tasks.summary import BatchResult


def _fmt_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"  # a short batch is not "00:00"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def results_panel(batch: BatchResult) -> Panel:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    total = batch.total_tasks
    rate = f" ({batch.passed / total:.1%})" if total else ""
    table.add_row("Trials", str(total))
    table.add_row("Passed", f"[green]{batch.passed}[/]{rate}")
    table.add_row(
        "Failed",
        f"[red]{batch.failed}[/]" + (f" ({batch.errored} errors)" if batch.errored else ""),
    )
    if batch.not_run:
        table.add_row("Not run", f"[yellow]{batch.not_run}[/] (finish with --resume)")
    if batch.invalid:
        table.add_row("Invalid tasks", f"[yellow]{len(batch.invalid)}[/]")
    if batch.unsupported:
        table.add_row("Unsupported tasks", f"[yellow]{len(batch.unsupported)}[/]")
    table.add_row("Mean reward", f"{batch.mean_reward:.3f}")
    table.add_row("Duration", _fmt_duration(batch.duration))
    usage = batch.usage
    if usage.calls:
        table.add_row(
            "Tokens",
            f"{usage.input_tokens:,} in · {usage.output_tokens:,} out"
            f" · {usage.output_tokens_per_second:.1f} tok/s",
        )
        why = usage.cost_unknown_reason or "no price"
        cost = (
            usage.cost_text() if usage.cost_known else f"unknown: {why} (add it with --prices FILE)"
        )
        table.add_row("Cost", cost)
        table.add_row("Model calls", f"{usage.calls:,} ({usage.retries:,} retries)")
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
            # pass@n with n attempts is the share of tasks with any passing attempt
            tasks_any = round(value * batch.n_unique_tasks)
            suffix = f" ({tasks_any}/{batch.n_unique_tasks} tasks)"
        lines.append(f"{key}: {value:.1%}{suffix}")
    lines.append(f"Raw: {batch.passed}/{batch.total_tasks} ({batch.pass_rate:.1%})")
    return Panel("\n".join(lines), title="pass@k", expand=False, border_style="cyan")


def final_panels(batch: BatchResult) -> list[Panel]:
    panels = [results_panel(batch)]
    if batch.n_attempts > 1:
        panels.append(pass_at_k_panel(batch))
    return panels
