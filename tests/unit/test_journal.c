/* test_journal.c: the embedded store's journal: entries come back in
 * order, only those of the asked epoch, up to the first torn record; a
 * restart retires what was written; a full file says so; a second
 * process cannot open it. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../proxy/store/journal.h"

#define MAX_SEEN 250000

struct seen {
    size_t n;
    char keys[MAX_SEEN][16];
    int64_t tokens[MAX_SEEN];
};

static struct seen seen;

static int
collect(void *arg, const unsigned char *key, size_t len, int64_t token)
{
    (void)arg;
    assert_true(len < sizeof(seen.keys[0]));
    assert_true(seen.n < MAX_SEEN);
    memcpy(seen.keys[seen.n], key, len);
    seen.keys[seen.n][len] = '\0';
    seen.tokens[seen.n] = token;
    seen.n++;
    return 0;
}

struct fixture {
    char dir[64];
    char path[128];
};

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    if (f == NULL) {
        return -1;
    }
    snprintf(f->dir, sizeof(f->dir), "/tmp/tm-journal-XXXXXX");
    if (mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof(f->path), "%s/marks-journal", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

static struct journal *
jopen(struct fixture *f)
{
    char err[256] = "";
    struct journal *j = journal_open(f->path, err, sizeof(err));

    if (j == NULL) {
        fail_msg("journal_open: %s", err);
    }
    return j;
}

static size_t
replay(struct journal *j, uint64_t epoch)
{
    size_t n = 99;

    seen.n = 0;
    assert_int_equal(journal_replay(j, epoch, collect, NULL, &n), 0);
    assert_int_equal(n, seen.n);
    return n;
}

static void
add(struct journal *j, const char *key, int64_t token)
{
    assert_true(journal_fits(j, strlen(key)));
    assert_int_equal(journal_add(j, key, strlen(key), token), 0);
}

/* Known answers for CRC-32C (RFC 3720, appendix B.4). */
static void
test_crc32c(void **state)
{
    unsigned char zeros[32] = {0};
    unsigned char ones[32];
    unsigned char inc[32];

    (void)state;
    memset(ones, 0xff, sizeof(ones));
    for (int i = 0; i < 32; i++) {
        inc[i] = (unsigned char)i;
    }
    assert_int_equal(journal_crc32c(0, zeros, 32), 0x8A9136AA);
    assert_int_equal(journal_crc32c(0, ones, 32), 0x62A8AB43);
    assert_int_equal(journal_crc32c(0, inc, 32), 0x46DD794E);
    assert_int_equal(journal_crc32c(0, "123456789", 9), 0xE3069283);
    /* In pieces, the same. */
    assert_int_equal(journal_crc32c(journal_crc32c(0, "1234", 4), "56789", 5),
                     0xE3069283);
}

/* A new file is zero-filled to its full size and holds nothing. */
static void
test_new_file(void **state)
{
    struct fixture *f = *state;
    struct journal *j = jopen(f);
    struct stat st;

    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal((size_t)st.st_size, JOURNAL_SIZE);
    assert_int_equal(replay(j, 0), 0);
    assert_int_equal(replay(j, 1), 0);
    journal_close(j);
}

/* Synced entries come back, in order, under their epoch only, across a
 * reopen. Entries added but not synced, or dropped, do not. */
static void
test_roundtrip(void **state)
{
    struct fixture *f = *state;
    struct journal *j = jopen(f);

    journal_restart(j, 7);
    add(j, "a", 5);
    add(j, "b", 1);
    assert_int_equal(journal_sync(j), 0);
    add(j, "a", INT64_MAX);
    add(j, "a", 6);
    assert_int_equal(journal_sync(j), 0);
    add(j, "dropped", 9);
    journal_drop(j);
    assert_int_equal(journal_sync(j), 0); /* nothing to write */
    add(j, "unsynced", 9);
    journal_close(j);

    j = jopen(f);
    assert_int_equal(replay(j, 7), 4);
    assert_string_equal(seen.keys[0], "a");
    assert_true(seen.tokens[0] == 5);
    assert_string_equal(seen.keys[1], "b");
    assert_true(seen.tokens[1] == 1);
    assert_string_equal(seen.keys[2], "a");
    assert_true(seen.tokens[2] == INT64_MAX);
    assert_true(seen.tokens[3] == 6);
    assert_int_equal(replay(j, 6), 0);
    assert_int_equal(replay(j, 8), 0);
    journal_close(j);
}

/* After a restart under the next epoch, what was written before is
 * retired, even where the new records are shorter than the old ones. */
static void
test_restart_retires(void **state)
{
    struct fixture *f = *state;
    struct journal *j = jopen(f);

    journal_restart(j, 1);
    for (int i = 0; i < 100; i++) {
        add(j, "old-key", i + 1);
        assert_int_equal(journal_sync(j), 0);
    }
    assert_int_equal(replay(j, 1), 100);
    journal_restart(j, 2);
    add(j, "n", 1000);
    assert_int_equal(journal_sync(j), 0);
    assert_int_equal(replay(j, 2), 1);
    assert_string_equal(seen.keys[0], "n");
    /* The epoch-1 records past it are still in the file, and retired:
     * asking for epoch 1 stops at the first record, now epoch 2. */
    assert_int_equal(replay(j, 1), 0);
    journal_close(j);
}

