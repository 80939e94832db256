// rbs-cell: starts a browser in a cell of its own. Whatever the browser (or a
// CDP client driving it) asks for, it can reach nothing but the ports this
// process forwards for it, and read nothing but what its view shows it.
//
//   rbs-cell [OPTIONS] -- FILE ARGS...
//   rbs-cell --probe     whether a cell can be made here (exit 0, or 111 and why on stderr)
//
//   --uid N          as root: the browser runs as uid N (and gid N), no
//                    supplementary groups. Not as another user: the browser
//                    then runs as the caller, in a user namespace of its own.
//   --nofile N       RLIMIT_NOFILE, soft and hard
//   --data N         RLIMIT_DATA in bytes (0: none; a cgroup limits memory)
//   --nice N         added to the niceness
//   --cgroup PROCS   a cgroup.procs file to join first (repeatable)
//   --cell DIR       the cell's dir on the host: DIR/root is the view's mount
//                    point (an empty dir), DIR/control.sock and
//                    DIR/devtools.sock are made here, and the browser's
//                    egress goes to DIR/egress-PORT.sock
//   --devtools PORT  DIR/devtools.sock reaches 127.0.0.1:PORT in the cell
//   --forward PORT   127.0.0.1:PORT in the cell reaches DIR/egress-PORT.sock
//                    (repeatable; more through the control socket)
//   --ro PATH        shown read-only at the same path (a dir, a file or a link)
//   --rw PATH        shown writable at the same path
//   --bind SRC DST   SRC shown writable at DST
//   --hide PATH      an empty dir none can read over PATH (after the binds above it)
//   --downloads DIR  the control's `show NAME` shows DIR/NAME writable at the same path
//   --tmp-size N     the view's private /tmp (a tmpfs) holds N bytes at most (0: the tmpfs default)
//
// The process tree: this process (in the host's PID namespace, in the cell's
// network, mount and IPC namespaces; as another user, in its user namespace
// too) waits for the cell's init, the first process of the cell's own PID
// namespace. The init builds the view (a tmpfs root with the binds above,
// its own /dev, /proc and /sys) in its mount namespace, listens on the
// sockets, and forks the browser, which enters a mount namespace of its own,
// a slave of the init's, pivots into the view (read-only but for the
// writable binds) and execs FILE with the caller's environment. The init then
// relays bytes (splice) between its listeners and their far ends until the
// browser exits, then exits with its status, which ends every process left in
// the cell. A mount the init makes later in the view (`show`) reaches the
// browser's namespace by propagation; nothing of the browser's reaches the
// init's.
//
// The control socket takes a line and answers one ("ok", or "error TEXT"):
//   forward PORT   as --forward, for a port more (a browser context's proxy)
//   show NAME      bind DIR/NAME of --downloads (a real dir, not a link) at
//                  the same path in the view
//
// SIGTERM to this process ends the cell; this process exits once nothing of it is left.
// Any failure before the browser runs: a line on stderr and exit status 111.
// Everything is killed when the process that started this one (the service's
// launcher) dies: each process of it holds a parent-death signal.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <grp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_VIEWS 256
#define MAX_PORTS 1024
#define MAX_CGROUPS 16
#define LINE 512

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
struct mount_attr {
  uint64_t attr_set;
  uint64_t attr_clr;
  uint64_t propagation;
  uint64_t userns_fd;
};
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

enum { V_RO, V_RW, V_BIND, V_HIDE };
struct view {
  int kind;
  const char *src;
  const char *dst;
};

static struct view views[MAX_VIEWS];
static int nviews;
static int ports[MAX_PORTS];
static int nports;
static const char *cgroups[MAX_CGROUPS];
static int ncgroups;
static const char *cell_dir;
static const char *downloads_dir;
static char root[PATH_MAX];
static int devtools_port = -1;
static long browser_uid = -1;
static long long tmp_bytes;

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "rbs-cell: %s%s%s: %s\n", what, detail ? " " : "", detail ? detail : "", strerror(errno));
  exit(111);
}

