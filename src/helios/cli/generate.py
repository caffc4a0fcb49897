"""`helios generate`: the prompt-dataset door on the command line.

Takes every flag of Hermes's `batch_runner.py` in both spellings
(`--dataset_file=F` and `--dataset-file F`), with Hermes's defaults, plus
Helios's own. Exit codes are `helios batch`'s: 0 done, 2 bad invocation or
input (never 0 on bad flags, unlike Hermes), 3 stopped by a budget, 130 interrupted.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from helios.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_BUDGET,
    Interrupted,
    err_console,
    fail,
    handle_errors,
    shown,
)
from helios.cli.common import run_coroutine as run_async
from helios.cli.options import CacheOpt, ExecutorOpt, NameOpt, RayAddressOpt, TagOpt
from helios.datagen.settings import default_model, load_prefill, split_list
from helios.display.console import SafeConsole, plain
from helios.errors import InputError


def _opt(*names: str, help: str) -> Any:
    return typer.Option(*names, help=help)


#: what the help of a required flag says
REQUIRED = "Required (not with --list_distributions; with --resume, the run's)."
DatasetOpt = Annotated[
    Path | None,
    _opt(
        "--dataset_file",
        "--dataset-file",
        help='JSONL prompts, one {"prompt": ...} per line. ' + REQUIRED,
    ),
]
BatchOpt = Annotated[
    int | None,
    _opt(
        "--batch_size",
        "--batch-size",
        help="Prompts per batch file and checkpoint entry. " + REQUIRED,
    ),
]
RunOpt = Annotated[str | None, _opt("--run_name", "--run-name",
                                    help="Run folder name under --output_dir. Required "
                                    "(not with --list_distributions).")]  # fmt: skip


def generate_command(
    ctx: typer.Context,
    dataset_file: DatasetOpt = None,
    batch_size: BatchOpt = None,
    run_name: RunOpt = None,
    distribution: Annotated[
        str, _opt("--distribution", help="Toolset distribution (--list_distributions shows them).")
    ] = "default",
    model: Annotated[
        str | None,
        _opt(
            "--model",
            help="Model name, sent verbatim to --base_url (with --routing helios: a Helios "
            f"provider/model). Default: {default_model('hermes')} "
            f"({default_model('helios')} with --routing helios).",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        _opt(
            "--api_key",
            "--api-key",
            help="API key (default: the endpoint's variable: OPENROUTER_API_KEY…).",
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        _opt("--base_url", "--base-url", help="OpenAI-compatible endpoint (default OpenRouter's)."),
    ] = None,
    max_turns: Annotated[
        int, _opt("--max_turns", "--max-turns", help="Model turns per prompt.")
    ] = 10,
    num_workers: Annotated[
        int,
        _opt(
            "--num_workers",
            "--num-workers",
            help="Hermes's workers; the default for --concurrency.",
        ),
    ] = 4,
    resume: Annotated[
        bool,
        _opt(
            "--resume", help="Continue the run: finished prompts are skipped, failed ones retried."
        ),
    ] = False,
    verbose: Annotated[
        bool, _opt("--verbose", help="A line per prompt, tracebacks on errors.")
    ] = False,
    list_distributions: Annotated[
        bool,
        _opt(
            "--list_distributions", "--list-distributions", help="Print the distributions and exit."
        ),
    ] = False,
    ephemeral_system_prompt: Annotated[
        str | None,
        _opt(
            "--ephemeral_system_prompt",
            "--ephemeral-system-prompt",
            help="System prompt used while running, never written to the data.",
        ),
    ] = None,
    log_prefix_chars: Annotated[
        int,
        _opt(
            "--log_prefix_chars", "--log-prefix-chars", help="Characters of prompts in log lines."
        ),
    ] = 100,
    providers_allowed: Annotated[
        str | None,
        _opt(
            "--providers_allowed",
            "--providers-allowed",
            help="OpenRouter: only these providers (comma-separated).",
        ),
    ] = None,
    providers_ignored: Annotated[
        str | None,
        _opt("--providers_ignored", "--providers-ignored", help="OpenRouter: never these."),
    ] = None,
    providers_order: Annotated[
        str | None,
        _opt("--providers_order", "--providers-order", help="OpenRouter: try in this order."),
    ] = None,
    provider_sort: Annotated[
        str | None,
        _opt("--provider_sort", "--provider-sort", help="OpenRouter: price|throughput|latency."),
    ] = None,
    max_tokens: Annotated[
        int | None,
        _opt(
            "--max_tokens",
            "--max-tokens",
            help="Output tokens per model call (default: the model's).",
        ),
    ] = None,
    reasoning_effort: Annotated[
        str | None,
        _opt(
            "--reasoning_effort",
            "--reasoning-effort",
            help="xhigh|high|medium|low|minimal|none (OpenRouter default: medium).",
        ),
    ] = None,
    reasoning_disabled: Annotated[
        bool, _opt("--reasoning_disabled", "--reasoning-disabled", help="Turn reasoning off.")
    ] = False,
    prefill_messages_file: Annotated[
        Path | None,
        _opt(
            "--prefill_messages_file",
            "--prefill-messages-file",
            help="JSON array of {role, content} sent before each prompt, never written.",
        ),
    ] = None,
    max_samples: Annotated[
        int | None, _opt("--max_samples", "--max-samples", help="Only the first N prompts.")
    ] = None,
    output_dir: Annotated[
        Path, _opt("--output_dir", "--output-dir", help="Where run folders go.")
    ] = Path("data"),
    provider: Annotated[
        str, _opt("--provider", help="Sandbox of the tools: local (bubblewrap) or docker.")
    ] = "local",
    concurrency: Annotated[
        int | None, _opt("--concurrency", help="Prompts in flight (default --num_workers).")
    ] = None,
    keep_no_reasoning: Annotated[
        bool,
        _opt("--keep_no_reasoning", "--keep-no-reasoning", help="Keep rows without any reasoning."),
    ] = False,
    seed: Annotated[
        int | None, _opt("--seed", help="Seed of the toolset sampling (kept for --resume).")
    ] = None,
    distributions_file: Annotated[
        Path | None,
        _opt(
            "--distributions_file",
            "--distributions-file",
            help="YAML or JSON with more distributions.",
        ),
    ] = None,
    routing: Annotated[
        str,
        _opt(
            "--routing",
            help="hermes (model verbatim to --base_url) or "
            "helios (provider/model, e.g. anthropic/...).",
        ),
    ] = "hermes",
    image: Annotated[str, _opt("--image", help="Docker image of rows without one.")] = (
        "debian:bookworm-slim"
    ),
    prompt_timeout: Annotated[
        float, _opt("--prompt_timeout", "--prompt-timeout", help="Seconds one prompt may take.")
    ] = 3600.0,
    prices: Annotated[Path | None, _opt("--prices", help="JSON of extra model prices.")] = None,
    cache: CacheOpt = False,
    quiet: Annotated[bool, _opt("--quiet", "-q", help="Only the live line.")] = False,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    name: NameOpt = None,
    tag: TagOpt = None,
    max_cost: Annotated[float | None, _opt("--max_cost", "--max-cost", help="Budget in USD "
                        "for the whole run: no prompt starts once it is reached; exit 3.")] = None,
    max_total_tokens: Annotated[int | None, _opt("--max_total_tokens", "--max-total-tokens",
                                help="Budget of model tokens for the whole run.")] = None,
    max_duration: Annotated[str | None, _opt("--max_duration", "--max-duration",
                            help="Budget of time for the whole run (90s, 45m, 2h).")] = None,
    budget_hard: Annotated[bool, _opt("--budget_hard", "--budget-hard", help="Once a budget "
                           "is reached, stop the prompts in flight too.")] = False,
    debug: Annotated[bool, _opt("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Turn a JSONL file of prompts into tool-use trajectories (Hermes batch-runner flags)."""
    if list_distributions:
        _list(distributions_file, debug)
        return
    from helios.engine.budget import BudgetConfig
    from helios.engine.labels import labels_of
    from helios.errors import ConfigError

    try:  # the folder is --run_name's: a name labels the run, it does not name the folder
        labels = labels_of(name, tag)
        budget = BudgetConfig.of(max_cost, max_total_tokens, max_duration, budget_hard)
    except (InputError, ConfigError) as exc:
        handle_errors(exc, debug)
    if resume and run_name is not None:
        p = _resumed(ctx, output_dir / run_name, debug)
        dataset_file, batch_size, model = p["dataset_file"], p["batch_size"], p["model"]
        distribution, api_key, base_url = p["distribution"], p["api_key"], p["base_url"]
        max_turns, num_workers, provider = p["max_turns"], p["num_workers"], p["provider"]
        providers_allowed, providers_ignored = p["providers_allowed"], p["providers_ignored"]
        providers_order, provider_sort = p["providers_order"], p["provider_sort"]
        max_tokens, reasoning_effort = p["max_tokens"], p["reasoning_effort"]
        reasoning_disabled, max_samples = p["reasoning_disabled"], p["max_samples"]
        concurrency, keep_no_reasoning = p["concurrency"], p["keep_no_reasoning"]
        distributions_file, routing, image = p["distributions_file"], p["routing"], p["image"]
        prompt_timeout, prices = p["prompt_timeout"], p["prices"]
        cache = p["cache"]
    required = (("--dataset_file", dataset_file), ("--batch_size", batch_size),
                ("--run_name", run_name))  # fmt: skip
    missing = [flag for flag, value in required if value is None]
    if missing:
        fail(f"{', '.join(missing)} required (or --list_distributions)")
    options = dict(
        dataset_file=dataset_file, batch_size=batch_size, run_name=run_name,
        distribution=distribution, model=model or "", api_key=api_key, base_url=base_url,
        max_iterations=max_turns, num_workers=num_workers, verbose=verbose,
        ephemeral_system_prompt=ephemeral_system_prompt, log_prefix_chars=log_prefix_chars,
        providers_allowed=split_list(providers_allowed),
        providers_ignored=split_list(providers_ignored),
        providers_order=split_list(providers_order), provider_sort=provider_sort,
        max_tokens=max_tokens, max_samples=max_samples, output_dir=output_dir,
        provider=provider, concurrency=concurrency, keep_no_reasoning=keep_no_reasoning,
        seed=seed, distributions_file=distributions_file, routing=routing, image=image,
        prompt_timeout=prompt_timeout, prices=prices, quiet=quiet, executor=executor,
        ray_address=ray_address, show_progress=True,  # -q keeps the live line
        reasoning_effort=reasoning_effort, reasoning_disabled=reasoning_disabled,
        labels=labels, cache=cache, budget=budget,
    )  # fmt: skip
    _run(options, prefill_messages_file, resume, debug or verbose)


