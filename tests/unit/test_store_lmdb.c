/* test_store_lmdb.c: the LMDB store through its ops table: the
 * registry, durability across reopen, long names, fresh, reads beside
 * the writer, a million resources, and open errors. */
#include "lmdb_test.h"

static void
test_registry(void **state)
{
    (void)state;
    assert_non_null(store_find("lmdb"));
    assert_ptr_equal(store_find("lmdb"), &store_lmdb_ops);
    assert_string_equal(store_find("lmdb")->name, "lmdb");
    assert_null(store_find("nope"));
    assert_null(store_find(""));
    assert_null(store_find(NULL));
}

static void
test_reopen_keeps_marks(void **state)
{
    enum { N = 300 };
    struct fixture *f = *state;
    static struct answer ans[N];
    struct answer a;
    char name[32];

    store_open(f);
    a = raise_wait(f, "kept", 41);
    assert_int_equal(a.res, STORE_ACCEPTED);
    /* Queued but never run through the loop: close commits them and runs
     * their callbacks before returning. */
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "closing/%d", i);
        do_raise(f, name, strlen(name), i + 1, &ans[i]);
    }
    store_close(f);
    for (int i = 0; i < N; i++) {
        assert_int_equal(ans[i].done, 1);
        assert_int_equal(ans[i].res, STORE_ACCEPTED);
    }

    store_open(f);
    a = get_wait(f, "kept", 4);
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_int_equal(a.mark, 41);
    a = raise_wait(f, "kept", 40);
    assert_int_equal(a.res, STORE_STALE);
    assert_int_equal(a.mark, 41);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "closing/%d", i);
        a = get_wait(f, name, strlen(name));
        assert_int_equal(a.mark, i + 1);
    }
    store_close(f);
}

static void
test_long_names(void **state)
{
    struct fixture *f = *state;
    char n512[512], n600[600], n600b[600];
    char nul[8] = {'\0', 'a', 'b'};
    struct answer a;

    memset(n512, 'a', sizeof(n512));
    memset(n600, 'b', sizeof(n600));
    memcpy(n600b, n600, sizeof(n600b));
    n600b[599] = 'c'; /* same first 511 bytes, different name */

    store_open(f);
    do_raise(f, n512, sizeof(n512), 10, &a);
    run_until_done(f);
    assert_int_equal(a.res, STORE_ACCEPTED);
    do_raise(f, n600, sizeof(n600), 20, &a);
    run_until_done(f);
    assert_int_equal(a.res, STORE_ACCEPTED);
    do_raise(f, n600b, sizeof(n600b), 30, &a);
    run_until_done(f);
    assert_int_equal(a.res, STORE_ACCEPTED);
    do_raise(f, nul, 3, 40, &a);
    run_until_done(f);
    assert_int_equal(a.res, STORE_ACCEPTED);
    do_raise(f, "", 0, 50, &a);
    run_until_done(f);
    assert_int_equal(a.res, STORE_ACCEPTED);
    store_close(f);

    store_open(f);
    assert_int_equal(get_wait(f, n512, sizeof(n512)).mark, 10);
    assert_int_equal(get_wait(f, n512, 511).mark, 0);
    assert_int_equal(get_wait(f, n600, sizeof(n600)).mark, 20);
    assert_int_equal(get_wait(f, n600b, sizeof(n600b)).mark, 30);
    assert_int_equal(get_wait(f, nul, 3).mark, 40);
    assert_int_equal(get_wait(f, nul, 2).mark, 0);
    assert_int_equal(get_wait(f, "", 0).mark, 50);
    do_raise(f, n600, sizeof(n600), 19, &a);
    run_until_done(f);
    assert_int_equal(a.res, STORE_STALE);
    assert_int_equal(a.mark, 20);
    store_close(f);
}

/* fresh: no mark at open, so no fenced write went through the store
 * before (tidemark then needs no hold after its start). Marks only the
 * journal holds count too. */
static void
test_fresh(void **state)
{
    struct fixture *f = *state;
    char jpath[160];
    char err[256];
    struct journal *j;

    store_open(f);
    assert_true(store_lmdb_fresh(f->st));
    store_close(f);
    store_open(f); /* reopened, still without a mark */
    assert_true(store_lmdb_fresh(f->st));
    assert_int_equal(raise_wait(f, "a", 5).res, STORE_ACCEPTED);
    assert_true(store_lmdb_fresh(f->st)); /* as it was at open */
    store_close(f);
    store_open(f);
    assert_false(store_lmdb_fresh(f->st));
    store_close(f);

    /* A store whose only mark is in the journal (kill -9 before a
     * checkpoint). */
    snprintf(f->path, sizeof(f->path), "%s/journal-only.mdb", f->dir);
    store_open(f);
    store_close(f);
    snprintf(jpath, sizeof(jpath), "%s-journal", f->path);
    j = journal_open(jpath, err, sizeof(err));
    assert_non_null(j);
    journal_restart(j, 0); /* no checkpoint yet: epoch 0 */
    assert_int_equal(journal_add(j, "b", 1, 3), 0);
    assert_int_equal(journal_sync(j), 0);
    journal_close(j);
    store_open(f);
    assert_false(store_lmdb_fresh(f->st));
    store_close(f);
}