static void usage(const char *why) {
  fprintf(stderr, "rbs-cell: %s\nusage: rbs-cell [OPTIONS] -- FILE ARGS...\n", why);
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

static int port_of(const char *text) {
  long port = number(text, "port");
  if (port < 1 || port > 65535) {
    errno = EINVAL;
    fail("port", text);
  }
  return (int)port;
}

static void add_view(int kind, const char *src, const char *dst) {
  if (nviews == MAX_VIEWS) usage("too many views");
  if (src[0] != '/' || dst[0] != '/') usage("view paths must be absolute");
  views[nviews++] = (struct view){kind, src, dst};
}

static void add_port(int port) {
  for (int i = 0; i < nports; i++)
    if (ports[i] == port) return;
  if (nports == MAX_PORTS) usage("too many forwarded ports");
  ports[nports++] = port;
}

/** `root` + `path`: where `path` of the view is in the init's mount namespace. */
static void in_root(char *out, const char *path) {
  if (snprintf(out, PATH_MAX, "%s%s", root, path) >= PATH_MAX) {
    errno = ENAMETOOLONG;
    fail("path", path);
  }
}

/** mkdir -p, each dir made with `mode` (those there already are kept as they are). */
static void mkdirs(const char *path, mode_t mode) {
  char buffer[PATH_MAX];
  if (snprintf(buffer, sizeof buffer, "%s", path) >= (int)sizeof buffer) {
    errno = ENAMETOOLONG;
    fail("path", path);
  }
  for (char *slash = buffer + 1;; slash++) {
    if (*slash == '/' || *slash == '\0') {
      char saved = *slash;
      *slash = '\0';
      if (mkdir(buffer, mode) != 0 && errno != EEXIST) fail("mkdir", buffer);
      *slash = saved;
      if (saved == '\0') break;
    }
  }
}

static void parent_dirs(const char *path) {
  char buffer[PATH_MAX];
  snprintf(buffer, sizeof buffer, "%s", path);
  char *slash = strrchr(buffer, '/');
  if (slash != NULL && slash != buffer) {
    *slash = '\0';
    mkdirs(buffer, 0755);
  }
}

static int mount_setattr_(const char *path, unsigned int flags, uint64_t set) {
  struct mount_attr attr = {.attr_set = set};
  return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &attr, sizeof attr);
}

/**
 * Shows host `src` at `dst` (a path inside the root): a link is made again as
 * the same link, a dir or a file is bound (with whatever is mounted below it).
 */
static void show_at(const char *src, const char *dst, int writable) {
  struct stat st;
  if (lstat(src, &st) != 0) fail("view", src);
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlink(src, target, sizeof target - 1);
    if (n < 0) fail("readlink", src);
    target[n] = '\0';
    parent_dirs(dst);
    if (symlink(target, dst) != 0 && errno != EEXIST) fail("symlink", dst);
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    mkdirs(dst, 0755);
  } else {
    parent_dirs(dst);
    int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) fail("create", dst);
    if (fd >= 0) close(fd);
  }
  if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0) fail("bind", src);
  uint64_t attrs = MOUNT_ATTR_NOSUID | (writable ? MOUNT_ATTR_NODEV : MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV);
  // A device node keeps its device: /dev's own entries are bound apart (see make_dev).
  if (mount_setattr_(dst, AT_RECURSIVE, attrs) != 0) fail("mount_setattr", dst);
}

static void make_dev(void) {
  char dev[PATH_MAX], path[PATH_MAX + 64];
  in_root(dev, "/dev");
  mkdirs(dev, 0755);
  if (mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") != 0) fail("mount", dev);
  static const char *devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
  for (size_t i = 0; i < sizeof devices / sizeof *devices; i++) {
    char host[64];
    snprintf(host, sizeof host, "/dev/%s", devices[i]);
    snprintf(path, sizeof path, "%s/%s", dev, devices[i]);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) fail("create", path);
    close(fd);
    if (mount(host, path, NULL, MS_BIND, NULL) != 0) fail("bind", host);
    if (mount_setattr_(path, 0, MOUNT_ATTR_NOSUID) != 0) fail("mount_setattr", path);
  }
  static const char *links[][2] = {{"fd", "/proc/self/fd"},
                                   {"stdin", "/proc/self/fd/0"},
                                   {"stdout", "/proc/self/fd/1"},
                                   {"stderr", "/proc/self/fd/2"}};
  for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
    snprintf(path, sizeof path, "%s/%s", dev, links[i][0]);
    if (symlink(links[i][1], path) != 0) fail("symlink", path);
  }
  snprintf(path, sizeof path, "%s/shm", dev);
  mkdirs(path, 01777);
  if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m") != 0) fail("mount", path);
}

