"""The task door's adapter to the batch service: a trial runs, then its files,
its record and its verdict."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from helios.agents.registry import agent_version
from helios.engine.batch import Verdict
from helios.engine.episode import EpisodeContext, now_iso, unit_dir
from helios.engine.scheduler import Slot
from helios.engine.store import write_json_atomic
from helios.failures import ErrorInfo
from helios.models.response_cache import sampling
from helios.tasks.features import features_used
from helios.tasks.phases import TimeoutScale, network_record
from helios.tasks.results import TrialResult
from helios.tasks.trial import TrialSpec, run_trial


@dataclass
class TaskDoor:
    run_dir: Path

    async def run_unit(self, unit: TrialSpec, ctx: EpisodeContext, slot: Slot) -> TrialResult:
        folder = unit_dir(ctx, unit.folder)
        if folder is not None:
            await asyncio.to_thread(write_json_atomic, folder / "config.json", spec_config(unit))
        if ctx.services is not None:  # a run over several models: the trial's own
            ctx = replace(ctx, services=ctx.services.for_model(unit.model))
        with sampling(unit.attempt):  # -k 3: three answers cached, each replayed
            return await run_trial(unit, ctx, slot)

    def inputs(self, unit: TrialSpec) -> dict[str, Path]:
        """The host folder a trial reads, by its content hash: its task's folder (an
        executor whose nodes do not share this file system ships it to them)."""
        return {unit.task.checksum: unit.task.path}

    def with_inputs(self, unit: TrialSpec, copies: Mapping[str, Path]) -> TrialSpec:
        """The trial reading its task from `copies` (a node's copy, by content hash);
        its records still name the task's own folder."""
        task = unit.task
        moved = task.model_copy(update={"path": copies[task.checksum], "origin": task.source})
        return replace(unit, task=moved)

    def retried(self, unit: TrialSpec, n: int, trial_id: str) -> TrialSpec:
        """The trial run again as its n-th retry (`engine.retries`): beside the old
        one, in `<folder>__retry<n>`, never over it."""
        return replace(unit, trial_id=trial_id, folder=f"{unit.folder}__retry{n}",
                       label=f"{unit.label} (retry {n})", retry_of=unit.trial_id,
                       retry=n)  # fmt: skip

    def write_files(self, unit: TrialSpec, result: TrialResult) -> None:
        data = result.model_dump(mode="json")
        write_json_atomic(self.run_dir / unit.folder / "result.json", data)

    def to_record(self, unit: TrialSpec, result: TrialResult) -> dict[str, Any]:
        return result.model_dump(mode="json")

    def crashed(self, unit: TrialSpec, error: ErrorInfo) -> TrialResult:
        stamp = now_iso()
        return TrialResult(
            **unit.identity(),
            status="error",
            error=error.model_copy(update={"infrastructure": True}),
            started_at=stamp,
            finished_at=stamp,
        )

    def verdict(self, result: TrialResult) -> Verdict:
        detail = f"reward={result.reward:g} ({result.duration:.1f}s)"
        reason = "" if result.passed else result.reason
        if reason:
            detail += f" · {reason}"
        error = result.error
        return Verdict(
            passed=result.passed,
            detail=detail,
            error_kind=error.type if error else None,
            error_message=error.message if error else "",
        )


def _version_of(agent: str, settings: Mapping[str, Any]) -> dict[str, str]:
    """`agent_version` for an installed agent (the release it ran), else nothing."""
    version = agent_version(agent, settings)
    return {} if version is None else {"agent_version": version}


def spec_config(spec: TrialSpec) -> dict[str, Any]:
    cfg = spec.task.config
    scale = spec.timeouts or TimeoutScale()
    return {
        "trial_id": spec.trial_id,
        "task": spec.task.name,
        "task_path": str(spec.task.source),
        "task_checksum": spec.task.checksum,
        "attempt": spec.attempt,
        **({"retry_of": spec.retry_of, "retry": spec.retry} if spec.retry else {}),
        "agent": spec.agent,
        "agent_settings": spec.agent_settings,
        **_version_of(spec.agent, spec.agent_settings),
        "model": spec.model,
        "provider": spec.provider,
        "timeouts": {
            "build": cfg.environment.build_timeout_sec,
            # as the trial ran them: a job's multipliers applied
            "agent": cfg.agent.timeout_sec * scale.of(scale.agent),
            "verifier": cfg.verifier.timeout_sec * scale.of(scale.verifier),
        },
        "schema_version": cfg.schema_version,
        "features": features_used(spec.task),
        "network": network_record(spec.task),
        **({"steps": [step.name for step in cfg.steps]} if cfg.steps else {}),
    }
