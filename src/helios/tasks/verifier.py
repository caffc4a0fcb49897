"""The verifier: runs after the agent, uploads tests/, runs test.sh, reads the reward.

Order matters: by now every process the agent started is dead (the episode
calls `Environment.stop_processes` first). /logs/verifier and /tests are then
emptied, so a reward file or a test the agent planted never counts; tests are
uploaded only now, so the agent never sees them. test.sh runs with a fresh,
empty HOME and PYTHONNOUSERSITE=1, so nothing the agent left in its home (a
usercustomize.py, a ~/.local/bin) runs inside the tests; its PATH is the
sandbox's fixed one (the image's on docker), which the agent cannot change.
The reward files are read on the host from a checked download (no links, bounded).

A task's `VerifierPlan` says who runs the tests (`[verifier] user`: /tests,
/logs/verifier and the fresh HOME are made theirs), which tests folders are
layered into /tests (a step's over the task's), and whether the sandbox is a
separate verifier's whose image already holds /tests (built from tests/).
"""

from __future__ import annotations

import asyncio
import math
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helios.agents.base import AgentOutcome
from helios.engine.episode import Score
from helios.engine.metrics import mean
from helios.environments import DownloadMissing, UnsafeDownload
from helios.environments.base import Environment, ExecDownload, FileSteps, User
from helios.environments.view import file_owner
from helios.errors import (
    EnvironmentExecError,
    RewardFileInvalid,
    RewardFileMissing,
    VerifierError,
    VerifierTimeout,
)
from helios.failures import ErrorInfo
from helios.safe_json import JsonValueError, parse_json
from helios.secrets import redact
from helios.tasks.phases import VerifierPlan, plan_steps
from helios.tasks.task import Task
from helios.text import one_line

#: `exec`: the tests replace the shell that found bash (one process fewer per trial)
RUN_TEST = (
    "if command -v bash >/dev/null 2>&1; then exec bash /tests/test.sh; "
    "else exec sh /tests/test.sh; fi"
)
#: what test.sh writes, downloaded once it has ended
LOGS = "/logs/verifier"
#: a reward file is a number or a small object of numbers
MAX_REWARD_FILE_BYTES = 1024 * 1024
#: the longest verifier line kept as a trial's `verifier_note`
NOTE_LIMIT = 160
#: the end of the output that is searched for it
NOTE_SEARCH_BYTES = 64 * 1024


#: kept for callers of the earlier name: a verifier's outcome is a `Score`
VerifierOutcome = Score


@dataclass(frozen=True)
class Verifier:
    """The task door's scorer: the task's tests decide the reward."""

    task: Task
    phase: str = "verifier"

    async def score(self, env: Environment, outcome: AgentOutcome, out_dir: Path) -> Score:
        return await run_verifier(env, self.task, out_dir)


async def run_verifier(env: Environment, task: Task, out_dir: Path) -> Score:
    """Score the environment's final state with the task's (first step's) verifier."""
    return await run_tests(env, plan_steps(task)[0].verifier, out_dir)


async def run_tests(
    env: Environment, plan: VerifierPlan, out_dir: Path, *, separate: bool = False
) -> Score:
    """Score the environment's final state.

    Test failures become data (reward 0 and a typed error); a broken sandbox
    raises, so the trial is recorded as an error rather than a fail.
    """
    await asyncio.to_thread(out_dir.mkdir, parents=True, exist_ok=True)
    outcome = Score()
    try:
        outcome.note, fetched = await _run_tests(env, plan, out_dir, separate)
        await _logs(env, out_dir, fetched)
        outcome.rewards = await asyncio.to_thread(read_rewards, out_dir)
        outcome.reward = primary_reward(outcome.rewards)
        if not math.isfinite(outcome.reward):  # cannot be, as every key is finite: a guard
            raise RewardFileInvalid("the reward is not a finite number")
    except (VerifierError, VerifierTimeout) as exc:
        outcome.error = ErrorInfo.from_exception(exc, phase="verifier")
    if outcome.error is not None:
        outcome.reward = 0.0
    return outcome