/** The view: a tmpfs root, /dev, /proc, /sys, then the binds in the order given. */
static void make_view(void) {
  if (snprintf(root, sizeof root, "%s/root", cell_dir) >= (int)sizeof root) {
    errno = ENAMETOOLONG;
    fail("path", cell_dir);
  }
  // Nothing of this namespace's mounts reaches the host's, nor the host's this one.
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) fail("mount", "/ private");
  if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") != 0) fail("mount", root);
  // Shared, so what `show` mounts here later reaches the browser's namespace (a slave of this one).
  if (mount(NULL, root, NULL, MS_SHARED, NULL) != 0) fail("mount", "root shared");
  make_dev();
  char path[PATH_MAX];
  in_root(path, "/proc");
  mkdirs(path, 0555);
  if (mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) fail("mount", path);
  in_root(path, "/sys");
  mkdirs(path, 0555);
  // This namespace's own sysfs (its network devices alone), read-only. Chromium reads CPU counts here.
  if (mount("sysfs", path, "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL) != 0)
    fail("mount", path);
  in_root(path, "/tmp");
  mkdirs(path, 01777);
  // A private /tmp (TMPDIR): gone with the cell, however it ends; what is written there is charged
  // to the browser's memory.
  char options[64];
  if (tmp_bytes > 0)
    snprintf(options, sizeof options, "mode=1777,size=%lld", tmp_bytes);
  else
    snprintf(options, sizeof options, "mode=1777");
  if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) fail("mount", path);
  for (int i = 0; i < nviews; i++) {
    char dst[PATH_MAX];
    in_root(dst, views[i].dst);
    switch (views[i].kind) {
      case V_RO:
        show_at(views[i].src, dst, 0);
        break;
      case V_RW:
      case V_BIND:
        show_at(views[i].src, dst, 1);
        break;
      case V_HIDE: {
        struct stat st;
        if (lstat(dst, &st) != 0) break;  // not in the view: nothing to hide
        if (!S_ISDIR(st.st_mode)) {
          errno = ENOTDIR;
          fail("hide", views[i].dst);
        }
        if (mount("tmpfs", dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000,size=4k") != 0)
          fail("hide", views[i].dst);
        break;
      }
    }
  }
}

static void loopback_up(void) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket", NULL);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strcpy(ifr.ifr_name, "lo");
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) fail("ioctl", "lo");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) fail("up", "lo");
  close(fd);
}

static int unix_address(struct sockaddr_un *address, const char *path) {
  memset(address, 0, sizeof *address);
  address->sun_family = AF_UNIX;
  if (strlen(path) >= sizeof address->sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy(address->sun_path, path);
  return 0;
}

static int listen_unix(const char *name) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", cell_dir, name);
  struct sockaddr_un address;
  if (unix_address(&address, path) != 0) fail("socket path", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket", path);
  unlink(path);
  if (bind(fd, (struct sockaddr *)&address, sizeof address) != 0) fail("bind", path);
  if (chmod(path, 0600) != 0) fail("chmod", path);
  if (listen(fd, 128) != 0) fail("listen", path);
  return fd;
}

static int listen_port(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&address, sizeof address) != 0 || listen(fd, 511) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

// ---- the relay ----

enum { H_DEVTOOLS, H_CONTROL, H_PORT, H_SIDE, H_CLIENT, H_SIGNAL };

struct relay;
struct handle {
  int kind;
  int fd;
  int port;             // H_PORT
  struct relay *relay;  // H_SIDE
  uint32_t events;      // H_SIDE: what epoll watches now
  int connecting;       // H_SIDE: a connect under way
  int hup;              // H_SIDE: its peer is gone both ways: nothing more to read from it or write to it
  int pipe[2];          // H_SIDE: what was read from this side, not yet written to the other
  size_t queued;
  int eof, shut;
  char line[LINE];  // H_CLIENT
  size_t used;
};
struct relay {
  struct handle a, b;  // a: the accepted end, b: the far end
  int dead;
  struct relay *next_dead;
};

static int epfd;
static size_t pipe_capacity = 65536;

static void watch(struct handle *h, uint32_t events) {
  struct epoll_event event = {.events = events, .data.ptr = h};
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, h->fd, &event) != 0) fail("epoll_ctl", NULL);
  h->events = events;
}

