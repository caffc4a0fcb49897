/*
 * The persistent shell's server, compiled: the same wire format and behaviour as
 * `shell/server.py` (read its docstring first), for hosts with a C compiler.
 * A Python interpreter costs ~13 ms of CPU to start, once per sandbox; this
 * costs well under one, and its per-command loop is cheaper too.
 *
 * Usage (inside bwrap, as the pid namespace's init):
 *   helios-shell NPROC DATA FSIZE
 * sets those rlimits (soft = hard, so nothing inside can raise them again), as
 * the `prlimit` prefix does for the Python server, then serves requests.
 *
 * host -> server: fields of `<length>\n<bytes>`: the operation, the timeout
 *   (empty: none), the script, its stdin bytes (empty: /dev/null), the number of
 *   variables, then each variable's name and value.
 * server -> host: frames of 1 type byte + 4-byte big-endian length + payload:
 *   R ready (once; "sealed" when not dumpable), O stdout, E stderr, X the end:
 *   "<exit code> <1 if timed out else 0>".
 *
 * Operations (the same in both modes):
 *   run      the script, as below;
 *   service  start the script as a *service* (Helios's, not the agent's): `sh -c
 *            script` in a session of its own, stdin /dev/null, stdout and stderr
 *            appended to the file named by the stdin field (no link followed, a
 *            plain file), with the variables. The answer: O "<pid> <start time>"
 *            (the clock ticks of /proc/<pid>/stat) and X "0 0", or E and X "1 0";
 *   status   O: the pids of the services still alive, space-separated;
 *   stop     kill every process but this server and what the services spare
 *            (below), and answer X "0 0" only once none is left;
 *   steps    file steps this server does itself, then, if given, a program run
 *            directly (no `sh`): the script field is NUL-separated words, pairs of
 *            a verb and an absolute path, then optionally "--" and the program's
 *            argv (argv[0] looked up in the request's PATH). Verbs: `rm` (the
 *            tree, if any, removed: no link followed, a link itself removed),
 *            `mkdir` (as `mkdir -p`), `private` (a new folder, mode 0700: it must
 *            not exist), `kind` (O: "link", "file", "dir", "special" or "missing"
 *            and a newline, as lstat says). The first step that fails answers E
 *            and X "1 0" (nothing after it runs); then the program runs as `run`
 *            would (its stdin the stdin field) and answers as `run`, or X "0 0".
 *            Each step saves a process (an `rm`, a `mkdir`, the `sh` around them).
 *
 * What services spare: a service is its recorded pid *with* its start time (a
 * reused pid never passes for it). Its own processes are that process and, while
 * it is still the shell the server started (`sh -c` that has not exec'd), the
 * programs that shell started; its descendants survive a kill only along a chain
 * of survivors, each running one of its own processes' programs (the same file,
 * /proc/<pid>/exe): Chromium's zygotes and renderers survive it, a shell or any
 * other program it spawned does not, nor an orphan (no longer a descendant),
 * nor a process whose program cannot be read. A service that died (or that this
 * server reaped) stays dead. The kill is passes over /proc, SIGKILL to all not
 * spared, until a pass finds none alive (a process with SIGKILL pending cannot
 * fork) and, before an answer, none left to reap; it is bounded in time. With no
 * service alive, it is the plain `kill(-1)` from pid 1.
 *
 * Container mode (`docker/shell.py`): helios-shell --container DEFAULT_USER
 *   The init of a docker container, started as root; the container's cgroup sets
 *   its limits. Each request has one more field after the operation: the user to
 *   run as (docker's USER syntax; empty: DEFAULT_USER). Processes a command leaves
 *   in the background live on, as with `docker exec`, until a "stop". The user is
 *   looked up in the container's own /etc/passwd and /etc/group, as the daemon
 *   does for `docker exec -u` (_container_user.h).
 *
 * Local mode: after each command (and at its timeout) every other process but
 * the services' is killed: no process of the agent outlives its command.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define DRAIN_SECONDS 2.0
/* container mode: how long output is still read once a command has exited while
 * something it left in the background holds its output open */
#define DETACH_SECONDS 0.2
#define STOP_SECONDS 5.0

/* container mode: commands may leave processes behind; only "stop" kills them */
static int container_mode = 0;
#define CHUNK 65536
#define MAX_FIELD (1L << 31)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void write_all(const char *data, size_t size) {
    while (size > 0) {
        ssize_t n = write(1, data, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            _exit(1); /* the host is gone */
        }
        data += n;
        size -= (size_t)n;
    }
}

static void send_frame(char kind, const char *data, size_t size) {
    char header[5] = {kind, (char)(size >> 24), (char)(size >> 16), (char)(size >> 8),
                      (char)size};
    write_all(header, 5);
    write_all(data, size);
}

