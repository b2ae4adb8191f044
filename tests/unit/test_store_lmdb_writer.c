/* test_store_lmdb_writer.c: the LMDB store's writer: raise semantics,
 * group commit, the queue bound, raises from callbacks, a full map (and
 * the full state it leaves), a failed sync (fdatasync made to fail in
 * this process), and journal replay. */
#include "lmdb_test.h"

static void
test_raise_semantics(void **state)
{
    static const struct {
        const char *res;
        int64_t token;
        enum store_result want;
        int64_t mark;
    } steps[] = {
        {"documents/1", 5, STORE_ACCEPTED, 5},
        {"documents/1", 3, STORE_STALE, 5},
        {"documents/1", 5, STORE_ACCEPTED, 5}, /* equal: accepted */
        {"documents/1", 7, STORE_ACCEPTED, 7},
        {"documents/1", 6, STORE_STALE, 7},
        {"documents/2", 1, STORE_ACCEPTED, 1},
        {"documents/1", INT64_MAX, STORE_ACCEPTED, INT64_MAX},
        {"documents/1", INT64_MAX - 1, STORE_STALE, INT64_MAX},
        {"documents/2", 2, STORE_ACCEPTED, 2},
    };
    struct fixture *f = *state;
    struct answer a;

    store_open(f);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        a = raise_wait(f, steps[i].res, steps[i].token);
        assert_int_equal(a.res, steps[i].want);
        assert_true(a.mark == steps[i].mark);
    }
    a = get_wait(f, "documents/1", strlen("documents/1"));
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_true(a.mark == INT64_MAX);
    a = get_wait(f, "documents/2", strlen("documents/2"));
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_int_equal(a.mark, 2);
    a = get_wait(f, "documents/3", strlen("documents/3"));
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_int_equal(a.mark, 0);
    /* The name is copied: a raise may pass a buffer it reuses. */
    {
        char buf[32];
        snprintf(buf, sizeof(buf), "documents/9");
        do_raise(f, buf, strlen(buf), 4, &a);
        memset(buf, 'z', sizeof(buf));
        run_until_done(f);
        assert_int_equal(a.res, STORE_ACCEPTED);
        a = get_wait(f, "documents/9", strlen("documents/9"));
        assert_int_equal(a.mark, 4);
    }
    store_close(f);
}

/* Many raises in one turn, several per resource, answered as if one
 * after the other, in one write transaction. */
static void
test_group_commit(void **state)
{
    enum { N = 2000, NRES = 13 };
    struct fixture *f = *state;
    static struct answer ans[N];
    int64_t model[NRES] = {0};
    struct store_lmdb_stats st;
    char name[32];
    uint64_t x = 88172645463325252ull;

    store_open(f);
    for (int i = 0; i < N; i++) {
        int r;
        int64_t token;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r = (int)(x % NRES);
        token = (int64_t)(x >> 40) % 500 + 1;
        snprintf(name, sizeof(name), "group/%d", r);
        do_raise(f, name, strlen(name), token, &ans[i]);
    }
    run_until_done(f);
    store_lmdb_stats(f->st, &st);
    assert_int_equal(st.batches, 1);
    assert_int_equal(st.commits, 1);
    assert_int_equal(st.largest_batch, N);
    assert_int_equal(st.raises, N);

    /* Replay the same sequence against a model. */
    x = 88172645463325252ull;
    for (int i = 0; i < N; i++) {
        int r;
        int64_t token;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r = (int)(x % NRES);
        token = (int64_t)(x >> 40) % 500 + 1;
        assert_int_equal(ans[i].done, 1);
        if (token >= model[r]) {
            model[r] = token;
            assert_int_equal(ans[i].res, STORE_ACCEPTED);
            assert_true(ans[i].mark == token);
        } else {
            assert_int_equal(ans[i].res, STORE_STALE);
            assert_true(ans[i].mark == model[r]);
        }
    }
    for (int r = 0; r < NRES; r++) {
        struct answer a;
        snprintf(name, sizeof(name), "group/%d", r);
        a = get_wait(f, name, strlen(name));
        assert_true(a.mark == model[r]);
    }
    /* Gets never reach the writer; a turn whose raises write nothing
     * does not write the journal. */
    store_lmdb_stats(f->st, &st);
    assert_int_equal(st.batches, 1);
    assert_int_equal(st.commits, 1);
    snprintf(name, sizeof(name), "group/%d", 0);
    (void)raise_wait(f, name, 1);
    store_lmdb_stats(f->st, &st);
    assert_int_equal(st.batches, 2);
    assert_int_equal(st.commits, 1);
    store_close(f);
}