async def _run_tests(
    env: Environment, plan: VerifierPlan, out_dir: Path, separate: bool
) -> tuple[str, ExecDownload | None]:
    """Run test.sh: the last meaningful line of what it printed (`verifier_note`), and
    /logs/verifier when it came with it (None: it is downloaded next)."""
    # A new name each time, made only now: the agent cannot have prepared it.
    home = f"/tmp/helios-verifier-home-{secrets.token_hex(8)}"
    keep_tests = separate and await _image_has_tests(env, plan)
    fresh = (LOGS,) if keep_tests else (LOGS, "/tests")
    reset = FileSteps(remove=fresh, make=fresh, private=(home,))
    # The tests go into the /tests just made (a step's files over the task's).
    uploads = [] if keep_tests else [(tests, "/tests") for tests in plan.tests_dirs]
    cleared = await env.prepare_and_upload(reset, uploads)
    if not cleared.ok:
        raise VerifierError(f"could not reset /logs/verifier: {cleared.stderr.strip()[:200]}")
    owner = await file_owner(env, plan.user)
    if owner is not None:
        await _give(env, owner, ["/logs/verifier", "/tests", home])
    variables = {"HOME": home, "PYTHONNOUSERSITE": "1", **plan.env}
    as_user: dict[str, Any] = {"user": plan.user} if plan.user is not None else {}
    baseline = env.network
    if plan.network is not None:
        await env.set_network(plan.network)
    fetched: ExecDownload | None = None
    try:
        if plan.user is None:
            # test.sh and the download of /logs/verifier in one command where the
            # provider can (the shell-backed ones): a round trip and processes fewer
            fetched = await env.exec_then_download(RUN_TEST, LOGS, out_dir, env=variables,
                                                   timeout=plan.timeout)  # fmt: skip
            result = fetched.result
        else:
            result = await env.exec(RUN_TEST, env=variables, timeout=plan.timeout, **as_user)
    finally:
        await env.set_network(baseline)
    await asyncio.to_thread(_write_output, out_dir, result.stdout, result.stderr)
    if result.timed_out:
        raise VerifierTimeout("verifier", plan.timeout)
    return verifier_note(result.stdout, result.stderr), fetched


async def _logs(env: Environment, out_dir: Path, fetched: ExecDownload | None) -> None:
    """/logs/verifier as test.sh left it: downloaded now, unless it came with test.sh."""
    if fetched is not None:
        if fetched.refused is not None:
            raise _refusal(fetched.refused)
        return
    try:
        await env.download(LOGS, out_dir)
    except (DownloadMissing, UnsafeDownload) as exc:
        raise _refusal(exc) from None


def _refusal(exc: EnvironmentExecError) -> RewardFileMissing | RewardFileInvalid:
    """A refused download of /logs/verifier (past a bound, an unreadable archive) or
    a missing one is the tests' doing, or the agent's through them (on docker a root
    agent owns the container's tar): a scoring failure, never an infrastructure
    error, which `--retry-errors` would rerun."""
    if isinstance(exc, DownloadMissing):
        return RewardFileMissing("test.sh (or what it ran) removed /logs/verifier")
    return RewardFileInvalid(f"/logs/verifier was refused: {exc}")


async def _image_has_tests(env: Environment, plan: VerifierPlan) -> bool:
    """A separate verifier built from a tests folder owns /tests (as in Harbor); a
    provider that does not run Dockerfiles (local) gets the folder uploaded."""
    sandbox = plan.sandbox
    if sandbox is None or sandbox.build_context not in plan.tests_dirs:
        return False
    return (await env.exec("test -f /tests/test.sh", cwd="/", timeout=60)).ok


async def _give(env: Environment, user: User, paths: list[str]) -> None:
    """Make what test.sh must write (and read) the verifier user's."""
    for path in paths:
        await env.give_to(path, user)


def _write_output(out_dir: Path, stdout: str, stderr: str) -> None:
    (out_dir / "test-stdout.txt").write_text(redact(stdout), "utf-8")
    (out_dir / "test-stderr.txt").write_text(redact(stderr), "utf-8")


