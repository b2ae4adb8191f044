/* test_marks.c: the bounded mark cache: lookups, marks that never go
 * down, the capacity bound, eviction and the ways' key buffers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../proxy/store/marks.h"

static void
put_s(struct marks *m, const char *res, int64_t mark)
{
    marks_put(m, res, strlen(res), mark);
}

static int64_t
get_s(struct marks *m, const char *res)
{
    return marks_get(m, res, strlen(res));
}

static void
test_put_get(void **state)
{
    static const struct {
        const char *res;
        int64_t mark;
    } cases[] = {
        {"documents/1", 1},
        {"documents/2", 42},
        {"documents/10", INT64_MAX},
        {"a", 7},
        {"", 9},
        {"a/very/long/resource/name/that/spans/several/hash/blocks/x", 3},
    };
    struct marks *m = marks_new(64);
    size_t n = sizeof(cases) / sizeof(cases[0]);

    (void)state;
    assert_non_null(m);
    assert_int_equal(get_s(m, "documents/1"), 0);
    for (size_t i = 0; i < n; i++) {
        put_s(m, cases[i].res, cases[i].mark);
    }
    for (size_t i = 0; i < n; i++) {
        assert_true(get_s(m, cases[i].res) == cases[i].mark);
    }
    assert_int_equal(marks_count(m), n);
    /* A prefix, or the same bytes with a different length, is another
     * resource. */
    assert_int_equal(get_s(m, "documents/"), 0);
    assert_int_equal(marks_get(m, "documents/1", 10), 0);
    assert_int_equal(get_s(m, "documents/3"), 0);
    marks_free(m);
}

static void
test_never_lowers(void **state)
{
    static const int64_t seq[] = {5, 3, 5, 9, 1, 8, 9, 0, -4, 12, 11};
    static const int64_t want[] = {5, 5, 5, 9, 9, 9, 9, 9, 9, 12, 12};
    struct marks *m = marks_new(16);

    (void)state;
    assert_non_null(m);
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
        put_s(m, "r", seq[i]);
        assert_true(get_s(m, "r") == want[i]);
    }
    assert_int_equal(marks_count(m), 1);
    marks_free(m);
}

/* Names that differ in a few characters, so many share long prefixes. */
static size_t
name_of(char *buf, size_t size, size_t i)
{
    return (size_t)snprintf(buf, size, "tenant/%zu/documents/%zu", i % 7, i);
}

static void
test_capacity_bound(void **state)
{
    static const size_t caps[] = {16, 17, 100, 1000, 4096};

    (void)state;
    for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
        size_t cap = caps[c];
        struct marks *m = marks_new(cap);
        size_t present = 0;
        char buf[64];

        assert_non_null(m);
        for (size_t i = 0; i < 10 * cap; i++) {
            size_t len = name_of(buf, sizeof(buf), i);
            marks_put(m, buf, len, (int64_t)i + 1);
            assert_true(marks_count(m) <= cap);
        }
        /* Every name is either gone (0) or has exactly its own mark. */
        for (size_t i = 0; i < 10 * cap; i++) {
            size_t len = name_of(buf, sizeof(buf), i);
            int64_t got = marks_get(m, buf, len);
            assert_true(got == 0 || got == (int64_t)i + 1);
            present += got != 0;
        }
        assert_int_equal(present, marks_count(m));
        /* The table is not wasted: at least half of cap stays used. */
        assert_true(present >= cap / 2);
        marks_free(m);
    }
}

static void
test_eviction_reput(void **state)
{
    struct marks *m = marks_new(64);
    char buf[64];

    (void)state;
    assert_non_null(m);
    /* An evicted name put again holds the new value, even a lower one:
     * the cache is a lower bound, never a stale higher value. */
    put_s(m, "victim", 50);
    put_s(m, "raised", 10);
    for (size_t i = 0; i < 10000; i++) {
        size_t len = name_of(buf, sizeof(buf), i);
        marks_put(m, buf, len, 1);
        if (i == 5000) {
            put_s(m, "raised", 20);
        }
    }
    put_s(m, "victim", 30);
    assert_true(get_s(m, "victim") == 30 || get_s(m, "victim") == 50);
    put_s(m, "raised", 25);
    assert_true(get_s(m, "raised") == 25);
    put_s(m, "raised", 24);
    assert_true(get_s(m, "raised") == 25);
    marks_free(m);
}

