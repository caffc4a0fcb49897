"""Helios's own environment variables (`HELIOS_*`, the daytona provider's
`DAYTONA_*` and the web toolset's `TAVILY_*`): every one is declared and read here,
and nowhere else, so that `helios --help`, the README and a run's `run.json` can
list them, and a run records the values it ran with (a key never: it is registered
as a secret).

A variable that changes what a run produces (a docker network, a price table) is
part of the run's identity: `--resume` with another value is refused, as a
different `-m` is. The others (which shell server runs a command, where sandbox
folders go) change how, not what.

A run reads them once, when it opens (`engine.run.Run.open`: `snapshot()`), records
that snapshot in its `run.json` and checks it on `--resume`, and every module that
asks (`current()`) while the run goes on gets that same snapshot, in worker processes
too (they are handed it): a variable changed in-process mid-run cannot make the run
do other than what it recorded. Outside a run, `current()` reads the environment
as it is at that moment (not cached at import: a test or an embedding program that
sets one in-process sees it at once).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from helios.secrets import public_url, register_secret, register_url


@dataclass(frozen=True)
class Variable:
    name: str
    meaning: str
    #: part of the run's identity, checked on `--resume`
    changes_results: bool = False
    #: a URL whose userinfo (a password) is redacted when recorded
    url: bool = False
    #: a key: registered as a secret when read, never recorded
    secret: bool = False


VARIABLES: tuple[Variable, ...] = (
    Variable("HELIOS_DOCKER", "the docker CLI to run (default: docker on PATH)"),
    Variable("HELIOS_DOCKER_NETWORK", "the network of a task sandbox that allows the "
             "network (default: the engine's)", changes_results=True),
    Variable("HELIOS_DOCKER_BUILD_NETWORK", "`docker build --network` for task images "
             "(e.g. host)"),
    Variable("HELIOS_EGRESS_HOSTS", "an /etc/hosts-style file the egress proxy of an "
             "allowlisted sandbox reads before the host's resolver", changes_results=True),
    Variable("HELIOS_ALLOW_PRIVILEGED_SIDECARS", "1: a compose task's services may be "
             "given the host (privileged, host namespaces, devices, host paths, the docker "
             "socket); refused otherwise", changes_results=True),
    Variable("HELIOS_DOCKER_BUILDER", "buildkit or classic: the builder of task images "
             "(default: BuildKit where the docker client has it)"),
    Variable("HELIOS_DOCKER_SHELL", "0: every docker call through the Engine API instead "
             "of the shell server as the container's init"),
    Variable("HELIOS_LOCAL_SHELL", "0: a one-shot bwrap per command; python: the Python "
             "shell server even with a C compiler"),
    Variable("HELIOS_SANDBOX_DIR", "where local sandbox folders go (default: the "
             "temporary folder)"),
    Variable("HELIOS_AGENT_CACHE", "where installed agents are installed (default: "
             "~/.cache/helios/agents)"),
    Variable("HELIOS_CACHE_DIR", "where the response cache (`--cache`) keeps model "
             "answers (default: ~/.cache/helios/responses)"),
    Variable("HELIOS_CACHE_MAX_MB", "the response cache's size cap in MB; the least "
             "recently used answers go first (default 2048)"),
    Variable("HELIOS_DATASETS_DIR", "where the tasks of datasets named with -d are fetched "
             "(default: ~/.cache/helios/datasets)"),
    Variable("HELIOS_REGISTRY", "the registry.json (a path or an http(s) URL) that -d "
             "NAME@VERSION reads when no --registry is given (default: Harbor's)", url=True),
    Variable("HELIOS_PRICES", "a JSON file of extra model prices (USD per 1M tokens)",
             changes_results=True),
    Variable("HELIOS_SEARXNG_URL", "the SearXNG instance behind the web toolset's "
             "web_search", changes_results=True, url=True),
    Variable("HELIOS_WEB_ALLOW_PRIVATE", "1: web_extract may fetch private and loopback "
             "addresses", changes_results=True),
    Variable("HELIOS_WEB_TIMEOUT", "seconds for one web request (default 20)"),
    Variable("HELIOS_WEB_MAX_BYTES", "bytes read of one web page (default 5 MB)",
             changes_results=True),
    # the web toolset's Tavily search (the names Hermes reads)
    Variable("TAVILY_API_KEY", "the key of the web toolset's Tavily search, used when "
             "HELIOS_SEARXNG_URL is not set (never recorded)", secret=True),
    Variable("TAVILY_API_URL", "Tavily's API (default: https://api.tavily.com)",
             changes_results=True, url=True),
    # the Daytona provider's keys (the names Daytona's own tools read)
    Variable("DAYTONA_API_KEY", "the key of `--provider daytona` (never recorded)",
             secret=True),
    Variable("DAYTONA_API_URL", "Daytona's API (default: Daytona's cloud)", url=True),
    Variable("DAYTONA_TARGET", "the region of Daytona sandboxes (default: the "
             "organization's)"),
)  # fmt: skip
BY_NAME = {v.name: v for v in VARIABLES}
TRUE = ("1", "true", "yes")


@dataclass(frozen=True)
class HeliosSettings:
    """The `HELIOS_*` variables that are set (empty ones count as unset)."""

    values: Mapping[str, str]

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> HeliosSettings:
        env = os.environ if environ is None else environ
        values = {v.name: env[v.name] for v in VARIABLES if env.get(v.name)}
        for variable in VARIABLES:  # a key is redacted wherever it might be echoed
            if variable.secret:
                register_secret(values.get(variable.name))
            elif variable.url:
                register_url(values.get(variable.name))
        return cls(values)

    def get(self, name: str) -> str | None:
        if name not in BY_NAME:
            raise KeyError(f"{name} is not a Helios setting")
        return self.values.get(name)

    # -- the typed views the modules use -----------------------------------------
    @property
    def docker_cli(self) -> str:
        return self.get("HELIOS_DOCKER") or "docker"

    @property
    def docker_network(self) -> str | None:
        return self.get("HELIOS_DOCKER_NETWORK")

    @property
    def docker_build_network(self) -> str | None:
        return self.get("HELIOS_DOCKER_BUILD_NETWORK")

    @property
    def allow_privileged_sidecars(self) -> bool:
        return (self.get("HELIOS_ALLOW_PRIVILEGED_SIDECARS") or "").lower() in TRUE

    @property
    def egress_hosts(self) -> str | None:
        return self.get("HELIOS_EGRESS_HOSTS")

    @property
    def docker_builder(self) -> str | None:
        """buildkit, classic, or None (found per client)."""
        value = (self.get("HELIOS_DOCKER_BUILDER") or "").lower()
        return value if value in ("buildkit", "classic") else None

    @property
    def docker_shell(self) -> bool:
        return self.get("HELIOS_DOCKER_SHELL") != "0"

    @property
    def local_shell(self) -> str:
        """off (HELIOS_LOCAL_SHELL=0), python, or auto (unset, 1, or anything else)."""
        value = self.get("HELIOS_LOCAL_SHELL") or "1"
        return {"0": "off", "python": "python"}.get(value, "auto")

    @property
    def sandbox_dir(self) -> str | None:
        return self.get("HELIOS_SANDBOX_DIR")

    @property
    def agent_cache(self) -> str | None:
        return self.get("HELIOS_AGENT_CACHE")

    @property
    def cache_dir(self) -> str | None:
        return self.get("HELIOS_CACHE_DIR")

    @property
    def datasets_dir(self) -> str | None:
        return self.get("HELIOS_DATASETS_DIR")

    @property
    def registry(self) -> str | None:
        return self.get("HELIOS_REGISTRY")

    @property
    def prices_file(self) -> str | None:
        return self.get("HELIOS_PRICES")

    @property
    def searxng_url(self) -> str | None:
        return self.get("HELIOS_SEARXNG_URL")

    @property
    def daytona_api_key(self) -> str | None:
        return self.get("DAYTONA_API_KEY")

    @property
    def daytona_api_url(self) -> str | None:
        return self.get("DAYTONA_API_URL")

    @property
    def daytona_target(self) -> str | None:
        return self.get("DAYTONA_TARGET")

    @property
    def tavily_api_key(self) -> str | None:
        return self.get("TAVILY_API_KEY")

    @property
    def tavily_api_url(self) -> str | None:
        return self.get("TAVILY_API_URL")

    @property
    def web_allow_private(self) -> bool:
        return (self.get("HELIOS_WEB_ALLOW_PRIVATE") or "").lower() in TRUE

    def number(self, name: str, default: float) -> float:
        """A positive finite number; `default` when unset or not one."""
        try:
            value = float(self.get(name) or default)
        except ValueError:
            return default
        return value if math.isfinite(value) and value > 0 else default

    # -- what a run records --------------------------------------------------------
    def recorded(self) -> dict[str, str]:
        """Every set variable, for `run.json`: URLs without their userinfo, no key."""
        return {
            name: public_url(value) if BY_NAME[name].url else value
            for name, value in sorted(self.values.items())
            if not BY_NAME[name].secret
        }

    def identity(self) -> dict[str, str]:
        """The set variables that change results (checked on `--resume`)."""
        recorded = self.recorded()
        return {n: v for n, v in recorded.items() if BY_NAME[n].changes_results}


#: the snapshot of the run going on in this context (its tasks inherit it)
_ACTIVE: ContextVar[HeliosSettings | None] = ContextVar("helios_settings", default=None)


def current() -> HeliosSettings:
    """The run's snapshot inside a run; else the environment as it is now."""
    active = _ACTIVE.get()
    return active if active is not None else HeliosSettings.read()


@contextmanager
def active(settings: HeliosSettings) -> Iterator[HeliosSettings]:
    """Make `settings` what `current()` gives in this context (and the tasks started
    in it) until the block ends."""
    token = _ACTIVE.set(settings)
    try:
        yield settings
    finally:
        _ACTIVE.reset(token)