/* A get that may answer either of two marks: the one acknowledged when
 * it was asked, or the one a raise still pending then is writing. */
struct ranged {
    struct answer a;
    int64_t lo, hi;
};

#define READ_NAMES 1500
#define READ_ROUNDS 4

/* Reads are answered beside the writer, never below an acknowledged
 * raise and never above what was raised: rounds of raises of the same
 * names (together past a checkpoint, which moves the journal's marks into
 * LMDB), with gets asked on every pass of the loop while they are
 * pending, and after each round is acknowledged. */
static void
test_reads_beside_writer(void **state)
{
    static struct answer raised[READ_NAMES];
    static struct ranged got[READ_ROUNDS * 4096];
    struct fixture *f = *state;
    struct store_lmdb_stats st;
    uint64_t x = 2463534242ull;
    size_t ngot = 0;
    char name[32];

    store_open(f);
    for (int64_t round = 1; round <= READ_ROUNDS; round++) {
        for (int i = 0; i < READ_NAMES; i++) {
            snprintf(name, sizeof(name), "read/%d", i);
            do_raise(f, name, strlen(name), round, &raised[i]);
        }
        /* While the round is pending: each name is at round - 1 or
         * round, acknowledged or not. */
        while (f->pending > 0 && ngot + 16 <= sizeof(got) / sizeof(got[0])) {
            for (int k = 0; k < 16; k++) {
                struct ranged *g = &got[ngot++];
                int i;

                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                i = (int)(x % READ_NAMES);
                snprintf(name, sizeof(name), "read/%d", i);
                g->lo = raised[i].done ? round : round - 1;
                g->hi = round;
                do_get(f, name, strlen(name), &g->a);
            }
            assert_int_equal(event_base_loop(f->base, EVLOOP_ONCE), 0);
        }
        run_until_done(f);
        for (int i = 0; i < READ_NAMES; i++) {
            assert_int_equal(raised[i].res, STORE_ACCEPTED);
            snprintf(name, sizeof(name), "read/%d", i);
            assert_true(get_wait(f, name, strlen(name)).mark == round);
        }
    }
    for (size_t k = 0; k < ngot; k++) {
        assert_int_equal(got[k].a.done, 1);
        assert_int_equal(got[k].a.res, STORE_ACCEPTED);
        assert_true(got[k].a.mark >= got[k].lo);
        assert_true(got[k].a.mark <= got[k].hi);
    }
    store_lmdb_stats(f->st, &st);
    assert_true(st.checkpoints >= 1); /* the rounds crossed one */
    store_close(f);
}

/* peek, the read a refusal makes at once, beside the writer: never
 * below an acknowledged raise, never above what was raised, across
 * checkpoints (which move the journal's marks into the file); with
 * far more reads than LMDB has reader slots. */
static void
test_peek_beside_writer(void **state)
{
    static struct answer raised[READ_NAMES];
    struct fixture *f = *state;
    struct store_lmdb_stats st;
    uint64_t x = 88172645463325252ull;
    size_t npeek = 0;
    char name[32];
    int64_t mark;

    store_open(f);
    assert_true(f->ops->peek(f->st, "peek/none", 9, &mark));
    assert_int_equal(mark, 0);
    for (int64_t round = 1; round <= READ_ROUNDS; round++) {
        for (int i = 0; i < READ_NAMES; i++) {
            snprintf(name, sizeof(name), "peek/%d", i);
            do_raise(f, name, strlen(name), round, &raised[i]);
        }
        while (f->pending > 0) {
            for (int k = 0; k < 16; k++) {
                int i;

                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                i = (int)(x % READ_NAMES);
                snprintf(name, sizeof(name), "peek/%d", i);
                assert_true(f->ops->peek(f->st, name, strlen(name), &mark));
                assert_true(mark >= (raised[i].done ? round : round - 1));
                assert_true(mark <= round);
                npeek++;
            }
            assert_int_equal(event_base_loop(f->base, EVLOOP_ONCE), 0);
        }
        for (int i = 0; i < READ_NAMES; i++) {
            assert_int_equal(raised[i].res, STORE_ACCEPTED);
            snprintf(name, sizeof(name), "peek/%d", i);
            assert_true(f->ops->peek(f->st, name, strlen(name), &mark));
            assert_int_equal(mark, round);
        }
    }
    assert_true(npeek > 0);
    store_lmdb_stats(f->st, &st);
    assert_true(st.checkpoints >= 1); /* the rounds crossed one */
    store_close(f);
}