/* One request field: NULL at the end of input. `size` gets its length; the
 * buffer is NUL-terminated (a script or a name never holds a NUL that counts). */
static char *read_field(size_t *size) {
    char line[32];
    if (fgets(line, sizeof line, stdin) == NULL) return NULL;
    char *end;
    long length = strtol(line, &end, 10);
    if (end == line || *end != '\n' || length < 0 || length > MAX_FIELD) _exit(2);
    char *buffer = malloc((size_t)length + 1);
    if (buffer == NULL || fread(buffer, 1, (size_t)length, stdin) != (size_t)length) _exit(2);
    buffer[length] = '\0';
    *size = (size_t)length;
    return buffer;
}

static char *must_field(size_t *size) {
    char *field = read_field(size);
    if (field == NULL) _exit(2); /* a request cut short */
    return field;
}

static int is_number(const char *text) {
    if (*text == '\0') return 0;
    for (; *text; text++)
        if (*text < '0' || *text > '9') return 0;
    return 1;
}

/* ---- services: Helios's long-lived processes, and the kill that spares them ---- */

#define MAX_SERVICES 64
/* the programs of one service's own processes (see the header) */
#define MAX_OWN 16

typedef struct {
    dev_t dev;
    ino_t ino;
} FileId;

typedef struct {
    pid_t pid;
    unsigned long long start;
    FileId shell; /* the program it was started as: while it runs that, it is a wrapper */
    int alive;
} Service;

static Service services[MAX_SERVICES];
static int service_count = 0;

typedef struct {
    pid_t pid, ppid;
    unsigned long long start;
    char state;
    int owner;     /* the service that spares it, or -1 */
    int exe_known; /* 0: not read yet, 1: read, -1: unreadable (never spared by it) */
    FileId exe;
} Proc;

static Proc *procs = NULL;
static size_t proc_count = 0, proc_room = 0;
static FileId own[MAX_SERVICES][MAX_OWN];
static int own_count[MAX_SERVICES];

/* The start of a /proc file, NUL-terminated in `text` (one read: what a process's
 * stat or status file holds): 0, or -1 when it cannot be read or is empty.
 * `path` may be `text` itself: it is only opened. */
static int read_proc_file(const char *path, char *text, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, text, size - 1);
    close(fd);
    if (n <= 0) return -1;
    text[n] = '\0';
    return 0;
}

/* A process's parent, state and start time from /proc/<pid>/stat: 0, or -1 when
 * it is gone or the line is not whole (its name may hold anything but cannot
 * fake the twenty fields after its last ')'). */
static int read_stat(pid_t pid, Proc *proc) {
    char path[64], line[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_proc_file(path, line, sizeof line) != 0) return -1;
    char *paren = strrchr(line, ')');
    if (paren == NULL || paren[1] != ' ') return -1;
    char *fields[20], *save = NULL, *token = strtok_r(paren + 2, " ", &save);
    int count = 0;
    for (; token != NULL && count < 20; token = strtok_r(NULL, " ", &save))
        fields[count++] = token;
    if (count < 20 || !is_number(fields[1]) || !is_number(fields[19])) return -1;
    proc->pid = pid;
    proc->state = fields[0][0];
    proc->ppid = (pid_t)strtol(fields[1], NULL, 10);
    proc->start = strtoull(fields[19], NULL, 10);
    proc->owner = -1;
    proc->exe_known = 0;
    return 0;
}

static int dead_state(char state) { return state == 'Z' || state == 'X' || state == 'x'; }

static int file_id(const char *path, FileId *id) {
    struct stat info;
    if (stat(path, &info) != 0) return -1;
    id->dev = info.st_dev;
    id->ino = info.st_ino;
    return 0;
}

static int same_file(FileId a, FileId b) { return a.dev == b.dev && a.ino == b.ino; }

/* One id line of /proc/<pid>/status ("Uid:" or "Gid:"): its value if real, effective
 * and saved agree (the kernel compares all three), else -1. */
static long status_id(const char *status, const char *key) {
    const char *line = strstr(status, key);
    unsigned long real, effective, saved;
    if (line == NULL || sscanf(line + strlen(key), "%lu %lu %lu", &real, &effective, &saved) != 3)
        return -1;
    return real == effective && effective == saved ? (long)real : -1;
}

/* The program a process runs: the file /proc/<pid>/exe is. Container mode: the
 * init is root without CAP_SYS_PTRACE, which reads another user's only with that
 * user's filesystem ids. A process that made itself not dumpable stays unknown. */
