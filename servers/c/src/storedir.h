/* storedir: the disk store's directory, trusted no further than PROTOCOL.md "The disk store's directory"
 * allows. tmp/ and files/ are opened once, refused when a symlink, not a directory or owned by another
 * user; everything after works relative to those descriptors, never following a link. */
#ifndef XFERD_STOREDIR_H
#define XFERD_STOREDIR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Creates dir, dir/tmp and dir/files as needed and opens the two subdirectories. Returns 0, or -1 with
 * a message in err (which may name the server's paths: it goes to the operator, not to clients). */
int storedir_open(const char *dir, int *tmp_fd, int *files_fd, char *err, size_t errlen);

/* Removes the regular files directly in tmp/ (uploads that never committed); nothing else: no
 * recursion, no symlink followed. Returns 0, or -1 with a message in err. */
int storedir_clean_tmp(int tmp_fd, const char *dir, char *err, size_t errlen);

/* A regular file in files/, read whole once to index it. */
typedef struct {
    dev_t dev;
    ino_t ino;
    uint64_t size;
    uint32_t crc;
} storedir_entry;

/* Reads name in files/ if it is a regular file (checked before the open, which neither follows a link
 * nor blocks on a FIFO, and again on the opened descriptor). Returns 0, or -1 for anything else. The
 * descriptor is closed before returning: the store keeps none per file. buf: scratch of buflen bytes. */
int storedir_read_entry(int files_fd, const char *name, uint8_t *buf, size_t buflen, storedir_entry *out);

#endif