/* Each read takes the loop thread's one reader slot and gives it back:
 * far more reads than LMDB has slots (126) are all answered. */
static void
test_reads_keep_one_slot(void **state)
{
    struct fixture *f = *state;

    store_open(f);
    assert_int_equal(raise_wait(f, "slot", 9).res, STORE_ACCEPTED);
    for (int i = 0; i < 2000; i++) {
        struct answer a = get_wait(f, i % 2 ? "slot" : "none", 4);

        assert_int_equal(a.res, STORE_ACCEPTED);
        assert_int_equal(a.mark, i % 2 ? 9 : 0);
    }
    store_close(f);
}

/* Closing with reads not yet answered answers them with their marks;
 * a read a callback makes while the store closes is refused. */
static struct answer late;

static void
on_answer_read_again(void *arg, enum store_result res, int64_t mark)
{
    on_answer(arg, res, mark);
    do_get(cur, "shut", 4, &late);
}

static void
test_close_with_reads(void **state)
{
    struct fixture *f = *state;
    struct answer a[64];
    struct answer first;

    store_open(f);
    assert_int_equal(raise_wait(f, "shut", 4).res, STORE_ACCEPTED);
    memset(&first, 0, sizeof(first));
    f->pending++;
    f->ops->get(f->st, "shut", 4, on_answer_read_again, &first);
    for (int i = 0; i < 64; i++) {
        do_get(f, i % 2 ? "shut" : "open", 4, &a[i]);
    }
    store_close(f);
    assert_int_equal(first.res, STORE_ACCEPTED);
    assert_int_equal(first.mark, 4);
    assert_int_equal(late.done, 1);
    assert_int_equal(late.res, STORE_ERROR);
    for (int i = 0; i < 64; i++) {
        assert_int_equal(a[i].done, 1);
        assert_int_equal(a[i].res, STORE_ACCEPTED);
        assert_int_equal(a[i].mark, i % 2 ? 4 : 0);
    }
}

/* A million resources fit in a modest map, survive a reopen, and every
 * one of them keeps its own mark. */
static void
test_million_resources(void **state)
{
    enum { N = 1000000, BATCH = 8192 };
    struct fixture *f = *state;
    static struct answer ans[BATCH];
    char name[32];
    struct stat st;
    int i = 0;

    f->cfg.map_size = (int64_t)256 << 20;
    store_open(f);
    while (i < N) {
        int n = 0;

        for (; n < BATCH && i < N; n++, i++) {
            int len = snprintf(name, sizeof(name), "tenant/%07d", i);

            do_raise(f, name, (size_t)len, (int64_t)i + 1, &ans[n]);
        }
        run_until_done(f);
        for (int k = 0; k < n; k++) {
            assert_int_equal(ans[k].res, STORE_ACCEPTED);
        }
    }
    store_close(f);
    store_open(f);
    for (i = 0; i < N; i += 9973) {
        int len = snprintf(name, sizeof(name), "tenant/%07d", i);

        assert_true(get_wait(f, name, (size_t)len).mark == (int64_t)i + 1);
    }
    store_close(f);
    assert_int_equal(stat(f->path, &st), 0);
    /* About 50 bytes a mark; far below the 256 MiB map. */
    if (getenv("TEST_VERBOSE") != NULL) {
        fprintf(stderr, "%d marks: %lld bytes\n", N, (long long)st.st_size);
    }
    assert_true(st.st_size < (off_t)N * 100);
}

static void
test_open_errors(void **state)
{
    struct fixture *f = *state;
    char err[256];
    char path[160];

    f->cfg.path = "";
    assert_null(f->ops->open(f->base, &f->cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "path"));
    /* A parent that is a file. */
    snprintf(path, sizeof(path), "%s/file", f->dir);
    touch(path);
    snprintf(path, sizeof(path), "%s/file/marks.mdb", f->dir);
    f->cfg.path = path;
    assert_null(f->ops->open(f->base, &f->cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "lmdb"));
    /* Not an LMDB file. */
    snprintf(path, sizeof(path), "%s/garbage", f->dir);
    {
        FILE *fp = fopen(path, "w");
        assert_non_null(fp);
        for (int i = 0; i < 10000; i++) {
            fputs("not lmdb ", fp);
        }
        fclose(fp);
    }
    assert_null(f->ops->open(f->base, &f->cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "cannot open"));
    f->cfg.path = f->path;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test_setup_teardown(test_reopen_keeps_marks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_long_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fresh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_million_resources, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reads_beside_writer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_peek_beside_writer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reads_keep_one_slot, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_close_with_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
