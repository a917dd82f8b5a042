// Sealed memory files for the fast path's sendfile(2): Glibc's Swift module does not carry
// memfd_create or the seals.
#ifndef CMEMORYFILE_H
#define CMEMORYFILE_H

#include <stddef.h>

/// A new memory file (memfd_create, close-on-exec) holding the `count` bytes at `bytes`, sealed
/// against any write, shrink or grow, and against further seals; -1 with errno on failure.
int cmemoryfile_make(const char *name, const void *bytes, size_t count);

#endif