/* A record damaged anywhere (a torn write) ends the journal there:
 * records before it replay, the damaged one and everything after do
 * not. */
static void
test_torn_record(void **state)
{
    struct fixture *f = *state;
    struct journal *j = jopen(f);
    /* Three records of one entry with a 1-byte key: 24 + 10 + 1. */
    const off_t rec = 35;
    int fd;

    journal_restart(j, 3);
    for (int i = 0; i < 3; i++) {
        char key[2] = {(char)('x' + i), '\0'};

        add(j, key, 10 + i);
        assert_int_equal(journal_sync(j), 0);
    }
    assert_int_equal(replay(j, 3), 3);
    journal_close(j);

    for (off_t at = rec; at < 2 * rec; at += 3) {
        unsigned char b;

        fd = open(f->path, O_RDWR);
        assert_true(fd >= 0);
        assert_int_equal(pread(fd, &b, 1, at), 1);
        b ^= 0x40;
        assert_int_equal(pwrite(fd, &b, 1, at), 1);
        j = jopen(f);
        assert_int_equal(replay(j, 3), 1);
        assert_string_equal(seen.keys[0], "x");
        journal_close(j);
        b ^= 0x40;
        assert_int_equal(pwrite(fd, &b, 1, at), 1);
        close(fd);
    }
    j = jopen(f);
    assert_int_equal(replay(j, 3), 3);
    journal_close(j);
}

/* Many entries between syncs span several records; when the file is
 * full, journal_fits says so, and a restart makes room again. */
static void
test_big_groups_and_full(void **state)
{
    struct fixture *f = *state;
    struct journal *j = jopen(f);
    char key[16];
    size_t n = 0;

    journal_restart(j, 1);
    for (;;) {
        snprintf(key, sizeof(key), "k%09u", (unsigned)n);
        if (!journal_fits(j, strlen(key))) {
            break;
        }
        assert_int_equal(journal_add(j, key, strlen(key), (int64_t)n + 1), 0);
        n++;
        if (n % 50000 == 0) {
            assert_int_equal(journal_sync(j), 0);
        }
    }
    assert_int_equal(journal_sync(j), 0);
    /* 4 MiB of 20-byte entries: well past one 64 KiB record. */
    assert_true(n > 100000);
    assert_true(n < MAX_SEEN);
    assert_int_equal(replay(j, 1), n);
    for (size_t i = 0; i < n; i += 997) {
        snprintf(key, sizeof(key), "k%09u", (unsigned)i);
        assert_string_equal(seen.keys[i], key);
        assert_true(seen.tokens[i] == (int64_t)i + 1);
    }
    journal_restart(j, 2);
    assert_true(journal_fits(j, 10));
    assert_true(journal_fits(j, JOURNAL_KEY_MAX));
    journal_close(j);
}

/* A journal cut short (a crash while it was being created, a copy that
 * stopped): open fills it out to full size again, and the records that
 * survived whole still replay. */
static void
test_short_file(void **state)
{
    struct fixture *f = *state;
    struct journal *j = jopen(f);
    struct stat st;

    journal_restart(j, 4);
    for (int i = 0; i < 3; i++) {
        add(j, "k", 100 + i);
        assert_int_equal(journal_sync(j), 0);
    }
    journal_close(j);
    /* Records are 35 bytes: two whole, the third cut. */
    assert_int_equal(truncate(f->path, 80), 0);
    j = jopen(f);
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal((size_t)st.st_size, JOURNAL_SIZE);
    assert_int_equal(replay(j, 4), 2);
    assert_true(seen.tokens[1] == 101);
    journal_close(j);
}

/* A second open of the same journal (another process, or a second store
 * on one path) is refused while the first holds it. */
static void
test_locked(void **state)
{
    struct fixture *f = *state;
    struct journal *j = jopen(f);
    char err[256] = "";

    assert_null(journal_open(f->path, err, sizeof(err)));
    assert_non_null(strstr(err, "in use"));
    journal_close(j);
    j = jopen(f);
    journal_close(j);
}

/* An entry stops the replay when the callback says so. */
static int
stop_at_b(void *arg, const unsigned char *key, size_t len, int64_t token)
{
    (void)arg;
    (void)token;
    return len == 1 && key[0] == 'b' ? 42 : 0;
}

static void
test_callback_error(void **state)
{
    struct fixture *f = *state;
    struct journal *j = jopen(f);
    size_t n = 0;

    journal_restart(j, 1);
    add(j, "a", 1);
    add(j, "b", 2);
    add(j, "c", 3);
    assert_int_equal(journal_sync(j), 0);
    assert_int_equal(journal_replay(j, 1, stop_at_b, NULL, &n), 42);
    assert_int_equal(n, 1);
    journal_close(j);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c),
        cmocka_unit_test_setup_teardown(test_new_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_retires, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_groups_and_full, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_short_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_locked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callback_error, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
