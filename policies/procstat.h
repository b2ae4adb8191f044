/* procstat.h: the fields of /proc/self/stat and /proc/stat that the
 * process_ metrics need, parsed from the files' text (proc(5)). Pure: the
 * caller reads the files. */
#ifndef TM_PROCSTAT_H
#define TM_PROCSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct procstat {
    uint64_t utime;     /* field 14: user CPU, clock ticks */
    uint64_t stime;     /* field 15: system CPU, clock ticks */
    uint64_t starttime; /* field 22: clock ticks after boot */
    uint64_t vsize;     /* field 23: virtual memory, bytes */
    uint64_t rss;       /* field 24: resident pages */
};

/* Parse the text of /proc/PID/stat (len bytes, not NUL-terminated
 * necessarily). The command name (field 2) may hold spaces and
 * parentheses: the fields after it are counted from its last ')'. false
 * when a field is missing or not a decimal number. */
bool procstat_parse(const char *text, size_t len, struct procstat *out);

/* The boot time in seconds since the epoch, from the "btime" line of
 * /proc/stat's text. false when there is none. */
bool procstat_btime(const char *text, size_t len, uint64_t *out);

#endif
