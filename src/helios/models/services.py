"""What a batch shares across its trials for model calls: one client per
endpoint, the adaptive limiter, the retry policy, prices and live counters."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helios.errors import ConfigError
from helios.figures import out_tokens_per_second
from helios.models.base import CacheMark, GenerationConfig, Message, Model, ModelResponse
from helios.models.limiter import AdaptiveLimiter
from helios.models.pricing import PriceTable, unknown_reason
from helios.models.response_cache import (
    CacheRequest,
    ResponseCache,
    current_sample,
    decode_response,
    encode_response,
)
from helios.models.retry import OnRetry, RetryPolicy, call_with_retries
from helios.models.routing import DEFAULT_MODEL, Api, ModelSpec
from helios.slots import Slot
from helios.usage import Usage

if TYPE_CHECKING:
    from helios.models.http import EndpointClient, WireRequest


def create_model(spec: ModelSpec) -> Model:
    """The client of `spec`'s wire (imported on first use)."""
    if spec.api == "anthropic":
        from helios.models.anthropic_messages import AnthropicModel

        return AnthropicModel(spec)
    if spec.api == "responses":
        from helios.models.openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(spec)
    if spec.api == "gemini":
        from helios.models.gemini_native import GeminiNativeModel

        return GeminiNativeModel(spec)
    from helios.models.openai_chat import OpenAIChatModel

    return OpenAIChatModel(spec)


