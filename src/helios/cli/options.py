"""Option types shared by the commands, the options `helios batch` and `helios run`
both take (`TrialOptions`, put in each command's signature by `trial_options`), and
their translation into one `ModelOptions` plus the agent's settings."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, get_args, get_type_hints

import typer

from helios.engine.budget import BudgetConfig
from helios.errors import ConfigError
from helios.models.base import GenerationConfig, ReasoningEffort
from helios.models.routing import DEFAULT_MODEL
from helios.models.services import ModelOptions

ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model", "-m",
        help="provider/model: anthropic/…, openai/…, openrouter/…, gemini/…, "
        "openai-compatible/… (with --base-url); bare claude-*, gpt-*, o* route by prefix. "
        f"Default: {DEFAULT_MODEL}.",
    ),
]  # fmt: skip
AgentOpt = Annotated[
    str | None,
    typer.Option("--agent", "-a",
                 help="tool (built-in tool-calling agent), computer (drives the task's desktop "
                 "from screenshots), oracle (runs solution/solve.sh), nop, claude-code, "
                 "mini-swe-agent, gemini-cli (installed into the sandbox). Default: computer "
                 "for a computer-use model (…computer-use…) or a task with a desktop, else tool."),
]  # fmt: skip
ProviderOpt = Annotated[
    str,
    typer.Option(
        "--provider",
        help="Sandbox: docker (default), local (bubblewrap) or daytona (cloud: the daytona extra).",
    ),
]
NetworkDefaultOpt = Annotated[
    str,
    typer.Option(
        "--network-default",
        help="The network of a task that leaves network_mode unset: public (as in Harbor) or none.",
    ),
]
PassEnvOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--pass-env",
        help="A host variable a task may take as ${NAME} in [environment.env] (repeat the "
        "option for several). None is passed by default, and never a model provider's key.",
    ),
]
OutputOpt = Annotated[
    Path,
    typer.Option(
        "--output",
        "-o",
        help="Folder that receives the run's folder: batch_YYYYMMDD_HHMMSS/ "
        "(helios run: run_YYYYMMDD_HHMMSS/).",
    ),
]
AttemptsOpt = Annotated[int, typer.Option("--attempts", "-k", min=1, help="Attempts per task.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks.")]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", help="Endpoint for openai-compatible/… (vLLM, SGLang, "
                 "llama.cpp, Ollama), or to override a provider's URL."),
]  # fmt: skip
ApiKeyOpt = Annotated[
    str | None,
    typer.Option("--api-key", help="API key (default: ANTHROPIC_API_KEY, OPENAI_API_KEY, "
                 "OPENROUTER_API_KEY or GEMINI_API_KEY). Never written to any output."),
]  # fmt: skip
MaxTurnsOpt = Annotated[
    int | None,
    typer.Option("--max-turns", min=1,
                 help="Model turns per trial (default 50; the computer agent's 100)."),
]  # fmt: skip
AgentVersionOpt = Annotated[
    str | None,
    typer.Option("--agent-version",
                 help="The release of an installed agent (claude-code) to install and run; "
                 "default: the one Helios was tested with."),
]  # fmt: skip
SystemPromptOpt = Annotated[
    Path | None,
    typer.Option("--system-prompt-file", help="Replace the tool agent's system prompt."),
]
MaxTokensOpt = Annotated[
    int, typer.Option("--max-tokens", min=1, help="Output tokens per model call.")
]
TemperatureOpt = Annotated[
    float | None, typer.Option("--temperature", min=0.0, max=2.0, help="Sampling temperature.")
]
EffortOpt = Annotated[
    str | None,
    typer.Option("--reasoning-effort",
                 help="xhigh|high|medium|low|minimal|none, mapped to what the provider has."),
]  # fmt: skip
NoReasoningOpt = Annotated[
    bool, typer.Option("--no-reasoning", help="Disable reasoning (same as effort none).")
]
RoutingOpt = Annotated[
    str | None,
    typer.Option("--openrouter-routing",
                 help="OpenRouter provider routing: 'order=a,b;ignored=c;allowed=d;sort=price'."),
]  # fmt: skip
WatchOpt = Annotated[
    bool,
    typer.Option("--watch",
                 help="Show each GUI trial's desktop live in a browser: a URL on 127.0.0.1 "
                 "(noVNC, view only). `helios run`: not with -k > 1."),
]  # fmt: skip
InteractiveOpt = Annotated[
    bool,
    typer.Option("--interactive", "-i",
                 help="As --watch, and the person at the browser may take control of the "
                 "desktop. Not with -k > 1."),
]  # fmt: skip
ExecutorOpt = Annotated[
    str,
    typer.Option("--executor",
                 help="Where trials run: local (this machine) or ray (the nodes of a Ray "
                 "cluster; pip install 'helios-harness[ray]')."),
]  # fmt: skip
RayAddressOpt = Annotated[
    str | None,
    typer.Option("--ray-address",
                 help="With --executor ray: the cluster's head (host:port), or auto (the one "
                 "`ray start` made here). Default: start a local Ray instance."),
]  # fmt: skip
NameOpt = Annotated[
    str | None,
    typer.Option("--name",
                 help="Name the run (kept in run.json, shown by helios view and compare; at "
                 "most 100 printable characters). A new run's folder is then "
                 "<name>_YYYYMMDD_HHMMSS (unsafe characters as -)."),
]  # fmt: skip
TagOpt = Annotated[
    list[str] | None,
    typer.Option("--tag",
                 help="key=value, repeatable: a tag kept in run.json (helios compare --by "
                 "tag:KEY groups runs by it). Never part of the run's identity: a resume "
                 "keeps the tags, and tags given again replace theirs."),
]  # fmt: skip
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only the aggregate line.")]
RetryErrorsOpt = Annotated[
    bool, typer.Option("--retry-errors", help="With --resume, re-run errored trials too.")
]
RetryBelowOpt = Annotated[
    float | None,
    typer.Option("--retry-failed-below", metavar="R",
                 help="With --resume, run each scored trial whose reward is below R again, "
                 "as a new attempt beside the old one (the newest counts)."),
]  # fmt: skip
ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="With --resume, accept settings that differ from the run's."),
]
FailUnderOpt = Annotated[
    float | None,
    typer.Option("--fail-under", min=0.0, max=1.0, help="Exit 1 below this pass rate."),
]
PricesOpt = Annotated[
    Path | None,
    typer.Option("--prices", help="JSON of extra model prices (USD per 1M tokens)."),
]
CacheOpt = Annotated[
    bool,
    typer.Option("--cache/--no-cache",
                 help="Answer a model request from the response cache when it holds it "
                 "(free, no call), and keep each new answer there (HELIOS_CACHE_DIR, "
                 "default ~/.cache/helios/responses). Each attempt has its own answers; a "
                 "resume keeps the setting unless --no-cache. See `helios cache`."),
]  # fmt: skip

# -- which tasks run (issue 33): `helios batch` and `helios tasks list` ------------------
IncludeOpt = Annotated[
    list[str] | None,
    typer.Option("--include",
                 help="Only the tasks whose name or path matches this glob (repeatable: any)."),
]  # fmt: skip
ExcludeOpt = Annotated[
    list[str] | None,
    typer.Option("--exclude", help="Leave out the tasks whose name or path matches this glob "
                 "(repeatable)."),
]  # fmt: skip
TaskTagOpt = Annotated[
    list[str] | None,
    typer.Option("--task-tag", help="Only the tasks with this tag in task.toml's [metadata] "
                 "tags (repeatable: any). Not --tag, which tags the run."),
]  # fmt: skip
DifficultyOpt = Annotated[
    list[str] | None,
    typer.Option("--difficulty", help="Only the tasks of this [metadata] difficulty "
                 "(repeatable: any)."),
]  # fmt: skip
CategoryOpt = Annotated[
    list[str] | None,
    typer.Option("--category", help="Only the tasks of this [metadata] category "
                 "(repeatable: any)."),
]  # fmt: skip
LimitOpt = Annotated[
    int | None, typer.Option("--limit", min=1, help="At most N tasks: the first ones selected.")
]
SampleOpt = Annotated[
    int | None,
    typer.Option("--sample", min=1, help="A random subset of N of the tasks selected, the same "
                 "for the same --seed (kept by --resume)."),
]  # fmt: skip
SeedOpt = Annotated[int, typer.Option("--seed", help="The seed of --sample (default 0).")]
DatasetOpt = Annotated[
    str | None,
    typer.Option("--dataset", "-d", help="NAME@VERSION: a dataset of a --registry, its tasks "
                 "fetched with git at their pinned commits (cached; HELIOS_DATASETS_DIR)."),
]  # fmt: skip
RegistryOpt = Annotated[
    str | None,
    typer.Option("--registry", help="A registry.json (Harbor's format), a path or an "
                 "http(s) URL: the datasets -d names (default: HELIOS_REGISTRY, else "
                 "Harbor's registry; a URL's last copy is used offline)."),
]  # fmt: skip
#: the selection's option names, as `TaskSelection` names its fields
SELECTION_OPTIONS = ("include", "exclude", "task_tags", "difficulty", "category", "limit",
                     "sample", "seed")  # fmt: skip
# -- budgets (engine/budget.py): the whole run's spend, every invocation's --------------
MaxCostOpt = Annotated[
    float | None,
    typer.Option("--max-cost", min=0.0, help="Budget in USD for the whole run (a resume "
                 "counts what was spent before): no trial starts once it is reached; exit 3."),
]  # fmt: skip
MaxTotalTokensOpt = Annotated[
    int | None,
    typer.Option("--max-total-tokens", min=1, help="Budget of model tokens (in, out, cache) "
                 "for the whole run, as --max-cost."),
]  # fmt: skip
MaxDurationOpt = Annotated[
    str | None,
    typer.Option("--max-duration", help="Budget of time for the whole run (90s, 45m, 2h), "
                 "as --max-cost."),
]  # fmt: skip
BudgetHardOpt = Annotated[
    bool,
    typer.Option("--budget-hard", help="Once a budget is reached, stop the trials in flight "
                 "too (recorded as BudgetStopped errors; a resume runs them again)."),
]  # fmt: skip


def _routing(text: str | None) -> dict[str, Any]:
    """'order=a,b;ignored=c;sort=price' → OpenRouter's provider object."""
    names = {"order": "order", "allowed": "only", "ignored": "ignore", "sort": "sort"}
    routing: dict[str, Any] = {}
    for part in filter(None, (text or "").split(";")):
        key, _, value = part.partition("=")
        key = key.strip()
        if key not in names or not value.strip():
            raise ConfigError(
                f"bad routing entry {part!r}: use order=, allowed=, ignored=, sort=",
                field="--openrouter-routing",
            )
        items = [v.strip() for v in value.split(",") if v.strip()]
        routing[names[key]] = items[0] if key == "sort" else items
    return routing