static void rewatch(struct handle *h, uint32_t events) {
  if (h->events == events) return;
  struct epoll_event event = {.events = events, .data.ptr = h};
  epoll_ctl(epfd, EPOLL_CTL_MOD, h->fd, &event);
  h->events = events;
}

/** A side whose peer hung up is watched no more: epoll would report its hang-up again and again. */
static void unwatch(struct handle *h) {
  if (h->events == (uint32_t)-1) return;
  epoll_ctl(epfd, EPOLL_CTL_DEL, h->fd, NULL);
  h->events = (uint32_t)-1;
}

static void side_close(struct handle *h) {
  if (h->fd >= 0) {
    if (h->events != (uint32_t)-1) epoll_ctl(epfd, EPOLL_CTL_DEL, h->fd, NULL);
    close(h->fd);
  }
  if (h->pipe[0] >= 0) close(h->pipe[0]);
  if (h->pipe[1] >= 0) close(h->pipe[1]);
  h->fd = h->pipe[0] = h->pipe[1] = -1;
}

/** Relays closed in this round of events, freed after it (a later event of the round may name one). */
static struct relay *graveyard;

static void relay_close(struct relay *r) {
  if (r->dead) return;
  side_close(&r->a);
  side_close(&r->b);
  r->dead = 1;
  r->next_dead = graveyard;
  graveyard = r;
}

/** Moves what `from` has to `to` through `from`'s pipe; -1 on an error of either. */
static int move(struct handle *from, struct handle *to) {
  for (;;) {
    int progress = 0;
    while (!from->eof && from->queued < pipe_capacity) {
      ssize_t n = splice(from->fd, NULL, from->pipe[1], NULL, pipe_capacity - from->queued,
                         SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        from->queued += (size_t)n;
        progress = 1;
      } else if (n == 0) {
        from->eof = 1;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN) {
        break;
      } else {
        return -1;
      }
    }
    while (from->queued > 0) {
      ssize_t n = splice(from->pipe[0], NULL, to->fd, NULL, from->queued, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        from->queued -= (size_t)n;
        progress = 1;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        break;
      } else {
        return -1;
      }
    }
    if (!progress) break;
  }
  if (from->eof && from->queued == 0 && !to->shut) {
    shutdown(to->fd, SHUT_WR);
    to->shut = 1;
  }
  return 0;
}

static void relay_pump(struct relay *r) {
  if (r->b.connecting) return;
  if (move(&r->a, &r->b) != 0 || move(&r->b, &r->a) != 0 ||
      (r->a.eof && r->a.queued == 0 && r->b.eof && r->b.queued == 0) ||
      // A side gone both ways, once what it sent has been passed on: nothing more can reach it.
      (r->a.hup && r->a.eof && r->a.queued == 0) || (r->b.hup && r->b.eof && r->b.queued == 0)) {
    relay_close(r);
    return;
  }
  // Read a side while its pipe has room; write it while the other's pipe holds something.
  struct handle *sides[2] = {&r->a, &r->b};
  for (int i = 0; i < 2; i++) {
    struct handle *side = sides[i], *other = sides[1 - i];
    if (side->hup)
      unwatch(side);
    else
      rewatch(side, (!side->eof && side->queued < pipe_capacity ? EPOLLIN : 0) | (other->queued > 0 ? EPOLLOUT : 0));
  }
}

static int side_init(struct handle *h, struct relay *r, int fd) {
  memset(h, 0, sizeof *h);
  h->kind = H_SIDE;
  h->fd = fd;
  h->relay = r;
  h->pipe[0] = h->pipe[1] = -1;
  return pipe2(h->pipe, O_NONBLOCK | O_CLOEXEC);
}