@dataclass
class ModelServices:
    spec: ModelSpec
    config: GenerationConfig = field(default_factory=GenerationConfig)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    prices: PriceTable = field(default_factory=PriceTable)
    #: bounds calls in flight to this endpoint and key (one batch, one endpoint)
    limiter: AdaptiveLimiter = field(default_factory=AdaptiveLimiter)
    #: batch-wide running totals for the live display
    totals: Usage = field(default_factory=Usage)
    started: float = field(default_factory=time.monotonic)
    #: called after each model call has been added to `totals` (a worker process
    #: sends its totals to the parent's live display); shared by the copies
    on_call: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    #: when the work ended (`stop_clock`): the figures stop moving then
    ended: float | None = None
    _model: Model | None = None
    #: the same services over another wire (`with_api`), made once per batch
    _wires: dict[str, ModelServices] = field(default_factory=dict, repr=False)
    #: the model id trials name these services by (`TrialSpec.model`)
    name: str | None = None
    #: a run over several models: the others by name (`for_model`), each with its own
    #: endpoint, key, limiter and generation settings; their calls count in these
    #: services' totals (`add_model`)
    others: dict[str, ModelServices] = field(default_factory=dict, repr=False)
    #: the services whose totals and `on_call` these count in (set by `add_model`)
    _owner: ModelServices | None = field(default=None, repr=False, compare=False)
    #: the response cache (`--cache`): a request it holds is answered from it
    cache: ResponseCache | None = None

    def __post_init__(self) -> None:
        # in place: services made by `with_api` share these totals
        if self.totals.calls == 0 and self.totals.cost_usd == 0.0 and not self.priced:
            self.totals.mark_cost_unknown(unknown_reason(self._unpriced() or ""))

    @property
    def priced(self) -> bool:
        """Whether every model of the run has a price."""
        return self._unpriced() is None

    def unpriced_model(self) -> str | None:
        """The first of the run's models without a price (None: every one has one)."""
        return self._unpriced()

    def _unpriced(self) -> str | None:
        """The first of the run's models without a price, or None."""
        for services in (self, *self.others.values()):
            if services.prices.lookup(services.spec.qualified) is None:
                return services.spec.qualified
        return None

    def add_model(self, name: str, services: ModelServices) -> None:
        """Make `services` the run's model `name`: trials that name it get it from
        `for_model`, and its calls count in these services' totals."""
        services._owner = self
        services.name = name
        self.others[name] = services
        if not services.priced and self.totals.calls == 0:
            self.totals.mark_cost_unknown(unknown_reason(services.spec.qualified))

    def for_model(self, model: str | None) -> ModelServices:
        """The services of `model`, one of the run's models (these when it is theirs,
        or the run has one model)."""
        if model is None or model == self.name or not self.others:
            return self
        try:
            return self.others[model]
        except KeyError:
            raise ConfigError(f"no model {model!r} in this run (it has: "
                              f"{', '.join([str(self.name), *self.others])})",
                              field="--model") from None  # fmt: skip

    def detached(self) -> ModelServices:
        """A copy for another process (a worker, a Ray node): its own limiters, from
        the current limits, its own totals, and no client (it makes its own, in its
        loop); the other models' copies count in its totals."""
        copy = replace(self, limiter=_fresh(self.limiter), totals=self.empty_usage(),
                       _model=None, _wires={}, others={}, _owner=None)  # fmt: skip
        for name, other in self.others.items():
            copy.others[name] = replace(other, limiter=_fresh(other.limiter), _model=None,
                                        _wires={}, others={}, _owner=copy)  # fmt: skip
        return copy

    def empty_usage(self) -> Usage:
        """A usage with nothing counted yet: its cost is $0 with a price for the model,
        and unknown (None, with the reason) without one, never a $0 for "unknown"."""
        usage = Usage()
        unpriced = self._unpriced()
        if unpriced is not None:
            usage.mark_cost_unknown(unknown_reason(unpriced))
        return usage

    def with_api(self, api: Api) -> ModelServices:
        """These services over another wire of the same provider (the computer agent
        asks for the one its provider module speaks: `ComputerProvider.api`).

        The result shares the limiter, retry policy, prices and totals (one endpoint
        and key, one budget) and is made once, so every trial of a batch uses one
        client and one connection pool; `close` closes it too."""
        if api == self.spec.api:
            return self
        derived = self._wires.get(api)
        if derived is None:
            derived = replace(self, spec=self.spec.with_api(api), _model=None, _wires={},
                              _owner=self._owner or self)  # fmt: skip
            self._wires[api] = derived
        return derived

    @property
    def model(self) -> Model:
        if self._model is None:
            self._model = create_model(self.spec)
        return self._model

    async def generate(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]],
        *,
        slot: Slot | None = None,
        on_retry: OnRetry | None = None,
        usage: Usage | None = None,
    ) -> ModelResponse:
        """One model turn with Helios's retries; the response's usage carries cost,
        retries and time. `usage` (the unit's running total) gets the call's usage,
        and every retry as it happens, so retries count even when the call fails."""
        keyed = self._keyed(messages, tools) if self.cache is not None else None
        if keyed is not None and (hit := self._replay(keyed, usage)) is not None:
            return hit
        started = time.monotonic()
        owner = self._owner or self  # a run's other models count in its first one's totals

        def count_retry(error: Any, delay: float, attempt: int) -> None:
            owner.totals.retries += 1
            if usage is not None:
                usage.retries += 1
            if on_retry is not None:
                on_retry(error, delay, attempt)

        if keyed is not None:
            client, wire = keyed.client, keyed.wire
            call = lambda: client.send(wire, self.config)  # noqa: E731
        else:
            call = lambda: self.model.generate(messages, tools, self.config)  # noqa: E731
        response, retries = await call_with_retries(
            call,
            limiter=self.limiter,
            policy=self.policy,
            slot=slot,
            on_retry=count_retry,
        )
        call_usage = response.usage
        call_usage.model_seconds = time.monotonic() - started
        self.prices.price_usage(self.spec.qualified, call_usage)
        if response.model:  # the id the provider reported: what a rerun compares
            call_usage.note_model(self.name or self.spec.qualified, response.model)
        owner.totals.add(call_usage)  # retries are counted live by count_retry
        if usage is not None:
            usage.add(call_usage)
        call_usage.retries = retries
        if owner.on_call is not None:
            owner.on_call()
        if keyed is not None:
            await self._store(keyed, response)
        return response

    # -- the response cache -----------------------------------------------------------------
    def _keyed(self, messages: list[Message], tools: list[dict[str, Any]]) -> _Keyed | None:
        """The request, built once, and its cache key (None: a client the cache cannot
        key, which then calls as usual)."""
        from helios.models.http import EndpointClient

        client = self.model
        if not isinstance(client, EndpointClient):
            return None
        wire = client.request(messages, tools, self.config)
        request = CacheRequest(
            api=self.spec.api, provider=self.spec.provider, model=self.spec.model,
            endpoint=client.endpoint_url, path=client.path, body=wire.body,
            headers=dict(wire.headers or {}), sample=current_sample(),
        )  # fmt: skip
        return _Keyed(client, wire, request, request.key())

    def _replay(self, keyed: _Keyed, usage: Usage | None) -> ModelResponse | None:
        """The stored answer to `keyed`, counted as a hit: it costs nothing, takes no
        limiter slot, and its usage holds what it saved."""
        assert self.cache is not None
        entry = self.cache.get(keyed.key)
        if entry is None:
            return None
        response, original = decode_response(entry.response)
        self.prices.price_usage(self.spec.qualified, original)
        saved = response.usage
        saved.cache_hits = 1
        saved.cache_saved_tokens = (
            original.input_tokens + original.cache_read_tokens
            + original.cache_write_tokens + original.output_tokens
        )  # fmt: skip
        saved.cache_saved_usd = original.cost_usd
        if response.model:
            saved.note_model(self.name or self.spec.qualified, response.model)
        response.message.cache = CacheMark(keyed.key, True, original)
        owner = self._owner or self
        owner.totals.add(saved)
        if usage is not None:
            usage.add(saved)
        if owner.on_call is not None:
            owner.on_call()
        return response

    async def _store(self, keyed: _Keyed, response: ModelResponse) -> None:
        assert self.cache is not None
        response.message.cache = CacheMark(keyed.key, False)
        if self.cache.put(keyed.key, keyed.request.parts(), encode_response(response)):
            import asyncio

            await asyncio.to_thread(self.cache.evict)

    def stop_clock(self) -> None:
        """The work is over: "out tok/s" is measured up to now, so the live line's last
        figure and the final panel's are one number."""
        if self.ended is None:
            self.ended = time.monotonic()

    def out_tokens_per_second(self) -> float:
        """Output tokens of this invocation's model calls per second of its wall time
        (from when the services opened to `stop_clock`, or now): the live line's and
        the final panel's "out tok/s"."""
        end = self.ended if self.ended is not None else time.monotonic()
        return out_tokens_per_second(self.totals.output_tokens, end - self.started)

    def live_line(self) -> str:
        """The model figures of a live display; "out tok/s" is
        `out_tokens_per_second`. A model with no price shows "cost unknown" from
        the start (never "$0.0000" while nothing is counted yet)."""
        t = self.totals
        return (
            f"limit {self.limiter.current} · {t.retries} retries · "
            f"{t.input_tokens + t.cache_read_tokens:,} in/{t.output_tokens:,} out tok · "
            f"{self.out_tokens_per_second():,.0f} out tok/s · {t.cost_text()}"
            + (f" · {t.cache_hits:,} cached" if t.cache_hits else "")
        )

    async def close(self) -> None:
        for derived in [*self._wires.values(), *self.others.values()]:
            await derived.close()
        if self._model is not None:
            await self._model.close()
            self._model = None