/* Past STORE_LMDB_QUEUE_MAX queued raises, the excess is refused at once
 * and the queued ones still commit. */
static void
test_queue_bound(void **state)
{
    enum { EXTRA = 10, N = STORE_LMDB_QUEUE_MAX + EXTRA };
    struct fixture *f = *state;
    static struct answer ans[N];
    char name[32];

    store_open(f);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "queue/%d", i % 100);
        do_raise(f, name, strlen(name), i + 1, &ans[i]);
    }
    run_until_done(f);
    for (int i = 0; i < N; i++) {
        assert_int_equal(ans[i].res, i < STORE_LMDB_QUEUE_MAX ? STORE_ACCEPTED
                                                              : STORE_ERROR);
    }
    assert_non_null(strstr(f->lastlog, "waiting for the disk"));
    assert_true(f->ops->ready(f->st));
    assert_int_equal(raise_wait(f, "queue/0", N).res, STORE_ACCEPTED);
    store_close(f);
}

struct chain {
    struct fixture *f;
    int left;
    int64_t token;
    int stale;
    int accepted;
};

/* A callback that raises again: the next raise goes in a later batch. */
static void
on_chain(void *arg, enum store_result res, int64_t mark)
{
    struct chain *c = arg;

    (void)mark;
    c->f->pending--;
    if (res == STORE_ACCEPTED) {
        c->accepted++;
    } else if (res == STORE_STALE) {
        c->stale++;
    }
    if (c->left-- > 0) {
        c->f->pending++;
        c->f->ops->raise(c->f->st, "chain", 5, ++c->token, on_chain, c);
    }
}

static void
test_raise_from_callback(void **state)
{
    struct fixture *f = *state;
    struct chain c = {f, 50, 0, 0, 0};

    store_open(f);
    f->pending++;
    f->ops->raise(f->st, "chain", 5, ++c.token, on_chain, &c);
    run_until_done(f);
    assert_int_equal(c.accepted, 51);
    assert_int_equal(c.stale, 0);
    store_close(f);
}

/* A long name that differs from the others near its start. */
static void
full_name(char *name, size_t size, int i)
{
    char num[32];
    int n = snprintf(num, sizeof(num), "full/%08d/", i);

    memset(name, 'm', size);
    memcpy(name, num, (size_t)n);
}

/* A tiny map fills up: the raise that does not fit is an error, the
 * store keeps working and earlier marks stay. */
static void
test_map_full(void **state)
{
    struct fixture *f = *state;
    char name[480];
    struct answer a;
    int accepted = 0;
    int i;

    f->cfg.map_size = 64 * 1024;
    store_open(f);
    for (i = 0; i < 100000; i++) {
        full_name(name, sizeof(name), i);
        do_raise(f, name, sizeof(name), i + 1, &a);
        run_until_done(f);
        if (a.res != STORE_ACCEPTED) {
            break;
        }
        accepted++;
    }
    assert_int_equal(a.res, STORE_ERROR);
    assert_true(accepted > 0);
    assert_non_null(strstr(f->lastlog, "map full"));
    assert_non_null(strstr(f->lastlog, "map_size"));
    /* Still usable: reads, and raises that need no new page. */
    assert_true(f->ops->ready(f->st));
    for (i = 0; i < accepted; i++) {
        full_name(name, sizeof(name), i);
        a = get_wait(f, name, sizeof(name));
        assert_int_equal(a.res, STORE_ACCEPTED);
        assert_int_equal(a.mark, i + 1);
    }
    full_name(name, sizeof(name), 0);
    do_raise(f, name, sizeof(name), 1, &a);
    run_until_done(f);
    assert_int_equal(a.res, STORE_ACCEPTED);
    do_raise(f, name, sizeof(name), 0, &a);
    run_until_done(f);
    assert_int_equal(a.res, STORE_STALE);
    store_close(f);

    store_open(f);
    for (i = 0; i < accepted; i++) {
        full_name(name, sizeof(name), i);
        assert_int_equal(get_wait(f, name, sizeof(name)).mark, i + 1);
    }
    store_close(f);
}