static int exe_id(pid_t pid, FileId *id) {
    char path[64], status[4096];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    if (file_id(path, id) == 0) return 0;
    if (errno != EACCES || !container_mode) return -1;
    snprintf(status, sizeof status, "/proc/%d/status", (int)pid);
    if (read_proc_file(status, status, sizeof status) != 0) return -1;
    long uid = status_id(status, "\nUid:"), gid = status_id(status, "\nGid:");
    if (uid < 0 || gid < 0) return -1;
    setfsgid((gid_t)gid);
    setfsuid((uid_t)uid);
    int found = file_id(path, id);
    setfsuid(0);
    setfsgid(0);
    return found;
}

/* A process's program, read once per scan: 1 if known. */
static int exe_of(Proc *proc) {
    if (proc->exe_known == 0) proc->exe_known = exe_id(proc->pid, &proc->exe) == 0 ? 1 : -1;
    return proc->exe_known == 1;
}

/* Is the service at index `i` alive: its pid with its start time, not a zombie. */
static int service_alive(int i) {
    Service *s = &services[i];
    if (!s->alive) return 0;
    Proc proc;
    if (read_stat(s->pid, &proc) != 0 || proc.start != s->start || dead_state(proc.state))
        s->alive = 0;
    return s->alive;
}

static int services_alive(void) {
    int alive = 0;
    for (int i = 0; i < service_count; i++) alive += service_alive(i);
    return alive;
}

/* A child this server reaped: a service with that pid has ended for good. */
static void reaped(pid_t pid) {
    for (int i = 0; i < service_count; i++)
        if (services[i].pid == pid) services[i].alive = 0;
}

static int by_pid(const void *a, const void *b) {
    pid_t x = ((const Proc *)a)->pid, y = ((const Proc *)b)->pid;
    return (x > y) - (x < y);
}

static Proc *find_proc(pid_t pid) {
    Proc key = {.pid = pid};
    return bsearch(&key, procs, proc_count, sizeof *procs, by_pid);
}

/* Every process of the namespace but this server, as /proc lists them: 0, or -1
 * when the list may be incomplete (no memory, no /proc). */
static int scan(void) {
    proc_count = 0;
    DIR *proc_dir = opendir("/proc");
    if (proc_dir == NULL) return -1;
    int whole = 0;
    struct dirent *entry;
    while ((entry = readdir(proc_dir)) != NULL) {
        if (!is_number(entry->d_name)) continue;
        pid_t pid = (pid_t)strtol(entry->d_name, NULL, 10);
        if (pid == 1) continue;
        if (proc_count == proc_room) {
            size_t room = proc_room ? proc_room * 2 : 256;
            Proc *grown = realloc(procs, room * sizeof *procs);
            if (grown == NULL) {
                whole = -1;
                break;
            }
            procs = grown, proc_room = room;
        }
        if (read_stat(pid, &procs[proc_count]) == 0) proc_count++;
    }
    closedir(proc_dir);
    qsort(procs, proc_count, sizeof *procs, by_pid);
    return whole;
}

static void add_own(int service, Proc *proc) {
    if (!exe_of(proc)) return;
    for (int i = 0; i < own_count[service]; i++)
        if (same_file(own[service][i], proc->exe)) return;
    if (own_count[service] < MAX_OWN) own[service][own_count[service]++] = proc->exe;
}

static int runs_own(int service, Proc *proc) {
    if (!exe_of(proc)) return 0;
    for (int i = 0; i < own_count[service]; i++)
        if (same_file(own[service][i], proc->exe)) return 1;
    return 0;
}

/* Mark, in the last scan, what the living services spare (see the header). */
static void mark_spared(void) {
    for (int s = 0; s < service_count; s++) {
        own_count[s] = 0;
        if (!services[s].alive) continue;
        Proc *root = find_proc(services[s].pid);
        if (root == NULL || root->start != services[s].start || dead_state(root->state)) {
            services[s].alive = 0;
            continue;
        }
        root->owner = s;
        if (!(exe_of(root) && same_file(root->exe, services[s].shell))) {
            add_own(s, root); /* it exec'd its program */
            continue;
        }
        for (size_t i = 0; i < proc_count; i++) /* the wrapper shell's own programs */
            if (procs[i].ppid == root->pid && !dead_state(procs[i].state) && procs[i].owner < 0) {
                procs[i].owner = s;
                add_own(s, &procs[i]);
            }
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < proc_count; i++) {
            Proc *proc = &procs[i];
            if (proc->owner >= 0 || dead_state(proc->state)) continue;
            Proc *parent = find_proc(proc->ppid);
            if (parent != NULL && parent->owner >= 0 && runs_own(parent->owner, proc)) {
                proc->owner = parent->owner;
                changed = 1;
            }
        }
    }
}

/* One pass: SIGKILL every living process not spared. Returns how many it killed;
 * `ours` (if given) gets how many dead ones wait for this server to reap them. */
