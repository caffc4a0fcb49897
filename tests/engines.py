"""Which tests use which engine, and so carry which marker: `docker`, `bwrap`,
`desktop` (Xvfb or Chromium), `ray`; and which are `slow` (> ~10 s on a loaded
2-core machine).

The conftest applies the markers at collection from the rules below (a fixture, a
parameter value, a helper the test's code calls, or the test's own entry), and
checks them at run time: a test that starts a container, a bubblewrap sandbox, a
desktop or a Ray node (itself or in any Python process it starts, seen by
tests/engine_probe) without the marker fails. tests/test_markers.py checks this
table against the fixtures it names.

To add an engine-using test: use one of FIXTURES (need_docker, need_bwrap, ...) or
a parameter named in PARAMS, and the marker follows; only a test that reaches an
engine another way (a CLI subprocess with --provider, say) needs an entry in TESTS.
"""

from __future__ import annotations

import types
from collections.abc import Iterator

import pytest

ENGINES = ("docker", "bwrap", "desktop", "ray")
MARKERS = (*ENGINES, "slow")

#: a fixture the test uses (directly or through another fixture) -> its engines; a
#: fixture name that several modules define differently is qualified, "path::name"
FIXTURES: dict[str, frozenset[str]] = {
    "need_docker": frozenset({"docker"}),
    "need_bwrap": frozenset({"bwrap"}),
    "local_env": frozenset({"bwrap"}),
    "daytona": frozenset({"docker"}),  # the Daytona fake runs its sandboxes in docker
    "cluster": frozenset({"ray", "bwrap"}),  # tests/test_ray_executor.py's nodes
    "can_reuse_pids": frozenset({"bwrap"}),
    "browser": frozenset({"desktop"}),  # tests/conftest.py: the view tests' Chromium
    "server_binary": frozenset({"bwrap"}),  # tests/test_local_shell_native.py
    "tests/test_compare.py::batches": frozenset({"bwrap"}),  # two real local batches
    "tests/test_harbor_export.py::helios_run": frozenset({"bwrap"}),  # a real local batch
}

#: a parameter (of parametrize, or of a parametrized fixture) whose value names a
#: sandbox provider or path -> the engine of each value, by its prefix
PARAMS = ("provider", "outcome", "local")
VALUE_PREFIXES: dict[str, frozenset[str]] = {
    "docker": frozenset({"docker"}),
    "daytona": frozenset({"docker"}),
    "local": frozenset({"bwrap"}),
}

#: a helper that the test's code calls (by name, in its body or a function nested
#: in it) -> its engines
HELPERS: dict[str, frozenset[str]] = {
    "need_desktop": frozenset({"desktop"}),
    "in_sandbox": frozenset({"bwrap"}),
    "open_page": frozenset({"desktop"}),  # tests/headless_browser.py: Chromium
    "DaytonaFake": frozenset({"docker"}),
}
#: with need_desktop: the provider named as a literal, need_desktop("docker")
LITERAL_PROVIDERS: dict[str, frozenset[str]] = {
    "docker": frozenset({"docker"}),
    "local": frozenset({"bwrap"}),
}

