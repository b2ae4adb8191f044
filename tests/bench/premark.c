/* premark.c: write many marks into an LMDB mark store quickly, through
 * the store's own code (store_lmdb_ops), so the file is exactly what
 * tidemark writes: journal, checkpoints and key layout included. For the
 * bench's marks set; run it before tidemark opens the file.
 *
 * premark PATH PREFIX COUNT TOKEN [MAP_SIZE]: raise the resources
 * <PREFIX>0 .. <PREFIX><COUNT-1> to TOKEN, in batches below the store's
 * queue bound, each batch one group commit. MAP_SIZE (bytes) defaults to
 * [store] map_size's default, 1 GiB: 1e7 marks take about 550 MB. Exits 1
 * unless every raise is accepted. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../conf/cfg.h"
#include "../../proxy/store/store.h"
#include "../../proxy/store/store_lmdb.h"

/* Raises in flight at once: below STORE_LMDB_QUEUE_MAX. */
#define BATCH 50000

struct tally {
    int64_t pending;
    int64_t failed;
};

static void
answered(void *arg, enum store_result res, int64_t mark)
{
    struct tally *t = arg;

    (void)mark;
    t->pending--;
    if (res != STORE_ACCEPTED) {
        t->failed++;
    }
}

/* Raise PREFIX<from> .. PREFIX<to - 1> and wait for every answer. */
static void
raise_range(struct store *st, struct event_base *base, const char *prefix,
            int64_t from, int64_t to, int64_t token, struct tally *t)
{
    char name[256];

    for (int64_t i = from; i < to; i++) {
        int n = snprintf(name, sizeof(name), "%s%" PRId64, prefix, i);

        t->pending++;
        store_lmdb_ops.raise(st, name, (size_t)n, token, answered, t);
    }
    while (t->pending > 0 && event_base_loop(base, EVLOOP_ONCE) == 0) {
    }
}

static int64_t
parse_count(const char *s)
{
    char *end;
    long long v = strtoll(s, &end, 10);

    return (*s != '\0' && *end == '\0' && v > 0) ? (int64_t)v : -1;
}

int
main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: premark PATH PREFIX COUNT TOKEN [MAP_SIZE]\n");
        return 2;
    }
    int64_t count = parse_count(argv[3]);
    int64_t token = parse_count(argv[4]);
    int64_t map = argc == 6 ? parse_count(argv[5]) : INT64_C(1) << 30;
    if (count < 0 || token < 0 || map < 0 || strlen(argv[2]) > 200) {
        fprintf(stderr, "premark: COUNT, TOKEN and MAP_SIZE are positive "
                        "integers, PREFIX at most 200 bytes\n");
        return 2;
    }
    struct cfg_store cfg = {.type = "lmdb", .path = argv[1], .map_size = map};
    char err[256] = "";
    struct event_base *base = event_base_new();
    struct store *st =
        base ? store_lmdb_ops.open(base, &cfg, err, sizeof(err)) : NULL;
    if (st == NULL) {
        fprintf(stderr, "premark: %s: %s\n", argv[1], err);
        return 1;
    }
    struct tally t = {0, 0};
    for (int64_t i = 0; i < count && t.pending == 0; i += BATCH) {
        raise_range(st, base, argv[2], i, i + BATCH < count ? i + BATCH : count,
                    token, &t);
    }
    store_lmdb_ops.close(st);
    event_base_free(base);
    if (t.pending != 0 || t.failed != 0) {
        fprintf(stderr, "premark: %" PRId64 " raises not accepted\n",
                t.failed + t.pending);
        return 1;
    }
    return 0;
}
