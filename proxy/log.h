/* log.h: logging through a sink the embedding program sets. The library
 * never writes to a fixed place; without a sink nothing is logged. */
#ifndef TM_LOG_H
#define TM_LOG_H

enum tm_log_level {
    TM_LOG_ERROR = 0,
    TM_LOG_WARN,
    TM_LOG_INFO,
    TM_LOG_DEBUG,
};

typedef void (*log_sink)(void *arg, enum tm_log_level level, const char *msg);

/* Set where log lines go and the most verbose level that is formatted. */
void log_set_sink(log_sink sink, void *arg, enum tm_log_level level);
int log_get_level(void);
/* "error" ... "debug" to a level; -1 when unknown. */
int log_level_parse(const char *name);

void log_write(enum tm_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Check the level before formatting anything. */
#define log_at(lvl, ...)                                                       \
    do {                                                                       \
        if ((int)(lvl) <= log_get_level()) {                                   \
            log_write((lvl), __VA_ARGS__);                                     \
        }                                                                      \
    } while (0)
#define log_error(...) log_at(TM_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_at(TM_LOG_WARN, __VA_ARGS__)
#define log_info(...) log_at(TM_LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_at(TM_LOG_DEBUG, __VA_ARGS__)

#endif
