// rbs-jail-exec: puts itself in a browser's jail and execs the browser, in
// one exec instead of four (sh joining the cgroups, setpriv, prlimit, nice):
// each of those is a dynamically linked program loaded and run per launch.
//
//   rbs-jail-exec UID NOFILE DATA NICE COUNT PROCS... -- FILE ARGS...
//
// UID: the browser's own uid (also its gid), or -1 to stay the caller's.
// NOFILE: RLIMIT_NOFILE, soft and hard. DATA: RLIMIT_DATA in bytes, 0 for
// none (a cgroup limits memory instead). NICE: added to the niceness.
// COUNT PROCS...: the cgroup.procs files to join first, so every process the
// browser ever forks is inside. With a UID: no supplementary groups, then the
// gid, then the uid, and no_new_privs. FILE ARGS...: exec'd with the caller's
// environment. Any failure: a line on stderr and exit status 111, before
// anything of the browser runs. The browser is killed when the process that
// started this one (the service's launcher) dies: a change of uid clears a
// parent-death signal, so it is set again here, after the change.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "rbs-jail-exec: %s%s%s: %s\n", what, detail ? " " : "", detail ? detail : "", strerror(errno));
  exit(111);
}

static long number(const char *text, const char *what) {
  char *end;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (errno != 0 || *text == '\0' || *end != '\0') {
    errno = EINVAL;
    fail(what, text);
  }
  return value;
}

int main(int argc, char **argv) {
  if (argc < 8) {
    fprintf(stderr, "usage: rbs-jail-exec UID NOFILE DATA NICE COUNT PROCS... -- FILE ARGS...\n");
    return 111;
  }
  pid_t parent = getppid();
  long uid = number(argv[1], "uid");
  long nofile = number(argv[2], "nofile");
  long data = number(argv[3], "data");
  long nice_by = number(argv[4], "nice");
  long count = number(argv[5], "count");
  if (count < 0 || 6 + count >= argc || strcmp(argv[6 + count], "--") != 0 || 7 + count >= argc) {
    errno = EINVAL;
    fail("arguments", NULL);
  }

  char pid[32];
  int length = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  for (long i = 0; i < count; i++) {
    const char *procs = argv[6 + i];
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail("open", procs);
    if (write(fd, pid, (size_t)length) != length) fail("join", procs);
    close(fd);
  }

  struct rlimit files = {(rlim_t)nofile, (rlim_t)nofile};
  if (setrlimit(RLIMIT_NOFILE, &files) != 0) fail("setrlimit", "RLIMIT_NOFILE");
  if (data > 0) {
    struct rlimit memory = {(rlim_t)data, (rlim_t)data};
    if (setrlimit(RLIMIT_DATA, &memory) != 0) fail("setrlimit", "RLIMIT_DATA");
  }
  errno = 0;
  int current = getpriority(PRIO_PROCESS, 0);
  if (errno != 0) fail("getpriority", NULL);
  if (setpriority(PRIO_PROCESS, 0, current + (int)nice_by) != 0) fail("setpriority", NULL);

  if (uid >= 0) {
    if (setgroups(0, NULL) != 0) fail("setgroups", NULL);
    if (setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) != 0) fail("setresgid", argv[1]);
    if (setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0) fail("setresuid", argv[1]);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs", NULL);
  }
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail("pdeathsig", NULL);
  // The launcher died before the signal was set: nothing would ever end this browser.
  if (getppid() != parent) {
    errno = ESRCH;
    fail("parent", NULL);
  }

  char **command = argv + 7 + count;
  execv(command[0], command);
  fail("exec", command[0]);
  return 111;
}
