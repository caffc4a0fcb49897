"""The tool-call door: one run (prompt, run index) is a unit of work on the engine.

A unit's run: the prompt's audio (made by the prompt's first run and shared with its
others, `SharedValues`), then an engine episode (`run_episode`) with the null sandbox,
the agent under test behind its adapter and the evaluator as the scorer
(`toolcalls/episode.py`). It never raises: a failure anywhere becomes a failed run
that carries its error. The synthesizer's and the agent's calls go through the
engine's `EndpointCalls`: transient failures (timeouts, 429, 5xx, dropped
connections) are retried with Helios's backoff, which frees the slot.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from helios.engine import (
    EndpointCalls,
    EpisodeContext,
    EpisodeSpec,
    PhaseChanged,
    Retrying,
    SharedValues,
    Slot,
    Verdict,
    run_episode,
)
from helios.environments import NULL_SPEC
from helios.failures import ErrorInfo
from helios.models.base import ToolCall
from helios.models.errors import ModelError
from helios.models.response_cache import sampling
from helios.models.retry import RetryPolicy
from helios.toolcalls.episode import EvaluatorScorer, ToolCallAgent
from helios.toolcalls.protocols import Evaluator, Synthesizer
from helios.toolcalls.types import Audio, EvalResult, SingleRunResult
from helios.usage import Usage

#: transient errors are retried this often by default (a hung agent must not take an hour)
DEFAULT_RETRY_POLICY = RetryPolicy(max_attempts=4, max_total_seconds=300.0, base_delay=1.0)


@dataclass(frozen=True)
class RunUnit:
    trial_id: str
    label: str
    #: which case (prompt and expectation) and which repetition
    case_index: int
    run_index: int
    prompt: str
    expect: tuple[ToolCall, ...]
    test_id: str | None = None
    folder: str | None = None


def unit_id(test_id: str | None, case_index: int, prompt: str, run_index: int) -> str:
    payload = json.dumps([test_id, case_index, prompt, run_index], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def failed_result(unit: RunUnit, error: ErrorInfo, duration: float = 0.0,
                  retries: int = 0, usage: Usage | None = None) -> SingleRunResult:  # fmt: skip
    evaluation = EvalResult(passed=False, expected=list(unit.expect), error=error)
    return SingleRunResult(prompt=unit.prompt, run_index=unit.run_index, eval_result=evaluation,
                           test_id=unit.test_id, duration=duration, retries=retries,
                           usage=usage)  # fmt: skip


class ToolCallDoor:
    """What the batch service needs to run tool-call units."""

    def __init__(
        self,
        *,
        synthesizer: Synthesizer | None,
        agent: Any,
        evaluator: Evaluator,
        text_mode: bool,
        agent_calls: EndpointCalls | None,
        synthesizer_calls: EndpointCalls | None,
    ) -> None:
        """`agent_calls` None: the agent's own model services retry its calls."""
        self.synthesizer = synthesizer
        self.agent = agent
        self.evaluator = evaluator
        self.text_mode = text_mode
        self.agent_calls = agent_calls
        self.synthesizer_calls = synthesizer_calls
        #: each prompt's audio, made by its first run
        self.audio: SharedValues[str, Audio] = SharedValues()
        #: runs still to finish per prompt: a prompt's audio is dropped after its last run
        self._remaining: dict[str, int] = {}

    def endpoints(self) -> dict[str, EndpointCalls]:
        """The endpoints its runs call through the engine (`CallsEndpoints`): on a Ray
        cluster each gets one limiter for the whole run."""
        found = {"agent": self.agent_calls, "synthesizer": self.synthesizer_calls}
        return {name: calls for name, calls in found.items() if calls is not None}

    def plan(self, units: Iterable[RunUnit]) -> None:
        """Count each prompt's runs, so its audio is kept exactly as long as needed."""
        for unit in units:
            self._remaining[unit.prompt] = self._remaining.get(unit.prompt, 0) + 1

    def _done_with(self, prompt: str) -> None:
        left = self._remaining.get(prompt, 1) - 1
        self._remaining[prompt] = left
        if left <= 0:
            self.audio.forget(prompt)

    # -- one run -----------------------------------------------------------------
    async def run_unit(self, unit: RunUnit, ctx: EpisodeContext, slot: Slot) -> SingleRunResult:
        started = time.monotonic()
        retries = [0]
        try:
            audio = None
            if not self.text_mode:
                try:
                    audio = await self._audio_for(unit, ctx, slot, retries)
                except Exception as exc:
                    return failed_result(unit, ErrorInfo.from_exception(exc, "synthesis"),
                                         time.monotonic() - started, retries[0])  # fmt: skip
            scorer = EvaluatorScorer(self.evaluator, unit.expect)
            agent = ToolCallAgent(self.agent, audio=audio, calls=self.agent_calls)
            spec = EpisodeSpec(
                trial_id=unit.trial_id, label=unit.label, folder=None, sandbox=NULL_SPEC,
                provider="null", agent=agent, agent_settings={}, instruction=unit.prompt,
                # no bound on the phase: each attempt has its timeout, the retries their cap
                agent_timeout=math.inf, scorer=scorer,
            )  # fmt: skip
            with sampling(unit.run_index):  # each run its own cached answer
                episode = await run_episode(spec, ctx, slot)
        finally:
            self._done_with(unit.prompt)
        duration = time.monotonic() - started
        retries[0] += episode.usage.retries
        # the agent's model calls are counted when they go through Helios's services
        usage = episode.usage if self.agent_calls is None else None
        error = episode.error or episode.agent_error
        if error is not None or scorer.result is None:
            missing = ErrorInfo(type="NoScore", message="the run was not scored", phase="evaluator")
            return failed_result(unit, error or missing, duration, retries[0], usage)
        return SingleRunResult(
            prompt=unit.prompt,
            run_index=unit.run_index,
            eval_result=scorer.result,
            test_id=unit.test_id,
            duration=duration,
            retries=retries[0],
            usage=usage,
        )

    async def _audio_for(
        self, unit: RunUnit, ctx: EpisodeContext, slot: Slot, retries: list[int]
    ) -> Audio:
        """The prompt's audio: the first run synthesizes it, the others wait for it."""
        synthesizer, calls = self.synthesizer, self.synthesizer_calls
        assert synthesizer is not None and calls is not None

        def retrying(error: ModelError, delay: float, attempt: int) -> None:
            retries[0] += 1
            if ctx.emit is not None:
                ctx.emit(Retrying(unit.trial_id, "synthesis", delay, f"{error.kind}: {error}"))

        async def synthesize() -> Audio:
            if ctx.emit is not None:
                ctx.emit(PhaseChanged(unit.trial_id, "synthesis"))
            audio, _ = await calls.call(lambda: synthesizer.synthesize(unit.prompt), slot=slot,
                                        on_retry=retrying)  # fmt: skip
            if not isinstance(audio, Audio):
                raise TypeError(f"the synthesizer returned {type(audio).__name__}, not Audio")
            return audio

        return await self.audio.get(unit.prompt, synthesize)

    # -- what the batch service records ----------------------------------------
    #: runs keep no files: the batch service need not hop to a thread per run
    writes_files = False

    def write_files(self, unit: RunUnit, result: SingleRunResult) -> None:
        """Runs keep no files of their own: the record holds everything."""

    def to_record(self, unit: RunUnit, result: SingleRunResult) -> dict[str, Any]:
        evaluation = result.eval_result
        status = "error" if evaluation.error else ("passed" if evaluation.passed else "failed")
        return {
            "trial_id": unit.trial_id,
            "status": status,
            "test_id": unit.test_id,
            **result.model_dump(mode="json", exclude={"eval_result"}),
            "passed": evaluation.passed,
            "match_rate": evaluation.match_rate,
            "eval_result": evaluation.model_dump(mode="json"),
        }

    def crashed(self, unit: RunUnit, error: ErrorInfo) -> SingleRunResult:
        return failed_result(unit, error)

    def verdict(self, result: SingleRunResult) -> Verdict:
        evaluation = result.eval_result
        error = evaluation.error
        if error is not None:
            detail = f"{error.phase}: {error.type}: {error.message}"
        else:
            detail = f"{evaluation.match_rate:.0%} match ({result.duration:.1f}s)"
        return Verdict(
            passed=evaluation.passed,
            detail=detail,
            error_kind=error.type if error else None,
            error_message=error.message if error else "",
        )
