#define _GNU_SOURCE
#include "CMemoryFile.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

int cmemoryfile_make(const char *name, const void *bytes, size_t count) {
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    const char *next = bytes;
    size_t left = count;
    while (left > 0) {
        ssize_t n = write(fd, next, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) goto fail;
        next += n;
        left -= (size_t)n;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) goto fail;
    return fd;
fail:;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}
