/*
 * rbs-idmap-mount <source> <target> <host uid> <count>
 *
 * Mounts <source> read-only at <target> with its owners shifted: a file of
 * uid/gid N in <source> shows as <host uid> + N below <target>. A sandbox's
 * image is one unpacked tree on disk, owned by root; each sandbox's root maps
 * to a host uid range of its own, and sees the image as its own through this
 * idmapped mount (the overlay's lower layer), with no copy and no chown.
 * Linux 5.12 or later (open_tree, mount_setattr, move_mount); util-linux's
 * mount gains this only in 2.39, which Debian 12 does not have.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc != 5 && !(argc == 6 && strcmp(argv[5], "rw") == 0)) {
    fprintf(stderr, "usage: %s <source> <target> <host uid> <count> [rw]\n", argv[0]);
    return 2;
  }
  unsigned long base = strtoul(argv[3], NULL, 10), count = strtoul(argv[4], NULL, 10);
  /* A user namespace with the mapping: a child that unshares and waits to be killed. */
  int ready[2];
  if (pipe(ready) < 0) return perror("pipe"), 1;
  pid_t child = fork();
  if (child < 0) return perror("fork"), 1;
  if (child == 0) {
    close(ready[0]);
    if (unshare(CLONE_NEWUSER) < 0) _exit(1);
    if (write(ready[1], "x", 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char byte;
  int status = 1;
  if (read(ready[0], &byte, 1) != 1) {
    fprintf(stderr, "rbs-idmap-mount: cannot make a user namespace\n");
    goto done;
  }
  char path[64], map[128];
  snprintf(map, sizeof map, "0 %lu %lu\n", base, count);
  snprintf(path, sizeof path, "/proc/%d/uid_map", (int)child);
  if (write_file(path, map) < 0) goto fail;
  snprintf(path, sizeof path, "/proc/%d/setgroups", (int)child);
  if (write_file(path, "deny") < 0) goto fail;
  snprintf(path, sizeof path, "/proc/%d/gid_map", (int)child);
  if (write_file(path, map) < 0) goto fail;
  snprintf(path, sizeof path, "/proc/%d/ns/user", (int)child);
  int userns = open(path, O_RDONLY | O_CLOEXEC);
  if (userns < 0) goto fail;
  int tree = (int)syscall(SYS_open_tree, AT_FDCWD, argv[1], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0) goto fail;
  // Read-only (an image), or writable (a workspace lent to a sandbox as its home): never suid or devices.
  unsigned long long flags = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID;
  if (argc == 5) flags |= MOUNT_ATTR_RDONLY;
  struct mount_attr attr = {.attr_set = flags, .userns_fd = (unsigned long long)userns};
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0) goto fail;
  if (syscall(SYS_move_mount, tree, "", AT_FDCWD, argv[2], MOVE_MOUNT_F_EMPTY_PATH) < 0) goto fail;
  status = 0;
  goto done;
fail:
  fprintf(stderr, "rbs-idmap-mount: %s -> %s: %s\n", argv[1], argv[2], strerror(errno));
done:
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  return status;
}