MODEL_OPTION_NAMES = (
    "model", "base_url", "api_key", "max_turns", "agent_version", "system_prompt_file",
    "max_tokens",
    "temperature", "reasoning_effort", "no_reasoning", "openrouter_routing", "prices",
    "cache",
)  # fmt: skip


@dataclass
class AgentAndModel:
    """The model and agent options of a command, parsed once."""

    models: ModelOptions
    agent_settings: dict[str, Any]


def model_options(
    *,
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    max_turns: int | None,
    system_prompt_file: Path | None,
    max_tokens: int,
    agent_version: str | None = None,
    temperature: float | None,
    reasoning_effort: str | None,
    no_reasoning: bool,
    openrouter_routing: str | None,
    prices: Path | None,
    cache: bool = False,
) -> AgentAndModel:
    effort = "none" if no_reasoning else reasoning_effort
    if effort is not None and effort not in get_args(ReasoningEffort):
        raise ConfigError(
            f"unknown reasoning effort {effort!r} (use {'|'.join(get_args(ReasoningEffort))})",
            field="--reasoning-effort",
        )
    settings: dict[str, Any] = {}
    if max_turns is not None:
        settings["max_turns"] = max_turns
    if agent_version is not None:
        settings["version"] = agent_version
    if system_prompt_file is not None:
        try:
            settings["system_prompt"] = system_prompt_file.read_text("utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read: {exc.strerror}", file=str(system_prompt_file)
            ) from None
    generation = GenerationConfig(
        max_tokens=max_tokens,
        temperature=temperature,
        reasoning_effort=effort,  # type: ignore[arg-type]
        openrouter_provider=_routing(openrouter_routing),
    )
    models = ModelOptions(
        model=model, base_url=base_url, api_key=api_key, generation=generation, prices=prices,
        cache=cache,
    )
    return AgentAndModel(models=models, agent_settings=settings)


