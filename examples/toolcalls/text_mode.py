"""Text mode: the same tests, measuring a text LLM's tool calling through Helios's
model clients. Here the model is Helios's scripted server on 127.0.0.1; point
`model=` at "openai/gpt-4.1", "anthropic/claude-sonnet-4-5", ... for a real one.

    python examples/toolcalls/text_mode.py
"""

import asyncio

from helios import toolcalls
from helios.testing.mock_llm import MockLLMServer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_flight",
            "description": "Book a flight between two cities",
            "parameters": {
                "type": "object",
                "properties": {"from_city": {"type": "string"}, "to_city": {"type": "string"}},
                "required": ["from_city", "to_city"],
            },
        },
    }
]
SCRIPT = {
    "scenarios": [
        {"match": "NYC", "turns": [{"tool_calls": [
            {"name": "book_flight", "arguments": {"from_city": "NYC", "to_city": "LA"}}]}]},
        {"match": "*", "turns": [{"text": "Where would you like to fly?"}]},
    ]
}  # fmt: skip


async def main() -> int:
    async with MockLLMServer(script=SCRIPT, latency_ms=20) as server:
        agent = toolcalls.ModelAgent(
            model="openai-compatible/scripted",
            base_url=server.openai_base_url,
            tools=TOOLS,
            system_prompt="You are a travel assistant. Book flights with book_flight.",
        )
        result = await toolcalls.run_concurrent(
            prompts=["Book a flight from NYC to LA", "Fly me from NYC to LA", "Book me a flight"],
            synthesizer=None,  # text mode
            agent=agent,
            expect=[toolcalls.tool_call("book_flight", from_city="NYC", to_city="LA")],
            runs=3,
            max_concurrency=5,
        )
    print(result.summary())
    print(f"\npass rate {result.pass_rate:.0%} (the vague prompt is expected to fail)")
    return 0 if result.passed_count == 6 else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