static int sweep(int *ours) {
    int whole = scan();
    mark_spared();
    int killed = whole == 0 ? 0 : 1, zombies = 0; /* a partial list never ends the passes */
    for (size_t i = 0; i < proc_count; i++) {
        Proc *proc = &procs[i];
        if (proc->owner >= 0) continue;
        if (dead_state(proc->state)) {
            zombies += proc->ppid == 1;
            continue;
        }
        kill(proc->pid, SIGKILL);
        killed++;
    }
    if (ours != NULL) *ours = zombies;
    return killed;
}

/* Orphans the server inherited that have already ended (the living stay). */
static void reap_exited(void) {
    pid_t pid;
    while ((pid = waitpid(-1, NULL, WNOHANG)) > 0) reaped(pid);
}

static void kill_the_rest(void) {
    if (!services_alive()) {
        /* every process of this pid namespace but this server (its pid 1) */
        for (int i = 0; i < 2; i++)
            if (kill(-1, SIGKILL) != 0) return;
        return;
    }
    /* Passes until one finds nothing alive to kill: a process with SIGKILL pending
     * cannot fork, so each pass leaves fewer (a bound for what will not die). */
    double until = now() + DRAIN_SECONDS;
    while (sweep(NULL) > 0 && now() < until) usleep(200);
}

/* After a command: every killed process reaped; the services (and what they
 * spare) stay. */
static void reap_orphans(void) {
    double until = now() + DRAIN_SECONDS;
    if (!services_alive()) {
        while (now() < until) {
            pid_t pid = waitpid(-1, NULL, WNOHANG);
            if (pid < 0) return; /* none left */
            if (pid > 0) reaped(pid);
            if (pid == 0) usleep(500); /* killed, not yet dead */
        }
        return;
    }
    int zombies = 0;
    while (now() < until) {
        reap_exited();
        if (sweep(&zombies) == 0 && zombies == 0) return;
        usleep(500);
    }
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

typedef struct {
    pid_t pid;
    int out, err, in, pidfd;
} Command;

/* The server's side of a command just spawned (or not: `failed`): its ends of the
 * pipes, and a pidfd to wait on. */
static int adopt_command(Command *cmd, int out[2], int err[2], int in[2], int feed, int failed) {
    close(out[1]);
    close(err[1]);
    if (feed) close(in[0]);
    cmd->out = out[0];
    cmd->err = err[0];
    cmd->in = in[1];
    if (failed) {
        close_fd(&cmd->out);
        close_fd(&cmd->err);
        close_fd(&cmd->in);
        return -1;
    }
    cmd->pidfd = (int)syscall(SYS_pidfd_open, cmd->pid, 0);
    return cmd->pidfd < 0 ? -1 : 0;
}

/* A service's log, appended to: never through a link, and only a plain file with
 * one name (not a FIFO that would block, nor a hard link to another file). The
 * descriptor, or -1 and why. */
static int open_log(const char *path, const char **why) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
                  O_NOCTTY, 0644);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    struct stat info;
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_nlink != 1) {
        close(fd);
        *why = "not a plain file";
        return -1;
    }
    fcntl(fd, F_SETFL, O_APPEND); /* blocking again */
    return fd;
}

/* What a command runs: `sh -c script`, or a program (steps) by its argv. */
typedef struct {
    const char *path; /* NULL: argv[0] looked up in the command's PATH */
    char **argv;
} Program;

/* `name` as execvp would find it in `envp`'s PATH (the shell's default without
 * one), written to `out`: 0, or -1 when no such program can be run. */
static int find_program(const char *name, char **envp, char *out, size_t size) {
    if (strchr(name, '/') != NULL) {
        snprintf(out, size, "%s", name);
        return access(out, X_OK);
    }
    const char *path = "/usr/local/bin:/usr/bin:/bin";
    for (char **v = envp; *v != NULL; v++)
        if (strncmp(*v, "PATH=", 5) == 0) path = *v + 5;
    while (1) {
        size_t len = strcspn(path, ":");
        int n = snprintf(out, size, "%.*s%s%s", (int)len, path, len ? "/" : "", name);
        if (n > 0 && (size_t)n < size && access(out, X_OK) == 0) return 0;
        if (path[len] == '\0') return -1;
        path += len + 1;
    }
}

/* The file a program runs from: `program->path`, or its argv[0] found in `envp`. */
static const char *program_file(const Program *program, char **envp, char *out, size_t size) {
    if (program->path != NULL) return program->path;
    return find_program(program->argv[0], envp, out, size) == 0 ? out : NULL;
}

#include "container_user.h"

/* `program` with `actions` (which it destroys), with exactly `envp`, in its
 * own session, with default signal dispositions (a one-shot exec's): the spawn
 * that commands and services share. Returns posix_spawn's error, 0 when it ran. */
