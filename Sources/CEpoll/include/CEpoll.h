// Linux epoll (and FIONREAD, accept4) for BenchKit's load threads and the edge's RawFront. Glibc's Swift module does not carry <sys/epoll.h>,
// and its struct epoll_event is packed on x86-64; these wrappers hand Swift a plain struct.
#ifndef CEPOLL_H
#define CEPOLL_H

#include <stdint.h>

/// An event epoll reported: its mask (CEPOLL_IN, ...) and the 64 bits registered with the fd.
typedef struct {
    uint32_t events;
    uint64_t data;
} cepoll_event;

enum {
    CEPOLL_IN = 0x001,
    CEPOLL_OUT = 0x004,
    CEPOLL_ERR = 0x008,
    CEPOLL_HUP = 0x010,
    CEPOLL_RDHUP = 0x2000,
    CEPOLL_EXCLUSIVE = 1u << 28,
    CEPOLL_ONESHOT = 1u << 30,
};

/// epoll_create1(EPOLL_CLOEXEC).
int cepoll_create(void);
/// epoll_ctl ADD (add != 0) or MOD of `fd` for `events`, carrying `data`.
int cepoll_set(int epfd, int fd, int add, uint32_t events, uint64_t data);
/// epoll_ctl DEL of `fd`.
int cepoll_remove(int epfd, int fd);
/// accept4 of a connection from listening socket `fd`, non-blocking and close-on-exec; -1 and errno when none.
int cepoll_accept(int fd);
/// Waits at most `timeout_ns` nanoseconds (epoll_pwait2; epoll_wait in whole milliseconds,
/// rounded up, where the kernel lacks it) and copies up to `max` events into `out`.
int cepoll_wait(int epfd, cepoll_event *out, int max, int64_t timeout_ns);

/// Names the calling thread (for top and perf), at most 15 bytes.
void cepoll_name_thread(const char *name);
/// How many bytes wait to be read on socket `fd` (ioctl FIONREAD); -1 on error.
int cepoll_pending(int fd);

#endif
