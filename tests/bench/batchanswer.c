/* batchanswer.c: what reading a mark store's answer costs the loop as
 * the batch grows: the PostgreSQL store's upsert answer (RETURNING one
 * row per distinct resource, in the batch's order) read into a batch of
 * N raises by pg_marks_answer_raises, on the store's own code. For each
 * N, ROUNDS rounds of REPS batches; prints the median round's time a
 * batch and a raise. A cost a raise that stays flat as N grows is the
 * aim; one that grows with N means a walk of the batch per answer.
 * Usage: batchanswer [N ...] (default 1 8 64 512, the store's largest). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <libpq-fe.h>

#include "../../proxy/store/batch.h"
#include "../../proxy/store/store_postgres_reply.h"

#define ROUNDS 5
#define REPS 200
#define NMAX 512
#define TOKEN 5

static double
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void
on_answer(void *arg, enum store_result res, int64_t mark)
{
    (void)arg;
    (void)res;
    (void)mark;
}

/* Resource i's name, as a tenant's document: len bytes at buf. */
static int
name_of(char *buf, size_t cap, int i)
{
    return snprintf(buf, cap, "tenant/%06d/doc", i);
}

/* The upsert's answer for n resources: (name, TOKEN), in name order. */
static PGresult *
answer_of(int n)
{
    PGresAttDesc cols[2] = {
        {.name = (char *)"resource",
         .typid = 25,
         .typlen = -1,
         .atttypmod = -1},
        {.name = (char *)"fence", .typid = 20, .typlen = 8, .atttypmod = -1},
    };
    PGresult *res = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
    char name[64], fence[24];

    if (res == NULL || !PQsetResultAttrs(res, 2, cols)) {
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        int nl = name_of(name, sizeof(name), i);
        int fl = snprintf(fence, sizeof(fence), "%d", TOKEN);

        if (!PQsetvalue(res, i, 0, name, nl) ||
            !PQsetvalue(res, i, 1, fence, fl)) {
            PQclear(res);
            return NULL;
        }
    }
    return res;
}

/* One batch of n raises, arrived in reverse, sorted as the store sends
 * it, answered from res: the microseconds the answer took. */
static double
one_batch(int n, const PGresult *res, struct batch_req **scratch)
{
    struct batch_list b = {0};
    char name[64];
    double t0, t1;

    for (int i = n - 1; i >= 0; i--) {
        int nl = name_of(name, sizeof(name), i);
        struct batch_req *r = batch_req_new(name, (size_t)nl, NULL, 0, TOKEN,
                                            false, on_answer, NULL);

        if (r == NULL) {
            fprintf(stderr, "batchanswer: out of memory\n");
            exit(1);
        }
        QUEUE_PUSH(&b, r);
    }
    batch_sort(&b, scratch);
    t0 = now_us();
    pg_marks_answer_raises(&b, res);
    t1 = now_us();
    batch_answer(&b);
    return t1 - t0;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
    static const int defaults[] = {1, 8, 64, NMAX};
    static struct batch_req *scratch[NMAX];
    int nn = argc > 1 ? argc - 1 : 4;

    for (int k = 0; k < nn; k++) {
        int n = argc > 1 ? atoi(argv[k + 1]) : defaults[k];
        double rounds[ROUNDS], med;
        PGresult *res;

        if (n < 1 || n > NMAX) {
            fprintf(stderr, "batchanswer: N must be 1 to %d\n", NMAX);
            return 2;
        }
        res = answer_of(n);
        if (res == NULL) {
            fprintf(stderr, "batchanswer: out of memory\n");
            return 1;
        }
        for (int r = 0; r < ROUNDS; r++) {
            rounds[r] = 0;
            for (int i = 0; i < REPS; i++) {
                rounds[r] += one_batch(n, res, scratch);
            }
            rounds[r] /= REPS;
        }
        qsort(rounds, ROUNDS, sizeof(rounds[0]), cmp_double);
        med = rounds[ROUNDS / 2];
        printf("raises %4d: %9.2f us a batch, %6.3f us a raise\n", n, med,
               med / n);
        PQclear(res);
    }
    return 0;
}
