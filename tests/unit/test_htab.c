/* test_htab.c: the seeded, growing table of names (htab.h): every name
 * found after the table doubled many times over, deletions from the
 * middle of a chain, names whose hashes collide, and the seed changing
 * where a name lands. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/htab.h"

struct ent {
    struct hnode node;
    size_t len;
    char name[32];
};

static struct ent *
find(const struct htab *t, const char *name, size_t len, uint64_t h)
{
    struct hnode *n = htab_find(t, name, len, h);

    return n != NULL ? HTAB_ENTRY(n, struct ent, node) : NULL;
}

static struct ent *
lookup(const struct htab *t, const char *name)
{
    return find(t, name, strlen(name), htab_key(t, name, strlen(name)));
}

#define N 100000

static void
test_every_name_is_found_as_the_table_grows(void **state)
{
    struct htab t;
    struct ent *ents = calloc(N, sizeof(*ents));
    char name[32];

    (void)state;
    assert_non_null(ents);
    assert_true(htab_init(&t, 4, 42));
    for (size_t i = 0; i < N; i++) {
        ents[i].len = (size_t)snprintf(ents[i].name, sizeof(ents[i].name),
                                       "documents/%zu", i);
        htab_add(&t, &ents[i].node, ents[i].name, ents[i].len,
                 htab_key(&t, ents[i].name, ents[i].len));
    }
    assert_int_equal(t.n, N);
    /* One chain per entry at most: 100,000 entries in 131,072 chains. */
    assert_int_equal(t.mask + 1, 131072);
    for (size_t i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "documents/%zu", i);
        assert_ptr_equal(lookup(&t, name), &ents[i]);
    }
    assert_null(lookup(&t, "documents/100000"));
    assert_null(lookup(&t, "documents/"));
    /* Every other one out: the rest stay found. */
    for (size_t i = 0; i < N; i += 2) {
        htab_del(&t, &ents[i].node);
    }
    assert_int_equal(t.n, N / 2);
    for (size_t i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "documents/%zu", i);
        assert_ptr_equal(lookup(&t, name), i % 2 ? &ents[i] : NULL);
    }
    htab_fini(&t);
    free(ents);
}

static void
test_colliding_hashes_share_a_chain_and_stay_apart(void **state)
{
    struct htab t;
    struct ent e[3] = {{.len = 1, .name = "a"},
                       {.len = 1, .name = "b"},
                       {.len = 2, .name = "ab"}};

    (void)state;
    assert_true(htab_init(&t, 8, 1));
    /* One hash for all three: only the names tell them apart. */
    for (int i = 0; i < 3; i++) {
        htab_add(&t, &e[i].node, e[i].name, e[i].len, 7);
    }
    assert_ptr_equal(find(&t, "a", 1, 7), &e[0]);
    assert_ptr_equal(find(&t, "b", 1, 7), &e[1]);
    assert_ptr_equal(find(&t, "ab", 2, 7), &e[2]);
    htab_del(&t, &e[1].node); /* the middle of the chain */
    assert_ptr_equal(find(&t, "a", 1, 7), &e[0]);
    assert_null(find(&t, "b", 1, 7));
    assert_ptr_equal(find(&t, "ab", 2, 7), &e[2]);
    htab_del(&t, &e[1].node); /* not in it any more: nothing happens */
    assert_int_equal(t.n, 2);
    htab_fini(&t);
}

static int drained;

static void
count_and_free(struct hnode *n, void *arg)
{
    assert_ptr_equal(arg, &drained);
    drained++;
    free(HTAB_ENTRY(n, struct ent, node));
}

static void
test_drain_gives_every_entry_once(void **state)
{
    struct htab t;

    (void)state;
    assert_true(htab_init(&t, 2, 3));
    for (int i = 0; i < 1000; i++) {
        struct ent *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->len = (size_t)snprintf(e->name, sizeof(e->name), "%d", i);
        htab_add(&t, &e->node, e->name, e->len, htab_key(&t, e->name, e->len));
    }
    drained = 0;
    htab_drain(&t, count_and_free, &drained);
    assert_int_equal(drained, 1000);
    assert_int_equal(t.n, 0);
    assert_null(lookup(&t, "1"));
    htab_fini(&t);
}

/* Names of every length class, odd bytes among them: the hash reads
 * each byte once, whole 16-byte steps and the tail, and never gives 0
 * (0 would mean an empty way in the mark cache). */
static void
test_hash_reads_every_byte_of_every_length(void **state)
{
    unsigned char buf[1100];

    (void)state;
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = (unsigned char)(i * 131 + 7);
    }
    const size_t lens[] = {0, 1, 15, 16, 17, 31, 32, 33, 255, 1024, 1099};
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        size_t len = lens[k];
        uint64_t h = htab_hash(9, buf, len);

        assert_true(h != 0);
        for (size_t i = 0; i < len; i++) {
            buf[i] ^= 0x80;
            assert_true(htab_hash(9, buf, len) != h);
            buf[i] ^= 0x80;
        }
        if (len > 0) {
            /* One byte more or less is another name. */
            assert_true(htab_hash(9, buf, len - 1) != h);
        }
        assert_true(htab_hash(9, buf, len) == h);
        assert_true(htab_hash(10, buf, len) != h);
    }
}

/* Names aimed at one chain of one seed spread out under another: what a
 * client can compute offline does not hold in a process whose seed it
 * cannot know. */
static void
test_names_aimed_at_one_chain_spread_under_another_seed(void **state)
{
    char name[32];
    size_t aimed = 0, same = 0;

    (void)state;
    for (int i = 0; aimed < 200; i++) {
        int len = snprintf(name, sizeof(name), "r%d", i);
        uint64_t h = htab_hash(1, name, (size_t)len);

        if ((h & 1023) != 0) {
            continue;
        }
        aimed++;
        same += (htab_hash(2, name, (size_t)len) & 1023) == 0;
    }
    /* Under seed 2, about 200 / 1024 of them land in chain 0 by chance. */
    assert_true(same <= 3);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_name_is_found_as_the_table_grows),
        cmocka_unit_test(test_colliding_hashes_share_a_chain_and_stay_apart),
        cmocka_unit_test(test_drain_gives_every_entry_once),
        cmocka_unit_test(test_hash_reads_every_byte_of_every_length),
        cmocka_unit_test(
            test_names_aimed_at_one_chain_spread_under_another_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
