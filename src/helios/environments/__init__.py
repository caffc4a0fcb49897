"""Sandboxes a trial runs in: docker (default), a local bubblewrap sandbox, or none (null)."""

from helios.environments.base import Capabilities, Environment, ExecResult
from helios.environments.registry import available_providers, create_environment, provider_class
from helios.environments.shell.safe_copy import DownloadMissing, UnsafeDownload
from helios.environments.spec import NULL_SPEC, SandboxSpec

__all__ = [
    "NULL_SPEC",
    "Capabilities",
    "DownloadMissing",
    "Environment",
    "ExecResult",
    "SandboxSpec",
    "UnsafeDownload",
    "available_providers",
    "create_environment",
    "provider_class",
]
