"""Every setting of a `helios generate` run: Hermes's batch-runner arguments plus Helios's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from helios.engine.budget import BudgetConfig
from helios.engine.config import check_executor
from helios.engine.labels import RunLabels
from helios.engine.saved_config import NOT_SAVED
from helios.errors import ConfigError, InputError
from helios.models.base import ReasoningEffort
from helios.models.routing import DEFAULT_MODEL, openrouter_name

OPENROUTER_URL = "https://openrouter.ai/api/v1"
PROVIDER_SORTS = ("price", "throughput", "latency")
DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant with access to tools that run in a Linux sandbox. Use them "
    "when they help with the request. When you are done, reply with your final answer "
    "without calling a tool."
)


@dataclass
class GenerateSettings:
    """run.json's `config.settings` saves every field but the `NOT_SAVED` ones."""

    dataset_file: Path
    batch_size: int
    run_name: str
    distribution: str = "default"
    #: "": the default model (`DEFAULT_MODEL`), as the routing spells it
    model: str = ""
    api_key: str | None = field(default=None, repr=False)
    #: None: OpenRouter's endpoint with Hermes routing, the provider's own with Helios routing
    base_url: str | None = None
    max_turns: int = 10
    num_workers: int = 4
    resume: bool = field(default=False, metadata=NOT_SAVED)
    verbose: bool = field(default=False, metadata=NOT_SAVED)
    #: the system prompt and prefill are not saved (pass them again): never in any file
    ephemeral_system_prompt: str | None = field(default=None, metadata=NOT_SAVED)
    log_prefix_chars: int = field(default=100, metadata=NOT_SAVED)
    providers_allowed: list[str] | None = None
    providers_ignored: list[str] | None = None
    providers_order: list[str] | None = None
    provider_sort: str | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    reasoning_disabled: bool = False
    prefill_messages: list[dict[str, str]] | None = field(default=None, metadata=NOT_SAVED)
    #: this invocation's: a resume without it runs the whole dataset
    max_samples: int | None = field(default=None, metadata=NOT_SAVED)
    # -- Helios's own ---------------------------------------------------------------------
    output_dir: Path = Path("data")
    #: the sandbox of the tools: local (bubblewrap) or docker
    provider: str = "local"
    #: prompts in flight; None = num_workers
    concurrency: int | None = None
    keep_no_reasoning: bool = False
    seed: int | None = None
    distributions_file: Path | None = None
    #: "hermes": --model verbatim to the OpenAI-compatible --base_url; "helios": provider/model
    routing: str = "hermes"
    #: the image of prompts without one (docker)
    image: str = "debian:bookworm-slim"
    #: seconds one prompt may take, sandbox included
    prompt_timeout: float = 3600.0
    temperature: float | None = None
    prices: Path | None = None
    quiet: bool = field(default=False, metadata=NOT_SAVED)
    show_progress: bool = field(default=True, metadata=NOT_SAVED)
    #: where prompts run: "local" (this machine) or "ray" (a Ray cluster's nodes)
    executor: str = "local"
    #: with executor "ray": the cluster's address, "auto", or None (a local Ray instance)
    ray_address: str | None = None
    #: the run's name and tags in run.json (the folder stays --run_name's)
    labels: RunLabels = field(default_factory=RunLabels)
    #: answer a request the response cache holds from it (`--cache`; saved, so a
    #: resume keeps it)
    cache: bool = False
    #: this invocation's budgets (`--max_cost`, ...), against the whole run's spend
    budget: BudgetConfig = field(default_factory=BudgetConfig, metadata=NOT_SAVED)

    def __post_init__(self) -> None:
        # a str path (as a Hermes user writes `output_dir="data"`) works like a Path
        self.dataset_file = Path(self.dataset_file)
        if isinstance(self.budget, dict):  # the Python API's form
            self.budget = BudgetConfig.of(**self.budget)
        self.output_dir = Path(self.output_dir)
        if self.distributions_file is not None:
            self.distributions_file = Path(self.distributions_file)
        if self.prices is not None:
            self.prices = Path(self.prices)
        if not self.model:
            self.model = default_model(self.routing)
        check_executor(self.executor, self.ray_address)

    @property
    def in_flight(self) -> int:
        return self.concurrency or self.num_workers

    @property
    def run_dir(self) -> Path:
        return self.output_dir / self.run_name

    @property
    def effort(self) -> ReasoningEffort | None:
        if self.reasoning_disabled:
            return "none"
        return self.reasoning_effort  # type: ignore[return-value]

    def openrouter_provider(self) -> dict[str, Any]:
        preferences: dict[str, Any] = {}
        pairs = (("only", self.providers_allowed), ("ignore", self.providers_ignored),
                 ("order", self.providers_order), ("sort", self.provider_sort))  # fmt: skip
        for key, value in pairs:
            if value:
                preferences[key] = value
        return preferences

    def check(self) -> None:
        """One ConfigError line for the first bad setting."""
        if not self.run_name or "/" in self.run_name or self.run_name in (".", ".."):
            raise ConfigError(f"bad run name {self.run_name!r}: a plain folder name",
                              field="--run_name")  # fmt: skip
        for name in ("batch_size", "max_turns", "num_workers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name} must be at least 1", field=f"--{name}")
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError("--concurrency must be at least 1", field="--concurrency")
        for name in ("max_tokens", "max_samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"--{name} must be at least 1", field=f"--{name}")
        if self.reasoning_effort is not None and self.reasoning_effort not in get_args(
            ReasoningEffort
        ):
            allowed = "|".join(get_args(ReasoningEffort))
            raise ConfigError(f"unknown reasoning effort {self.reasoning_effort!r} (use "
                              f"{allowed})", field="--reasoning_effort")  # fmt: skip
        if self.provider_sort is not None and self.provider_sort not in PROVIDER_SORTS:
            raise ConfigError(f"--provider_sort must be one of {', '.join(PROVIDER_SORTS)}",
                              field="--provider_sort")  # fmt: skip
        if self.routing not in ("hermes", "helios"):
            raise ConfigError("--routing must be hermes or helios", field="--routing")
        if self.prompt_timeout <= 0:
            raise ConfigError("--prompt_timeout must be positive", field="--prompt_timeout")
        check_prefill(self.prefill_messages or [], "--prefill_messages_file")


def default_model(routing: str) -> str:
    """The one default model (`helios.models.routing.DEFAULT_MODEL`) as `routing`
    names it: OpenRouter's spelling with Hermes's routing, Helios's with Helios's."""
    return DEFAULT_MODEL if routing == "helios" else openrouter_name(DEFAULT_MODEL)


def split_list(text: str | None) -> list[str] | None:
    """Hermes's comma-separated provider lists."""
    if not text:
        return None
    items = [part.strip() for part in text.split(",") if part.strip()]
    return items or None


def check_prefill(messages: Any, where: str) -> None:
    if not isinstance(messages, list):
        raise InputError("must be a JSON array of {role, content} messages", file=where)
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise InputError(f"message {i} must be an object with a string 'content'",
                             file=where)  # fmt: skip
        if message.get("role") not in ("system", "user", "assistant"):
            raise InputError(f"message {i} has role {message.get('role')!r}; use user, "
                             "assistant or system", file=where)  # fmt: skip


def load_prefill(path: Path) -> list[dict[str, str]]:
    import json

    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise InputError(
            "file not found", file=str(path), field="--prefill_messages_file"
        ) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read prefill messages: {exc}", file=str(path)) from None
    check_prefill(data, str(path))
    return [{"role": m["role"], "content": m["content"]} for m in data]