@dataclass(frozen=True, slots=True)
class _Keyed:
    """A request with its cache key."""

    client: EndpointClient
    wire: WireRequest
    request: CacheRequest
    key: str


def _fresh(limiter: AdaptiveLimiter) -> AdaptiveLimiter:
    """A new limiter that starts where `limiter` is now."""
    return AdaptiveLimiter(initial=limiter.limit, minimum=limiter.minimum,
                           maximum=limiter.maximum, decrease=limiter.decrease,
                           cooldown=limiter.cooldown)  # fmt: skip


@dataclass
class ModelOptions:
    """How a batch reaches its model: one object that every door passes on. A run
    over several models lists the others in `others`, each with its own endpoint,
    key and generation settings."""

    model: str | None = None
    base_url: str | None = None
    #: never written anywhere; kept out of repr so it never reaches a log
    api_key: str | None = field(default=None, repr=False)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    prices: Path | None = None
    retry_policy: RetryPolicy | None = None
    #: the run's other models (`-m a,b`, a job file's `models`); trials name their own
    others: list[ModelOptions] = field(default_factory=list)
    #: answer a request the response cache holds from it, and keep each new answer
    #: there (`--cache`; `helios.models.response_cache`); for every model of the run
    cache: bool = False

    def __post_init__(self) -> None:
        if self.prices is not None:  # a str path works like a Path
            self.prices = Path(self.prices)

    def every(self) -> list[ModelOptions]:
        """This model and the others, in order."""
        return [self, *self.others]

    def open(self, default_model: str = DEFAULT_MODEL) -> ModelServices:
        name = self.model or default_model
        services = open_model_services(
            name,
            base_url=self.base_url,
            api_key=self.api_key,
            generation=self.generation,
            prices_path=self.prices,
            policy=self.retry_policy,
            cache=self.cache,
        )
        services.name = name
        for other in self.others:
            opened = other.open(default_model)
            opened.cache = opened.cache or services.cache
            services.add_model(other.model or default_model, opened)
        return services


def open_model_services(
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    generation: GenerationConfig | None = None,
    prices_path: Path | None = None,
    policy: RetryPolicy | None = None,
    cache: bool = False,
) -> ModelServices:
    """Resolve the model and its key (a ConfigError names what to set) before any trial."""
    from helios.models.routing import resolve_model

    spec = resolve_model(model, base_url=base_url, api_key=api_key)
    prices = PriceTable.load(prices_path)
    prices.warn_unmatched([spec.qualified])
    return ModelServices(
        spec=spec,
        config=generation or GenerationConfig(),
        prices=prices,
        policy=policy or RetryPolicy(),
        cache=ResponseCache.from_settings() if cache else None,
    )
