/*
 * The persistent shell's server, compiled: the same wire format and behaviour as
 * `_shell_server.py` (read its docstring first), for hosts with a C compiler.
 * A Python interpreter costs ~13 ms of CPU to start, once per sandbox; this
 * costs well under one, and its per-command loop is cheaper too.
 *
 * Usage (inside bwrap, as the pid namespace's init):
 *   helios-shell NPROC DATA FSIZE
 * sets those rlimits (soft = hard, so nothing inside can raise them again), as
 * the `prlimit` prefix does for the Python server, then serves requests.
 *
 * host -> server: fields of `<length>\n<bytes>`: the timeout (empty: none), the
 *   script, its stdin bytes (empty: /dev/null), the number of variables, then
 *   each variable's name and value.
 * server -> host: frames of 1 type byte + 4-byte big-endian length + payload:
 *   R ready (once; "sealed" when not dumpable), O stdout, E stderr, X the end:
 *   "<exit code> <1 if timed out else 0>".
 *
 * Container mode (`_docker_shell.py`): helios-shell --container DEFAULT_USER
 *   The init of a docker container, started as root; the container's cgroup sets
 *   its limits. Each request starts with two more fields: the operation ("run",
 *   or "stop": kill every other process of the container and check that none is
 *   left) and the user to run as (docker's USER syntax; empty: DEFAULT_USER).
 *   Processes a command leaves in the background live on, as with `docker exec`,
 *   until a "stop". The user is looked up in the container's own /etc/passwd and
 *   /etc/group, as the daemon does for `docker exec -u` (_container_user.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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

static void kill_the_rest(void) {
    /* every process of this pid namespace but this server (its pid 1) */
    for (int i = 0; i < 2; i++)
        if (kill(-1, SIGKILL) != 0) return;
}

static void reap_orphans(void) {
    double until = now() + DRAIN_SECONDS;
    while (now() < until) {
        pid_t pid = waitpid(-1, NULL, WNOHANG);
        if (pid < 0) return; /* none left */
        if (pid == 0) usleep(500); /* killed, not yet dead */
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

#include "_container_user.h"

/* `sh -c script` in its own session, with exactly `envp`, default signal
 * dispositions (a one-shot exec's), stdin /dev/null or a pipe for `feed`. */
static int spawn_command(Command *cmd, const char *script, char **envp, int feed) {
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
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGXFSZ);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF);
    char *argv[] = {"sh", "-c", (char *)script, NULL};
    int failed = posix_spawn(&cmd->pid, "/bin/sh", &actions, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
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

static void run(const char *script, char **envp, double timeout, const char *data, size_t size,
                const User *user) {
    Command cmd = {-1, -1, -1, -1, -1};
    int timed_out = 0, status = 0;
    int failed = user ? spawn_as(&cmd, script, envp, size > 0, user)
                      : spawn_command(&cmd, script, envp, size > 0);
    if (failed != 0) {
        const char *why = "helios shell: cannot start /bin/sh\n";
        send_frame('E', why, strlen(why));
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
    size_t size;
    char *timeout;
    char *operation = NULL, *who = NULL;
    while (1) {
        if (container_mode) {
            size_t op_size, who_size;
            if ((operation = read_field(&op_size)) == NULL) break;
            who = must_field(&who_size);
            timeout = must_field(&size);
        } else if ((timeout = read_field(&size)) == NULL) {
            break;
        }
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
        if (!container_mode) {
            run(script, envp, limit, data, data_size, NULL);
        } else if (strcmp(operation, "stop") == 0) {
            stop_all(limit);
        } else {
            User user;
            if (find_user(*who ? who : argv[2], &user) == 0)
                run(script, envp, limit, data, data_size, &user);
        }
        free(operation);
        free(who);
        operation = who = NULL;
        for (long i = 0; i < variables; i++) free(envp[i]);
        free(envp);
        free(timeout);
        free(script);
        free(data);
        free(count);
    }
    return 0;
}
