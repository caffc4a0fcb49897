"""Which server a local sandbox's persistent shell runs (`shell.client`): the compiled one
(`shell.native`), else the Python twin with the system interpreter the sandbox
sees (its /usr is the host's, read-only), or none: every command is then a
one-shot bwrap (and the sandbox has no services)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from helios.environments.local.bwrap import tool
from helios.environments.shell.native import native_server
from helios.settings import current as helios_settings

ENV_SWITCH = "HELIOS_LOCAL_SHELL"


@cache
def server_source() -> str:
    """The server's code without its docstring and comments: it is the sandbox
    init's command line, which commands inside can read."""
    text = (Path(__file__).parent.parent / "shell" / "server.py").read_text("utf-8")
    code = text[text.index("from __future__") :]
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ServerProgram:
    """What a sandbox's shell runs: the compiled server (`shell.native`), else the
    Python one with the system interpreter the sandbox sees (its /usr is the host's,
    read-only)."""

    binary: bytes | None = None
    python: str | None = None


@cache
def server_program() -> ServerProgram | None:
    """None: every command is a one-shot bwrap. HELIOS_LOCAL_SHELL=0 turns the shell
    off; HELIOS_LOCAL_SHELL=python keeps the Python server even with a compiler.
    The first call may compile (a fraction of a second, once per machine)."""
    mode = helios_settings().local_shell
    if mode == "off":
        return None
    binary = None if mode == "python" else native_server()
    if binary is not None:
        return ServerProgram(binary=binary)
    python = tool("python3")
    return None if python is None else ServerProgram(python=python)


def server_argv(python: str) -> list[str]:
    return [python, "-I", "-S", "-c", server_source()]