static uint64_t stored_epoch(struct fixture *f);

/* raise_wait for a name of a full_name buffer (not NUL-terminated). */
static struct answer
raise_full_wait(struct fixture *f, const char *name, int64_t token)
{
    struct answer a;

    do_raise(f, name, 480, token, &a);
    run_until_done(f);
    return a;
}

/* Every accepted raise of full_name(i) has mark i + 1: read them all. */
static void
assert_all_kept(struct fixture *f, int accepted)
{
    char name[480];

    for (int i = 0; i < accepted; i++) {
        full_name(name, sizeof(name), i);
        struct answer a = get_wait(f, name, sizeof(name));
        assert_int_equal(a.res, STORE_ACCEPTED);
        assert_int_equal(a.mark, i + 1);
    }
}

/* A 1 MiB map (the smallest the loader takes) fills under batches of
 * raises: the store becomes full without LMDB failing a put, so the file
 * stays within map_size, every accepted raise stays readable, and raises
 * that would write are refused while reads and stale raises are not.
 * Reopening keeps it so, with a smaller map_size too; a larger one lets
 * raises in again. */
static void
test_full_state(void **state)
{
    enum { BATCH = 32 };
    struct fixture *f = *state;
    static struct answer ans[BATCH];
    char name[480];
    struct answer a;
    struct stat sb;
    struct journal *j;
    char jpath[160];
    char err[256];
    int accepted = 0;
    int refused = 0;
    int next = 0;

    f->cfg.map_size = 1 << 20;
    store_open(f);
    /* Raise new names a batch a loop turn until a batch is refused; the
     * accepted ones are 0 .. accepted - 1, in queue order. */
    while (refused == 0) {
        assert_true(next < 100000);
        for (int i = 0; i < BATCH; i++) {
            full_name(name, sizeof(name), next + i);
            do_raise(f, name, sizeof(name), next + i + 1, &ans[i]);
        }
        run_until_done(f);
        for (int i = 0; i < BATCH; i++) {
            if (ans[i].res == STORE_ACCEPTED) {
                assert_int_equal(refused, 0); /* full lasts */
                assert_int_equal(ans[i].mark, next + i + 1);
                accepted++;
            } else {
                assert_int_equal(ans[i].res, STORE_ERROR);
                refused++;
            }
        }
        next += BATCH;
    }
    assert_true(accepted > 1000);
    assert_non_null(strstr(f->lastlog, "map full"));
    assert_non_null(strstr(f->lastlog, "map_size"));
    assert_int_equal(stat(f->path, &sb), 0);
    assert_true(sb.st_size <= (off_t)f->cfg.map_size);
    assert_true(f->ops->ready(f->st));
    /* Later raises that would write are refused, a new name and a higher
     * mark alike; one log line for the burst. */
    int errors = f->errors_logged;
    for (int i = 0; i < BATCH; i++) {
        full_name(name, sizeof(name), next + i);
        do_raise(f, name, sizeof(name), 1, &ans[i]);
    }
    run_until_done(f);
    for (int i = 0; i < BATCH; i++) {
        assert_int_equal(ans[i].res, STORE_ERROR);
    }
    full_name(name, sizeof(name), 0);
    a = raise_full_wait(f, name, 1000000);
    assert_int_equal(a.res, STORE_ERROR);
    assert_int_equal(f->errors_logged, errors);
    /* Raises that write nothing are answered. */
    a = raise_full_wait(f, name, 1);
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_int_equal(a.mark, 1);
    a = raise_full_wait(f, name, 0);
    assert_int_equal(a.res, STORE_STALE);
    assert_int_equal(a.mark, 1);
    assert_all_kept(f, accepted);
    store_close(f);

    /* Reopened: full from the start, logged, nothing lost. */
    f->lastlog[0] = '\0';
    store_open(f);
    assert_non_null(strstr(f->lastlog, "map full"));
    assert_all_kept(f, accepted);
    full_name(name, sizeof(name), next);
    assert_int_equal(raise_full_wait(f, name, 1).res, STORE_ERROR);
    store_close(f);

    /* A map_size below what the file uses still opens, and replays a
     * journal as long as a checkpoint interval (a process killed with
     * that much not yet in LMDB, under a larger map_size) into the full
     * file: the env's headroom holds it. */
    snprintf(jpath, sizeof(jpath), "%s-journal", f->path);
    j = journal_open(jpath, err, sizeof(err));
    assert_non_null(j);
    journal_restart(j, stored_epoch(f));
    for (int i = 0; i < 4096; i++) {
        full_name(name, sizeof(name), next + 1000 + i);
        assert_true(journal_fits(j, sizeof(name)));
        assert_int_equal(journal_add(j, name, sizeof(name), 7), 0);
    }
    assert_int_equal(journal_sync(j), 0);
    journal_close(j);
    f->cfg.map_size = 512 * 1024;
    f->lastinfo[0] = '\0';
    store_open(f);
    assert_non_null(strstr(f->lastinfo, "replayed 4096 raises"));
    assert_all_kept(f, accepted);
    for (int i = 0; i < 4096; i += 97) {
        full_name(name, sizeof(name), next + 1000 + i);
        assert_int_equal(get_wait(f, name, sizeof(name)).mark, 7);
    }
    full_name(name, sizeof(name), next);
    assert_int_equal(raise_full_wait(f, name, 1).res, STORE_ERROR);
    store_close(f);

    /* A larger one takes raises again. */
    f->cfg.map_size = 64 << 20;
    store_open(f);
    a = raise_full_wait(f, name, 1);
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_all_kept(f, accepted);
    store_close(f);
}

