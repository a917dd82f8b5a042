// C declarations bench/fetch-floor.swift needs that Glibc's Swift module lacks (<sys/epoll.h>,
// memfd_create) or imports awkwardly (epoll_event is packed on x86-64, accept4's address union).
#define _GNU_SOURCE
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

/// Adds `fd` to `epoll` for `events`, with the fd as its data.
static inline int floor_epoll_add(int epoll, int fd, unsigned events) {
    struct epoll_event event = { .events = events, .data.u64 = (unsigned)fd };
    return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
}

/// Waits for events; puts the ready fds in `fds` (at most 64) and returns how many.
static inline int floor_epoll_wait(int epoll, int *fds) {
    struct epoll_event events[64];
    int count = epoll_wait(epoll, events, 64, -1);
    for (int i = 0; i < count; i++) fds[i] = (int)events[i].data.u64;
    return count;
}

/// accept4 without the peer's address, non-blocking.
static inline int floor_accept(int listener) { return accept4(listener, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC); }

/// A memory file named `name`.
static inline int floor_memfd(const char *name) { return memfd_create(name, MFD_CLOEXEC); }