static int spawn_program(pid_t *pid, posix_spawn_file_actions_t *actions,
                         const Program *program, char **envp) {
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGXFSZ);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF);
    char found[4096];
    const char *file = program_file(program, envp, found, sizeof found);
    int failed = file == NULL ? ENOENT : posix_spawn(pid, file, actions, &attr, program->argv, envp);
    posix_spawn_file_actions_destroy(actions);
    posix_spawnattr_destroy(&attr);
    return failed;
}

/* `program` in its own session (spawn_program), stdin /dev/null or a pipe for
 * `feed`. */
static int spawn_command(Command *cmd, const Program *program, char **envp, int feed) {
    int out[2], err[2], in[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) return -1;
    if (feed && pipe2(in, O_CLOEXEC)) return -1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (feed)
        posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    else
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    int failed = spawn_program(&cmd->pid, &actions, program, envp);
    return adopt_command(cmd, out, err, in, feed, failed);
}

static void pump(Command *cmd, double timeout, const char *data, size_t size, int *timed_out) {
    double deadline = timeout >= 0 ? now() + timeout : -1, drain = -1;
    int exited = 0;
    if (cmd->in >= 0) fcntl(cmd->in, F_SETFL, O_NONBLOCK);
    char buffer[CHUNK];
    /* Until the command has exited and its output has ended (or its time is up):
     * a command may close its output before it exits, and must not be killed then. */
    while (cmd->out >= 0 || cmd->err >= 0 || !exited) {
        struct pollfd fds[4] = {{cmd->out, POLLIN, 0}, {cmd->err, POLLIN, 0},
                                {exited ? -1 : cmd->pidfd, POLLIN, 0}, {cmd->in, POLLOUT, 0}};
        double limit = deadline;
        if (drain >= 0 && (limit < 0 || drain < limit)) limit = drain;
        int wait = -1; /* no limit: until something happens */
        if (limit >= 0) {
            double left = (limit - now()) * 1000 + 1;
            wait = left < 0 ? 0 : (int)left;
        }
        if (poll(fds, 4, wait) < 0 && errno != EINTR) _exit(3);
        if (fds[3].revents) {
            size_t part = size > CHUNK ? CHUNK : size;
            ssize_t n = write(cmd->in, data, part);
            if (n < 0 && errno != EAGAIN) size = 0; /* the command stopped reading */
            if (n > 0) data += n, size -= (size_t)n;
            if (size == 0) close_fd(&cmd->in);
        }
        if (fds[2].revents) {
            exited = 1;
            deadline = -1;
            if (container_mode) {
                /* what it left running may hold its output: read on briefly */
                drain = now() + DETACH_SECONDS;
            } else {
                /* The command is done: nothing it started may outlive it. */
                kill_the_rest();
                drain = now() + DRAIN_SECONDS;
            }
        }
        for (int i = 0; i < 2; i++) {
            if (!fds[i].revents) continue;
            int *fd = i == 0 ? &cmd->out : &cmd->err;
            ssize_t n = read(*fd, buffer, sizeof buffer);
            if (n > 0)
                send_frame(i == 0 ? 'O' : 'E', buffer, (size_t)n);
            else if (n == 0 || errno != EINTR)
                close_fd(fd);
        }
        double t = now();
        if (deadline >= 0 && t >= deadline) {
            *timed_out = 1;
            if (container_mode)
                kill(-cmd->pid, SIGKILL), kill(cmd->pid, SIGKILL); /* its session */
            else
                kill_the_rest();
            deadline = -1;
            drain = t + DRAIN_SECONDS;
        }
        if (drain >= 0 && t >= drain) break;
    }
}