/* fdatasync fails (EIO) during a commit: the batch is an error, the store
 * is failed for good, and after a restart no accepted mark is lost. */
static void
test_failed_sync(void **state)
{
    enum { N = 10 };
    struct fixture *f = *state;
    struct answer ans[N];
    struct answer a;
    char err[256];
    int64_t mark;

    store_open(f);
    a = raise_wait(f, "synced", 5);
    assert_int_equal(a.res, STORE_ACCEPTED);

    touch(f->trigger);
    for (int i = 0; i < N; i++) {
        do_raise(f, "synced", 6, 6 + i, &ans[i]);
    }
    run_until_done(f);
    for (int i = 0; i < N; i++) {
        assert_int_equal(ans[i].res, STORE_ERROR);
    }
    assert_false(f->ops->ready(f->st));
    assert_non_null(strstr(f->lastlog, "commit failed"));
    assert_non_null(strstr(f->lastlog, "restart"));

    /* The disk is fine again; the store stays failed: never retry. */
    assert_int_equal(unlink(f->trigger), 0);
    a = raise_wait(f, "synced", 100);
    assert_int_equal(a.res, STORE_ERROR);
    a = raise_wait(f, "other", 1);
    assert_int_equal(a.res, STORE_ERROR);
    a = get_wait(f, "synced", 6);
    assert_int_equal(a.res, STORE_ERROR);
    /* Nor is the file read at once: the refusal's read goes to raise. */
    assert_false(f->ops->peek(f->st, "synced", 6, &mark));
    assert_false(f->ops->ready(f->st));
    store_close(f);

    /* A restart: at least the last accepted mark. The refused raises
     * may have reached the journal before its sync failed (here they
     * did, in the page cache); a mark above every accepted token only
     * refuses more. */
    store_open(f);
    a = get_wait(f, "synced", 6);
    assert_int_equal(a.res, STORE_ACCEPTED);
    assert_true(a.mark >= 5 && a.mark <= 6 + N - 1);
    a = raise_wait(f, "synced", a.mark + 1);
    assert_int_equal(a.res, STORE_ACCEPTED);
    store_close(f);

    /* Opening syncs the directory: with failing syncs, open fails. */
    touch(f->trigger);
    assert_null(f->ops->open(f->base, &f->cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "sync"));
    assert_int_equal(unlink(f->trigger), 0);
}