def _resumed(ctx: typer.Context, run_dir: Path, debug: bool) -> dict[str, Any]:
    """The command's values, with each one not given taken from the run in `run_dir`
    (nothing when there is no run there yet: `--resume` then starts it)."""
    from helios.cli.resume import given, recorded_run, refuse_recorded_endpoints
    from helios.datagen.folder import STORE_DIR

    values = dict(ctx.params)
    if not (run_dir / STORE_DIR).is_dir():
        return values
    try:
        run = recorded_run(run_dir / STORE_DIR, ("generate",))
    except Exception as exc:
        handle_errors(exc, debug)
    where = run_dir / STORE_DIR / "run.json"
    try:
        saved = _saved(ctx, run, where)
    except InputError as exc:
        handle_errors(exc, debug)
    if saved is not None:  # the run's config: every option named as a setting, one rule
        for name, value in saved.items():
            if name in values and value is not None and not given(ctx, name):
                values[name] = ",".join(value) if isinstance(value, list) else value
        return values
    recorded = {**(run.get("settings") or {}), "dataset_file": run.get("dataset_file"),
                "model": run.get("model"), "distribution": run.get("distribution")}  # fmt: skip
    paths = ("dataset_file", "prices", "distributions_file")
    hints = typing.get_type_hints(generate_command)
    for name, value in recorded.items():
        if name in values and value is not None and not given(ctx, name):
            if not _fits(value, hints.get(name)):  # what the flag would refuse is refused
                bad = InputError(f"not a valid value: {value!r}", file=str(where), field=name)
                handle_errors(bad, debug)
            values[name] = Path(value) if name in paths else value
    try:
        refuse_recorded_endpoints(ctx, recorded, where)
    except InputError as exc:
        handle_errors(exc, debug)
    return values


