"""The tool-call door: one run (prompt, run index) is a unit of work on the engine.

A unit's run: the prompt's audio (synthesized once per prompt and shared by its
runs), the agent, the evaluator. It never raises: an exception anywhere becomes
a failed run that carries its error. Transient failures (timeouts, 429, 5xx,
dropped connections) are retried with Helios's backoff, which frees the slot.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from helios.engine.batch import Verdict
from helios.engine.episode import EpisodeContext
from helios.engine.events import EventSink, PhaseChanged, Retrying
from helios.engine.scheduler import Slot
from helios.failures import ErrorInfo
from helios.models.errors import ModelError
from helios.models.limiter import AdaptiveLimiter
from helios.models.retry import RetryPolicy, call_with_retries
from helios.toolcalls.context import current_slot
from helios.toolcalls.helpers import coerce_response
from helios.toolcalls.protocols import Evaluator, Synthesizer
from helios.toolcalls.transport import classify
from helios.toolcalls.types import AgentResponse, Audio, EvalResult, SingleRunResult, ToolCall

T = TypeVar("T")

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


def failed_result(unit: RunUnit, error: ErrorInfo, duration: float = 0.0) -> SingleRunResult:
    evaluation = EvalResult(passed=False, expected=list(unit.expect), error=error)
    return SingleRunResult(prompt=unit.prompt, run_index=unit.run_index, eval_result=evaluation,
                           test_id=unit.test_id, duration=duration)  # fmt: skip


class ToolCallDoor:
    """What the batch service needs to run tool-call units."""

    def __init__(
        self,
        *,
        synthesizer: Synthesizer | None,
        agent: Any,
        evaluator: Evaluator,
        text_mode: bool,
        policy: RetryPolicy,
        limit: int,
        timeout: float | None,
        emit: EventSink | None = None,
    ) -> None:
        self.synthesizer = synthesizer
        self.agent = agent
        self.evaluator = evaluator
        self.text_mode = text_mode
        self.policy = policy
        self.timeout = timeout
        self.emit = emit
        # Two endpoints, two limiters: each starts at the batch's bound and only
        # shrinks when its own endpoint answers 429.
        self.agent_limiter = AdaptiveLimiter(initial=limit, maximum=limit)
        self.synth_limiter = AdaptiveLimiter(initial=limit, maximum=limit)
        self._audio: dict[str, asyncio.Future[Audio]] = {}
        #: runs still to finish per prompt: a prompt's audio is dropped after its last run
        self._remaining: dict[str, int] = {}

    def plan(self, units: Iterable[RunUnit]) -> None:
        """Count each prompt's runs, so its audio is kept exactly as long as needed."""
        for unit in units:
            self._remaining[unit.prompt] = self._remaining.get(unit.prompt, 0) + 1

    def _done_with(self, prompt: str) -> None:
        left = self._remaining.get(prompt, 1) - 1
        self._remaining[prompt] = left
        if left <= 0:
            self._audio.pop(prompt, None)

    # -- one run -----------------------------------------------------------------
    async def run_unit(self, unit: RunUnit, ctx: EpisodeContext, slot: Slot) -> SingleRunResult:
        started = time.monotonic()
        token = current_slot.set(slot)
        retries = [0]
        phase = "synthesis"
        try:
            if self.text_mode:
                phase = "agent"
                self._phase(unit, phase)
                response = await self._call_agent(unit, slot, retries, None)
            else:
                audio = await self._audio_for(unit, slot, retries)
                phase = "agent"
                self._phase(unit, phase)
                response = await self._call_agent(unit, slot, retries, audio)
            phase = "evaluator"
            evaluation = self._evaluate(unit, response)
        except Exception as exc:
            result = failed_result(unit, ErrorInfo.from_exception(exc, phase),
                                   time.monotonic() - started)  # fmt: skip
            result.retries = retries[0]
            return result
        finally:
            current_slot.reset(token)
            self._done_with(unit.prompt)
        return SingleRunResult(
            prompt=unit.prompt,
            run_index=unit.run_index,
            eval_result=evaluation,
            test_id=unit.test_id,
            duration=time.monotonic() - started,
            retries=retries[0],
        )

    def _phase(self, unit: RunUnit, phase: str) -> None:
        if self.emit is not None:
            self.emit(PhaseChanged(unit.trial_id, phase))

    async def _audio_for(self, unit: RunUnit, slot: Slot, retries: list[int]) -> Audio:
        """The prompt's audio: the first run synthesizes it, the others wait for it."""
        future = self._audio.get(unit.prompt)
        if future is None:
            self._phase(unit, "synthesis")
            future = asyncio.ensure_future(self._synthesize(unit, slot, retries))
            self._audio[unit.prompt] = future
        # shield: one run being cancelled must not cancel the others' audio
        return await asyncio.shield(future)

    async def _synthesize(self, unit: RunUnit, slot: Slot, retries: list[int]) -> Audio:
        assert self.synthesizer is not None
        synthesizer = self.synthesizer
        audio = await self._with_retries(
            lambda: synthesizer.synthesize(unit.prompt), unit, slot, retries,
            "synthesis", self.synth_limiter,
        )  # fmt: skip
        if not isinstance(audio, Audio):
            raise TypeError(f"the synthesizer returned {type(audio).__name__}, not Audio")
        return audio

    async def _call_agent(
        self, unit: RunUnit, slot: Slot, retries: list[int], audio: Audio | None
    ) -> AgentResponse:
        agent = self.agent
        call: Callable[[], Awaitable[Any]] = (
            (lambda: agent.run_text(unit.prompt)) if audio is None else (lambda: agent.run(audio))
        )
        raw = await self._with_retries(call, unit, slot, retries, "agent", self.agent_limiter)
        return coerce_response(raw)

    def _evaluate(self, unit: RunUnit, response: AgentResponse) -> EvalResult:
        result = self.evaluator.evaluate(list(unit.expect), list(response.tool_calls))
        if isinstance(result, EvalResult):
            return result
        dump = getattr(result, "model_dump", None)
        if callable(dump):  # another library's EvalResult of the same shape
            return EvalResult.model_validate(dump())
        raise TypeError(f"the evaluator returned {type(result).__name__}, not EvalResult")

    async def _with_retries(
        self,
        call: Callable[[], Awaitable[T]],
        unit: RunUnit,
        slot: Slot,
        retries: list[int],
        phase: str,
        limiter: AdaptiveLimiter,
    ) -> T:
        timeout = self.timeout

        async def attempt() -> T:
            try:
                async with asyncio.timeout(timeout):
                    return await call()
            except ModelError:
                raise
            except Exception as exc:
                mapped = classify(exc)
                if mapped is None:
                    raise
                raise mapped from exc

        def on_retry(error: ModelError, delay: float, attempt_no: int) -> None:
            retries[0] += 1
            if self.emit is not None:
                self.emit(Retrying(unit.trial_id, phase, delay, f"{error.kind}: {error}"))

        value, _ = await call_with_retries(
            attempt, limiter=limiter, policy=self.policy, slot=slot, on_retry=on_retry
        )
        return value

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
