/*
 * rbs-supervisor: the first process (PID 1) of every sandbox container.
 *
 * The service starts commands, PTYs and file transfers through it instead of
 * one `runc exec` each (a few hundred milliseconds on a loaded machine), as
 * E2B's and Daytona's in-sandbox daemons do. Every operation is one Unix
 * socket connection, so the kernel does the flow control and no stream waits
 * for another. The service listens and this process connects: it keeps a few
 * idle connections open to the service's control socket (a socket file the
 * service made, bind-mounted read-only, so nothing in the sandbox can swap it
 * for a link to somewhere else on the host), and the service takes one for
 * each operation. It also forwards the sandbox's only way out: 127.0.0.1:3128
 * inside the container (HTTP_PROXY) to the session's metering egress proxy,
 * through the service's egress socket, mounted the same way.
 *
 * Protocol (docs/internals/sandbox-protocol.md): frames of [type: 1 byte][length: 4
 * bytes, big-endian][payload], at most 1 MiB each. The first frame the
 * service sends on an idle connection says what it is for:
 *
 *   'S' spawn   fields "a=<argv>" (repeated), "e=<NAME=value>" (repeated),
 *               "d=<cwd>", "t=<cols> <rows>" (a PTY), each NUL-terminated.
 *               Answers 'P' <pid> or 'E' <message>; then 'O' stdout, 'R'
 *               stderr and finally 'X' "<exit code> <signal>". Takes 'I'
 *               stdin, 'C' end of stdin, 'K' <signal> (to the process group)
 *               and 'Z' "<cols> <rows>" (a PTY's size). Answers 'A' <bytes>
 *               as stdin leaves its queue (written, or dropped once the
 *               program closed it): the service keeps what is unread
 *               bounded by them.
 *   'F' read    <path>: 'H' "<size> <mode>", 'D' data..., 'X'; or 'E'.
 *   'W' write   "<mode>\0<path>\0", then 'D' data... and 'C': written to a
 *               temporary file renamed into place ('X' <bytes>), so a
 *               transfer cut short leaves nothing; or 'E'.
 *   'G' list    "<limit>\0<after>\0<path>\0": 'N' entries by name, then 'X'
 *               "<more>"; 'Q' stat <path>, 'M' mkdir "<parents>\0<path>\0"
 *               and 'B' move "<overwrite>\0<from>\0<to>\0": one 'N' entry;
 *               'U' remove "<recursive>\0<path>\0": 'X'. Each 'E' starts
 *               with its errno's name.
 *   'J' watch   "<recursive>\0<path>\0": 'Y' once watched, then an 'N' for
 *               each change (inotify), 'X' when the directory goes.
 *   'T' dial    <port>: 'Y' once connected to 127.0.0.1:<port> inside the
 *               sandbox, then raw bytes both ways; or 'E'.
 *   'V' version answers 'V' "rbs-supervisor <version>".
 *   'L' lifeline: held open, never answered; the service learns of this
 *               process's death when it closes, and this process of the
 *               service's: when the service's end closes (it died, by any
 *               signal), every process of the sandbox is killed and the
 *               sandbox ends with it.
 *
 * A connection closed before its command exited kills the command's process
 * group. Output is read only as fast as the service takes it, so a command
 * that writes gigabytes blocks on its pipe instead of filling memory.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VERSION "1"
#define MAX_FRAME (1u << 20)
/* Arguments and variables a spawn request may carry, each. */
#define MAX_ARGS 4096
#define CHUNK (64 * 1024)
/* Output queued towards the service before the command's pipes stop being read. */
#define HIGH_WATER (256 * 1024)
/* After a command exits, how long its pipes are drained (a background child may hold them open). */
#define DRAIN_MS 100
/* How long an answered connection waits for the service to hang up. */
#define LINGER_MS 5000
/* Directories one watch follows, at most (each is an inotify watch of the sandbox's). */
#define MAX_WATCH_DIRS 8192
/* How long a rename's first half waits for its second before it counts as a removal. */
#define MOVE_PAIR_MS 10

extern char **environ;

typedef struct {
  uint8_t *p;
  size_t off, len, cap;
} buf_t;