#: a line that says what failed: it starts with a verdict (pytest's `FAILED …`,
#: `ERROR …`, `E   assert …`, a ✗), or names a failure
_VERDICT = re.compile(r"^(FAIL|ERROR|E\s|✗|×|AssertionError)", re.IGNORECASE)
_FAILURE = re.compile(
    r"\b(fail(ed|s|ure)?|errors?|assert\w*|expected|missing|not found|does not|differs?)\b",
    re.IGNORECASE,
)
#: lines that say nothing on their own: the reward echoed, rules, shell traces
_NOISE = re.compile(r"^(reward\s*[:=]|[-=_*#~+.\s]*$|\+\s|[-=]{3,}.*[-=]{3,}$)", re.IGNORECASE)


def verifier_note(stdout: str, stderr: str = "") -> str:
    """The last meaningful line of a verifier's output, for a trial's line on screen:
    the last that gives a verdict (FAIL…, ERROR…), else the last that names a
    failure, else the last that is not noise (the reward echoed, a rule of dashes).
    The output is the sandbox's, so untrusted: secrets are redacted, escape
    sequences removed, control characters shown, and the line cut at NOTE_LIMIT."""
    text = redact(stdout[-NOTE_SEARCH_BYTES:] + "\n" + stderr[-NOTE_SEARCH_BYTES:])
    lines = [line for line in (one_line(raw, 10 * NOTE_LIMIT) for raw in text.splitlines())
             if line and not _NOISE.match(line)]  # fmt: skip
    for wanted in (_VERDICT.match, _FAILURE.search):
        chosen = next((line for line in reversed(lines) if wanted(line)), None)
        if chosen is not None:
            return one_line(chosen, NOTE_LIMIT)
    return one_line(lines[-1], NOTE_LIMIT) if lines else ""


def read_rewards(folder: Path) -> dict[str, float]:
    """reward.json (a dict of floats) wins over reward.txt (one float).

    Every value must be a finite number; anything else (text, a boolean, NaN,
    a number too large for a float, nesting too deep to parse) makes the file
    invalid, with one line saying why."""
    json_path, txt_path = folder / "reward.json", folder / "reward.txt"
    for path in (json_path, txt_path):
        if path.is_file() and path.stat().st_size > MAX_REWARD_FILE_BYTES:
            raise RewardFileInvalid(f"{path.name} is larger than {MAX_REWARD_FILE_BYTES} bytes")
    if json_path.is_file():
        try:
            data = parse_json(json_path.read_bytes())
        except JsonValueError as exc:
            raise RewardFileInvalid(f"reward.json: {exc}") from None
        if not isinstance(data, dict) or not data:
            raise RewardFileInvalid("reward.json must be a non-empty object of numbers")
        return {str(k): _as_float(v, f"reward.json[{_short(k)}]") for k, v in data.items()}
    if txt_path.is_file():
        text = txt_path.read_text("utf-8", errors="replace").strip()
        return {"reward": _as_float(text, "reward.txt")}
    raise RewardFileMissing("test.sh wrote neither /logs/verifier/reward.txt nor reward.json")


def _short(text: str) -> str:
    return text if len(text) <= 50 else text[:47] + "..."


_KINDS = {bool: "a boolean", list: "a list", dict: "an object", type(None): "null"}
#: a reward written as text: a plain decimal number in ASCII digits. Python's float()
#: also takes `1_0` (10), `١` (an Arabic-Indic one), `nan` and `infinity`: none of
#: those is a reward a test wrote on purpose.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _as_float(value: object, where: str) -> float:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        # never the value itself: a list may be nested as deep as the parser allowed
        kind = _KINDS.get(type(value), type(value).__name__)
        raise RewardFileInvalid(f"{where} is {kind}, expected a number")
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):
        raise RewardFileInvalid(f"{where} is not a number: {_short(repr(value))}")
    try:
        number = float(value)
    except ValueError:
        raise RewardFileInvalid(f"{where} is not a number: {_short(repr(value))}") from None
    except OverflowError:  # an integer beyond the float range
        number = math.inf
    if not math.isfinite(number):
        raise RewardFileInvalid(f"{where} is not a finite number")
    return number


def primary_reward(rewards: dict[str, float]) -> float:
    """The trial's reward: the `reward` key, else the mean of all keys (finite, as
    they are: the mean never overflows)."""
    if "reward" in rewards:
        return rewards["reward"]
    return mean(list(rewards.values()))
