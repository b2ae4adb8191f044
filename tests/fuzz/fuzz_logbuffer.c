/* fuzz_logbuffer.c: libFuzzer target for the buffer between the stderr
 * sinks and stderr (tm_log_stderr_buffer in log.c): the ring the sinks
 * append whole lines to, wrapping at its end, and the writer that cuts
 * what it holds into writes of whole lines. The first byte picks the
 * form and how many times each message is logged; the rest, split at
 * each '\n', are the messages (a NUL ends one early), each logged as
 * "n=SEQ " and its bytes. stderr is a pipe of 1 MiB, read once the
 * buffer is gone. Invariants, on every input:
 * - the unbuffer ends in time (stderr took everything);
 * - what came is whole lines, each a message's (its SEQ) or the
 *   writer's count of lines dropped;
 * - the messages that came did so in the order they were logged, none
 *   twice;
 * - the lines that came and the counts of dropped ones make every line
 *   logged (a line is dropped only when the 64 KiB buffer is full, or
 *   alone longer than it). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../proxy/log.h"
#include "../../proxy/tidemark.h"
#include "fuzz.h"

#define PIPE_SIZE (1 << 20)

/* Everything the pipe holds (it is non-blocking), NUL-terminated. */
static char *
slurp(int fd, size_t *len)
{
    char *out = malloc(PIPE_SIZE + 1);
    ssize_t n;

    check(out != NULL, "memory");
    *len = 0;
    while ((n = read(fd, out + *len, PIPE_SIZE - *len)) > 0) {
        *len += (size_t)n;
    }
    out[*len] = '\0';
    return out;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int rd = -1, wr = -1, saved = -1;
    void (*sink)(void *, enum tm_log_level, const char *);
    const char *seq_at, *drop_at;
    char *msg, *got, *line;
    size_t len, at = 1;
    long sent = 0, came = 0, dropped = 0, last = -1;
    int times;

    if (size < 1) {
        return 0;
    }
    if (rd < 0) {
        int p[2];

        check(pipe2(p, O_NONBLOCK) == 0, "pipe");
        check(fcntl(p[1], F_SETPIPE_SZ, PIPE_SIZE) >= PIPE_SIZE, "pipe size");
        rd = p[0];
        wr = p[1];
        saved = dup(2);
        fcntl(wr, F_SETFL, 0); /* the writer's end blocks */
    }
    sink = data[0] & 1 ? tm_log_stderr_json : tm_log_stderr_text;
    seq_at = data[0] & 1 ? "\"msg\":\"n=" : "msg=\"n=";
    drop_at = data[0] & 1 ? "\"dropped\":" : "dropped=";
    times = 1 + (data[0] >> 1) % 8;
    msg = malloc(size + 32);
    check(msg != NULL, "memory");

    fflush(stderr);
    dup2(wr, 2);
    check(tm_log_stderr_buffer(TM_LOG_BUFFER_MIN) == 0, "buffer starts");
    while (at <= size) {
        const uint8_t *end = memchr(data + at, '\n', size - at);
        size_t n = end != NULL ? (size_t)(end - data) - at : size - at;

        for (int t = 0; t < times; t++) {
            int k = snprintf(msg, 32, "n=%ld ", sent++);

            memcpy(msg + k, data + at, n);
            msg[k + n] = '\0';
            sink(NULL, TM_LOG_INFO, msg);
        }
        at += n + 1;
    }
    check(tm_log_stderr_unbuffer(10000), "stderr took it all");
    dup2(saved, 2);
    free(msg);

    got = slurp(rd, &len);
    check(len == 0 || got[len - 1] == '\n', "whole lines");
    for (line = got; *line != '\0';) {
        char *nl = strchr(line, '\n'), *p;

        check(nl != NULL, "a line ends");
        *nl = '\0';
        if ((p = strstr(line, seq_at)) != NULL) {
            long seq = strtol(p + strlen(seq_at), NULL, 10);

            check(seq > last && seq < sent, "in order, once each");
            last = seq;
            came++;
        } else {
            p = strstr(line, drop_at);
            check(p != NULL && strstr(line, "log: lines dropped") != NULL,
                  "a message's line or the count of dropped ones");
            dropped += strtol(p + strlen(drop_at), NULL, 10);
        }
        line = nl + 1;
    }
    check(came + dropped == sent, "every line came or was counted");
    free(got);
    return 0;
}
