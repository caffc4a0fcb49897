/*
 * Container mode of the shell server (`shell/server.c` includes this after its
 * Command type): who a command or a service runs as, and its environment.
 *
 * Users are looked up as the docker daemon does for `docker exec -u SPEC`
 * (moby's GetExecUser): SPEC is `user[:group]`, each a name or a number, read
 * from the container's own /etc/passwd and /etc/group. A name not found is an
 * error with the daemon's words; a number not found runs as that uid with gid 0.
 */
#include <dirent.h>
#include <grp.h>

#define MAX_GROUPS 64

typedef struct {
    uid_t uid;
    gid_t gid;
    gid_t groups[MAX_GROUPS];
    int ngroups;
    char home[512];
    char name[256];
} User;

/* Split a colon-separated line in place into at most `max` fields. */
static int split_fields(char *line, char **fields, int max) {
    int count = 0;
    line[strcspn(line, "\n")] = '\0';
    while (count < max) {
        fields[count++] = line;
        char *colon = strchr(line, ':');
        if (colon == NULL) break;
        *colon = '\0';
        line = colon + 1;
    }
    return count;
}

/* The passwd entry whose name (or uid, for a number) is `key`: 1 if found. */
static int find_passwd(const char *key, User *user) {
    FILE *file = fopen("/etc/passwd", "re");
    if (file == NULL) return 0;
    char line[1024];
    int found = 0, numeric = is_number(key);
    while (!found && fgets(line, sizeof line, file) != NULL) {
        char *f[7];
        if (split_fields(line, f, 7) < 7) continue;
        if (numeric ? strcmp(f[2], key) != 0 : strcmp(f[0], key) != 0) continue;
        user->uid = (uid_t)strtoul(f[2], NULL, 10);
        user->gid = (gid_t)strtoul(f[3], NULL, 10);
        snprintf(user->home, sizeof user->home, "%s", f[5]);
        snprintf(user->name, sizeof user->name, "%s", f[0]);
        found = 1;
    }
    fclose(file);
    return found;
}

/* The gid of group `key` (a name or a number): 1 if found. With `member`, also
 * collect every group that lists that user name as a member. */
static int scan_groups(const char *key, gid_t *gid, const char *member, User *user) {
    FILE *file = fopen("/etc/group", "re");
    if (file == NULL) return 0;
    char line[4096];
    int found = 0, numeric = key != NULL && is_number(key);
    while (fgets(line, sizeof line, file) != NULL) {
        char *f[4];
        if (split_fields(line, f, 4) < 4) continue;
        if (key != NULL && !found && strcmp(numeric ? f[2] : f[0], key) == 0) {
            *gid = (gid_t)strtoul(f[2], NULL, 10);
            found = 1;
        }
        if (member == NULL || *member == '\0') continue;
        for (char *name = strtok(f[3], ","); name != NULL; name = strtok(NULL, ","))
            if (strcmp(name, member) == 0 && user->ngroups < MAX_GROUPS)
                user->groups[user->ngroups++] = (gid_t)strtoul(f[2], NULL, 10);
    }
    fclose(file);
    return found;
}

static int user_error(const char *kind, const char *name, const char *file) {
    char message[600];
    int n = snprintf(message, sizeof message,
                     "unable to find %s %s: no matching entries in %s file\n", kind, name, file);
    send_frame('E', message, (size_t)n);
    send_frame('X', "126 0", 5);
    return -1;
}

/* Resolve SPEC into `user`; on failure the request's answer is already sent. */
static int find_user(const char *spec, User *user) {
    memset(user, 0, sizeof *user);
    snprintf(user->home, sizeof user->home, "/");
    char copy[512];
    snprintf(copy, sizeof copy, "%s", *spec ? spec : "0");
    char *group = strchr(copy, ':');
    if (group != NULL) *group++ = '\0';
    int known = find_passwd(copy, user);
    if (!known) {
        if (!is_number(copy)) return user_error("user", copy, "passwd");
        user->uid = (uid_t)strtoul(copy, NULL, 10);
    }
    gid_t gid = user->gid;
    if (group != NULL && *group != '\0') {
        if (!scan_groups(group, &gid, NULL, user)) {
            if (!is_number(group)) return user_error("group", group, "group");
            gid = (gid_t)strtoul(group, NULL, 10);
        }
    }
    if (known) scan_groups(NULL, &gid, user->name, user);
    user->gid = gid;
    return 0;
}

/* The command's environment: the container's own (the init's, as docker gave
 * it), the request's variables over it, and HOME for a user other than root
 * when the container's is the daemon's default. */
