"""One exception hierarchy for everything Helios raises on purpose.

Trials never raise: the engine turns these into `ErrorInfo` records. They are
raised only at the edges (bad input, bad invocation) and inside components,
where the trial lifecycle catches them.
"""

from __future__ import annotations


class HeliosError(Exception):
    """Base class of every error Helios raises deliberately."""

    #: short machine-readable kind, stored in results
    kind: str = "HeliosError"


class InputError(HeliosError):
    """Bad user input: a malformed file, an unknown option value.

    `str()` is one line naming the file, line and field where known.
    """

    kind = "InputError"

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        # Without a file the message already names the option; the field is for code.
        if not self.file:
            return self.message
        where = self.file + (f":{self.line}" if self.line else "")
        if self.field:
            where = f"{where} [{self.field}]"
        return f"{where}: {self.message}"


class TaskFormatError(InputError):
    kind = "TaskFormatError"


class ConfigError(InputError):
    """A bad invocation: unknown provider, missing key, conflicting flags."""

    kind = "ConfigError"


class SetupError(HeliosError):
    """This machine lacks something Helios needs (a program, an image): one line
    that names it and how to get it, found once before a batch starts (exit 2)."""

    kind = "SetupError"


class EnvironmentError_(HeliosError):
    kind = "EnvironmentError"


class EnvironmentUnavailable(EnvironmentError_):
    """The provider cannot run on this machine (no docker daemon, no bwrap)."""

    kind = "EnvironmentUnavailable"


class EnvironmentBuildError(EnvironmentError_):
    kind = "EnvironmentBuildError"


class BaseImageMissing(EnvironmentBuildError):
    """An image the sandbox starts from is not on this machine and cannot be pulled
    (Helios's desktop image is built, never pulled): named, with how to get it."""

    kind = "BaseImageMissing"


class EnvironmentStartError(EnvironmentError_):
    kind = "EnvironmentStartError"


class EnvironmentExecError(EnvironmentError_):
    kind = "EnvironmentExecError"


class EnvironmentUnhealthy(EnvironmentError_):
    """The sandbox started but its healthcheck never passed (not retried)."""

    kind = "EnvironmentUnhealthy"


class UnsupportedFeature(EnvironmentError_):
    """A task asks for something this provider cannot do (a user, a network switch)."""

    kind = "UnsupportedFeature"


class PhaseTimeout(HeliosError):
    """A phase (build, agent, verifier) ran past its timeout."""

    kind = "PhaseTimeout"

    def __init__(self, phase: str, seconds: float) -> None:
        self.phase = phase
        self.seconds = seconds
        super().__init__(f"{phase} timed out after {seconds:g}s")


class AgentTimeout(PhaseTimeout):
    kind = "AgentTimeout"


class VerifierError(HeliosError):
    kind = "VerifierError"


class VerifierTimeout(PhaseTimeout):
    kind = "VerifierTimeout"


class RewardFileMissing(VerifierError):
    kind = "RewardFileMissing"


class RewardFileInvalid(VerifierError):
    kind = "RewardFileInvalid"


class AgentError(HeliosError):
    kind = "AgentError"
