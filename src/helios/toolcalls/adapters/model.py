"""ModelAgent: text mode. The prompt goes as text to any Helios model
(`provider/name`), through Helios's own clients, retries and limiter, so the
same tests measure how reliably a text LLM makes the right tool calls.

Its model services are the batch's (`run_cases` hands them to the engine): their
adaptive limiter, retry policy (`retry_policy=`) and request timeout
(`generation.timeout`) are the only ones its calls go through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helios.models.base import GenerationConfig, Message
from helios.models.errors import ModelError
from helios.models.retry import RetryPolicy
from helios.models.services import ModelOptions, ModelServices
from helios.toolcalls.adapters.tools import to_specs
from helios.toolcalls.context import current_context
from helios.toolcalls.types import AgentResponse, Audio

#: seconds one model request may take before it counts as a (transient) timeout, unless
#: `generation` says otherwise (the tool-call runs' default, not the model layer's 600)
REQUEST_TIMEOUT = 120.0


class ModelAgent:
    """`ModelAgent(model="openai/gpt-4.1", tools=[...], system_prompt=...)`.

    Tools are JSON schemas in Chat Completions or flat form, or ToolSpecs. The
    key comes from the provider's usual variable or `api_key=`; a missing key
    or an unknown provider fails here, before any run. `cache=True` answers a
    request the response cache holds from it (each run its own answer), and keeps
    each new answer there (`helios.models.response_cache`).
    """

    #: text mode: the door sends the prompt's text and skips synthesis
    accepts_audio = False

    def __init__(
        self,
        model: str,
        tools: list[Any] | None = None,
        system_prompt: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        generation: GenerationConfig | None = None,
        retry_policy: RetryPolicy | None = None,
        prices: str | Path | None = None,
        cache: bool = False,
    ) -> None:
        self.model = model
        self.specs = to_specs(tools)
        self.system_prompt = system_prompt
        self.services: ModelServices = ModelOptions(
            model=model,
            base_url=base_url,
            api_key=api_key,
            generation=generation or GenerationConfig(max_tokens=1024, timeout=REQUEST_TIMEOUT),
            prices=None if prices is None else Path(prices),
            retry_policy=retry_policy,
            cache=cache,
        ).open()
        api = self.services.spec.api
        self.tool_wire = [s.to_anthropic() if api == "anthropic" else s.to_openai()
                          for s in self.specs]  # fmt: skip

    def __repr__(self) -> str:
        return f"ModelAgent(model={self.model!r}, tools={[s.name for s in self.specs]})"

    async def run_text(self, prompt: str) -> AgentResponse:
        messages = []
        if self.system_prompt:
            messages.append(Message(role="system", content=self.system_prompt))
        messages.append(Message(role="user", content=prompt))
        ctx = current_context.get()

        def retrying(error: ModelError, delay: float, attempt: int) -> None:
            if ctx is not None:
                ctx.retrying("agent", delay, f"{error.kind}: {error}")

        response = await self._services(ctx).generate(
            messages, self.tool_wire, slot=ctx.slot if ctx is not None else None,
            usage=ctx.usage if ctx is not None else None, on_retry=retrying,
        )  # fmt: skip
        raw = {
            "content": response.message.content,
            "finish_reason": response.finish_reason,
            "usage": response.usage.model_dump(),
        }
        # The model's own calls: arguments it sent as unreadable JSON stay visible in
        # the diff, under `_raw` (AgentResponse converts them, see `types.as_call`).
        return AgentResponse(tool_calls=response.tool_calls, raw=raw)

    def _services(self, ctx: Any) -> ModelServices:
        """The batch's services of this model as the engine hands them to the run: on
        one machine these very services; on a Ray node the node's copy, which asks the
        run's shared limiter and counts the run's usage. Else (no engine run) its own."""
        given = getattr(ctx, "services", None)
        if isinstance(given, ModelServices) and given.spec == self.services.spec:
            return given
        return self.services

    async def run(self, audio: Audio) -> AgentResponse:
        """Text models cannot hear: use the transcript the synthesizer kept."""
        if not audio.transcript:
            raise TypeError("ModelAgent is text-only: run it with synthesizer=None")
        return await self.run_text(audio.transcript)

    async def aclose(self) -> None:
        await self.services.close()