static char **command_env(char **request, const User *user) {
    extern char **environ;
    size_t own = 0, asked = 0;
    while (environ[own]) own++;
    while (request[asked]) asked++;
    char **envp = calloc(own + asked + 2, sizeof(char *));
    if (envp == NULL) _exit(2);
    size_t n = 0;
    int home_given = 0;
    for (size_t i = 0; i < asked; i++) {
        envp[n++] = request[i];
        home_given |= strncmp(request[i], "HOME=", 5) == 0;
    }
    static char home[520];
    for (size_t i = 0; i < own; i++) {
        size_t name = strcspn(environ[i], "=");
        int overridden = 0;
        for (size_t j = 0; j < asked && !overridden; j++)
            overridden = strncmp(request[j], environ[i], name + 1) == 0;
        if (overridden) continue;
        if (strncmp(environ[i], "HOME=", 5) == 0) {
            if (home_given) continue;
            home_given = 1;
            if (user->uid != 0 && strcmp(environ[i], "HOME=/root") == 0) {
                snprintf(home, sizeof home, "HOME=%s", user->home);
                envp[n++] = home;
                continue;
            }
        }
        envp[n++] = environ[i];
    }
    if (!home_given) {
        snprintf(home, sizeof home, "HOME=%s", user->home);
        envp[n++] = home;
    }
    return envp;
}

/* `program` as `user`, in its own session, as spawn_command does. */
static int spawn_as(Command *cmd, const Program *program, char **request_env, int feed,
                    const User *user) {
    int out[2], err[2], in[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) return -1;
    if (feed && pipe2(in, O_CLOEXEC)) return -1;
    char **envp = command_env(request_env, user);
    pid_t pid = fork();
    if (pid == 0) {
        int null = feed ? in[0] : open("/dev/null", O_RDONLY);
        if (setsid() < 0 || null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 ||
            dup2(err[1], 2) < 0)
            _exit(126);
        if (setgroups((size_t)user->ngroups, user->groups) != 0 || setgid(user->gid) != 0 ||
            setuid(user->uid) != 0) {
            static const char why[] = "helios shell: cannot switch to the asked user\n";
            (void)!write(2, why, sizeof why - 1);
            _exit(126);
        }
        signal(SIGPIPE, SIG_DFL);
        signal(SIGXFSZ, SIG_DFL);
        char found[4096];
        const char *file = program_file(program, envp, found, sizeof found);
        if (file != NULL) execve(file, program->argv, envp);
        _exit(127);
    }
    free(envp);
    cmd->pid = pid;
    return adopt_command(cmd, out, err, in, feed, pid < 0);
}

/* A service as `user` (see `start_service`): its own session, stdin /dev/null,
 * its log opened as that user. 0 and its pid, or -1 and why in `why`. */
static int spawn_service_as(pid_t *out, const char *script, char **request_env, const char *log,
                            const User *user, char *why, size_t why_size) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        snprintf(why, why_size, "no pipe: %s", strerror(errno));
        return -1;
    }
    char **envp = command_env(request_env, user);
    pid_t pid = fork();
    if (pid == 0) {
        const char *fail = NULL;
        int null = open("/dev/null", O_RDONLY);
        if (setsid() < 0 || null < 0 || dup2(null, 0) < 0 || chdir("/") != 0)
            fail = "cannot set up its session";
        else if (setgroups((size_t)user->ngroups, user->groups) != 0 || setgid(user->gid) != 0 ||
                 setuid(user->uid) != 0)
            fail = "cannot switch to the asked user";
        else {
            int log_fd = open_log(log, &fail);
            if (log_fd >= 0 && (dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0))
                fail = "cannot write its log";
        }
        if (fail == NULL) {
            signal(SIGPIPE, SIG_DFL);
            signal(SIGXFSZ, SIG_DFL);
            char *argv[] = {"sh", "-c", (char *)script, NULL};
            execve("/bin/sh", argv, envp);
            fail = "cannot run /bin/sh";
        }
        (void)!write(report[1], fail, strlen(fail));
        _exit(127);
    }
    free(envp);
    close(report[1]);
    ssize_t n;
    /* the pipe ends (closed on exec) once /bin/sh runs, or carries why not */
    while ((n = read(report[0], why, why_size - 1)) < 0 && errno == EINTR) {
    }
    close(report[0]);
    if (pid < 0 || n > 0) {
        if (pid < 0) snprintf(why, why_size, "cannot fork: %s", strerror(errno));
        else why[n] = '\0', waitpid(pid, NULL, 0);
        return -1;
    }
    *out = pid;
    return 0;
}