/** Joins `accepted` with `far` (connected, or connecting when `connecting`). */
static void relay_start(int accepted, int far, int connecting) {
  struct relay *r = calloc(1, sizeof *r);
  if (r == NULL || side_init(&r->a, r, accepted) != 0 || side_init(&r->b, r, far) != 0) {
    if (r != NULL) {
      side_close(&r->a);
      side_close(&r->b);
      free(r);
    } else {
      close(accepted);
      close(far);
    }
    return;
  }
  r->b.connecting = connecting;
  watch(&r->a, connecting ? 0 : EPOLLIN);
  watch(&r->b, connecting ? EPOLLOUT : EPOLLIN);
}

static void side_event(struct handle *h, uint32_t events) {
  struct relay *r = h->relay;
  if (r->dead) return;
  if (h == &r->b && r->b.connecting) {
    int error = 0;
    socklen_t length = sizeof error;
    getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0 || (events & (EPOLLERR | EPOLLHUP)) != 0) {
      relay_close(r);
      return;
    }
    r->b.connecting = 0;
  }
  if ((events & EPOLLERR) != 0) {
    relay_close(r);
    return;
  }
  if ((events & EPOLLHUP) != 0) h->hup = 1;
  relay_pump(r);
}

static void accept_devtools(int listener) {
  for (;;) {
    int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    int far = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (far < 0) {
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(far, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)devtools_port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int connecting = 0;
    if (connect(far, (struct sockaddr *)&address, sizeof address) != 0) {
      if (errno != EINPROGRESS) {
        close(fd);
        close(far);
        continue;
      }
      connecting = 1;
    }
    relay_start(fd, far, connecting);
  }
}

static void accept_port(struct handle *listener) {
  for (;;) {
    int fd = accept4(listener->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/egress-%d.sock", cell_dir, listener->port);
    struct sockaddr_un address;
    int far = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    // No proxy there (not opened yet, or closed): the browser's connection is refused.
    if (far < 0 || unix_address(&address, path) != 0 ||
        connect(far, (struct sockaddr *)&address, sizeof address) != 0) {
      if (far >= 0) close(far);
      close(fd);
      continue;
    }
    relay_start(fd, far, 0);
  }
}

static int open_port(int port) {
  for (int i = 0; i < nports; i++)
    if (ports[i] == port) return 0;
  if (nports == MAX_PORTS) {
    errno = EMFILE;
    return -1;
  }
  int fd = listen_port(port);
  if (fd < 0) return -1;
  struct handle *h = calloc(1, sizeof *h);
  if (h == NULL) abort();
  h->kind = H_PORT;
  h->fd = fd;
  h->port = port;
  watch(h, EPOLLIN);
  ports[nports++] = port;
  return 0;
}

static int plain_name(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 128) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
      return 0;
  }
  return 1;
}

/** `show NAME`: DIR/NAME of --downloads, a real dir (opened without following a link), bound into the view. */
static int show(const char *name, char *why, size_t size) {
  if (downloads_dir == NULL || !plain_name(name)) {
    snprintf(why, size, "not a name this cell shows");
    return -1;
  }
  char src[PATH_MAX], dst[PATH_MAX], through[64];
  if (snprintf(src, sizeof src, "%s/%s", downloads_dir, name) >= (int)sizeof src ||
      snprintf(dst, sizeof dst, "%s%s/%s", root, downloads_dir, name) >= (int)sizeof dst) {
    snprintf(why, size, "%s: its path is too long", name);
    return -1;
  }
  int fd = open(src, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, size, "%s: %s", name, strerror(errno));
    return -1;
  }
  // Its parents on the view's tmpfs, made once; the browser's mount of the root is read-only.
  for (char *slash = dst + strlen(root) + 1; *slash; slash++) {
    if (*slash != '/') continue;
    *slash = '\0';
    mkdir(dst, 0755);
    *slash = '/';
  }
  if (mkdir(dst, 0755) != 0 && errno != EEXIST) {
    snprintf(why, size, "mkdir %s: %s", name, strerror(errno));
    close(fd);
    return -1;
  }
  snprintf(through, sizeof through, "/proc/self/fd/%d", fd);
  int bound = mount(through, dst, NULL, MS_BIND, NULL);
  int saved = errno;
  close(fd);
  if (bound != 0 || mount_setattr_(dst, 0, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV) != 0) {
    snprintf(why, size, "bind %s: %s", name, strerror(bound != 0 ? saved : errno));
    return -1;
  }
  return 0;
}

