#define _GNU_SOURCE
#include "CEpoll.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

int cepoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

int cepoll_set(int epfd, int fd, int add, uint32_t events, uint64_t data) {
    struct epoll_event event = { .events = events, .data.u64 = data };
    return epoll_ctl(epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event);
}

int cepoll_remove(int epfd, int fd) {
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
}

int cepoll_accept(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

enum { BATCH = 256 };

int cepoll_wait(int epfd, cepoll_event *out, int max, int64_t timeout_ns) {
    static _Thread_local int no_pwait2;
    struct epoll_event events[BATCH];
    if (max > BATCH) max = BATCH;
    if (timeout_ns < 0) timeout_ns = 0;
    int count;
    if (!no_pwait2) {
        struct timespec timeout = { .tv_sec = timeout_ns / 1000000000, .tv_nsec = timeout_ns % 1000000000 };
        count = epoll_pwait2(epfd, events, max, &timeout, NULL);
        if (count < 0 && errno == ENOSYS) no_pwait2 = 1;
    }
    if (no_pwait2) count = epoll_wait(epfd, events, max, (int)((timeout_ns + 999999) / 1000000));
    for (int i = 0; i < count; i++) {
        out[i].events = events[i].events;
        out[i].data = events[i].data.u64;
    }
    return count;
}

int cepoll_pending(int fd) {
    int pending = 0;
    return ioctl(fd, FIONREAD, &pending) == 0 ? pending : -1;
}

void cepoll_name_thread(const char *name) {
    pthread_setname_np(pthread_self(), name);
}
