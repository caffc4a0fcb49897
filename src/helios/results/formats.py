"""A comparison as a file: JSON (everything), CSV (a row per task and pair) and
Markdown (the tables a report or a pull request shows).

Task names, labels and models are untrusted text. JSON carries them as they are (its
encoder escapes control characters); CSV shows a control character as an escape
(`\x1b`: the file may be printed on a terminal) and puts a quote before a cell that
a spreadsheet would read as a formula (`=`, `+`, `-`, `@`); Markdown also escapes every character
that would make them formatting, a link or HTML, so a rendered report shows them
literally.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable

from helios.figures import percent, points
from helios.results.compare import CompareReport, Comparison, RunSummary, TaskSide
from helios.text import visible

CSV_COLUMNS = (
    "baseline", "run", "task", "change",
    "a_attempts", "a_passed", "a_pass_rate", "a_mean_reward", "a_mean_duration", "a_mean_cost_usd",
    "b_attempts", "b_passed", "b_pass_rate", "b_mean_reward", "b_mean_duration", "b_mean_cost_usd",
    "reward_delta", "duration_delta", "cost_delta_usd",
)  # fmt: skip

#: what Markdown reads as formatting, a link, an entity or HTML inside a table cell
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>&|~!#])")


#: what a spreadsheet reads as the start of a formula (CSV injection): such a cell
#: gets a leading quote, which the spreadsheet shows as text
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(text: str) -> str:
    """Untrusted text (a task name, a label) for a CSV cell: control characters as
    escapes, and never read as a formula by a spreadsheet."""
    if text.startswith(_FORMULA_START):
        text = "'" + text
    return visible(text)


def to_csv(report: CompareReport) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for comparison in report.comparisons:
        for row in comparison.tasks:
            writer.writerow([
                csv_text(comparison.a), csv_text(comparison.b), csv_text(row.task), row.change,
                *_side_cells(row.a), *_side_cells(row.b),
                _number(row.reward_delta), _number(row.duration_delta),
                _number(row.cost_delta_usd),
            ])  # fmt: skip
    return out.getvalue()


def _side_cells(side: TaskSide | None) -> list[str]:
    if side is None:
        return [""] * 6
    return [str(side.attempts), str(side.passed), _number(side.pass_rate),
            _number(side.mean_reward), _number(side.mean_duration),
            _number(side.mean_cost_usd)]  # fmt: skip


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


# -- Markdown -----------------------------------------------------------------------
def md(text: str) -> str:
    """Untrusted text for a Markdown table cell, shown literally once rendered."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", visible(text, one_line=True))


def money(value: float | None) -> str:
    """Dollars: cents from a dollar up, four decimals below (a cheap model's tasks)."""
    if value is None:
        return "unknown"
    if value == 0:
        return "$0"
    return f"${value:.2f}" if abs(value) >= 1 else f"${value:.4f}"


def signed_money(value: float | None) -> str:
    if value is None:
        return "unknown"
    return ("-" if value < 0 else "+") + money(abs(value))


def seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}s"


def signed_seconds(value: float | None) -> str:
    return "" if value is None else f"{value:+.1f}s"


def attempts(side: TaskSide | None) -> str:
    return "—" if side is None else f"{side.passed}/{side.attempts}"


def flip_titles(comparison: Comparison, a: str, b: str) -> tuple[str, str]:
    """What a regression and a fix are: pass → fail with one attempt per task, a lower
    or higher pass rate with more."""
    several = any(
        side is not None and side.attempts > 1
        for row in comparison.tasks
        for side in (row.a, row.b)
    )
    if several:
        return f"passed less often in {b} than in {a}", f"passed more often in {b} than in {a}"
    return f"passed in {a}, failed in {b}", f"failed in {a}, passed in {b}"


def verdict(comparison: Comparison) -> str:
    if comparison.shared_tasks == 0:
        return "no shared task"
    if comparison.significantly_worse:
        return "significantly worse"
    if comparison.significantly_better:
        return "significantly better"
    return "no significant difference"


