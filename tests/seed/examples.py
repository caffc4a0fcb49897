"""The Python examples of the Helios docs pages, as written.

They come from the docs' ParallelRunner page and the batch page's "Programmatic
Usage" section. The captured pages lost some whitespace (`print ( f "…" )`); the
code below is those examples with that capture damage undone, nothing else.
"""

BASIC_USAGE = """
import asyncio
from helios import ParallelRunner, discover_tasks

async def main():
    task_paths = discover_tasks("tasks/")

    runner = ParallelRunner(
        task_paths=task_paths,
        n_concurrent=4,
        model="claude-sonnet-4-20250514"
    )

    result = await runner.run()
    print(f"Passed: {result.passed}/{result.total_tasks}")

asyncio.run(main())
"""

DISCOVER = """
from helios import discover_tasks

# Find all tasks
tasks = discover_tasks("tasks/")

# Find tasks matching a pattern
tasks = discover_tasks("tasks/pdfbench/", pattern="**/pdfbench_eyemed*/task.toml")
print(len(tasks), [t.name for t in tasks])
"""

BASIC_BATCH_RUN = """
import asyncio
from helios import ParallelRunner, discover_tasks

async def run_batch():
    tasks = discover_tasks("tasks/benchmark/")

    runner = ParallelRunner(
        task_paths=tasks,
        n_concurrent=4,
        model="claude-sonnet-4-20250514"
    )

    result = await runner.run()

    print(f"Total: {result.total_tasks}")
    print(f"Passed: {result.passed}")
    print(f"Failed: {result.failed}")
    print(f"Mean reward: {result.mean_reward:.3f}")
    print(f"Duration: {result.duration:.1f}s")

asyncio.run(run_batch())
"""

PROGRESS_CALLBACK = """
import asyncio
from helios import ParallelRunner, discover_tasks

async def on_task_complete(task_name: str, result):
    status = "PASS" if result.reward >= 1.0 else "FAIL"
    print(f"[{status}] {task_name}: {result.reward:.2f}")

async def run_with_callback():
    tasks = discover_tasks("tasks/")

    runner = ParallelRunner(
        task_paths=tasks,
        n_concurrent=4,
        model="claude-sonnet-4-20250514",
        on_complete=on_task_complete
    )

    result = await runner.run()

asyncio.run(run_with_callback())
"""

ANALYZING_RESULTS = """
import asyncio
from helios import ParallelRunner, discover_tasks

async def analyze_results():
    tasks = discover_tasks("tasks/benchmark/")

    runner = ParallelRunner(
        task_paths=tasks,
        n_concurrent=4,
        model="claude-sonnet-4-20250514"
    )

    result = await runner.run()

    # Group by result
    passed = [t for t in result.tasks if t.status == "passed"]
    failed = [t for t in result.tasks if t.status == "failed"]

    print("PASSED:")
    for t in passed:
        print(f"  {t.name}: {t.duration:.1f}s")

    print("\\nFAILED:")
    for t in failed:
        print(f"  {t.name}: {t.error or 'No error message'}")

    # Statistics
    rewards = [t.reward for t in result.tasks]
    print(f"\\nMin reward: {min(rewards):.2f}")
    print(f"Max reward: {max(rewards):.2f}")
    print(f"Median: {sorted(rewards)[len(rewards)//2]:.2f}")

asyncio.run(analyze_results())
"""

CUSTOM_SELECTION = """
import asyncio
from pathlib import Path
from helios import ParallelRunner

async def run_specific_tasks():
    # Manually specify tasks
    task_paths = [
        Path("tasks/easy-task"),
        Path("tasks/medium-task"),
        Path("tasks/hard-task"),
    ]

    runner = ParallelRunner(
        task_paths=task_paths,
        n_concurrent=3,
        model="claude-sonnet-4-20250514"
    )

    result = await runner.run()
    print(f"Mean reward: {result.mean_reward:.3f}")

asyncio.run(run_specific_tasks())
"""

