/*
 * The measured phase: placement reports at the rate (or a flood) until --seconds or --reports, then the drain; and
 * the CPU time the server, the broker and loadgen itself used meanwhile.
 */
#include "loadgen.h"

#include <string.h>
#include <time.h>

/* utime + stime of a process, in clock ticks (/proc/PID/stat fields 14 and 15); -1 when unreadable. */
static long long cpu_ticks(long pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        return -1;
    }
    char *read = fgets(line, sizeof line, file);
    fclose(file);
    char *fields = read != NULL ? strrchr(line, ')') : NULL;
    unsigned long long utime, stime;
    /* After "pid (comm)": state, then fields 4-13, then utime and stime. */
    if (fields == NULL ||
        sscanf(fields + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2) {
        return -1;
    }
    return (long long)(utime + stime);
}

static uint64_t process_cpu_ns(void)
{
    struct timespec cpu;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    return (uint64_t)cpu.tv_sec * NS_PER_S + (uint64_t)cpu.tv_nsec;
}

/* The measured phase: placement reports until --seconds or --reports, then the drain. */
int measure(struct loadgen *lg, struct measurement *m)
{
    const struct options *opt = &lg->opt;
    lg->phase = PHASE_MEASURING;
    for (uint32_t i = 0; i < (uint32_t)opt->accessories; i++) {
        push_idle(lg, i);
    }
    if (opt->ready_file != NULL) {
        FILE *ready = fopen(opt->ready_file, "w");
        if (ready != NULL) {
            fclose(ready);
        }
    }
    long long server_start = opt->server_pid ? cpu_ticks(opt->server_pid) : -1;
    long long broker_start = opt->broker_pid ? cpu_ticks(opt->broker_pid) : -1;
    uint64_t cpu_start = process_cpu_ns();
    uint64_t start = now_ns();
    uint64_t stop = opt->seconds > 0 ? start + seconds_ns(opt->seconds) : UINT64_MAX;
    uint64_t interval_ns = opt->rate > 0 ? (uint64_t)(1e9 / opt->rate) : 0;
    uint64_t next_due = start;
    bool sending = true;
    uint64_t drain_deadline = 0;
    lg->last_result_ns = start;
    lg->measure_started_ns = start;

    for (;;) {
        uint64_t now = now_ns();
        if (sending && (now >= stop || (opt->reports > 0 && lg->sent >= opt->reports))) {
            sending = false;
            drain_deadline = now + seconds_ns(opt->drain);
        }
        if (!sending && (lg->outstanding == 0 || now >= drain_deadline)) {
            break;
        }
        int timeout_ms = 100;
        if (sending) {
            while (lg->idle_count > 0 && (interval_ns == 0 || next_due <= now) &&
                   (opt->reports == 0 || lg->sent < opt->reports)) {
                if (send_report(lg, pop_idle(lg)) != 0) {
                    return -1;
                }
                next_due += interval_ns;
            }
            uint64_t until = stop - now;
            if (interval_ns > 0 && lg->idle_count > 0 && next_due > now && next_due - now < until) {
                until = next_due - now;
            }
            if (until < 100 * 1000000ULL) {
                timeout_ms = (int)((until + 999999) / 1000000);
            }
        }
        if (pump(lg, timeout_ms) != 0) {
            return -1;
        }
    }
    m->started_ns = start;
    m->ended_ns = lg->last_result_ns;
    m->loadgen_cpu_ns = process_cpu_ns() - cpu_start;
    long long server_end = opt->server_pid ? cpu_ticks(opt->server_pid) : -1;
    long long broker_end = opt->broker_pid ? cpu_ticks(opt->broker_pid) : -1;
    m->server_ticks = server_start >= 0 && server_end >= 0 ? server_end - server_start : -1;
    m->broker_ticks = broker_start >= 0 && broker_end >= 0 ? broker_end - broker_start : -1;
    if (opt->server_pid && m->server_ticks < 0) {
        fprintf(stderr, "loadgen: cannot read /proc/%ld/stat\n", opt->server_pid);
    }
    return 0;
}
