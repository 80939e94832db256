// rbs-spawner: starts the service's browsers from a small resident process,
// so that the service (a few hundred MB of heap) never forks itself: a fork
// copies the forking process's page tables, and then every page it writes
// faults once. Started once per service process, with the service's pid as
// its one argument.
//
// Nothing it started outlives the service: when its stdin closes or its
// parent dies (the service gone, by any signal, SIGKILL included), it kills
// the process group of every program it started and exits. Each program is
// also killed should this process itself die (a parent-death signal set in
// the child; rbs-cell sets it in each process of the cell).
//
// stdin, requests: a 4-byte little-endian length, then that many bytes of
// NUL-terminated fields: ID FILE ARGC ARGS... ENVC ENV... (the counts as
// decimal text). Each program runs in a session of its own (its pid is its
// process group), with stdin and stdout on /dev/null and stderr on a pipe
// this process reads.
//
// stdout, one line per event:
//   spawned ID PID         the program is exec'd
//   failed ID ERRNO        it could not be (fork or exec failed)
//   endpoint PID URL       its stderr said "DevTools listening on URL"
//   ended PID TEXT         it exited, or its stderr closed, without that
//                          line; TEXT: the last 500 bytes it wrote, newlines
//                          as spaces
// A request it cannot take (too large) is answered "failed ? E2BIG".
//   exit PID CODE SIGNAL   it is reaped (-1 for whichever does not apply)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CHILDREN 1024
// Larger than one read: the DevTools line, split across two reads, is always whole in the tail.
#define TAIL 16384
#define READ 8192
#define MAX_REQUEST (4 * 1024 * 1024)
#define NEEDLE "DevTools listening on "

// A slot is free when both its pid and its fd are gone: a reaped program's stderr is still read to
// its end, since the rest of its process group may write there until it is killed.
struct child {
  pid_t pid;   // 0 once reaped
  pid_t group; // the program's process group (its pid), kept after it is reaped
  int fd;    // stderr's read end, -1 once closed
  int found;
  size_t used;
  char tail[TAIL];
};

static struct child children[MAX_CHILDREN];
static int sigchld_pipe[2];
static volatile sig_atomic_t orphaned = 0;
static pid_t self;

static void on_sigchld(int signo) {
  (void)signo;
  int saved = errno;
  char byte = 0;
  if (write(sigchld_pipe[1], &byte, 1) < 0) {
    // full: a wake-up is pending already
  }
  errno = saved;
}

/** The service died (the parent-death signal): the main loop kills every group and exits. */
static void on_parent_death(int signo) {
  orphaned = 1;
  on_sigchld(signo);
}

/**
 * Kills every group a program of this process leads or led while any of it
 * may live (its stderr still open: the rest of the group may hold it).
 */
static void kill_all(void) {
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (children[i].pid != 0 || children[i].fd >= 0) kill(-children[i].group, SIGKILL);
}

static void say(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *format, ...) {
  va_list args;
  va_start(args, format);
  vfprintf(stdout, format, args);
  va_end(args);
  fflush(stdout);
}

static int read_full(int fd, void *buffer, size_t length) {
  size_t done = 0;
  while (done < length) {
    ssize_t n = read(fd, (char *)buffer + done, length - done);
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    done += (size_t)n;
  }
  return 1;
}

/** The next NUL-terminated field of a request, or NULL past its end. */
static char *field(char **cursor, char *end) {
  if (*cursor >= end) return NULL;
  char *start = *cursor;
  char *nul = memchr(start, '\0', (size_t)(end - start));
  if (nul == NULL) return NULL;
  *cursor = nul + 1;
  return start;
}

