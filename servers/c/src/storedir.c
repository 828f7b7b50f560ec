/* storedir: opening, checking and cleaning the disk store's directory. */
#include "storedir.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libdeflate.h>

#define STOREDIR_PERM 0755

static int check_dir(const struct stat *st, const char *dir, const char *sub, char *err, size_t errlen) {
    if (S_ISLNK(st->st_mode)) snprintf(err, errlen, "%s/%s is a symlink; refusing to use it", dir, sub);
    else if (!S_ISDIR(st->st_mode)) snprintf(err, errlen, "%s/%s is not a directory", dir, sub);
    else if (st->st_uid != geteuid())
        snprintf(err, errlen, "%s/%s is owned by uid %u, not by this user (uid %u)", dir, sub, (unsigned)st->st_uid,
                 (unsigned)geteuid());
    else return 0;
    return -1;
}

/* Creates top/sub if missing and opens it; whoever controls a symlink or a foreign directory here could
 * point the store's writes and start-up deletions anywhere. */
static int open_subdir(int top, const char *dir, const char *sub, char *err, size_t errlen) {
    if (mkdirat(top, sub, STOREDIR_PERM) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "creating %s/%s: %s", dir, sub, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstatat(top, sub, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(err, errlen, "%s/%s: %s", dir, sub, strerror(errno));
        return -1;
    }
    if (check_dir(&st, dir, sub, err, errlen)) return -1;
    int fd = openat(top, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "opening %s/%s: %s", dir, sub, strerror(errno));
        return -1;
    }
    /* check what was opened too: the name may have changed since fstatat */
    if (fstat(fd, &st) != 0 || check_dir(&st, dir, sub, err, errlen)) {
        if (!err[0]) snprintf(err, errlen, "%s/%s: %s", dir, sub, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int storedir_open(const char *dir, int *tmp_fd, int *files_fd, char *err, size_t errlen) {
    err[0] = '\0';
    if (mkdir(dir, STOREDIR_PERM) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "creating %s: %s", dir, strerror(errno));
        return -1;
    }
    int top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0) {
        snprintf(err, errlen, "opening %s: %s", dir, strerror(errno));
        return -1;
    }
    *tmp_fd = open_subdir(top, dir, "tmp", err, errlen);
    *files_fd = *tmp_fd < 0 ? -1 : open_subdir(top, dir, "files", err, errlen);
    close(top);
    if (*files_fd < 0 && *tmp_fd >= 0) {
        close(*tmp_fd);
        *tmp_fd = -1;
    }
    return *files_fd < 0 ? -1 : 0;
}

int storedir_clean_tmp(int tmp_fd, const char *dir, char *err, size_t errlen) {
    int fd = openat(tmp_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        snprintf(err, errlen, "listing %s/tmp: %s", dir, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        if (fstatat(tmp_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            unlinkat(tmp_fd, de->d_name, 0); /* a failure leaves a stale file: harmless */
    }
    closedir(d);
    return 0;
}

int storedir_read_entry(int files_fd, const char *name, uint8_t *buf, size_t buflen, storedir_entry *out) {
    struct stat st, fst;
    if (fstatat(files_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return -1;
    int fd = openat(files_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    if (fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode) || fst.st_ino != st.st_ino || fst.st_dev != st.st_dev) {
        close(fd);
        return -1;
    }
    uint32_t c = 0;
    uint64_t total = 0;
    ssize_t n;
    while ((n = read(fd, buf, buflen)) > 0) {
        c = libdeflate_crc32(c, buf, (size_t)n);
        total += (uint64_t)n;
    }
    close(fd);
    if (n < 0 || total != (uint64_t)fst.st_size) return -1; /* unreadable, or changing under us */
    out->dev = fst.st_dev;
    out->ino = fst.st_ino;
    out->size = total;
    out->crc = (uint32_t)c;
    return 0;
}