#: tests that reach an engine some other way (a CLI subprocess with --provider, a
#: provider chosen inside the test): "path::name" (any parameters) or "path" (the
#: whole module) -> markers, engines and `slow` alike
SLOW = frozenset({"slow"})
TESTS: dict[str, frozenset[str]] = {
    "tests/test_ray_executor.py": frozenset({"ray", "bwrap", "slow"}),
    "tests/test_benchmarks.py::test_the_ray_executor_benchmark_prints_the_driver_cpu_of_both":
        frozenset({"ray", "slow"}),
    "tests/test_daytona_env.py::test_cleanup_without_keys_says_nothing_of_daytona":
        frozenset({"docker"}),  # helios cleanup lists the containers
    "tests/test_workers.py::test_forked_workers_of_the_cli_hold_nothing_of_the_parent":
        frozenset({"bwrap"}),
    "tests/test_run_metadata.py": frozenset({"bwrap"}),  # batch and generate --provider local
    # a batch of Claude Code on the local sandbox, installing from npm into a new cache,
    # then the same on docker from that cache: the install baked into a derived image
    "tests/test_benchmarks.py::test_the_agent_install_benchmark_installs_once_and_docker_uploads_nothing":
        frozenset({"bwrap", "docker", "slow"}),
    # two `helios rerun` subprocesses of a 3-second task, one killed, then its resume
    "tests/test_rerun.py::test_reruns_at_once_get_their_own_folders_and_a_killed_one_resumes":
        frozenset({"bwrap", "slow"}),
    # `helios cleanup` lists the containers too, whichever provider the batch used
    "tests/test_env_cleanup.py::test_helios_cleanup_spares_a_running_batch": frozenset({"docker"}),
    "tests/test_interrupt.py::test_kill_9_then_resume_loses_and_duplicates_nothing":
        frozenset({"docker"}),
    "tests/test_chaos.py::test_random_signals_then_resume_lose_and_duplicate_nothing":
        frozenset({"docker"}),
    # slow: > ~10 s on an idle 2-core machine, or several times that on a loaded one
    "tests/test_benchmarks.py::test_the_anthropic_api_workload_runs": SLOW,
    "tests/test_benchmarks.py::test_the_viewer_benchmark_prints_each_row": SLOW,
    "tests/test_fuzz_parsers.py": SLOW,  # hypothesis: hundreds of examples each
    "tests/test_local_shell_native.py::test_the_build_is_cached_and_a_tampered_cache_is_not_trusted":
        SLOW,
    "tests/test_local_shell_native.py::test_two_processes_building_at_once_both_get_the_whole_server":
        SLOW,
    "tests/test_local_shell_native.py::test_the_static_build_is_cached_apart_and_its_absence_is_said":
        SLOW,
    "tests/test_gui_examples.py::test_tasks_check_passes_on_the_gui_examples": SLOW,
    "tests/test_gui_examples.py::test_the_desktop_benchmark_prints_its_figures": SLOW,
    "tests/test_watch.py::test_batch_watch_lists_each_gui_trials_url": SLOW,
    "tests/test_cli.py::test_examples_on_docker_k3_leave_no_container": SLOW,
    # the tests that load files with Harbor's own models: the first run builds the Harbor
    # venv (pip install harbor, a minute or more; tests/harbor_venv.py)
    "tests/test_harbor_export.py::test_harbor_0_25_loads_the_export_and_its_numbers_are_the_runs":
        SLOW,
    "tests/test_harbor_job.py::test_harbor_0_25_loads_the_example_job_files_as_they_are": SLOW,
    "tests/test_harbor_export.py::test_an_old_run_folder_with_steps_and_errors_loads_in_harbor":
        SLOW,
}


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _names_and_strings(function: object) -> tuple[set[str], set[str]]:
    code = getattr(function, "__code__", None)
    if not isinstance(code, types.CodeType):
        return set(), set()
    names: set[str] = set()
    strings: set[str] = set()
    for each in _code_objects(code):
        names.update(each.co_names)
        strings.update(c for c in each.co_consts if isinstance(c, str))
    return names, strings


def _by_prefix(value: object) -> frozenset[str]:
    if not isinstance(value, str):
        return frozenset()
    for prefix, engines in VALUE_PREFIXES.items():
        if value == prefix or value.startswith(prefix + "-"):
            return engines
    return frozenset()


def markers_of(item: pytest.Item) -> set[str]:
    """The markers `item` must carry, by the rules above."""
    found: set[str] = set()
    path, _, rest = item.nodeid.partition("::")
    for fixture in getattr(item, "fixturenames", ()):
        found |= FIXTURES.get(fixture, frozenset())
        found |= FIXTURES.get(f"{path}::{fixture}", frozenset())
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for name in PARAMS:
            if name in callspec.params:
                found |= _by_prefix(callspec.params[name])
    names, strings = _names_and_strings(getattr(item, "function", None))
    for helper, engines in HELPERS.items():
        if helper in names:
            found |= engines
    if "need_desktop" in names:
        for literal, engines in LITERAL_PROVIDERS.items():
            if literal in strings:
                found |= engines
    found |= TESTS.get(path, frozenset())
    found |= TESTS.get(f"{path}::{rest.split('[', 1)[0]}", frozenset())
    return found
