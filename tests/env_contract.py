"""One contract test body, run against every provider (docker and local)."""

from __future__ import annotations

from pathlib import Path

from helios.environments.base import Environment, FileSteps


async def check_contract(env: Environment, tmp_path: Path) -> None:
    await env.start()
    try:
        hello = await env.exec("echo hello; echo oops >&2; exit 3")
        assert (hello.stdout, hello.stderr, hello.exit_code) == ("hello\n", "oops\n", 3)
        assert not hello.ok

        pwd = await env.exec("pwd")
        assert pwd.stdout.strip() == env.workdir

        with_env = await env.exec('echo "$GREETING"', env={"GREETING": "hi there"}, cwd="/tmp")
        assert with_env.stdout == "hi there\n"

        slow = await env.exec("sleep 30; echo never", timeout=1)
        assert slow.timed_out and "never" not in slow.stdout

        # upload a directory's contents, then a single file
        src = tmp_path / "up"
        (src / "sub").mkdir(parents=True)
        (src / "a.txt").write_text("A")
        (src / "sub" / "b.txt").write_text("B")
        await env.upload(src, "/data/in")
        single = tmp_path / "single.txt"
        single.write_text("S")
        await env.upload(single, "/data/one/renamed.txt")
        listing = await env.exec("cat /data/in/a.txt /data/in/sub/b.txt /data/one/renamed.txt")
        assert listing.stdout == "ABS"

        await _check_prepare_and_upload(env, tmp_path)

        # download a directory and a file made inside
        await env.exec("mkdir -p /out/deep && echo X > /out/deep/x.txt && echo Y > /out/y.txt")
        await env.download("/out", tmp_path / "down")
        assert (tmp_path / "down" / "deep" / "x.txt").read_text() == "X\n"
        await env.download("/out/y.txt", tmp_path / "y-copy.txt")
        assert (tmp_path / "y-copy.txt").read_text() == "Y\n"
    finally:
        await env.stop()
    await env.stop()  # idempotent


async def _check_prepare_and_upload(env: Environment, tmp_path: Path) -> None:
    """The verifier's reset and its tests: `prepare`, then the uploads in order (the
    local sandbox does it in one command when it can: the same outcome)."""
    first, second = tmp_path / "tests", tmp_path / "step-tests"
    (first / "d").mkdir(parents=True)
    (first / "test.sh").write_text("one")
    (first / "test.sh").chmod(0o755)
    (first / "d" / "keep.txt").write_text("K")
    second.mkdir()
    (second / "test.sh").write_text("two")
    await env.exec("mkdir -p /fresh && echo stale > /fresh/old.txt")
    reset = "rm -rf /fresh && mkdir -p /fresh"
    single = await env.prepare_and_upload(reset, [(first, "/fresh")])
    assert single.ok
    seen = await env.exec("cat /fresh/test.sh; [ -x /fresh/test.sh ] && echo ' x'; ls -a /fresh")
    assert seen.stdout.split() == ["one", "x", ".", "..", "d", "test.sh"]
    layered = await env.prepare_and_upload(reset, [(first, "/fresh"), (second, "/fresh")])
    assert layered.ok
    seen = await env.exec("cat /fresh/test.sh /fresh/d/keep.txt")
    assert seen.stdout == "twoK"
    failed = await env.prepare_and_upload("echo no >&2; exit 4", [(first, "/nowhere")])
    assert (failed.exit_code, failed.stderr) == (4, "no\n")
    assert (await env.exec("[ -e /nowhere ]")).exit_code == 1  # nothing uploaded
    await _check_file_steps(env, first)


async def _check_file_steps(env: Environment, tests: Path) -> None:
    """The verifier's reset as `FileSteps` (the shell servers do them without a
    process): a tree removed without following its links, folders made, a private
    folder that must be new; then what `path_kinds` says of each kind of path."""
    await env.exec(
        "mkdir -p /keep /fresh/deep/er /logs/v && echo K > /keep/k && echo o > /fresh/deep/er/o"
        " && ln -s /keep /fresh/out && ln -s /keep /logs/v/link && mkfifo /logs/v/fifo"
    )
    steps = FileSteps(remove=("/fresh", "/logs/v"), make=("/fresh", "/logs/v"),
                      private=("/tmp/helios-home-contract",))  # fmt: skip
    done = await env.prepare_and_upload(steps, [(tests, "/fresh")])
    assert done.ok, done.stderr
    seen = await env.exec("ls -A /fresh /logs/v; cat /keep/k; stat -c %a /tmp/helios-home-contract")
    assert seen.stdout.split() == ["/fresh:", "d", "test.sh", "/logs/v:", "K", "700"]
    again = await env.prepare_and_upload(steps, [])  # its private folder exists now
    assert not again.ok and "helios-home-contract" in again.stderr
    await env.exec("ln -s /keep /logs/v/link && mkfifo /logs/v/fifo")
    paths = ["/keep/k", "/keep", "/logs/v/link", "/logs/v/fifo", "/nope", "/keep/k/under"]
    kinds = await env.path_kinds(paths)
    assert kinds == ["file", "dir", "link", "special", "missing", "missing"]
    assert await env.path_kinds([]) == []
