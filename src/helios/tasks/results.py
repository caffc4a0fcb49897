"""Result records: what a trial produced, kept as data (a trial never raises)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from helios.engine.episode import PhaseTimings
from helios.failures import ErrorInfo
from helios.text import one_line
from helios.usage import Usage

TrialStatus = Literal["passed", "failed", "error"]
StepStatus = Literal["passed", "failed", "error", "not_run"]
PASS_THRESHOLD = 1.0


class StepResult(BaseModel):
    """One step of a multi-step task."""

    # built when a multi-step task's first result is made, not at import
    model_config = ConfigDict(defer_build=True)

    name: str
    status: StepStatus
    #: the step's reward; None when its verifier produced none (or it did not run)
    reward: float | None = None
    rewards: dict[str, float] = Field(default_factory=dict)
    #: why the step has no reward, or why it stopped the trial
    error: ErrorInfo | None = None
    agent_error: ErrorInfo | None = None
    #: its reward missed `min_reward`: the steps after it did not run
    below_min_reward: bool = False
    turns: int = 0
    duration: float = 0.0


class TrialResult(BaseModel):
    trial_id: str
    task_name: str
    task_path: str
    #: 1-based attempt number
    attempt: int
    agent: str
    model: str | None = None
    provider: str
    status: TrialStatus
    reward: float = 0.0
    rewards: dict[str, float] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    #: a non-fatal note, e.g. the agent stopped early (partial) but was still scored
    agent_error: ErrorInfo | None = None
    #: the sandbox could not be stopped cleanly; the reward and status stand
    teardown_error: ErrorInfo | None = None
    #: agent turns (model calls for the tool agent)
    turns: int = 0
    duration: float = 0.0
    timings: PhaseTimings = Field(default_factory=PhaseTimings)
    usage: Usage = Field(default_factory=Usage)
    started_at: str
    finished_at: str
    #: output folder of this trial, relative to the batch folder
    folder: str
    #: a retry (`--retry-failed-below`): the trial it ran again, and which retry it
    #: is; the newest of a trial's retries is the one counted
    retry_of: str | None = None
    retry: int = 0
    #: a multi-step task's steps, in order (steps that did not run included)
    steps: list[StepResult] | None = None
    #: how the steps' rewards became `reward` ("mean" or "final"), for multi-step tasks
    reward_strategy: str | None = None
    #: the last meaningful line of the verifier's output (the last step's), e.g.
    #: "FAIL: /app/hello.txt does not exist"; control characters shown, secrets
    #: redacted, at most 160 characters. None when no verifier ran
    verifier_note: str | None = None

    @property
    def reason(self) -> str:
        """Why the trial did not pass, in one line: its typed error first (e.g.
        "RewardFileMissing: ..."), then what the verifier said last; empty when
        neither says anything. A verifier's line ("PASS: everything fine") never
        hides the error that decided the outcome."""
        error = self.error
        shown_error = f"{error.type}: {error.message}" if error is not None else ""
        if self.status == "error" or not self.verifier_note:
            return one_line(shown_error, 240)
        if not shown_error:
            return self.verifier_note
        return one_line(f"{shown_error} · verifier: {self.verifier_note}", 240)

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def status_for(reward: float, error: ErrorInfo | None) -> TrialStatus:
    # Failures before scoring was possible are errors (re-run by --retry-errors);
    # verifier failures are scored 0 and count as failed.
    if error is not None and (
        error.infrastructure or error.phase in ("environment", "agent", "internal")
    ):
        return "error"
    return "passed" if reward >= PASS_THRESHOLD else "failed"