static void spawn_request(char *request, size_t length) {
  char *cursor = request, *end = request + length;
  char *id = field(&cursor, end);
  char *file = field(&cursor, end);
  char *count = field(&cursor, end);
  if (id == NULL || file == NULL || count == NULL) {
    say("failed %s %d\n", id == NULL ? "?" : id, EINVAL);
    return;
  }
  long argc = strtol(count, NULL, 10);
  if (argc < 1 || argc > 4096) {
    say("failed %s %d\n", id, EINVAL);
    return;
  }
  char **argv = calloc((size_t)argc + 1, sizeof(char *));
  for (long i = 0; i < argc; i++) argv[i] = field(&cursor, end);
  char *env_count = field(&cursor, end);
  long envc = env_count == NULL ? -1 : strtol(env_count, NULL, 10);
  char **envp = envc < 0 || envc > 4096 ? NULL : calloc((size_t)envc + 1, sizeof(char *));
  int complete = argv[argc - 1] != NULL && envp != NULL;
  for (long i = 0; complete && i < envc; i++) complete = (envp[i] = field(&cursor, end)) != NULL;
  int slot = -1;
  for (int i = 0; i < MAX_CHILDREN && slot < 0; i++)
    if (children[i].pid == 0 && children[i].fd < 0) slot = i;
  int err[2] = {-1, -1}, out[2] = {-1, -1};
  if (!complete || slot < 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    say("failed %s %d\n", id, complete ? (slot < 0 ? EAGAIN : errno) : EINVAL);
    goto done;
  }
  pid_t pid = fork();
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    setsid();
    // Dies with this process; and if this process died before the signal was set, never runs.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != self) goto child_failed;
    // Every other descriptor of this process is close-on-exec: nothing else reaches the program.
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(out[1], 2) < 0) goto child_failed;
    execve(file, argv, envp);
  child_failed:;
    int code = errno;
    if (write(err[1], &code, sizeof code) < 0) {
      // the parent reads a failure as EOF without a code
    }
    _exit(127);
  }
  close(err[1]);
  close(out[1]);
  err[1] = out[1] = -1;
  if (pid < 0) {
    say("failed %s %d\n", id, errno);
    close(out[0]);
    goto done;
  }
  int code = 0;
  ssize_t n;
  do n = read(err[0], &code, sizeof code);
  while (n < 0 && errno == EINTR);
  if (n == (ssize_t)sizeof code) {
    // exec failed: the child is gone at once; reaped here, so never announced.
    close(out[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    say("failed %s %d\n", id, code);
    goto done;
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  children[slot] = (struct child){.pid = pid, .group = pid, .fd = out[0], .found = 0, .used = 0};
  say("spawned %s %d\n", id, (int)pid);
done:
  if (err[0] >= 0) close(err[0]);
  if (err[1] >= 0) close(err[1]);
  if (out[1] >= 0) close(out[1]);
  free(argv);
  free(envp);
}

/** Says the endpoint once the DevTools line is whole (its end: a newline, or the end of the output). */
static void find_endpoint(struct child *c, int at_end) {
  if (c->found) return;
  char *at = memmem(c->tail, c->used, NEEDLE, strlen(NEEDLE));
  if (at == NULL) return;
  char *url = at + strlen(NEEDLE);
  char *eol = memchr(url, '\n', (size_t)(c->tail + c->used - url));
  if (eol == NULL && !at_end) return;
  int length = (int)((eol == NULL ? c->tail + c->used : eol) - url);
  if (length > 0 && url[length - 1] == '\r') length--;
  if (length == 0) return;
  c->found = 1;
  say("endpoint %d %.*s\n", (int)c->pid, length, url);
}

/** Without the endpoint (its stderr closed, or it is gone): says what it wrote last. */
static void tell_ended(struct child *c) {
  if (c->found) return;
  c->found = 1;
  size_t from = c->used > 500 ? c->used - 500 : 0;
  for (size_t i = from; i < c->used; i++)
    if (c->tail[i] == '\n' || c->tail[i] == '\r' || c->tail[i] == '\0') c->tail[i] = ' ';
  say("ended %d %.*s\n", (int)c->pid, (int)(c->used - from), c->tail + from);
}

/** Reads what a child's group wrote on stderr, until it would block or ends: the endpoint once, then drains. */
static void drain(struct child *c) {
  char buffer[READ];
  for (;;) {
    ssize_t n = read(c->fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      if (c->pid != 0) {
        find_endpoint(c, 1);
        tell_ended(c);
      }
      close(c->fd);
      c->fd = -1;
      return;
    }
    if (c->found) continue;
    // Keep the last TAIL bytes: the line is early, and an error's text is at the end.
    if (c->used + (size_t)n > TAIL) {
      size_t drop = c->used + (size_t)n - TAIL;
      memmove(c->tail, c->tail + drop, c->used - drop);
      c->used -= drop;
    }
    memcpy(c->tail + c->used, buffer, (size_t)n);
    c->used += (size_t)n;
    find_endpoint(c, 0);
  }
}

static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (int i = 0; i < MAX_CHILDREN; i++) {
      struct child *c = &children[i];
      if (c->pid != pid) continue;
      // What it wrote before it died is read before its exit is told.
      if (c->fd >= 0) drain(c);
      tell_ended(c);
      c->pid = 0;
      say("exit %d %d %d\n", (int)pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
          WIFSIGNALED(status) ? WTERMSIG(status) : -1);
      break;
    }
  }
}

