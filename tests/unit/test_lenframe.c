/* test_lenframe.c: ZooKeeper's frames weighed by their length headers,
 * whatever pieces the stream comes in: a frame of up to the limit goes
 * by, its header and body; one whose header says more is found at that
 * header, before a reader has it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../policies/lenframe.h"
#include "frame_test.h"

#define MAX (16u << 20)

/* A frame of body bytes (each 'x'), whole, in one buffer of *n bytes. */
static uint8_t *
frame(uint32_t body, size_t *n)
{
    uint8_t *p = malloc(4 + (size_t)body);

    assert_non_null(p);
    put_len(p, body);
    memset(p + 4, 'x', body);
    *n = 4 + (size_t)body;
    return p;
}

/* The stream p (n bytes) in pieces of step bytes: passed whole, or the
 * length of the first header over max (-1 when none). */
static int64_t
pass_in_steps(const uint8_t *p, size_t n, size_t step, uint32_t max)
{
    struct lenframe f = {0};

    for (size_t off = 0; off < n; off += step) {
        uint32_t len = 0;
        size_t k = n - off < step ? n - off : step;

        if (!lenframe_pass(&f, p + off, k, max, &len)) {
            return len;
        }
    }
    return -1;
}

/* Length classes, each frame alone and whole: up to the limit go by,
 * past it is found, at once and in pieces of 1, 3 and 4096 bytes. */
static void
test_length_classes(void **state)
{
    static const uint32_t fits[] = {0, 1, 30, 300, 65536, MAX - 1, MAX};
    static const uint32_t over[] = {MAX + 1, 32u << 20, 0x7fffffffu,
                                    0x80000000u, 0xffffffffu};
    static const size_t steps[] = {1, 3, 4096, SIZE_MAX};

    (void)state;
    for (size_t i = 0; i < sizeof(fits) / sizeof(fits[0]); i++) {
        size_t n;
        uint8_t *p = frame(fits[i], &n);

        for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
            if (steps[s] == 1 && fits[i] > 65536) {
                continue; /* 16 million calls say nothing more */
            }
            assert_int_equal(pass_in_steps(p, n, steps[s], MAX), -1);
        }
        free(p);
    }
    for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
        uint8_t h[4];

        put_len(h, over[i]);
        for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
            assert_int_equal(pass_in_steps(h, 4, steps[s], MAX), over[i]);
        }
    }
}

/* Frames one after another: each header is read where the last body
 * ended, in one piece or across pieces; the one too long is found even
 * after many that were not. */
static void
test_frames_in_a_row(void **state)
{
    uint8_t s[64];
    size_t n = 0;

    (void)state;
    put_len(s + n, 0); /* an empty frame */
    n += 4;
    put_len(s + n, 5);
    memcpy(s + n + 4, "\xff\xff\xff\xff\xff", 5); /* a body like a header */
    n += 9;
    put_len(s + n, 2);
    memcpy(s + n + 4, "ab", 2);
    n += 6;
    put_len(s + n, 17);
    n += 4;
    for (size_t step = 1; step <= n; step++) {
        assert_int_equal(pass_in_steps(s, n, step, 16), 17);
        assert_int_equal(pass_in_steps(s, n, step, 17), -1);
    }
}

/* Where the stream stands between pieces: the body still to come, and a
 * header split after each of its bytes. */
static void
test_state_between_pieces(void **state)
{
    struct lenframe f = {0};
    uint8_t h[4] = {0, 0, 1, 0}, body[300];
    uint32_t len = 0;

    (void)state;
    memset(body, 0xff, sizeof(body));
    assert_true(lenframe_pass(&f, h, 3, MAX, &len));
    assert_int_equal(f.have, 3);
    assert_true(lenframe_pass(&f, h + 3, 1, MAX, &len));
    assert_int_equal(f.left, 256);
    assert_int_equal(f.have, 0);
    assert_true(lenframe_pass(&f, body, 255, MAX, &len));
    assert_int_equal(f.left, 1);
    /* The body's last byte, then a header that says 0xffffffff. */
    assert_false(lenframe_pass(&f, body, 5, MAX, &len));
    assert_int_equal(len, 0xffffffffu);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_length_classes),
        cmocka_unit_test(test_frames_in_a_row),
        cmocka_unit_test(test_state_between_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