/* The journal epoch LMDB holds: records of it are not in LMDB yet. */
static uint64_t
stored_epoch(struct fixture *f)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val key = {.mv_size = 14, .mv_data = "\0journal-epoch"};
    MDB_val val;
    uint64_t epoch = 0;

    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(
        mdb_env_open(env, f->path, MDB_NOSUBDIR | MDB_RDONLY, 0640), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    assert_int_equal(mdb_get(txn, dbi, &key, &val), 0);
    assert_int_equal(val.mv_size, 8);
    for (int i = 0; i < 8; i++) {
        epoch = (epoch << 8) | ((unsigned char *)val.mv_data)[i];
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return epoch;
}

/* What a process killed between its journal sync and its next
 * checkpoint leaves: records of the stored epoch that LMDB lacks. Open
 * replays them; records of the epoch before are already in LMDB and are
 * not replayed (a replay only raises, so they could not lower a mark,
 * but they are not counted either). */
static void
test_journal_replay(void **state)
{
    struct fixture *f = *state;
    char jpath[160];
    char err[256];
    struct journal *j;
    struct answer a;
    uint64_t epoch;

    store_open(f);
    assert_int_equal(raise_wait(f, "a", 5).res, STORE_ACCEPTED);
    store_close(f);
    epoch = stored_epoch(f);
    assert_true(epoch >= 1);

    snprintf(jpath, sizeof(jpath), "%s-journal", f->path);
    j = journal_open(jpath, err, sizeof(err));
    assert_non_null(j);
    journal_restart(j, epoch);
    assert_int_equal(journal_add(j, "a", 1, 7), 0);
    assert_int_equal(journal_add(j, "b", 1, 3), 0);
    assert_int_equal(journal_sync(j), 0);
    assert_int_equal(journal_add(j, "c", 1, 9), 0);
    assert_int_equal(journal_add(j, "a", 1, 6), 0); /* below: no-op */
    assert_int_equal(journal_sync(j), 0);
    journal_close(j);

    f->lastinfo[0] = '\0';
    store_open(f);
    assert_non_null(strstr(f->lastinfo, "replayed 4 raises"));
    assert_int_equal(stored_epoch(f), epoch + 1);
    a = get_wait(f, "a", 1);
    assert_true(a.res == STORE_ACCEPTED && a.mark == 7);
    assert_true(get_wait(f, "b", 1).mark == 3);
    assert_true(get_wait(f, "c", 1).mark == 9);
    a = raise_wait(f, "a", 6);
    assert_true(a.res == STORE_STALE && a.mark == 7);
    store_close(f);

    /* The same records again, now of a retired epoch: nothing moves. */
    j = journal_open(jpath, err, sizeof(err));
    assert_non_null(j);
    journal_restart(j, epoch);
    assert_int_equal(journal_add(j, "a", 1, 70), 0);
    assert_int_equal(journal_sync(j), 0);
    journal_close(j);
    f->lastinfo[0] = '\0';
    store_open(f);
    assert_string_equal(f->lastinfo, "");
    assert_true(get_wait(f, "a", 1).mark == 7);
    store_close(f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_raise_semantics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raise_from_callback, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_map_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_sync, setup, teardown),
        cmocka_unit_test_setup_teardown(test_journal_replay, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