/** Reads and drops `length` bytes of a request it cannot take. */
static int skip(uint32_t length) {
  char sink[4096];
  while (length > 0) {
    uint32_t part = length < sizeof sink ? length : (uint32_t)sizeof sink;
    if (read_full(0, sink, part) <= 0) return 0;
    length -= part;
  }
  return 1;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  self = getpid();
  // Whatever the service inherited from its own parent reaches no browser.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  for (int i = 0; i < MAX_CHILDREN; i++) children[i].fd = -1;
  if (pipe2(sigchld_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  struct sigaction action = {0};
  action.sa_handler = on_sigchld;
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &action, NULL);
  struct sigaction death = {0};
  death.sa_handler = on_parent_death;
  death.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &death, NULL);
  // The service's death by any signal reaches this process as SIGTERM; if it is gone already, stop now.
  if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0) return 1;
  if (argc > 1 && getppid() != (pid_t)strtol(argv[1], NULL, 10)) return 0;
  static struct pollfd fds[MAX_CHILDREN + 2];
  static int owners[MAX_CHILDREN + 2];
  for (;;) {
    int count = 0;
    fds[count++] = (struct pollfd){.fd = 0, .events = POLLIN};
    fds[count++] = (struct pollfd){.fd = sigchld_pipe[0], .events = POLLIN};
    for (int i = 0; i < MAX_CHILDREN; i++)
      if (children[i].fd >= 0) {
        owners[count] = i;
        fds[count++] = (struct pollfd){.fd = children[i].fd, .events = POLLIN};
      }
    if (poll(fds, (nfds_t)count, -1) < 0) {
      if (errno == EINTR) continue;
      kill_all();
      return 1;
    }
    for (int i = 2; i < count; i++)
      if (fds[i].revents != 0 && children[owners[i]].fd == fds[i].fd) drain(&children[owners[i]]);
    if (fds[1].revents != 0) {
      char sink[64];
      while (read(sigchld_pipe[0], sink, sizeof sink) > 0) {
      }
      reap();
    }
    if (orphaned) {
      kill_all();
      return 0;
    }
    if (fds[0].revents != 0) {
      uint8_t header[4];
      int got = read_full(0, header, sizeof header);
      if (got <= 0) { // the service is gone
        kill_all();
        return 0;
      }
      uint32_t length = (uint32_t)header[0] | (uint32_t)header[1] << 8 | (uint32_t)header[2] << 16 |
                        (uint32_t)header[3] << 24;
      char *request = length > MAX_REQUEST ? NULL : malloc(length);
      if (request == NULL) {
        if (!skip(length)) {
          kill_all();
          return 0;
        }
        say("failed ? %d\n", E2BIG);
        continue;
      }
      if (read_full(0, request, length) <= 0) {
        kill_all();
        return 0;
      }
      spawn_request(request, length);
      free(request);
    }
  }
}