#: the options that say where the run's folder is: this invocation's, never the run's
FOLDER_OPTIONS = ("run_name", "output_dir")


def _saved(ctx: typer.Context, run: dict[str, Any], where: Path) -> dict[str, Any] | None:
    """The settings a run saved (run.json's `config`) that a resume may take, read
    against `GenerateSettings`'s fields; None for a run of before config_version. An
    endpoint it records is never taken: it must be named again."""
    from helios.cli.resume import refuse_recorded_endpoints
    from helios.datagen.settings import GenerateSettings
    from helios.engine.saved_config import ENDPOINTS, load_fields, saved_config, saved_endpoints

    config = saved_config(run, str(where))
    if config is None:
        return None
    settings = load_fields(GenerateSettings, config.get("settings", {}), str(where),
                           "config.settings")  # fmt: skip
    refuse_recorded_endpoints(ctx, saved_endpoints(config), where)
    skipped = (*ENDPOINTS, *FOLDER_OPTIONS)
    return {name: value for name, value in settings.items() if name not in skipped}


def _fits(value: Any, hint: Any) -> bool:
    """Whether a value read from run.json is one the option's type takes (a path as its
    text, an int where a float goes; a bool is not a number)."""
    kinds = [k for k in typing.get_args(hint) or (hint,) if k is not type(None)]
    for kind in kinds:
        if kind is Path and isinstance(value, str):
            return True
        if kind in (int, float) and isinstance(value, bool):
            continue
        if kind is float and isinstance(value, int):
            return True
        if isinstance(kind, type) and isinstance(value, kind):
            return True
    return False


