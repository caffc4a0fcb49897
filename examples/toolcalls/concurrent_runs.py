"""russo's "Full example" from its docs, with only the import lines changed."""

import asyncio

from helios import toolcalls as russo
from helios.toolcalls.evaluators import ExactEvaluator


class FakeSynthesizer:
    async def synthesize(self, text: str) -> russo.Audio:
        return russo.Audio(data=b"\x00" * 4800, format="wav", sample_rate=24000)


@russo.agent
async def fake_agent(audio: russo.Audio) -> russo.AgentResponse:
    return russo.AgentResponse(
        tool_calls=[russo.ToolCall(name="book_flight", arguments={"from_city": "NYC", "to_city": "LA"})]
    )


async def main():
    result = await russo.run_concurrent(
        prompts=["Book a flight from NYC to LA", "Fly me from NYC to LA"],
        synthesizer=FakeSynthesizer(),
        agent=fake_agent,
        evaluator=ExactEvaluator(ignore_extra_args=True),
        expect=[russo.tool_call("book_flight")],
        runs=3,
        max_concurrency=4,
    )

    print(result.summary())
    assert result.passed
    print(f"\nAll {result.total} runs passed!")


if __name__ == "__main__":
    asyncio.run(main())
