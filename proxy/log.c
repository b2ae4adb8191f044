/* log.c: the log sink and level. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static log_sink sink_fn;
static void *sink_arg;
static enum tm_log_level max_level = TM_LOG_INFO;

void
log_set_sink(log_sink sink, void *arg, enum tm_log_level level)
{
    sink_fn = sink;
    sink_arg = arg;
    max_level = level;
}

int
log_get_level(void)
{
    return sink_fn == NULL ? -1 : (int)max_level;
}

int
log_level_parse(const char *name)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

void
log_write(enum tm_log_level level, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    if (sink_fn == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    sink_fn(sink_arg, level, buf);
}