def interval(comparison: Comparison) -> str:
    ci = comparison.ci
    normal = ", normal approximation" if ci.method == "normal" else ""
    return f"{ci.confidence:.0%} CI {ci.low * 100:+.1f} … {ci.high * 100:+.1f} pp{normal}"


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _run_row(run: RunSummary) -> list[str]:
    k = max(run.pass_at_k, key=lambda key: int(key[5:]), default=None)
    labels = [run.name or "", " ".join(f"{k}={v}" for k, v in run.tags.items())]
    named = " · ".join(part for part in labels if part)
    return [
        md(run.label) + (f" ({md(named)})" if named else "")
        + ("" if run.finished else " (unfinished)"), md(run.model or ""),
        md(run.agent or ""), str(run.tasks), str(run.trials), percent(run.pass_rate),
        "" if k is None else f"{k}: {percent(run.pass_at_k[k])}", f"{run.mean_reward:.3f}",
        money(run.cost_usd), seconds(run.wall_seconds),
    ]  # fmt: skip


def to_markdown(report: CompareReport, *, tasks: bool = False, limit: int = 0) -> str:
    """The runs, each comparison with its interval, its flips and (`tasks`) every task;
    `limit` > 0 lists at most that many flips and tasks per comparison."""
    lines = ["## Runs", ""]
    lines += _table(
        ["run", "model", "agent", "tasks", "trials", "pass rate", "pass@k", "mean reward",
         "cost", "duration"],
        (_run_row(run) for run in report.runs),
    )  # fmt: skip
    for comparison in report.comparisons:
        lines += ["", f"## {md(comparison.b)} against {md(comparison.a)}", ""]
        lines += _summary_table(comparison)
        lines += ["", f"**{verdict(comparison)}** ({interval(comparison)}, "
                  f"{comparison.ci.resamples} resamples, seed {comparison.ci.seed})"]  # fmt: skip
        if comparison.note:
            lines += ["", f"Note: {md(comparison.note)}"]
        worse, better = flip_titles(comparison, "A", "B")
        flips = [(f"Regressions ({worse})", comparison.regressions),
                 (f"Fixes ({better})", comparison.fixes)]  # fmt: skip
        by_name = {row.task: row for row in comparison.tasks}
        for title, names in flips:
            lines += ["", f"### {title}: {len(names)}"]
            if names:
                shown = names[:limit] if limit > 0 else names
                cells = ([md(n), attempts(by_name[n].a), attempts(by_name[n].b)] for n in shown)
                lines += ["", *_table(["task", "A", "B"], cells)]
                if len(shown) < len(names):
                    lines += ["", f"… and {len(names) - len(shown)} more"]
        if tasks:
            rows = comparison.tasks[:limit] if limit > 0 else comparison.tasks
            lines += ["", f"### Tasks: {len(comparison.tasks)}", ""]
            lines += _table(
                ["task", "change", "A", "B", "reward Δ", "duration Δ", "cost Δ"],
                ([md(r.task), r.change, attempts(r.a), attempts(r.b),
                  "" if r.reward_delta is None else f"{r.reward_delta:+.3f}",
                  signed_seconds(r.duration_delta),
                  "" if r.a is None or r.b is None else signed_money(r.cost_delta_usd)]
                 for r in rows),
            )  # fmt: skip
            if len(rows) < len(comparison.tasks):
                lines += ["", f"… and {len(comparison.tasks) - len(rows)} more"]
    return "\n".join(lines) + "\n"


def _summary_table(c: Comparison) -> list[str]:
    rows = [
        ["tasks paired", str(c.shared_tasks), str(c.shared_tasks), ""],
        ["pass rate", percent(c.pass_rate_a), percent(c.pass_rate_b),
         f"{points(c.pass_rate_delta)} ({interval(c)})"],
        ["mean reward", f"{c.mean_reward_a:.3f}", f"{c.mean_reward_b:.3f}",
         f"{c.reward_delta:+.3f}"],
        *([key, percent(c.pass_at_k_a[key]), percent(c.pass_at_k_b[key]),
           points(c.pass_at_k_b[key] - c.pass_at_k_a[key])] for key in c.pass_at_k_a),
        ["cost", money(c.cost_a_usd), money(c.cost_b_usd), signed_money(c.cost_delta_usd)],
        ["trial time", seconds(c.trial_seconds_a), seconds(c.trial_seconds_b),
         signed_seconds(c.duration_delta)],
    ]  # fmt: skip
    return _table(["", "A (baseline)", "B", "Δ (B − A)"], rows)