def _run(options: dict[str, Any], prefill: Path | None, resume: bool, debug: bool) -> None:
    from helios.datagen.runner import BatchRunner

    runner: BatchRunner | None = None
    try:
        if prefill is not None:
            options["prefill_messages"] = load_prefill(prefill)
        runner = BatchRunner(**options)
        result = run_async(runner.arun(resume))
    except Interrupted as exc:
        if runner is not None:
            err_console.print("resume with the same command plus [bold]--resume[/]",
                              highlight=False, soft_wrap=True)  # fmt: skip
        handle_errors(exc, debug)
    except Exception as exc:
        handle_errors(exc, debug)
    if result.aborted:
        err_console.print(
            f"[red]stopped early:[/] {shown(result.aborted)}; fix it, then rerun with --resume",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
        raise typer.Exit(EXIT_BAD_INPUT)
    if result.budget_stopped:
        err_console.print(f"[yellow]stopped by a budget:[/] {shown(result.budget_stopped)}; to "
                          "go on, rerun with --resume and a higher budget", highlight=False,
                          soft_wrap=True)  # fmt: skip
        raise typer.Exit(EXIT_BUDGET)
    first = shown(result.first_failure or "no error message")
    if result.failed and result.failed >= result.prompts:
        # nothing was generated: as a batch whose every trial errored, not a result
        err_console.print(f"[red]every prompt failed[/] ({result.failed}); the first: {first} "
                          "(all in failures.jsonl)", highlight=False, soft_wrap=True)  # fmt: skip
        raise typer.Exit(EXIT_BAD_INPUT)
    if result.failed:
        err_console.print(f"{result.failed} prompt(s) failed (see failures.jsonl); the first: "
                          f"{first}; rerun with --resume to retry them",
                          highlight=False, soft_wrap=True)  # fmt: skip


def _list(distributions_file: Path | None, debug: bool) -> None:
    from helios.agents.toolsets import get_toolset
    from helios.datagen.distributions import BUILTIN, describe, load_distributions_file

    try:
        extra = load_distributions_file(distributions_file) if distributions_file else {}
    except Exception as exc:
        handle_errors(exc, debug)
    table = Table(title="Toolset distributions", title_justify="left")
    for column in ("name", "toolsets (chance per prompt)", "description"):
        table.add_column(column)
    for name, dist in sorted({**BUILTIN, **extra}.items()):
        mark = " (file)" if name in extra else ""
        table.add_row(plain(name + mark), plain(describe(dist)), plain(dist.description))
    console = SafeConsole()
    console.print(table)
    reason = get_toolset("web").unavailable_reason()
    if reason:
        console.print(f"[yellow]web toolset unavailable here:[/] {shown(reason)}",
                      highlight=False, soft_wrap=True)  # fmt: skip