/** An answer of a line: the service reads it at once, so a full socket is waited for briefly. */
static void reply(int fd, const char *text) {
  size_t n = strlen(text), done = 0;
  while (done < n) {
    ssize_t w = write(fd, text + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      struct pollfd writable = {.fd = fd, .events = POLLOUT};
      if (poll(&writable, 1, 1000) <= 0) return;
      continue;
    }
    if (w <= 0) return;
    done += (size_t)w;
  }
}

static void control_line(int fd, char *line) {
  char answer[LINE + 64];
  char why[LINE];
  if (strncmp(line, "forward ", 8) == 0) {
    char *end;
    long port = strtol(line + 8, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535) {
      reply(fd, "error not a port\n");
    } else if (open_port((int)port) != 0) {
      snprintf(answer, sizeof answer, "error cannot listen on %ld: %s\n", port, strerror(errno));
      reply(fd, answer);
    } else {
      reply(fd, "ok\n");
    }
  } else if (strncmp(line, "show ", 5) == 0) {
    if (show(line + 5, why, sizeof why) != 0) {
      snprintf(answer, sizeof answer, "error %s\n", why);
      reply(fd, answer);
    } else {
      reply(fd, "ok\n");
    }
  } else {
    reply(fd, "error unknown command\n");
  }
}

static void client_event(struct handle *h) {
  for (;;) {
    ssize_t n = read(h->fd, h->line + h->used, sizeof h->line - 1 - h->used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0 || h->used + (size_t)n >= sizeof h->line - 1) {
      epoll_ctl(epfd, EPOLL_CTL_DEL, h->fd, NULL);
      close(h->fd);
      free(h);
      return;
    }
    h->used += (size_t)n;
    char *newline;
    while ((newline = memchr(h->line, '\n', h->used)) != NULL) {
      *newline = '\0';
      control_line(h->fd, h->line);
      size_t rest = h->used - (size_t)(newline + 1 - h->line);
      memmove(h->line, newline + 1, rest);
      h->used = rest;
    }
  }
}

static void accept_control(int listener) {
  for (;;) {
    int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    struct handle *h = calloc(1, sizeof *h);
    if (h == NULL) abort();
    h->kind = H_CLIENT;
    h->fd = fd;
    watch(h, EPOLLIN);
  }
}

// ---- the browser ----

static void browser(char **command, sigset_t *original) {
  // As the init's: signals as they were, none ignored, none blocked.
  signal(SIGPIPE, SIG_DFL);
  sigprocmask(SIG_SETMASK, original, NULL);
  if (unshare(CLONE_NEWNS) != 0) fail("unshare", "mount");
  if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0) fail("mount", "/ slave");
  if (chdir(root) != 0) fail("chdir", root);
  if (syscall(SYS_pivot_root, ".", ".") != 0) fail("pivot_root", root);
  if (umount2(".", MNT_DETACH) != 0) fail("umount", "old root");
  if (chdir("/") != 0) fail("chdir", "/");
  // The root and its dirs read-only: the browser writes only where a writable bind lets it.
  if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0)
    fail("remount", "/");
  if (browser_uid >= 0) {
    if (setgroups(0, NULL) != 0) fail("setgroups", NULL);
    if (setresgid((gid_t)browser_uid, (gid_t)browser_uid, (gid_t)browser_uid) != 0) fail("setresgid", NULL);
    if (setresuid((uid_t)browser_uid, (uid_t)browser_uid, (uid_t)browser_uid) != 0) fail("setresuid", NULL);
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs", NULL);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail("pdeathsig", NULL);
  syscall(SYS_close_range, 3, ~0U, 0);
  execv(command[0], command);
  fail("exec", command[0]);
}

