"""The datagen door's adapter to the batch service: a prompt runs in a fresh sandbox
with the tool agent and its sampled toolsets, then becomes a Hermes row, a
tombstone (no reasoning) or a failure.

Only the model's own answer can make a tombstone: a conversation that ended
normally (an answer, submit, the turn limit, invalid replies) with no reasoning in
any turn. A prompt cut short by something else (its timeout, the endpoint, the
sandbox) and left without reasoning is a failure, which `--resume` runs again.

`write_files` appends the row to its batch file (fsynced) before the engine
appends the completion record, and the record says where the row is.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from helios.agents.toolsets import Tool, resolve_tools
from helios.datagen.folder import RowWriter
from helios.datagen.rows import Coverage, ToolStats, hermes_row, reasoning_coverage, tool_stats
from helios.datagen.settings import DEFAULT_SYSTEM_PROMPT, GenerateSettings
from helios.datagen.units import PromptUnit
from helios.engine.batch import Verdict
from helios.engine.episode import Episode, EpisodeContext, EpisodeSpec, run_episode
from helios.engine.scheduler import Slot
from helios.environments.spec import DEFAULT_WORKDIR, SandboxSpec
from helios.failures import ErrorInfo
from helios.secrets import redact_value
from helios.trajectories.sharegpt import to_sharegpt
from helios.usage import Usage

#: agent endings that are not the model's answer (the prompt's time ran out)
CUT_SHORT = frozenset({"AgentTimeout"})


@dataclass
class PromptResult:
    unit: PromptUnit
    #: "ok" (a row), "discarded" (a tombstone) or "error" (a failure, retried on resume)
    status: str
    error: ErrorInfo | None = None
    reason: str | None = None
    row: bytes | None = None
    #: (batch file, byte offset, length) once the row is on disk
    location: tuple[str, int, int] | None = None
    stats: ToolStats = field(default_factory=dict)
    coverage: Coverage = field(default_factory=lambda: Coverage(0, 0))
    api_calls: int = 0
    completed: bool = False
    partial: bool = False
    usage: Usage = field(default_factory=Usage)
    duration: float = 0.0


class ImageCheck:
    """Is an image usable? Asked once per image: inspect, else one pull attempt."""

    def __init__(self, pull_timeout: float = 600.0) -> None:
        self.pull_timeout = pull_timeout
        self._checks: dict[str, asyncio.Task[str | None]] = {}

    async def problem(self, image: str) -> str | None:
        task = self._checks.get(image)
        if task is None:
            task = asyncio.ensure_future(self._probe(image))
            self._checks[image] = task
        return await asyncio.shield(task)

    async def _probe(self, image: str) -> str | None:
        from helios.environments.docker.cli import docker

        code, _, _ = await docker("image", "inspect", image)
        if code == 0:
            return None
        code, _, err = await docker("pull", "-q", image, timeout=self.pull_timeout)
        if code == 0:
            return None
        reason = (err.strip().splitlines() or ["pull failed"])[-1][:300]
        return f"image {image!r} is not available locally and could not be pulled: {reason}"


@dataclass
class GenerateDoor:
    settings: GenerateSettings
    writer: RowWriter
    #: every tool name the Hermes toolsets can offer (the zero-filled tool_stats keys)
    all_tools: Sequence[str]
    images: ImageCheck = field(default_factory=ImageCheck)
    _tools: dict[tuple[str, ...], list[Tool]] = field(default_factory=dict)

    def agent_settings(self) -> dict[str, Any]:
        s = self.settings
        return {
            "max_turns": s.max_turns,
            "system_prompt": s.ephemeral_system_prompt or DEFAULT_SYSTEM_PROMPT,
            "prefill": s.prefill_messages or [],
        }

    def tools_for(self, toolsets: tuple[str, ...]) -> list[Tool]:
        if toolsets not in self._tools:
            self._tools[toolsets] = resolve_tools(toolsets)
        return self._tools[toolsets]

    def sandbox(self, unit: PromptUnit) -> SandboxSpec:
        docker = self.settings.provider == "docker"
        image = (unit.row.image or self.settings.image) if docker else None
        return SandboxSpec(image=image, workdir=unit.row.cwd or DEFAULT_WORKDIR,
                           label=unit.label, memory_mb=2048)  # fmt: skip

    async def run_unit(self, unit: PromptUnit, ctx: EpisodeContext, slot: Slot) -> PromptResult:
        started = time.monotonic()
        sandbox = self.sandbox(unit)
        if sandbox.image is not None:
            problem = await self.images.problem(sandbox.image)
            if problem is not None:
                error = ErrorInfo(type="ImageUnavailable", message=problem,
                                  phase="environment", infrastructure=True)  # fmt: skip
                return PromptResult(unit, "error", error=error)
        spec = EpisodeSpec(
            trial_id=unit.trial_id, label=unit.label, folder=None, sandbox=sandbox,
            provider=self.settings.provider, agent="tool", agent_settings=self.agent_settings(),
            instruction=unit.row.prompt, agent_timeout=self.settings.prompt_timeout,
            tools=self.tools_for(unit.toolsets),
        )  # fmt: skip
        episode = await run_episode(spec, ctx, slot)
        result = self.classify(unit, episode)
        result.duration = time.monotonic() - started
        return result

    def classify(self, unit: PromptUnit, episode: Episode) -> PromptResult:
        outcome = episode.outcome
        conversation = outcome.conversation
        result = PromptResult(unit, "ok", usage=episode.usage, api_calls=outcome.n_turns)
        result.stats = tool_stats(conversation)
        result.coverage = reasoning_coverage(conversation)
        if episode.error is not None:
            result.status, result.error = "error", episode.error
            return result
        agent_error = episode.agent_error
        result.completed = agent_error is None
        result.partial = agent_error is not None and agent_error.type != "MaxTurns"
        if result.coverage.with_reasoning == 0:
            if cut_short(agent_error) and (
                result.api_calls == 0 or not self.settings.keep_no_reasoning
            ):
                # Never a tombstone: the model was not done; --resume runs it again.
                result.status, result.error = "error", agent_error
                return result
            if not self.settings.keep_no_reasoning:
                result.status, result.reason = "discarded", "no_reasoning"
                return result
        conversations = to_sharegpt(conversation, prompt=unit.row.prompt, tools=outcome.tools,
                                    setup_messages=outcome.setup_messages)  # fmt: skip
        row = hermes_row(
            prompt_index=unit.row.index, conversations=conversations, batch_num=unit.batch_num,
            model=self.settings.model, completed=result.completed, partial=result.partial,
            api_calls=result.api_calls, toolsets=list(unit.toolsets), stats=result.stats,
            all_tools=self.all_tools,
        )  # fmt: skip
        text = json.dumps(redact_value(row), ensure_ascii=False) + "\n"
        result.row = text.encode("utf-8", errors="replace")
        return result

    def write_files(self, unit: PromptUnit, result: PromptResult) -> None:
        if result.row is not None and result.location is None:
            result.location = self.writer.append(unit.batch_num, result.row)

    def to_record(self, unit: PromptUnit, result: PromptResult) -> dict[str, Any]:
        record: dict[str, Any] = {
            "trial_id": unit.trial_id, "status": result.status, "prompt_key": unit.key,
            "prompt_index": unit.row.index, "line": unit.row.line, "batch_num": unit.batch_num,
            "toolsets": list(unit.toolsets), "api_calls": result.api_calls,
            "completed": result.completed, "partial": result.partial,
            "tool_stats": result.stats, "turns": result.coverage.turns,
            "turns_with_reasoning": result.coverage.with_reasoning,
            "tokens_in": result.usage.input_tokens + result.usage.cache_read_tokens,
            "tokens_out": result.usage.output_tokens, "cost_usd": result.usage.cost_usd,
            "duration": round(result.duration, 3), "finished_at": time.time(),
        }  # fmt: skip
        if result.usage.cost_usd is None:
            record["cost_unknown_reason"] = result.usage.cost_unknown_reason
        if result.usage.reported_models:  # the model ids the provider answered with
            record["reported_models"] = result.usage.reported_models
        if result.usage.cache_hits:  # answers the response cache gave (--cache)
            record["cache_hits"] = result.usage.cache_hits
            record["cache_saved_tokens"] = result.usage.cache_saved_tokens
        if result.location is not None:
            record["file"], record["offset"], record["length"] = result.location
        if result.reason is not None:
            record["reason"] = result.reason
        if result.error is not None:
            record["error"] = result.error.model_dump(mode="json", exclude_none=True)
        return record

    def crashed(self, unit: PromptUnit, error: ErrorInfo) -> PromptResult:
        # A row already written stays unreferenced (an orphan the merge skips).
        return PromptResult(unit, "error", error=error.model_copy(update={"infrastructure": True}))

    def verdict(self, result: PromptResult) -> Verdict:
        error = result.error
        if result.status == "ok":
            detail = f"{result.api_calls} calls, row in batch_{result.unit.batch_num}"
        elif result.status == "discarded":
            detail = "discarded: no reasoning in any turn"
        else:
            detail = f"failed: {error.type}: {error.message}" if error else "failed"
        return Verdict(
            passed=result.status == "ok",
            detail=detail,
            error_kind=error.type if error else None,
            error_message=error.message if error else "",
        )


def cut_short(ending: ErrorInfo | None) -> bool:
    """Did something other than the model end the conversation (a timeout, an
    infrastructure failure)?"""
    return ending is not None and (ending.type in CUT_SHORT or ending.infrastructure)