static void
test_hot_name_survives(void **state)
{
    struct marks *m = marks_new(32);
    char buf[64];

    (void)state;
    assert_non_null(m);
    put_s(m, "hot", 77);
    for (size_t i = 0; i < 5000; i++) {
        size_t len = name_of(buf, sizeof(buf), i);
        marks_put(m, buf, len, 1);
        /* Read between inserts: CLOCK gives it a second chance. */
        assert_true(get_s(m, "hot") == 77);
    }
    marks_free(m);
}

static void
test_long_names(void **state)
{
    size_t big = 70000;
    char *name = malloc(big);
    struct marks *m = marks_new(16);

    (void)state;
    assert_non_null(name);
    assert_non_null(m);
    memset(name, 'x', big);
    /* 512 bytes (TM_RESOURCE_MAX) is cached like any name. */
    marks_put(m, name, 512, 4);
    assert_int_equal(marks_get(m, name, 512), 4);
    assert_int_equal(marks_get(m, name, 511), 0);
    /* Beyond 65535 bytes nothing is cached, and nothing breaks. */
    marks_put(m, name, big, 5);
    assert_int_equal(marks_get(m, name, big), 0);
    assert_int_equal(marks_count(m), 1);
    free(name);
    marks_free(m);
}

/* Every length class of a name, each beside the one a byte longer: 1,
 * tens, a way's line (44) and past it, hundreds, the largest cached
 * (65,535) and one more, which is never cached. Odd bytes too: a name is
 * bytes, compared whole, NUL and 0xff included. */
static void
test_name_length_classes(void **state)
{
    static const size_t lens[] = {1, 2, 43, 44, 45, 46, 300, 65534, 65535};
    size_t big = 65536;
    char *a = malloc(big);
    char *b = malloc(big);
    struct marks *m = marks_new(64);

    (void)state;
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(m);
    for (size_t i = 0; i < big; i++) {
        a[i] = (char)(i % 7 == 3 ? 0 : i % 5 == 1 ? 0xff : 'a' + i % 26);
    }
    memcpy(b, a, big);
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        size_t len = lens[k];

        marks_put(m, a, len, (int64_t)(10 + k));
        assert_int_equal(marks_get(m, a, len), 10 + (int64_t)k);
        /* One differing in its last byte is another name (and each
         * name is a prefix of the next: the loop below finds them apart). */
        b[len - 1] ^= 1;
        assert_int_equal(marks_get(m, b, len), 0);
        b[len - 1] ^= 1;
        assert_int_equal(marks_get(m, b, len), 10 + (int64_t)k);
    }
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        assert_int_equal(marks_get(m, a, lens[k]), 10 + (int64_t)k);
    }
    /* 65,536 bytes: not cached, and nothing else lost. */
    marks_put(m, a, big, 99);
    assert_int_equal(marks_get(m, a, big), 0);
    assert_int_equal(marks_count(m), sizeof(lens) / sizeof(lens[0]));
    free(a);
    free(b);
    marks_free(m);
}

/* Names shorter and longer than a way's 44 inline bytes take turns in
 * the same ways (evicting each other): each reads back its own mark,
 * and the cache holds what it last kept. ASan checks the buffers. */
static void
test_key_buffers(void **state)
{
    struct marks *m = marks_new(16);
    char name[128];
    int kept = 0;

    (void)state;
    assert_non_null(m);
    for (int i = 0; i < 2000; i++) {
        size_t len = 1 + (size_t)(i * 37) % 100;

        memset(name, 'k', sizeof(name));
        snprintf(name, sizeof(name), "%d", i);
        name[strlen(name)] = 'k';
        marks_put(m, name, len, 1000 + i);
        assert_int_equal(marks_get(m, name, len), 1000 + i);
    }
    for (int i = 0; i < 2000; i++) {
        size_t len = 1 + (size_t)(i * 37) % 100;
        int64_t got;

        memset(name, 'k', sizeof(name));
        snprintf(name, sizeof(name), "%d", i);
        name[strlen(name)] = 'k';
        got = marks_get(m, name, len);
        assert_true(got == 0 || got == 1000 + i);
        kept += got != 0;
    }
    assert_true(kept > 0);
    /* Full: as many entries as whole buckets of 16 hold. */
    assert_true(marks_count(m) > 16 / 2 && marks_count(m) <= 16);
    marks_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get),
        cmocka_unit_test(test_never_lowers),
        cmocka_unit_test(test_capacity_bound),
        cmocka_unit_test(test_eviction_reput),
        cmocka_unit_test(test_hot_name_survives),
        cmocka_unit_test(test_long_names),
        cmocka_unit_test(test_key_buffers),
        cmocka_unit_test(test_name_length_classes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