@dataclass(frozen=True)
class TrialOptions:
    """The options `helios batch` and `helios run` share, defined once: each field's
    annotation is its typer option and its default the option's default."""

    model: ModelOpt = None
    agent: AgentOpt = None
    provider: ProviderOpt = "docker"
    network_default: NetworkDefaultOpt = "public"
    pass_env: PassEnvOpt = None
    output: OutputOpt = Path("output")
    n_attempts: AttemptsOpt = 1
    base_url: BaseUrlOpt = None
    api_key: ApiKeyOpt = None
    max_turns: MaxTurnsOpt = None
    agent_version: AgentVersionOpt = None
    system_prompt_file: SystemPromptOpt = None
    max_tokens: MaxTokensOpt = 4096
    temperature: TemperatureOpt = None
    reasoning_effort: EffortOpt = None
    no_reasoning: NoReasoningOpt = False
    openrouter_routing: RoutingOpt = None
    prices: PricesOpt = None
    cache: CacheOpt = False
    watch: WatchOpt = False
    debug: DebugOpt = False
    name: NameOpt = None
    tags: TagOpt = None
    max_cost: MaxCostOpt = None
    max_total_tokens: MaxTotalTokensOpt = None
    max_duration: MaxDurationOpt = None
    budget_hard: BudgetHardOpt = False

    def agent_and_model(self) -> AgentAndModel:
        return model_options(**{name: getattr(self, name) for name in MODEL_OPTION_NAMES})

    def budget(self) -> BudgetConfig:
        return BudgetConfig.of(self.max_cost, self.max_total_tokens, self.max_duration,
                               self.budget_hard)  # fmt: skip


Command = Callable[..., None]


def trial_options(*help_order: str) -> Callable[[Command], Command]:
    """A command that takes `TrialOptions`: its signature, as typer reads it, is the
    command's own parameters (all but `options`) plus one per `TrialOptions` field, in
    `help_order` (every name once: the order of `--help`); it is called with the shared
    ones gathered into `options`."""
    hints = get_type_hints(TrialOptions, include_extras=True)
    shared = {
        field.name: inspect.Parameter(
            field.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[field.name],
            default=field.default,
        )
        for field in fields(TrialOptions)
    }  # fmt: skip

    def decorate(command: Command) -> Command:
        own = {
            name: parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for name, parameter in inspect.signature(command, eval_str=True).parameters.items()
            if name != "options"
        }
        every = own | shared
        if len(every) != len(own) + len(shared) or sorted(help_order) != sorted(every):
            raise TypeError(f"{command.__name__}: help_order must name {sorted(every)} once each")

        @functools.wraps(command)
        def with_options(**values: Any) -> None:
            options = TrialOptions(**{name: values.pop(name) for name in shared})
            command(options=options, **values)

        parameters = [every[name] for name in help_order]
        # typer reads the signature (and, for plain annotations, the type hints)
        with_options.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        with_options.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_options

    return decorate