static int init(char **command) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail("pdeathsig", NULL);
  // The browser runs as this process's user (without root): none of it may trace this one.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  loopback_up();
  make_view();
  epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) fail("epoll", NULL);
  struct handle devtools = {.kind = H_DEVTOOLS, .fd = listen_unix("devtools.sock")};
  struct handle control = {.kind = H_CONTROL, .fd = listen_unix("control.sock")};
  watch(&devtools, EPOLLIN);
  watch(&control, EPOLLIN);
  int initial[MAX_PORTS], ninitial = nports;
  memcpy(initial, ports, sizeof ports);
  nports = 0;
  for (int i = 0; i < ninitial; i++)
    if (open_port(initial[i]) != 0) fail("listen", "forwarded port");
  int probe[2];
  if (pipe(probe) == 0) {
    long capacity = fcntl(probe[0], F_GETPIPE_SZ);
    if (capacity > 0) pipe_capacity = (size_t)capacity;
    close(probe[0]);
    close(probe[1]);
  }

  sigset_t blocked, original;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGCHLD);
  sigprocmask(SIG_BLOCK, &blocked, &original);
  signal(SIGPIPE, SIG_IGN);
  struct handle signals = {.kind = H_SIGNAL, .fd = signalfd(-1, &blocked, SFD_NONBLOCK | SFD_CLOEXEC)};
  if (signals.fd < 0) fail("signalfd", NULL);
  watch(&signals, EPOLLIN);

  pid_t child = fork();
  if (child < 0) fail("fork", NULL);
  if (child == 0) browser(command, &original);

  struct epoll_event events[64];
  for (;;) {
    int n = epoll_wait(epfd, events, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("epoll_wait", NULL);
    for (int i = 0; i < n; i++) {
      struct handle *h = events[i].data.ptr;
      switch (h->kind) {
        case H_DEVTOOLS:
          accept_devtools(h->fd);
          break;
        case H_CONTROL:
          accept_control(h->fd);
          break;
        case H_PORT:
          accept_port(h);
          break;
        case H_CLIENT:
          client_event(h);
          break;
        case H_SIDE:
          side_event(h, events[i].events);
          break;
        case H_SIGNAL: {
          struct signalfd_siginfo info;
          while (read(h->fd, &info, sizeof info) > 0) {
          }
          int status;
          pid_t pid;
          while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            // The browser is gone: so is the cell (the kernel kills what is left in it).
            if (pid == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          }
          break;
        }
      }
    }
    while (graveyard != NULL) {
      struct relay *r = graveyard;
      graveyard = r->next_dead;
      free(r);
    }
  }
}

static volatile pid_t cell_init;
static void on_stop(int signo) {
  (void)signo;
  if (cell_init > 0) kill(cell_init, SIGKILL);
}

/*
 * Not as root: a user namespace of its own, mapping only this user. What the cell's init may do
 * as its "root" (mounts, its network) holds inside the cell's namespaces alone.
 */
static void own_user_namespace(void) {
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER) != 0) fail("unshare", "user namespace");
  char map[64];
  int fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "deny", 4) != 4) fail("write", "setgroups");
  close(fd);
  int n = snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
  fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, map, (size_t)n) != n) fail("write", "uid_map");
  close(fd);
  n = snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
  fd = open("/proc/self/gid_map", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, map, (size_t)n) != n) fail("write", "gid_map");
  close(fd);
}

/*
 * --probe: whether a cell can be made here, as a launch makes one: its namespaces, and its own
 * /proc and read-only /sys (a container that masks the host's /proc and /sys refuses those).
 * Exits 0, or 111 with what refused on stderr. Mounts nothing that outlives it.
 */