static void buf_push(buf_t *b, const void *data, size_t n) {
  if (b->off > 0 && b->off == b->len) b->off = b->len = 0;
  if (b->len + n > b->cap) {
    if (b->off > 0) {
      memmove(b->p, b->p + b->off, b->len - b->off);
      b->len -= b->off;
      b->off = 0;
    }
    if (b->len + n > b->cap) {
      size_t cap = b->cap ? b->cap : 4096;
      while (cap < b->len + n) cap *= 2;
      uint8_t *p = realloc(b->p, cap);
      if (!p) abort();
      b->p = p;
      b->cap = cap;
    }
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
}

static size_t buf_size(const buf_t *b) { return b->len - b->off; }
static void buf_free(buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

enum kind { K_NEW, K_PROC, K_READ, K_WRITE, K_DIAL, K_RAW, K_LIFELINE, K_WATCH };

typedef struct {
  int wd;
  char *path;
} watched_t;

typedef struct conn {
  struct conn *next;
  int fd;
  int kind;
  int dead;
  buf_t in;  /* frames read from the service */
  buf_t out; /* bytes for the service (frames, or raw bytes) */
  int closing;
  /* Answered and shut for writing: reading what the service still sends until it hangs up. */
  long long lingering_since;
  /* K_PROC */
  pid_t pid;
  int out_fd, err_fd, in_fd, pty;
  buf_t stdin_q;
  int stdin_close;
  size_t stdin_done; /* bytes of stdin written or dropped since the last 'A' */
  int exited, status;
  long long exited_at, output_at;
  /* K_READ */
  int file_fd;
  /* K_WRITE */
  int wfd;
  char *tmp, *dst;
  long long written;
  /* K_DIAL / K_RAW: fd <-> peer */
  int peer;
  int connecting;
  buf_t to_peer;
  int fd_eof, peer_eof, peer_shut, fd_shut;
  /* K_WATCH: an inotify instance, the directories it follows, a rename's first half waiting for its second */
  int ino_fd, recursive, root_wd;
  watched_t *dirs;
  size_t ndirs, capdirs;
  uint32_t move_cookie;
  char *move_from;
  int move_from_dir;
  long long move_at;
} conn_t;

static conn_t *conns;
static int proxy_fd = -1, sig_fd = -1;
static const char *control_path = "/.rbs/control.sock";
static const char *egress_path = "/.rbs/egress.sock";
/* Idle connections kept open to the service, each ready to take an operation at once. */
static int spares = 4;
static long long spare_retry_at;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static conn_t *conn_new(int fd, int kind) {
  conn_t *c = calloc(1, sizeof *c);
  if (!c) abort();
  c->fd = fd;
  c->kind = kind;
  c->out_fd = c->err_fd = c->in_fd = c->file_fd = c->wfd = c->peer = c->ino_fd = -1;
  c->next = conns;
  conns = c;
  return c;
}

static void frame(conn_t *c, char type, const void *data, size_t n) {
  uint8_t head[5] = {(uint8_t)type, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
  buf_push(&c->out, head, 5);
  if (n) buf_push(&c->out, data, n);
}

static void framef(conn_t *c, char type, const char *fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof text) n = sizeof text - 1;
  frame(c, type, text, (size_t)n);
}

/* An error answer, after which the connection closes. */
static void fail(conn_t *c, const char *fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof text) n = sizeof text - 1;
  frame(c, 'E', text, (size_t)n);
  c->closing = 1;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/*
 * Signals a command's whole session: every command is its session's leader
 * (setsid), and a shell with job control puts each background job in a
 * process group of its own, so the process group alone would miss them.
 * A process that made a session of its own has left the command.
 */
static void proc_kill(conn_t *c, int sig) {
  if (c->pid <= 0 || c->exited) return;
  kill(-c->pid, sig);
  DIR *proc = opendir("/proc");
  if (!proc) return;
  struct dirent *entry;
  while ((entry = readdir(proc)) != NULL) {
    char *end;
    long pid = strtol(entry->d_name, &end, 10);
    if (*end != 0 || pid <= 1) continue;
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, stat, sizeof stat - 1);
    close(fd);
    if (n <= 0) continue;
    stat[n] = 0;
    /* pid (comm) state ppid pgrp session ...: the comm may hold spaces and parentheses. */
    char *after = strrchr(stat, ')');
    int ppid, pgrp, session;
    char state;
    if (after && sscanf(after + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) == 4 && session == c->pid)
      kill((pid_t)pid, sig);
  }
  closedir(proc);
}

static int debug;
#define DEBUG(...) do { if (debug) { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); fflush(stderr); } } while (0)

static void conn_release_at(conn_t *c, int line) {
  DEBUG("release fd=%d kind=%d pid=%d exited=%d closing=%d line=%d", c->fd, c->kind, (int)c->pid, c->exited, c->closing, line);
  if (c->kind == K_PROC && !c->exited) proc_kill(c, SIGKILL);
  if (c->kind == K_WRITE && c->tmp) unlink(c->tmp);
  close_fd(&c->fd);
  close_fd(&c->out_fd);
  close_fd(&c->err_fd);
  close_fd(&c->in_fd);
  close_fd(&c->file_fd);
  close_fd(&c->wfd);
  close_fd(&c->peer);
  close_fd(&c->ino_fd);
  for (size_t i = 0; i < c->ndirs; i++) free(c->dirs[i].path);
  free(c->dirs);
  free(c->move_from);
  free(c->tmp);
  free(c->dst);
  buf_free(&c->in);
  buf_free(&c->out);
  buf_free(&c->stdin_q);
  buf_free(&c->to_peer);
  c->dead = 1;
}
#define conn_release(c) conn_release_at((c), __LINE__)

/* ---- spawn ---- */

static int env_name_len(const char *entry) {
  const char *eq = strchr(entry, '=');
  return eq ? (int)(eq - entry) : (int)strlen(entry);
}

static void spawn(conn_t *c, char *payload, size_t n) {
  /* As many as the service lets a request carry (EXEC_LIMITS), and a NULL after them. */
  char *argv[MAX_ARGS + 1];
  char *env_req[MAX_ARGS];
  int argc = 0, envc = 0;
  const char *cwd = NULL;
  int cols = 0, rows = 0, want_pty = 0;
  for (size_t i = 0; i < n;) {
    char *field = payload + i;
    size_t len = strnlen(field, n - i);
    if (i + len >= n) return fail(c, "malformed spawn request");
    if (len >= 2 && field[1] == '=') {
      char *value = field + 2;
      switch (field[0]) {
      case 'a':
        if (argc == MAX_ARGS) return fail(c, "more than %d arguments", MAX_ARGS);
        argv[argc++] = value;
        break;
      case 'e':
        if (envc == MAX_ARGS) return fail(c, "more than %d variables", MAX_ARGS);
        env_req[envc++] = value;
        break;
      case 'd':
        cwd = value;
        break;
      case 't':
        want_pty = sscanf(value, "%d %d", &cols, &rows) == 2;
        break;
      }
    }
    i += len + 1;
  }
  if (argc == 0) return fail(c, "no command");
  argv[argc] = NULL;

  /* The environment: the sandbox's own, with the request's variables over it. */
  size_t base = 0;
  while (environ[base]) base++;
  char **env = calloc(base + (size_t)envc + 1, sizeof *env);
  if (!env) abort();
  int k = 0;
  for (size_t i = 0; i < base; i++) {
    int keep = 1;
    int len = env_name_len(environ[i]);
    for (int j = 0; j < envc && keep; j++)
      if (env_name_len(env_req[j]) == len && strncmp(env_req[j], environ[i], (size_t)len) == 0) keep = 0;
    if (keep) env[k++] = environ[i];
  }
  for (int j = 0; j < envc; j++) env[k++] = env_req[j];
  env[k] = NULL;

  int in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, master = -1, slave = -1, report[2];
  if (want_pty) {
    struct winsize ws = {.ws_row = (unsigned short)(rows > 0 ? rows : 24),
                         .ws_col = (unsigned short)(cols > 0 ? cols : 80)};
    if (openpty(&master, &slave, NULL, NULL, &ws) < 0) {
      free(env);
      return fail(c, "openpty: %s", strerror(errno));
    }
    fcntl(master, F_SETFD, FD_CLOEXEC);
  } else if (pipe2(in_p, O_CLOEXEC) < 0 || pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0) {
    free(env);
    int e = errno;
    close_fd(&in_p[0]), close_fd(&in_p[1]), close_fd(&out_p[0]), close_fd(&out_p[1]);
    return fail(c, "pipe: %s", strerror(e));
  }
  if (pipe2(report, O_CLOEXEC) < 0) {
    /* Out of descriptors (a program in the sandbox can do that): a refusal, not the supervisor's end. */
    int e = errno;
    free(env);
    close_fd(&in_p[0]), close_fd(&in_p[1]), close_fd(&out_p[0]), close_fd(&out_p[1]);
    close_fd(&err_p[0]), close_fd(&err_p[1]), close_fd(&master), close_fd(&slave);
    return fail(c, "pipe: %s", strerror(e));
  }

  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    free(env);
    close(report[0]), close(report[1]);
    close_fd(&in_p[0]), close_fd(&in_p[1]), close_fd(&out_p[0]), close_fd(&out_p[1]);
    close_fd(&err_p[0]), close_fd(&err_p[1]), close_fd(&master), close_fd(&slave);
    /* EAGAIN under the pids limit: the sandbox is full of processes, not broken. */
    return fail(c, "fork: %s", strerror(e));
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    setsid();
    if (want_pty) {
      ioctl(slave, TIOCSCTTY, 0);
      dup2(slave, 0), dup2(slave, 1), dup2(slave, 2);
      if (slave > 2) close(slave);
    } else {
      dup2(in_p[0], 0), dup2(out_p[1], 1), dup2(err_p[1], 2);
    }
    /* Whatever score the supervisor was started with, its commands start from the default. */
    int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (oom >= 0) {
      if (write(oom, "0", 1) < 0) { /* best effort */
      }
      close(oom);
    }
    char message[600];
    if (cwd && chdir(cwd) < 0) {
      int len = snprintf(message, sizeof message, "cwd %.200s: %s", cwd, strerror(errno));
      if (write(report[1], message, (size_t)len) < 0) _exit(127);
      _exit(127);
    }
    environ = env;
    execvp(argv[0], argv);
    /* The program's name is the client's: at most 200 bytes of it go in the message. */
    int len = snprintf(message, sizeof message, "%.200s: %s", argv[0], strerror(errno));
    if (write(report[1], message, (size_t)len) < 0) _exit(127);
    _exit(127);
  }
  free(env);
  close(report[1]);
  close_fd(&in_p[0]), close_fd(&out_p[1]), close_fd(&err_p[1]), close_fd(&slave);
  char message[600];
  ssize_t got;
  do got = read(report[0], message, sizeof message - 1);
  while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got > 0) {
    message[got] = 0;
    waitpid(pid, NULL, 0);
    close_fd(&in_p[1]), close_fd(&out_p[0]), close_fd(&err_p[0]), close_fd(&master);
    return fail(c, "%s", message);
  }
  c->kind = K_PROC;
  c->pid = pid;
  if (want_pty) {
    c->pty = 1;
    c->out_fd = master;
    c->in_fd = dup(master);
    fcntl(c->in_fd, F_SETFD, FD_CLOEXEC);
  } else {
    c->out_fd = out_p[0];
    c->err_fd = err_p[0];
    c->in_fd = in_p[1];
  }
  nonblock(c->out_fd);
  if (c->err_fd >= 0) nonblock(c->err_fd);
  nonblock(c->in_fd);
  framef(c, 'P', "%d", (int)pid);
}