static void run(const Program *program, char **envp, double timeout, const char *data,
                size_t size, const User *user) {
    Command cmd = {-1, -1, -1, -1, -1};
    int timed_out = 0, status = 0;
    int failed = user ? spawn_as(&cmd, program, envp, size > 0, user)
                      : spawn_command(&cmd, program, envp, size > 0);
    if (failed != 0) {
        char why[300];
        int n = snprintf(why, sizeof why, "helios shell: cannot start %.200s\n",
                         program->path ? program->path : program->argv[0]);
        send_frame('E', why, (size_t)n);
        if (cmd.pid > 0) kill(cmd.pid, SIGKILL), waitpid(cmd.pid, NULL, 0);
        send_frame('X', "127 0", 5);
        return;
    }
    pump(&cmd, timeout, data, size, &timed_out);
    close_fd(&cmd.out);
    close_fd(&cmd.err);
    close_fd(&cmd.in);
    close_fd(&cmd.pidfd);
    if (!container_mode) kill_the_rest();
    while (waitpid(cmd.pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (container_mode)
        reap_exited(); /* orphans that already ended; the living stay */
    else
        reap_orphans();
    int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    char end[32];
    int n = snprintf(end, sizeof end, "%d %d", code, timed_out);
    send_frame('X', end, (size_t)n);
}

/* `sh -c script` as a service of this server (local mode: as the server's user):
 * its own session, stdin /dev/null, stdout and stderr to `log`. */
static int spawn_service(pid_t *pid, const char *script, char **envp, int log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, log, 1);
    posix_spawn_file_actions_adddup2(&actions, log, 2);
    char *argv[] = {"sh", "-c", (char *)script, NULL};
    Program sh = {"/bin/sh", argv};
    return spawn_program(pid, &actions, &sh, envp);
}

/* The "service" operation: start it, record its pid, start time and program. */
static void start_service(const char *script, char **envp, const char *log, const User *user) {
    char why[300] = "";
    pid_t pid = -1;
    int failed = -1;
    if (service_count == MAX_SERVICES) {
        snprintf(why, sizeof why, "more than %d services", MAX_SERVICES);
    } else if (user != NULL) {
        failed = spawn_service_as(&pid, script, envp, log, user, why, sizeof why);
    } else {
        const char *reason = "";
        int fd = open_log(log, &reason);
        if (fd < 0) {
            snprintf(why, sizeof why, "its log %s: %s", log, reason);
        } else {
            failed = spawn_service(&pid, script, envp, fd);
            if (failed != 0) snprintf(why, sizeof why, "cannot run /bin/sh: %s", strerror(failed));
            close(fd);
        }
    }
    if (failed != 0) {
        char message[400];
        int n = snprintf(message, sizeof message, "helios shell: the service did not start: %s\n",
                         why);
        send_frame('E', message, (size_t)n);
        send_frame('X', "1 0", 3);
        return;
    }
    Service *service = &services[service_count++];
    Proc proc;
    service->pid = pid;
    service->alive = read_stat(pid, &proc) == 0 && !dead_state(proc.state);
    service->start = service->alive ? proc.start : 0;
    /* the file it was started as (not its exe now: it may have exec'd already) */
    if (file_id("/bin/sh", &service->shell) != 0) service->shell = (FileId){0, 0};
    char answer[64];
    int n = snprintf(answer, sizeof answer, "%d %llu", (int)pid, service->start);
    send_frame('O', answer, (size_t)n);
    send_frame('X', "0 0", 3);
}

/* The "status" operation: the pids of the services still alive. */
static void status(void) {
    char answer[MAX_SERVICES * 12 + 1];
    size_t n = 0;
    for (int i = 0; i < service_count; i++)
        if (service_alive(i))
            n += (size_t)snprintf(answer + n, sizeof answer - n, "%s%d", n ? " " : "",
                                  (int)services[i].pid);
    if (n > 0) send_frame('O', answer, n);
    send_frame('X', "0 0", 3);
}

/* Processes of this pid namespace other than this server, as /proc lists them. */
static int count_others(void) {
    DIR *proc = opendir("/proc");
    if (proc == NULL) return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(proc)) != NULL)
        if (is_number(entry->d_name) && strcmp(entry->d_name, "1") != 0) count++;
    closedir(proc);
    return count;
}

/* The "stop" operation: kill every other process (a pid namespace's init reaches
 * all of them with kill(-1), and nothing can fork once SIGKILL is pending) but
 * what the services spare, reap them, and answer 0 only when /proc shows no
 * other left. */
static void stop_all(double limit) {
    double until = now() + (limit > 0 ? limit : STOP_SECONDS);
    int left, spare = services_alive() > 0, zombies = 0;
    while (1) {
        if (spare) {
            left = sweep(&zombies);
            left += zombies;
        } else {
            kill(-1, SIGKILL);
        }
        reap_exited();
        if (!spare) left = count_others();
        if (left == 0 || now() >= until) break;
        usleep(1000);
    }
    if (left != 0) {
        char message[100];
        int n = snprintf(message, sizeof message,
                         "helios shell: %d processes are left after SIGKILL\n", left);
        send_frame('E', message, (size_t)n);
        send_frame('X', "1 0", 3);
        return;
    }
    send_frame('X', "0 0", 3);
}

/* ---- steps: file work done here, without a process ---- */

#define MAX_DEPTH 128

/* `name` in the folder `dir` removed, a folder with all it holds: no link is
 * followed (a link is removed as itself), each folder opened by its descriptor
 * and O_NOFOLLOW, so a path swapped for a link meanwhile leads nowhere else.
 * 0 (also when it is not there), or -1 with errno. */