static int probe(void) {
  if (geteuid() != 0) own_user_namespace();
  if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID) != 0) fail("unshare", "namespaces");
  pid_t child = fork();
  if (child < 0) fail("fork", NULL);
  if (child == 0) {
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) fail("mount", "/ (private)");
    char dir[] = "/tmp/rbs-cell-probe-XXXXXX";
    if (mkdtemp(dir) == NULL) fail("mkdtemp", dir);
    int proc = mount("proc", dir, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    int refused = errno;
    if (proc == 0) {
      umount2(dir, MNT_DETACH);
      proc = mount("sysfs", dir, "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL);
      refused = errno;
      if (proc == 0) umount2(dir, MNT_DETACH);
    }
    rmdir(dir);
    if (proc != 0) {
      errno = refused;
      fail("mount", "its own /proc and /sys");
    }
    _exit(0);
  }
  int status;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) fail("waitpid", NULL);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 111;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--probe") == 0) return probe();
  pid_t parent = getppid();
  long nofile = -1, data = 0, nice_by = 0;
  int i = 1;
  for (; i < argc; i++) {
    const char *option = argv[i];
    if (strcmp(option, "--") == 0) {
      i++;
      break;
    }
    if (i + 1 >= argc) usage("an option without its value");
    const char *value = argv[++i];
    if (strcmp(option, "--uid") == 0)
      browser_uid = number(value, "uid");
    else if (strcmp(option, "--nofile") == 0)
      nofile = number(value, "nofile");
    else if (strcmp(option, "--data") == 0)
      data = number(value, "data");
    else if (strcmp(option, "--nice") == 0)
      nice_by = number(value, "nice");
    else if (strcmp(option, "--cgroup") == 0) {
      if (ncgroups == MAX_CGROUPS) usage("too many cgroups");
      cgroups[ncgroups++] = value;
    } else if (strcmp(option, "--cell") == 0)
      cell_dir = value;
    else if (strcmp(option, "--devtools") == 0)
      devtools_port = port_of(value);
    else if (strcmp(option, "--forward") == 0)
      add_port(port_of(value));
    else if (strcmp(option, "--ro") == 0)
      add_view(V_RO, value, value);
    else if (strcmp(option, "--rw") == 0)
      add_view(V_RW, value, value);
    else if (strcmp(option, "--hide") == 0)
      add_view(V_HIDE, value, value);
    else if (strcmp(option, "--downloads") == 0)
      downloads_dir = value;
    else if (strcmp(option, "--tmp-size") == 0)
      tmp_bytes = number(value, "tmp-size");
    else if (strcmp(option, "--bind") == 0) {
      if (i + 1 >= argc) usage("--bind takes SRC DST");
      add_view(V_BIND, value, argv[++i]);
    } else
      usage(option);
  }
  if (i >= argc) usage("no program to run");
  if (cell_dir == NULL || cell_dir[0] != '/') usage("--cell DIR (absolute) is required");
  if (devtools_port < 0) usage("--devtools PORT is required");
  char **command = argv + i;
  int as_root = geteuid() == 0;
  if (as_root && browser_uid < 0) usage("as root, --uid is required: the browser never runs as root");
  if (!as_root && browser_uid >= 0) usage("--uid needs root");

  char pid[32];
  int length = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  for (int c = 0; c < ncgroups; c++) {
    int fd = open(cgroups[c], O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail("open", cgroups[c]);
    if (write(fd, pid, (size_t)length) != length) fail("join", cgroups[c]);
    close(fd);
  }
  if (nofile > 0) {
    struct rlimit files = {(rlim_t)nofile, (rlim_t)nofile};
    if (setrlimit(RLIMIT_NOFILE, &files) != 0) fail("setrlimit", "RLIMIT_NOFILE");
  }
  if (data > 0) {
    struct rlimit memory = {(rlim_t)data, (rlim_t)data};
    if (setrlimit(RLIMIT_DATA, &memory) != 0) fail("setrlimit", "RLIMIT_DATA");
  }
  errno = 0;
  int current = getpriority(PRIO_PROCESS, 0);
  if (errno != 0) fail("getpriority", NULL);
  if (setpriority(PRIO_PROCESS, 0, current + (int)nice_by) != 0) fail("setpriority", NULL);

  if (!as_root) own_user_namespace();
  if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID) != 0) fail("unshare", "namespaces");
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail("pdeathsig", NULL);
  // The launcher died before the signal was set: nothing would ever end this cell.
  if (getppid() != parent) {
    errno = ESRCH;
    fail("parent", NULL);
  }
  pid_t first = fork();
  if (first < 0) fail("fork", NULL);
  if (first == 0) {
    signal(SIGTERM, SIG_DFL);
    exit(init(command));
  }
  // SIGTERM ends the cell: its init is killed, which kills everything in it, and this process
  // exits once the last of it is gone (the init is reaped only then), so its exit says the cell is.
  cell_init = first;
  struct sigaction stop = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
  sigaction(SIGTERM, &stop, NULL);
  for (;;) {
    int status;
    pid_t done = waitpid(first, &status, 0);
    if (done < 0 && errno == EINTR) continue;
    if (done < 0) fail("waitpid", NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
}