/* ---- files ---- */

static void read_file(conn_t *c, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return fail(c, "%.200s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail(c, "%.200s: not a regular file", path);
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  c->kind = K_READ;
  c->file_fd = fd;
  framef(c, 'H', "%lld %o", (long long)st.st_size, st.st_mode & 07777);
}

static int mkdirs(char *dir) {
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    int r = mkdir(dir, 0755);
    *p = '/';
    if (r < 0 && errno != EEXIST) return -1;
  }
  if (mkdir(dir, 0755) < 0 && errno != EEXIST) return -1;
  return 0;
}

static void write_file(conn_t *c, char *payload, size_t n) {
  size_t mode_len = strnlen(payload, n);
  if (mode_len >= n) return fail(c, "malformed write request");
  char *path = payload + mode_len + 1;
  size_t path_len = strnlen(path, n - mode_len - 1);
  if (path_len == 0 || mode_len + 1 + path_len >= n || path[0] != '/') return fail(c, "malformed write request");
  unsigned mode = (unsigned)strtoul(payload, NULL, 8) & 07777;
  char *dir = strdup(path);
  char *slash = strrchr(dir, '/');
  if (slash == dir) slash[1] = 0;
  else *slash = 0;
  if (mkdirs(dir) < 0) {
    int e = errno;
    free(dir);
    return fail(c, "%.200s: %s", path, strerror(e));
  }
  char *tmp;
  if (asprintf(&tmp, "%s/.rbs-upload-XXXXXX", strcmp(dir, "/") == 0 ? "" : dir) < 0) abort();
  free(dir);
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    free(tmp);
    return fail(c, "%.200s: %s", path, strerror(e));
  }
  fchmod(fd, mode ? mode : 0644);
  c->kind = K_WRITE;
  c->wfd = fd;
  c->tmp = tmp;
  c->dst = strdup(path);
}

static void write_chunk(conn_t *c, const uint8_t *data, size_t n) {
  while (n > 0) {
    ssize_t w = write(c->wfd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return fail(c, "%.200s: %s", c->dst, strerror(errno));
    }
    data += w, n -= (size_t)w, c->written += w;
  }
}

static void write_done(conn_t *c) {
  if (close(c->wfd) < 0) {
    c->wfd = -1;
    return fail(c, "%.200s: %s", c->dst, strerror(errno));
  }
  c->wfd = -1;
  if (rename(c->tmp, c->dst) < 0) return fail(c, "%.200s: %s", c->dst, strerror(errno));
  free(c->tmp);
  c->tmp = NULL;
  framef(c, 'X', "%lld", c->written);
  c->closing = 1;
}


/*
 * The file system calls: each answers 'N' entries or 'X', or an 'E' that starts with the errno's
 * name ("ENOENT /root/x: No such file or directory"), so the service can tell the cases apart.
 */
static void fail_errno(conn_t *c, int e, const char *path) {
  const char *name = strerrorname_np(e);
  fail(c, "%s %.200s: %s", name ? name : "EIO", path, strerror(e));
}

/* The request's NUL-terminated fields, in `fields` (at most `max`); 0 when there are fewer than `want`. */
static int split_fields(char *payload, size_t n, char **fields, int want) {
  size_t at = 0;
  for (int i = 0; i < want; i++) {
    if (at >= n) return 0;
    size_t len = strnlen(payload + at, n - at);
    if (at + len >= n && i < want - 1) return 0;
    fields[i] = payload + at;
    at += len + 1;
  }
  return 1;
}

