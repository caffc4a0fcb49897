"""The benchmarks still run: each workload, tiny, against the mock server, with no
failed episode (a workload broken by an API change once printed a row of failures
and no error), and the hot-path profiler prints its tables."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
TINY = ["-N", "4", "-C", "2", "-T", "2", "--latency-ms", "1"]


def _bench(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.usefixtures("need_bwrap", "need_docker")
def test_every_workload_runs_with_no_failed_episode() -> None:
    """trivial is test_the_anthropic_api_workload_runs's (one run of it, not two: its
    wire is the only difference, and the rows here are on the OpenAI one)."""
    names = ["floor", "local", "datagen", "toolcalls", "docker"]
    out = _bench("run.py", "--only", ",".join(names), *TINY)
    for name in names:
        row = re.search(rf"^{name}\s+N=4 .*$", out, re.M)
        assert row is not None, f"no row for {name}:\n{out}"
        assert row.group(0).endswith("failed 0"), row.group(0)
        assert re.search(r"\d+\.\d (ep|sandboxes)/s", row.group(0))
    # the process floor (issue 34), and the sandboxed rows as a share of it
    assert re.search(r"^floor .* 9 /bin/true each: .* sandboxes/s", out, re.M), out
    for name in ("local", "docker"):
        assert re.search(rf"^{name}\s+\d+\.\d\d of the floor \(", out, re.M), out


def test_the_anthropic_api_workload_runs() -> None:
    out = _bench("run.py", "--only", "trivial", "--api", "anthropic", *TINY)
    row = re.search(r"^trivial\s+N=4 .*$", out, re.M)
    assert row is not None and row.group(0).endswith("failed 0"), out
    assert re.search(r"\d+\.\d ep/s", row.group(0)), out


@pytest.mark.usefixtures("need_bwrap")
def test_the_hot_path_profile_prints_its_tables() -> None:
    out = _bench("hot_path.py", *TINY, "--top", "5")
    assert re.search(r"no profiler: \d+\.\d ms of Helios's CPU per episode", out), out
    assert "event loop's own CPU by module" in out
    threads = out.split("work in threads")[1].split("event loop's functions")[0]
    assert "create_root" in threads and "_write_trajectory" in threads, out


@pytest.mark.usefixtures("need_docker")
def test_the_docker_exec_a_b_prints_every_path_and_the_ratios() -> None:
    out = _bench("docker_exec.py", "-N", "2", "-K", "1")
    for path in ("cli", "api", "stream"):
        assert re.search(rf"^{path} +2 execs, 2 at once: wall \d+\.\d ms/exec", out, re.M), out
    assert re.search(r"^ratio: the CLI takes \d+\.\d\dx", out, re.M), out
    assert re.search(r"^ratio: the API takes \d+\.\d\dx the stream's", out, re.M), out


def test_the_viewer_benchmark_prints_each_row() -> None:
    out = _bench("view.py", "--trials", "300", "--steps", "60")
    for row in ("first table page (cold: index built)", "sorted by cost", "steps, last 50"):
        assert re.search(rf"^{re.escape(row)}.*\d+ ms", out, re.M), out
    assert "(300 match)" in out and "(1,300 trials)" in out
    assert re.search(r"server peak RSS \(VmHWM\): \d+ MB", out), out


def test_the_ray_executor_benchmark_prints_the_driver_cpu_of_both() -> None:
    """Two nodes (a head and a worker node: the script's add_node path), not its default
    three: each node costs about 7 CPU-s to start and stop. The executor over three
    nodes is tests/test_ray_executor.py's."""
    pytest.importorskip("ray")
    if os.geteuid() != 0:
        pytest.skip("its cluster runs in a network namespace of its own: root")
    out = _bench("ray.py", "-N", "24", "--slots", "2", "--unit-ms", "10", "--file-kb", "1",
                 "--nodes", "2", "--idle-s", "1")  # fmt: skip
    for row in ("local engine, this process", "Ray executor, 2 nodes"):
        assert re.search(rf"^{row} +24 recorded  driver CPU +\d+\.\d\d ms/trial", out, re.M), out
    assert re.search(r"over the local engine: [+-]\d+\.\d\d ms/trial", out), out


def test_the_startup_benchmark_prints_helios_and_its_peers() -> None:
    out = _bench("startup.py", "--repeat", "1")
    assert re.search(r"^helios --help +wall +\d+ ms +CPU +\d+ ms$", out, re.M), out
    assert re.search(r"^helios batch --help +wall +\d+ ms +CPU +\d+ ms +\d+\.\dx", out, re.M), out
    for peer in ("inspect", "harbor"):  # a figure and its ratio, or why there is none
        assert re.search(rf"^{peer} --help +(wall .*\d+\.\dx helios --help|skipped: .+)$",
                         out, re.M), out  # fmt: skip


def test_the_agent_install_benchmark_installs_once_and_docker_uploads_nothing() -> None:
    """Local: the first trial installs Claude Code into the empty cache, the second finds
    it. Docker, on that cache (one npm install for both): the install is in the derived
    image, so its trial does not install again or upload it. One docker trial: a second
    one on the same derived image (no install, no upload) is checked by
    tests/test_installed_agent_sandbox.py (..._bakes_the_install_into_a_derived_image_once)."""
    # not under pytest's tmp_path, whose parent only root may enter: the sandbox's users
    # read the install from the cache
    with tempfile.TemporaryDirectory(prefix="helios-install-bench-", dir="/tmp") as scratch:
        Path(scratch).chmod(0o755)
        _installs_once_then_docker_uploads_nothing(Path(scratch) / "cache")


def _installs_once_then_docker_uploads_nothing(cache: Path) -> None:
    out = _bench("agent_install.py", "--trials", "2", "--cache", str(cache))
    rows = re.findall(r"^trial (\d): install +([\d.]+) s .* reward (\S+)$", out, re.M)
    assert [(n, reward) for n, _, reward in rows] == [("1", "1.0"), ("2", "1.0")], out
    assert float(rows[0][1]) > 0.0 and float(rows[1][1]) == 0.0, out
    out = _bench("agent_install.py", "--trials", "1", "--provider", "docker", "--cache",
                 str(cache))  # fmt: skip
    rows = re.findall(r"^trial (\d): install +([\d.]+) s +upload +([\d.]+) s .* reward (\S+)$",
                      out, re.M)  # fmt: skip
    assert [(n, reward) for n, _, _, reward in rows] == [("1", "1.0")], out
    assert float(rows[0][1]) == 0.0, out  # installed once (by the local trial)
    assert float(rows[0][2]) == 0.0, out  # in the image


def test_the_loading_benchmark_makes_a_corpus_and_prints_each_row(tmp_path: Path) -> None:
    """The synthetic Harbor corpus loads with no invalid task (in Helios and, where a
    Python >= 3.12 is here, in Harbor), and each row prints ms per task."""
    sys.path.insert(0, str(BENCH))
    import task_corpus

    from .harbor_venv import find_python, harbor_python

    corpus = task_corpus.generate(tmp_path / "corpus", 20)
    assert len(list(corpus.glob("*/task.toml"))) == 20
    assert list(corpus.glob("*/steps/*/instruction.md")), "no multi-step task"
    assert list(corpus.glob("*/environment/docker-compose.yaml")), "no compose task"
    found = find_python()
    harbor = ["--harbor-python", str(harbor_python(found))] if found else ["--no-harbor"]
    out = _bench("loading.py", "--corpus", str(corpus), "-R", "1", "--no-warmup", *harbor)
    rows = ["helios load", "helios load + ids", "helios tasks list --json",
            "helios tasks list (its table)"]  # fmt: skip
    rows += ["harbor 0.25 (is_valid_dir + Task)"] if found else []
    for row in rows:
        assert re.search(rf"^{re.escape(row)} +\d+\.\d+ ms/task .*\[20 tasks, 1 runs\]", out,
                         re.M), out  # fmt: skip