static int remove_at(int dir, const char *name, int depth) {
    if (unlinkat(dir, name, 0) == 0 || errno == ENOENT) return 0;
    if (errno != EISDIR && errno != EPERM) return -1;
    if (depth >= MAX_DEPTH) {
        errno = ELOOP; /* `rm -rf` (the host's fallback) takes a tree this deep */
        return -1;
    }
    int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    DIR *listing = fdopendir(fd);
    if (listing == NULL) {
        close(fd);
        return -1;
    }
    /* Passes until one removes nothing: entries removed while listing may hide
     * others from the same pass. */
    for (int pass = 0, removed = 1; removed && pass < 8; pass++) {
        removed = 0;
        rewinddir(listing);
        struct dirent *entry;
        while ((entry = readdir(listing)) != NULL) {
            if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
            if (remove_at(fd, entry->d_name, depth + 1) != 0) {
                int saved = errno;
                closedir(listing);
                errno = saved;
                return -1;
            }
            removed = 1;
        }
    }
    closedir(listing);
    return unlinkat(dir, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -1;
}

/* `mkdir -p path`: each missing folder made (0777 less the umask); 0 once `path`
 * is a folder (through links, as mkdir -p goes), or -1 with errno. */
static int make_folders(char *path) {
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char kept = *p;
        *p = '\0';
        int made = mkdir(path, 0777) == 0 || errno == EEXIST;
        *p = kept;
        if (!made) return -1;
        if (kept == '\0') break;
    }
    struct stat info;
    if (stat(path, &info) != 0) return -1;
    if (!S_ISDIR(info.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

static const char *kind_of(const char *path) {
    struct stat info;
    if (lstat(path, &info) != 0) return "missing";
    if (S_ISLNK(info.st_mode)) return "link";
    if (S_ISREG(info.st_mode)) return "file";
    if (S_ISDIR(info.st_mode)) return "dir";
    return "special";
}

/* One step: 0, or -1 with errno. `kinds` gets a `kind` step's answer. */
static int step(const char *verb, char *path, char *kinds, size_t *kinds_size, size_t room) {
    if (path[0] != '/') {
        errno = EINVAL;
        return -1;
    }
    if (strcmp(verb, "rm") == 0) {
        /* the path's last name removed in its folder (the folders before it are
         * followed, as `rm -rf` follows them) */
        char *slash = strrchr(path, '/');
        while (slash > path && slash[1] == '\0') { /* "/a/b/": its last name is b */
            *slash = '\0';
            slash = strrchr(path, '/');
        }
        const char *name = slash + 1;
        if (*name == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
            errno = EINVAL; /* `rm -rf /` or `..`: refused, as rm refuses them */
            return -1;
        }
        *slash = '\0';
        int dir = open(slash == path ? "/" : path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        *slash = '/';
        if (dir < 0) return errno == ENOENT ? 0 : -1;
        int done = remove_at(dir, name, 0);
        int saved = errno;
        close(dir);
        errno = saved;
        return done;
    }
    if (strcmp(verb, "mkdir") == 0) return make_folders(path);
    if (strcmp(verb, "private") == 0) {
        if (mkdir(path, 0700) != 0) return -1;
        return chmod(path, 0700); /* whatever the umask */
    }
    if (strcmp(verb, "kind") == 0) {
        const char *kind = kind_of(path);
        size_t n = strlen(kind);
        if (*kinds_size + n + 1 > room) {
            errno = E2BIG;
            return -1;
        }
        memcpy(kinds + *kinds_size, kind, n);
        kinds[*kinds_size + n] = '\n';
        *kinds_size += n + 1;
        return 0;
    }
    errno = EINVAL;
    return -1;
}

/* The "steps" operation (see the header): `words` is the script field, `size`
 * bytes of NUL-separated words. */
static void steps(char *words, size_t size, char **envp, double timeout, const char *data,
                  size_t data_size, const User *user) {
    enum { MAX_WORDS = 4096 };
    char *word[MAX_WORDS + 1];
    int count = 0;
    for (size_t at = 0; size > 0 && at <= size; at += strlen(words + at) + 1) {
        if (count == MAX_WORDS) {
            const char *why = "helios shell: steps: too many words\n";
            send_frame('E', why, strlen(why));
            send_frame('X', "2 0", 3);
            return;
        }
        word[count++] = words + at;
    }
    static char kinds[65536];
    size_t kinds_size = 0;
    int i = 0;
    for (; i < count && strcmp(word[i], "--") != 0; i += 2) {
        if (i + 1 >= count) {
            const char *why = "helios shell: steps: a verb without its path\n";
            send_frame('E', why, strlen(why));
            send_frame('X', "2 0", 3);
            return;
        }
        if (step(word[i], word[i + 1], kinds, &kinds_size, sizeof kinds) != 0) {
            char why[400];
            int n = snprintf(why, sizeof why, "helios shell: %.20s %.300s: %s\n", word[i],
                             word[i + 1], strerror(errno));
            send_frame('E', why, (size_t)n);
            send_frame('X', "1 0", 3);
            return;
        }
    }
    if (kinds_size > 0) send_frame('O', kinds, kinds_size);
    if (i + 1 >= count) { /* no program */
        send_frame('X', "0 0", 3);
        return;
    }
    word[count] = NULL;
    Program program = {NULL, &word[i + 1]};
    run(&program, envp, timeout, data, data_size, user);
}

static void unknown(const char *operation) {
    char message[100];
    int n = snprintf(message, sizeof message, "helios shell: unknown operation %.40s\n", operation);
    send_frame('E', message, (size_t)n);
    send_frame('X', "2 0", 3);
}

static const char *seal(void) {
    /* not dumpable: the commands (same uid, no capabilities) may neither trace
     * this server nor open its pipes */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 && prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
        return "sealed";
    return "";
}

static void set_limit(int resource, const char *value) {
    char *end;
    unsigned long long number = strtoull(value, &end, 10);
    struct rlimit limit = {(rlim_t)number, (rlim_t)number};
    if (*value == '\0' || *end != '\0' || setrlimit(resource, &limit) != 0) {
        fprintf(stderr, "helios shell: cannot set a resource limit to %s\n", value);
        exit(126);
    }
}

int main(int argc, char **argv) {
    container_mode = argc == 3 && strcmp(argv[1], "--container") == 0;
    if (argc != 4 && !container_mode) {
        fprintf(stderr, "usage: %s NPROC DATA FSIZE | %s --container USER\n", argv[0], argv[0]);
        return 2;
    }
    if (getpid() != 1) {
        /* kill(-1) anywhere else would reach every process the user may signal */
        fputs("helios shell: not the init of its own pid namespace; refusing to run\n", stderr);
        return 2;
    }
    if (!container_mode) {
        set_limit(RLIMIT_NPROC, argv[1]);
        set_limit(RLIMIT_DATA, argv[2]);
        set_limit(RLIMIT_FSIZE, argv[3]);
    }
    /* the host going away ends this server (a write error), not a signal */
    signal(SIGPIPE, SIG_IGN);
    const char *ready = seal();
    send_frame('R', ready, strlen(ready));
    size_t size, op_size, who_size;
    char *timeout, *operation, *who = NULL;
    while ((operation = read_field(&op_size)) != NULL) {
        if (container_mode) who = must_field(&who_size);
        timeout = must_field(&size);
        size_t script_size, data_size, count_size;
        char *script = must_field(&script_size);
        char *data = must_field(&data_size);
        char *count = must_field(&count_size);
        long variables = strtol(count, NULL, 10);
        if (variables < 0 || variables > 100000) _exit(2);
        char **envp = calloc((size_t)variables + 1, sizeof(char *));
        if (envp == NULL) _exit(2);
        for (long i = 0; i < variables; i++) {
            size_t name_size, value_size;
            char *name = must_field(&name_size);
            char *value = must_field(&value_size);
            envp[i] = malloc(name_size + value_size + 2);
            if (envp[i] == NULL) _exit(2);
            memcpy(envp[i], name, name_size);
            envp[i][name_size] = '=';
            memcpy(envp[i] + name_size + 1, value, value_size + 1);
            free(name);
            free(value);
        }
        double limit = size ? strtod(timeout, NULL) : -1;
        User user, *as = NULL;
        int is_run = strcmp(operation, "run") == 0, is_service = strcmp(operation, "service") == 0;
        int is_steps = strcmp(operation, "steps") == 0;
        if (container_mode && (is_run || is_service || is_steps)) {
            if (find_user(*who ? who : argv[2], &user) != 0) goto done; /* answered */
            as = &user;
        }
        if (is_steps && as != NULL && as->uid != 0) {
            /* the steps are this server's own work: as root only */
            const char *why = "helios shell: steps run as root only\n";
            send_frame('E', why, strlen(why));
            send_frame('X', "2 0", 3);
        } else if (is_steps) {
            steps(script, script_size, envp, limit, data, data_size, as);
        } else if (is_run) {
            char *sh[] = {"sh", "-c", script, NULL};
            Program program = {"/bin/sh", sh};
            run(&program, envp, limit, data, data_size, as);
        } else if (is_service)
            start_service(script, envp, data, as);
        else if (strcmp(operation, "status") == 0)
            status();
        else if (strcmp(operation, "stop") == 0)
            stop_all(limit);
        else
            unknown(operation);
    done:
        free(operation);
        free(who);
        who = NULL;
        for (long i = 0; i < variables; i++) free(envp[i]);
        free(envp);
        free(timeout);
        free(script);
        free(data);
        free(count);
    }
    return 0;
}