/* One entry: "<type> <size> <mode> <mtime>\0<name>\0<link target>", type f, d, l or o. */
static void entry_frame(conn_t *c, const char *name, const char *full, const struct stat *st) {
  char type = S_ISREG(st->st_mode) ? 'f' : S_ISDIR(st->st_mode) ? 'd' : S_ISLNK(st->st_mode) ? 'l' : 'o';
  char target[PATH_MAX];
  ssize_t tn = 0;
  if (type == 'l') {
    tn = readlink(full, target, sizeof target - 1);
    if (tn < 0) tn = 0;
  }
  target[tn] = 0;
  char head[128];
  int hn = snprintf(head, sizeof head, "%c %lld %o %lld.%09ld", type, (long long)st->st_size,
                    (unsigned)(st->st_mode & 07777), (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
  size_t nn = strlen(name);
  size_t total = (size_t)hn + 1 + nn + 1 + (size_t)tn;
  char *payload = malloc(total);
  if (!payload) abort();
  memcpy(payload, head, (size_t)hn + 1);
  memcpy(payload + hn + 1, name, nn + 1);
  memcpy(payload + hn + 1 + nn + 1, target, (size_t)tn);
  frame(c, 'N', payload, total);
  free(payload);
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash && slash[1] ? slash + 1 : path;
}

static char *join_path(const char *dir, const char *name) {
  char *full;
  if (asprintf(&full, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, name) < 0) abort();
  return full;
}

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* 'G' "<limit>\0<after>\0<path>": the entries named after `after`, by name, then 'X' "<more: 0 or 1>". */
static void list_dir(conn_t *c, char *payload, size_t n) {
  char *f[3];
  if (!split_fields(payload, n, f, 3)) return fail(c, "malformed list request");
  long limit = strtol(f[0], NULL, 10);
  const char *after = f[1], *path = f[2];
  if (limit < 1) limit = 1;
  DIR *dir = opendir(path);
  if (!dir) return fail_errno(c, errno, path);
  char **names = NULL;
  size_t count = 0, cap = 0;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    if (*after && strcmp(entry->d_name, after) <= 0) continue;
    if (count == cap) {
      cap = cap ? cap * 2 : 256;
      names = realloc(names, cap * sizeof *names);
      if (!names) abort();
    }
    names[count++] = strdup(entry->d_name);
  }
  if (count) qsort(names, count, sizeof *names, compare_names);
  size_t shown = 0, i = 0;
  for (; i < count && shown < (size_t)limit; i++) {
    struct stat st;
    /* One removed since the directory was read is not there any more. */
    if (fstatat(dirfd(dir), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    char *full = join_path(path, names[i]);
    entry_frame(c, names[i], full, &st);
    free(full);
    shown++;
  }
  int more = i < count;
  for (i = 0; i < count; i++) free(names[i]);
  free(names);
  closedir(dir);
  framef(c, 'X', "%d", more);
  c->closing = 1;
}

/* 'Q' <path>: its entry (a link as a link). */
static void stat_path(conn_t *c, const char *path) {
  struct stat st;
  if (lstat(path, &st) < 0) return fail_errno(c, errno, path);
  entry_frame(c, base_name(path), path, &st);
  c->closing = 1;
}

/* 'M' "<parents: 0 or 1>\0<path>": a directory made, mode 0755, answered with its entry. */
static void make_dir(conn_t *c, char *payload, size_t n) {
  char *f[2];
  if (!split_fields(payload, n, f, 2)) return fail(c, "malformed mkdir request");
  char *path = f[1];
  if (*f[0] == '1') {
    char *copy = strdup(path);
    int r = mkdirs(copy);
    free(copy);
    if (r < 0) return fail_errno(c, errno, path);
  } else if (mkdir(path, 0755) < 0) return fail_errno(c, errno, path);
  struct stat st;
  if (lstat(path, &st) < 0) return fail_errno(c, errno, path);
  if (!S_ISDIR(st.st_mode)) return fail_errno(c, EEXIST, path);
  entry_frame(c, base_name(path), path, &st);
  c->closing = 1;
}

/* 'B' "<overwrite: 0 or 1>\0<from>\0<to>": renamed, answered with the entry where it went. */
static void move_path(conn_t *c, char *payload, size_t n) {
  char *f[3];
  if (!split_fields(payload, n, f, 3)) return fail(c, "malformed move request");
  const char *from = f[1], *to = f[2];
  int r;
  if (*f[0] == '1') r = rename(from, to);
  else {
    r = renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
    /* A file system without RENAME_NOREPLACE: the check and the rename, apart. */
    if (r < 0 && errno == EINVAL) {
      struct stat st;
      if (lstat(to, &st) == 0) return fail_errno(c, EEXIST, to);
      r = rename(from, to);
    }
  }
  if (r < 0) {
    int e = errno;
    /* Which of the two paths the error is about: the source, unless it is there. */
    struct stat st;
    return fail_errno(c, e, e == ENOENT && lstat(from, &st) == 0 ? to : from);
  }
  struct stat st;
  if (lstat(to, &st) < 0) return fail_errno(c, errno, to);
  entry_frame(c, base_name(to), to, &st);
  c->closing = 1;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path) < 0 ? errno : 0;
}

/* 'U' "<recursive: 0 or 1>\0<path>": removed (a directory's contents too, when recursive), then 'X'. */
static void remove_path(conn_t *c, char *payload, size_t n) {
  char *f[2];
  if (!split_fields(payload, n, f, 2)) return fail(c, "malformed remove request");
  const char *path = f[1];
  struct stat st;
  if (lstat(path, &st) < 0) return fail_errno(c, errno, path);
  if (S_ISDIR(st.st_mode)) {
    if (*f[0] == '1') {
      int e = nftw(path, remove_one, 64, FTW_DEPTH | FTW_PHYS);
      if (e != 0) return fail_errno(c, e > 0 ? e : errno, path);
    } else if (rmdir(path) < 0) return fail_errno(c, errno, path);
  } else if (unlink(path) < 0) return fail_errno(c, errno, path);
  frame(c, 'X', NULL, 0);
  c->closing = 1;
}

/* ---- watch ---- */

/*
 * 'J' "<recursive: 0 or 1>\0<path>": 'Y' once the directory (and, recursive, every directory
 * below it) is watched, then an 'N' "<event> <is dir: 0 or 1>\0<path>\0<to>" for each change:
 * create, modify, delete, move (with <to>) and overflow (changes were lost: list again). 'X'
 * once the directory itself is removed or moved away. Closing the connection ends the watch.
 */
static void watch_event(conn_t *c, const char *event, int is_dir, const char *path, const char *to) {
  char head[32];
  int hn = snprintf(head, sizeof head, "%s %d", event, is_dir);
  size_t pn = strlen(path), tn = to ? strlen(to) : 0;
  size_t total = (size_t)hn + 1 + pn + 1 + tn;
  char *payload = malloc(total);
  if (!payload) abort();
  memcpy(payload, head, (size_t)hn + 1);
  memcpy(payload + hn + 1, path, pn + 1);
  if (tn) memcpy(payload + hn + 1 + pn + 1, to, tn);
  frame(c, 'N', payload, total);
  free(payload);
}

#define WATCH_MASK (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)

/* Follows `path`; 0 when it cannot (the limit, or the kernel's: an overflow event says so once). */
static int watch_dir(conn_t *c, const char *path) {
  if (c->ndirs >= MAX_WATCH_DIRS) return 0;
  int wd = inotify_add_watch(c->ino_fd, path, WATCH_MASK | IN_ONLYDIR | IN_DONT_FOLLOW);
  if (wd < 0) return 0;
  for (size_t i = 0; i < c->ndirs; i++)
    if (c->dirs[i].wd == wd) {
      free(c->dirs[i].path);
      c->dirs[i].path = strdup(path);
      return 1;
    }
  if (c->ndirs == c->capdirs) {
    c->capdirs = c->capdirs ? c->capdirs * 2 : 16;
    c->dirs = realloc(c->dirs, c->capdirs * sizeof *c->dirs);
    if (!c->dirs) abort();
  }
  c->dirs[c->ndirs++] = (watched_t){.wd = wd, .path = strdup(path)};
  return 1;
}

/*
 * Follows every directory below `dir` (already followed). `announce`: each entry found is also
 * a create event, as it was made after `dir` appeared but before its watch was there to see it.
 */
static int watch_tree(conn_t *c, const char *dir, int announce) {
  DIR *d = opendir(dir);
  if (!d) return 1;
  int ok = 1;
  struct dirent *entry;
  while ((entry = readdir(d)) != NULL) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    char *full = join_path(dir, entry->d_name);
    struct stat st;
    if (fstatat(dirfd(d), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      int is_dir = S_ISDIR(st.st_mode);
      if (announce) watch_event(c, "create", is_dir, full, NULL);
      if (is_dir) {
        if (!watch_dir(c, full)) ok = 0;
        else if (!watch_tree(c, full, announce)) ok = 0;
      }
    }
    free(full);
  }
  closedir(d);
  return ok;
}

static const char *watched_path(conn_t *c, int wd) {
  for (size_t i = 0; i < c->ndirs; i++)
    if (c->dirs[i].wd == wd) return c->dirs[i].path;
  return NULL;
}

static void forget_wd(conn_t *c, int wd) {
  for (size_t i = 0; i < c->ndirs; i++)
    if (c->dirs[i].wd == wd) {
      free(c->dirs[i].path);
      c->dirs[i] = c->dirs[--c->ndirs];
      return;
    }
}

static int under(const char *path, const char *dir) {
  size_t n = strlen(dir);
  return strncmp(path, dir, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/* A directory moved within the tree: its watches (it and below) now have paths under `to`. */
static void rename_watched(conn_t *c, const char *from, const char *to) {
  size_t fn = strlen(from);
  for (size_t i = 0; i < c->ndirs; i++) {
    if (!under(c->dirs[i].path, from)) continue;
    char *moved;
    if (asprintf(&moved, "%s%s", to, c->dirs[i].path + fn) < 0) abort();
    free(c->dirs[i].path);
    c->dirs[i].path = moved;
  }
}

/* A directory gone from the tree (moved out of it): its watches and those below are dropped. */
static void unwatch_tree(conn_t *c, const char *dir) {
  for (size_t i = 0; i < c->ndirs;) {
    if (under(c->dirs[i].path, dir) && c->dirs[i].wd != c->root_wd) {
      inotify_rm_watch(c->ino_fd, c->dirs[i].wd);
      free(c->dirs[i].path);
      c->dirs[i] = c->dirs[--c->ndirs];
    } else i++;
  }
}

/* A rename's first half whose second did not come: it left the tree, a removal as seen from here. */
static void flush_move(conn_t *c) {
  if (!c->move_from) return;
  watch_event(c, "delete", c->move_from_dir, c->move_from, NULL);
  if (c->move_from_dir) unwatch_tree(c, c->move_from);
  free(c->move_from);
  c->move_from = NULL;
}

static void start_watch(conn_t *c, char *payload, size_t n) {
  char *f[2];
  if (!split_fields(payload, n, f, 2)) return fail(c, "malformed watch request");
  const char *path = f[1];
  struct stat st;
  if (lstat(path, &st) < 0) return fail_errno(c, errno, path);
  if (!S_ISDIR(st.st_mode)) return fail_errno(c, ENOTDIR, path);
  c->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (c->ino_fd < 0) return fail_errno(c, errno, path);
  c->kind = K_WATCH;
  c->recursive = *f[0] == '1';
  if (!watch_dir(c, path)) return fail_errno(c, errno ? errno : ENOSPC, path);
  c->root_wd = c->dirs[0].wd;
  if (c->recursive && !watch_tree(c, path, 0))
    return fail(c, "ENOSPC %.200s: more than %d directories to watch below it", path, MAX_WATCH_DIRS);
  frame(c, 'Y', NULL, 0);
}

/* Reads what inotify has and turns it into events. */
static void pump_watch(conn_t *c) {
  char data[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
  ssize_t n = read(c->ino_fd, data, sizeof data);
  if (n <= 0) return;
  for (char *p = data; p < data + n;) {
    struct inotify_event *ev = (struct inotify_event *)p;
    p += sizeof *ev + ev->len;
    if (c->closing) return;
    if (ev->mask & IN_Q_OVERFLOW) {
      flush_move(c);
      watch_event(c, "overflow", 1, c->ndirs ? c->dirs[0].path : "/", NULL);
      continue;
    }
    const char *dir = watched_path(c, ev->wd);
    if (!dir) continue;
    if (ev->mask & IN_IGNORED) {
      if (ev->wd == c->root_wd) {
        flush_move(c);
        frame(c, 'X', NULL, 0);
        c->closing = 1;
        return;
      }
      forget_wd(c, ev->wd);
      continue;
    }
    /* The directory itself: its parent's events say what became of it, unless it is the root. */
    if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
      if (ev->wd == c->root_wd) {
        flush_move(c);
        watch_event(c, "delete", 1, dir, NULL);
        frame(c, 'X', NULL, 0);
        c->closing = 1;
        return;
      }
      continue;
    }
    if (ev->len == 0) continue;
    int is_dir = (ev->mask & IN_ISDIR) != 0;
    char *full = join_path(dir, ev->name);
    if (ev->mask & IN_MOVED_FROM) {
      flush_move(c);
      c->move_from = full;
      c->move_from_dir = is_dir;
      c->move_cookie = ev->cookie;
      c->move_at = now_ms();
      continue;
    }
    if (ev->mask & IN_MOVED_TO) {
      if (c->move_from && c->move_cookie == ev->cookie) {
        watch_event(c, "move", is_dir, c->move_from, full);
        if (is_dir && c->recursive) rename_watched(c, c->move_from, full);
        free(c->move_from);
        c->move_from = NULL;
      } else {
        flush_move(c);
        watch_event(c, "create", is_dir, full, NULL);
        if (is_dir && c->recursive && (!watch_dir(c, full) || !watch_tree(c, full, 1)))
          watch_event(c, "overflow", 1, full, NULL);
      }
    } else {
      flush_move(c);
      if (ev->mask & IN_CREATE) {
        watch_event(c, "create", is_dir, full, NULL);
        if (is_dir && c->recursive && (!watch_dir(c, full) || !watch_tree(c, full, 1)))
          watch_event(c, "overflow", 1, full, NULL);
      } else if (ev->mask & IN_MODIFY) watch_event(c, "modify", is_dir, full, NULL);
      else if (ev->mask & IN_DELETE) watch_event(c, "delete", is_dir, full, NULL);
    }
    free(full);
  }
}

/* ---- dial ---- */

static void dial(conn_t *c, const char *port_text) {
  long port = strtol(port_text, NULL, 10);
  if (port < 1 || port > 65535) return fail(c, "invalid port");
  int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return fail(c, "socket: %s", strerror(errno));
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  c->kind = K_DIAL;
  c->peer = s;
  if (connect(s, (struct sockaddr *)&to, sizeof to) < 0 && errno != EINPROGRESS) {
    int e = errno;
    close_fd(&c->peer);
    return fail(c, "127.0.0.1:%ld: %s", port, strerror(e));
  }
  c->connecting = 1;
}

static void dial_connected(conn_t *c) {
  int error = 0;
  socklen_t len = sizeof error;
  getsockopt(c->peer, SOL_SOCKET, SO_ERROR, &error, &len);
  c->connecting = 0;
  if (error) {
    close_fd(&c->peer);
    return fail(c, "connect: %s", strerror(error));
  }
  int one = 1;
  setsockopt(c->peer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  frame(c, 'Y', NULL, 0);
  c->kind = K_RAW;
  /* Bytes the service sent after its request go to the peer first. */
  if (buf_size(&c->in)) buf_push(&c->to_peer, c->in.p + c->in.off, buf_size(&c->in));
  buf_free(&c->in);
}

/* ---- frames from the service ---- */

static void on_frame(conn_t *c, char type, uint8_t *payload, size_t n) {
  switch (c->kind) {
  case K_NEW: {
    char *text = malloc(n + 1);
    if (!text) abort();
    memcpy(text, payload, n);
    text[n] = 0;
    switch (type) {
    case 'S': spawn(c, text, n); break;
    case 'F': read_file(c, text); break;
    case 'W': write_file(c, text, n); break;
    case 'T': dial(c, text); break;
    case 'G': list_dir(c, text, n); break;
    case 'Q': stat_path(c, text); break;
    case 'M': make_dir(c, text, n); break;
    case 'B': move_path(c, text, n); break;
    case 'U': remove_path(c, text, n); break;
    case 'J': start_watch(c, text, n); break;
    case 'V':
      framef(c, 'V', "rbs-supervisor %s", VERSION);
      c->closing = 1;
      break;
    case 'L': c->kind = K_LIFELINE; break;
    default: fail(c, "unknown request '%c'", type);
    }
    free(text);
    return;
  }
  case K_PROC:
    switch (type) {
    case 'I':
      /* Input after the program closed its stdin has nowhere to go: dropped, not kept. */
      if (!c->stdin_close && c->in_fd >= 0) buf_push(&c->stdin_q, payload, n);
      else c->stdin_done += n;
      return;
    case 'C':
      c->stdin_close = 1;
      if (c->pty) buf_push(&c->stdin_q, "\x04", 1), c->stdin_close = 0;
      return;
    case 'K': {
      char text[16] = {0};
      memcpy(text, payload, n < 15 ? n : 15);
      int sig = atoi(text);
      if (sig > 0 && sig < 65) proc_kill(c, sig);
      return;
    }
    case 'Z': {
      char text[32] = {0};
      memcpy(text, payload, n < 31 ? n : 31);
      int cols, rows;
      if (c->pty && sscanf(text, "%d %d", &cols, &rows) == 2) {
        struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
        ioctl(c->out_fd, TIOCSWINSZ, &ws);
      }
      return;
    }
    }
    return;
  case K_WRITE:
    if (c->closing) return;
    if (type == 'D') write_chunk(c, payload, n);
    else if (type == 'C') write_done(c);
    return;
  }
}

static void parse_frames(conn_t *c) {
  while (!c->dead && !c->closing && (c->kind == K_NEW || c->kind == K_PROC || c->kind == K_WRITE)) {
    size_t avail = buf_size(&c->in);
    if (avail < 5) return;
    uint8_t *h = c->in.p + c->in.off;
    size_t n = ((size_t)h[1] << 24) | ((size_t)h[2] << 16) | ((size_t)h[3] << 8) | h[4];
    if (n > MAX_FRAME) return fail(c, "frame too large");
    if (avail < 5 + n) return;
    c->in.off += 5 + n;
    on_frame(c, (char)h[0], h + 5, n);
  }
}

/* ---- the loop ---- */

static int connect_unix(const char *path, int flags) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
  if (fd < 0) return -1;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Keeps `spares` idle connections open to the service (retrying every 100 ms while it refuses). */
static void ensure_spares(void) {
  int idle = 0;
  for (conn_t *c = conns; c; c = c->next)
    if (!c->dead && c->kind == K_NEW && !c->closing && !buf_size(&c->in)) idle++;
  if (idle >= spares || now_ms() < spare_retry_at) return;
  while (idle < spares) {
    int fd = connect_unix(control_path, SOCK_NONBLOCK);
    if (fd < 0) {
      spare_retry_at = now_ms() + 100;
      return;
    }
    conn_new(fd, K_NEW);
    idle++;
  }
}

static void accept_proxy(void) {
  for (;;) {
    int fd = accept4(proxy_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    int up = connect_unix(egress_path, 0);
    if (up < 0) {
      close(fd);
      continue;
    }
    nonblock(up);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn_t *c = conn_new(fd, K_RAW);
    c->peer = up;
  }
}

static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (conn_t *c = conns; c; c = c->next) {
      if (!c->dead && c->kind == K_PROC && c->pid == pid && !c->exited) {
        c->exited = 1;
        c->status = status;
        c->exited_at = now_ms();
      }
    }
  }
}

/* Reads one chunk of a command's output into a frame; 0 at its end. */
static int pump_output(conn_t *c, int *fd, char type) {
  uint8_t data[CHUNK];
  ssize_t n = read(*fd, data, sizeof data);
  if (n > 0) {
    frame(c, type, data, (size_t)n);
    c->output_at = now_ms();
    return 1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 1;
  /* EOF, or EIO from a PTY whose last holder of the terminal is gone. */
  close_fd(fd);
  return 0;
}

static void proc_finish(conn_t *c) {
  int code = -1, sig = 0;
  if (WIFEXITED(c->status)) code = WEXITSTATUS(c->status);
  else if (WIFSIGNALED(c->status)) sig = WTERMSIG(c->status);
  close_fd(&c->out_fd);
  close_fd(&c->err_fd);
  close_fd(&c->in_fd);
  framef(c, 'X', "%d %d", code, sig);
  c->closing = 1;
  c->pid = 0;
}

static int flush_out(conn_t *c) {
  while (buf_size(&c->out)) {
    ssize_t n = send(c->fd, c->out.p + c->out.off, buf_size(&c->out), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return 1;
      return 0;
    }
    c->out.off += (size_t)n;
  }
  return 1;
}

static void raw_io(conn_t *c, short fd_ev, short peer_ev) {
  uint8_t data[CHUNK];
  if ((fd_ev & (POLLIN | POLLHUP | POLLERR)) && !c->fd_eof && buf_size(&c->to_peer) < HIGH_WATER) {
    ssize_t n = recv(c->fd, data, sizeof data, 0);
    if (n > 0) buf_push(&c->to_peer, data, (size_t)n);
    else if (n == 0 || (errno != EAGAIN && errno != EINTR)) c->fd_eof = 1;
  }
  if ((peer_ev & (POLLIN | POLLHUP | POLLERR)) && !c->peer_eof && buf_size(&c->out) < HIGH_WATER) {
    ssize_t n = recv(c->peer, data, sizeof data, 0);
    if (n > 0) buf_push(&c->out, data, (size_t)n);
    else if (n == 0 || (errno != EAGAIN && errno != EINTR)) c->peer_eof = 1;
  }
  while (buf_size(&c->to_peer)) {
    ssize_t n = send(c->peer, c->to_peer.p + c->to_peer.off, buf_size(&c->to_peer), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno != EAGAIN && errno != EINTR) c->peer_eof = c->fd_eof = 1, buf_free(&c->to_peer);
      break;
    }
    c->to_peer.off += (size_t)n;
  }
  if (c->fd_eof && !buf_size(&c->to_peer) && !c->peer_shut) shutdown(c->peer, SHUT_WR), c->peer_shut = 1;
  if (!flush_out(c)) c->fd_eof = c->peer_eof = 1, buf_free(&c->out);
  if (c->peer_eof && !buf_size(&c->out) && !c->fd_shut) shutdown(c->fd, SHUT_WR), c->fd_shut = 1;
  if (c->fd_eof && c->peer_eof && !buf_size(&c->out) && !buf_size(&c->to_peer)) conn_release(c);
}

static void serve(void) {
  struct pollfd *fds = NULL;
  conn_t **owner = NULL;
  short *role = NULL;
  size_t cap = 0;
  for (;;) {
    ensure_spares();
    size_t count = 0, need = 3;
    for (conn_t *c = conns; c; c = c->next) need += 6;
    if (need > cap) {
      cap = need * 2;
      fds = realloc(fds, cap * sizeof *fds);
      owner = realloc(owner, cap * sizeof *owner);
      role = realloc(role, cap * sizeof *role);
      if (!fds || !owner || !role) abort();
    }
#define WATCH(fd_, ev_, c_, r_) (fds[count] = (struct pollfd){.fd = (fd_), .events = (ev_)}, owner[count] = (c_), role[count] = (r_), count++)
    WATCH(sig_fd, POLLIN, NULL, 0);
    if (proxy_fd >= 0) WATCH(proxy_fd, POLLIN, NULL, 2);
    int timeout = spare_retry_at > now_ms() ? 100 : -1;
    for (conn_t *c = conns; c; c = c->next) {
      if (c->dead) continue;
      short ev = 0;
      int room = buf_size(&c->out) < HIGH_WATER;
      /*
       * A command's pipes go unread while its output waits for the service: that is not quiet, so
       * the drain after its exit counts from when they are read again (else a slow reader of a
       * flood would lose its tail to the drain's deadline).
       */
      if (c->kind == K_PROC && !room) c->output_at = now_ms();
      if (c->kind == K_RAW || c->kind == K_DIAL) {
        if (c->connecting) {
          WATCH(c->peer, POLLOUT, c, 10);
          continue;
        }
        if (!c->fd_eof && buf_size(&c->to_peer) < HIGH_WATER) ev |= POLLIN;
        if (buf_size(&c->out)) ev |= POLLOUT;
        WATCH(c->fd, ev, c, 11);
        short pev = 0;
        if (!c->peer_eof && room) pev |= POLLIN;
        if (buf_size(&c->to_peer)) pev |= POLLOUT;
        WATCH(c->peer, pev, c, 12);
        continue;
      }
      if (!c->closing || c->lingering_since) ev |= POLLIN;
      if (buf_size(&c->out)) ev |= POLLOUT;
      WATCH(c->fd, ev, c, 20);
      if (c->kind == K_PROC) {
        if (c->out_fd >= 0 && room) WATCH(c->out_fd, POLLIN, c, 21);
        if (c->err_fd >= 0 && room) WATCH(c->err_fd, POLLIN, c, 22);
        if (c->in_fd >= 0 && buf_size(&c->stdin_q)) WATCH(c->in_fd, POLLOUT, c, 23);
        if (c->exited) timeout = DRAIN_MS / 4;
      }
      if (c->lingering_since) {
        timeout = timeout < 0 || timeout > 1000 ? 1000 : timeout;
      }
      if (c->kind == K_READ && c->file_fd >= 0 && room) timeout = 0;
      if (c->kind == K_WATCH && c->ino_fd >= 0 && room && !c->closing) WATCH(c->ino_fd, POLLIN, c, 24);
      if (c->kind == K_WATCH && c->move_from) timeout = timeout < 0 || timeout > MOVE_PAIR_MS ? MOVE_PAIR_MS : timeout;
    }
    int ready = poll(fds, count, timeout);
    if (ready < 0 && errno != EINTR) abort();
    for (size_t i = 0; i < count && ready > 0; i++) {
      short ev = fds[i].revents;
      if (!ev) continue;
      conn_t *c = owner[i];
      if (c && c->dead) continue;
      switch (role[i]) {
      case 0: {
        struct signalfd_siginfo info;
        while (read(sig_fd, &info, sizeof info) == sizeof info) {
          if (info.ssi_signo == SIGCHLD) reap();
          else {
            /* The container is stopping: take every process with us. */
            kill(-1, SIGKILL);
            _exit(0);
          }
        }
        break;
      }
      case 2: accept_proxy(); break;
      case 10: dial_connected(c); break;
      case 11: raw_io(c, ev, 0); break;
      case 12: raw_io(c, 0, ev); break;
      case 20:
        if (ev & (POLLIN | POLLHUP | POLLERR)) {
          uint8_t data[CHUNK];
          ssize_t n = recv(c->fd, data, sizeof data, 0);
          if (n > 0) {
            if (!c->lingering_since) {
              buf_push(&c->in, data, (size_t)n);
              parse_frames(c);
            }
          } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            /* The service is gone (only its death closes the lifeline): nothing here outlives it. */
            if (c->kind == K_LIFELINE) {
              /* As the sandbox's init (pid 1 of its own pid namespace), -1 is every other process of it. */
              if (getpid() == 1) kill(-1, SIGKILL);
              _exit(0);
            }
            /* The service hung up: a command it left running dies with its process group. */
            conn_release(c);
            continue;
          }
        }
        if ((ev & POLLOUT) && !flush_out(c)) conn_release(c);
        break;
      case 21: pump_output(c, &c->out_fd, 'O'); break;
      case 24: pump_watch(c); break;
      case 22: pump_output(c, &c->err_fd, 'R'); break;
      case 23:
        while (buf_size(&c->stdin_q)) {
          ssize_t n = write(c->in_fd, c->stdin_q.p + c->stdin_q.off, buf_size(&c->stdin_q));
          if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
              c->stdin_done += buf_size(&c->stdin_q), buf_free(&c->stdin_q), close_fd(&c->in_fd);
            break;
          }
          c->stdin_q.off += (size_t)n;
          c->stdin_done += (size_t)n;
        }
        break;
      }
    }
    /* Work that does not wait on a descriptor. */
    for (conn_t *c = conns; c; c = c->next) {
      if (c->dead) continue;
      if (c->kind == K_PROC && c->stdin_done > 0 && !c->closing) {
        framef(c, 'A', "%zu", c->stdin_done);
        c->stdin_done = 0;
      }
      if (c->kind == K_PROC && c->in_fd >= 0 && c->stdin_close && !buf_size(&c->stdin_q) && !c->pty)
        close_fd(&c->in_fd);
      if (c->kind == K_PROC && c->exited && c->pid > 0) {
        /* All output read, or none for a while though there was room for it (a background child holds the pipe). */
        int drained = c->out_fd < 0 && c->err_fd < 0;
        long long quiet_since = c->output_at > c->exited_at ? c->output_at : c->exited_at;
        if (drained || (buf_size(&c->out) < HIGH_WATER && now_ms() - quiet_since >= DRAIN_MS)) proc_finish(c);
      }
      if (c->kind == K_WATCH && c->move_from && !c->closing && now_ms() - c->move_at >= MOVE_PAIR_MS) flush_move(c);
      if (c->kind == K_READ && c->file_fd >= 0 && buf_size(&c->out) < HIGH_WATER) {
        uint8_t data[CHUNK];
        ssize_t n = read(c->file_fd, data, sizeof data);
        if (n > 0) frame(c, 'D', data, (size_t)n);
        else if (n == 0) {
          close_fd(&c->file_fd);
          frame(c, 'X', NULL, 0);
          c->closing = 1;
        } else if (errno != EINTR) {
          close_fd(&c->file_fd);
          fail(c, "read: %s", strerror(errno));
        }
      }
      if (buf_size(&c->out) && c->kind != K_RAW && !flush_out(c)) conn_release(c);
      /*
       * Closing a socket with unread input resets it, and a reset makes the service's kernel drop
       * what it has not read yet (the last output, the exit). So shut it for writing, then wait
       * for the service to hang up (it does on the last frame), reading what it still sends.
       */
      if (!c->dead && c->closing && !buf_size(&c->out) && c->kind != K_RAW && !c->lingering_since) {
        shutdown(c->fd, SHUT_WR);
        c->lingering_since = now_ms();
      }
      if (!c->dead && c->lingering_since && now_ms() - c->lingering_since > LINGER_MS) conn_release(c);
    }
    /* Unlink released connections. */
    for (conn_t **p = &conns; *p;) {
      if ((*p)->dead) {
        conn_t *gone = *p;
        *p = gone->next;
        free(gone);
      } else p = &(*p)->next;
    }
  }
}

static int listen_proxy(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 128) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int main(int argc, char **argv) {
  int proxy_port = 3128;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--control") == 0) control_path = argv[i + 1];
    else if (strcmp(argv[i], "--egress") == 0) egress_path = argv[i + 1];
    else if (strcmp(argv[i], "--proxy-port") == 0) proxy_port = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--spares") == 0) spares = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 1;
  }
  debug = getenv("RBS_SUPERVISOR_DEBUG") != NULL;
  signal(SIGPIPE, SIG_IGN);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  sig_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sig_fd < 0) {
    perror("signalfd");
    return 1;
  }
  if (proxy_port > 0) {
    proxy_fd = listen_proxy(proxy_port);
    if (proxy_fd < 0) fprintf(stderr, "rbs-supervisor: no egress forwarder on port %d: %s\n", proxy_port, strerror(errno));
  }
  serve();
  return 0;
}
