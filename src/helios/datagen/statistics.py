"""`statistics.json`: Hermes's fields, then Helios's counts (failed and discarded
prompts, bad input lines, what the merge dropped, tokens and cost)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from helios.datagen.outputs import TERMINAL, MergeResult
from helios.usage import merge_reported


@dataclass
class RunTotals:
    """Counts over the final record of every prompt, for the file and the final table."""

    tools: dict[str, dict[str, int]]
    turns: int
    turns_with_reasoning: int
    rows: int
    discarded: int
    failed: int
    tokens_in: int
    tokens_out: int
    #: None: unknown (a prompt's model had no price), `cost_unknown_reason` says why
    cost_usd: float | None
    batches: int
    cost_unknown_reason: str | None = None
    #: each model asked for with the ids the provider reported (`Usage.reported_models`)
    reported_models: dict[str, list[str]] = field(default_factory=dict)
    #: model calls the response cache answered (`--cache`), and the tokens they took
    cache_hits: int = 0
    cache_saved_tokens: int = 0

    @property
    def cost_text(self) -> str:
        return "cost unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"


def totals(finals: Iterable[dict[str, Any]], failed_now: int) -> RunTotals:
    result = RunTotals({}, 0, 0, 0, 0, failed_now, 0, 0, 0.0, 0)
    batches: set[int] = set()
    for record in finals:
        batches.add(int(record.get("batch_num", 0)))
        status = record.get("status")
        result.tokens_in += int(record.get("tokens_in", 0))
        result.tokens_out += int(record.get("tokens_out", 0))
        result.cache_hits += int(record.get("cache_hits", 0))
        result.cache_saved_tokens += int(record.get("cache_saved_tokens", 0))
        _add_cost(result, record)
        reported = record.get("reported_models")
        if isinstance(reported, dict):  # a record is read back: only lists of ids count
            merge_reported(result.reported_models, {
                str(k): [i for i in v if isinstance(i, str)]
                for k, v in reported.items() if isinstance(v, list)})  # fmt: skip
        if status not in TERMINAL:
            continue
        result.rows += status == "ok"
        result.discarded += status == "discarded"
        result.turns += int(record.get("turns", 0))
        result.turns_with_reasoning += int(record.get("turns_with_reasoning", 0))
        for name, entry in (record.get("tool_stats") or {}).items():
            total = result.tools.setdefault(name, {"count": 0, "success": 0, "failure": 0})
            for key in total:
                total[key] += int(entry.get(key, 0))
    result.batches = len(batches)
    return result


def _add_cost(result: RunTotals, record: dict[str, Any]) -> None:
    """A record's cost into the total: an unknown one (null) makes the total unknown."""
    cost = record.get("cost_usd", 0.0)
    if cost is None or result.cost_usd is None:
        result.cost_usd = None
        result.cost_unknown_reason = result.cost_unknown_reason or str(
            record.get("cost_unknown_reason") or "unknown"
        )
    else:
        result.cost_usd += float(cost)


def _rates(stats: dict[str, int]) -> dict[str, Any]:
    calls = stats["success"] + stats["failure"]
    share = (lambda n: round(n / calls * 100, 2)) if calls else (lambda n: 0.0)
    return {
        **stats,
        "success_rate": share(stats["success"]),
        "failure_rate": share(stats["failure"]),
    }


def statistics_document(
    *,
    run_name: str,
    distribution: str,
    total_prompts: int,
    batch_size: int,
    model: str,
    duration: float,
    total_duration: float,
    run: RunTotals,
    merge: MergeResult,
    bad_lines: int,
    failed_prompts: int,
    tombstones: int,
    orphan_rows: int,
) -> dict[str, Any]:
    tools = sorted(run.tools.items(), key=lambda item: -item[1]["count"])
    return {
        "run_name": run_name,
        "distribution": distribution,
        "total_prompts": total_prompts,
        "total_batches": run.batches,
        "batch_size": batch_size,
        "model": model,
        "completed_at": datetime.now().isoformat(),
        "duration_seconds": round(duration, 2),
        "tool_statistics": {name: _rates(stats) for name, stats in tools},
        "reasoning_statistics": {
            "total_assistant_turns": run.turns,
            "turns_with_reasoning": run.turns_with_reasoning,
            "turns_without_reasoning": run.turns - run.turns_with_reasoning,
        },
        # Helios's additions
        "trajectories_written": merge.rows,
        "failed_prompts": failed_prompts,
        "discarded_prompts": tombstones,
        "discarded_no_reasoning": run.discarded,
        "dropped_invalid_json": merge.invalid_json,
        "dropped_invalid_tool_names": merge.invalid_tools,
        "dropped_missing_rows": merge.missing,
        "orphan_rows_skipped": orphan_rows,
        "bad_input_lines": bad_lines,
        "total_duration_seconds": round(total_duration, 2),
        "usage": {
            "input_tokens": run.tokens_in,
            "output_tokens": run.tokens_out,
            "cost_usd": None if run.cost_usd is None else round(run.cost_usd, 6),
            **({"cost_unknown_reason": run.cost_unknown_reason} if run.cost_usd is None else {}),
            **({"reported_models": run.reported_models} if run.reported_models else {}),
            **({"cache_hits": run.cache_hits, "cache_saved_tokens": run.cache_saved_tokens}
               if run.cache_hits else {}),
        },
    }