COMPARING_MODELS = """
import asyncio
from helios import ParallelRunner, discover_tasks

async def compare_models():
    tasks = discover_tasks("tasks/benchmark/")
    models = [
        "gemini/gemini-2.5-computer-use-preview-10-2025",
        "claude-sonnet-4-20250514",
    ]

    results = {}

    for model in models:
        runner = ParallelRunner(
            task_paths=tasks,
            n_concurrent=4,
            model=model,
            output_dir=f"results/{model.replace('/', '_')}"
        )

        result = await runner.run()
        results[model] = {
            "mean_reward": result.mean_reward,
            "passed": result.passed,
            "duration": result.duration
        }

    print("\\nModel Comparison:")
    for model, stats in results.items():
        print(f"\\n{model}:")
        print(f"  Mean reward: {stats['mean_reward']:.3f}")
        print(f"  Passed: {stats['passed']}/{len(tasks)}")
        print(f"  Duration: {stats['duration']:.1f}s")

asyncio.run(compare_models())
"""

USING_DAYTONA = """
import asyncio
from helios import ParallelRunner, discover_tasks

async def run_in_cloud():
    tasks = discover_tasks("tasks/pdfbench/")

    runner = ParallelRunner(
        task_paths=tasks,
        n_concurrent=20,  # Higher concurrency with cloud
        model="claude-sonnet-4-20250514",
        provider="daytona"
    )

    result = await runner.run()
    print(f"Cloud execution: {result.mean_reward:.3f} mean reward")

asyncio.run(run_in_cloud())
"""

SAVING_JSON = """
import asyncio
import json
from datetime import datetime
from helios import ParallelRunner, discover_tasks

async def run_and_export():
    tasks = discover_tasks("tasks/")

    runner = ParallelRunner(
        task_paths=tasks,
        n_concurrent=4,
        model="claude-sonnet-4-20250514"
    )

    result = await runner.run()

    # Export to JSON
    export = {
        "timestamp": datetime.now().isoformat(),
        "model": "claude-sonnet-4-20250514",
        "total_tasks": result.total_tasks,
        "passed": result.passed,
        "failed": result.failed,
        "mean_reward": result.mean_reward,
        "duration": result.duration,
        "tasks": [
            {
                "name": t.name,
                "status": t.status,
                "reward": t.reward,
                "duration": t.duration,
                "error": t.error
            }
            for t in result.tasks
        ]
    }

    with open("results.json", "w") as f:
        json.dump(export, f, indent=2)

asyncio.run(run_and_export())
"""

PROGRAMMATIC_PASS_AT_K = """
import asyncio
from helios import ParallelRunner, discover_tasks

async def main():
    # Discover all tasks in a directory
    task_paths = discover_tasks("tasks/")

    # Create a parallel runner
    runner = ParallelRunner(
        task_paths=task_paths,
        n_concurrent=4,
        n_attempts=3,  # pass@3 evaluation
        model="claude-sonnet-4-20250514",
        output_dir="results/"
    )

    # Run all tasks
    result = await runner.run()

    # Access results
    print(f"Passed: {result.passed}/{result.total_tasks}")
    print(f"Mean reward: {result.mean_reward:.3f}")
    print(f"Duration: {result.total_duration_sec:.1f}s")

    # pass@k metrics (when n_attempts > 1)
    if result.pass_at_k is not None:
        print(f"pass@{result.n_attempts}: {result.pass_at_k:.1f}%")
        print(f"Unique tasks: {result.n_unique_tasks}")

    # Iterate over individual results
    for task_result in result.results:
        if not task_result.passed:
            print(f"Failed: {task_result.task_name} (attempt {task_result.attempt})")

asyncio.run(main())
"""

PROGRESS_CALLBACKS_SNIPPET = """
import asyncio
from pathlib import Path
from helios import ParallelRunner

task_paths = [
    Path("tasks/easy-task"),
    Path("tasks/medium-task"),
    Path("tasks/hard-task"),
]

runner = ParallelRunner(
    task_paths=task_paths,
    n_concurrent=3,
    model="claude-sonnet-4-20250514"
)

async def on_task_complete(task_name: str, result):
    print(f"Completed: {task_name} - {result.status}")

runner = ParallelRunner(
    task_paths=task_paths,
    n_concurrent=4,
    on_complete=on_task_complete
)
asyncio.run(runner.run())
"""
