/* htab.c: the chained table of htab.h, which doubles at one entry a
 * chain. */
#include "htab.h"

#include <stdlib.h>

bool
htab_init(struct htab *t, size_t buckets, uint64_t seed)
{
    t->b = calloc(buckets, sizeof(*t->b));
    t->mask = buckets - 1;
    t->n = 0;
    t->seed = seed;
    return t->b != NULL;
}

void
htab_fini(struct htab *t)
{
    free(t->b);
    t->b = NULL;
    t->mask = 0;
    t->n = 0;
}

/* Twice the chains, each entry moved by the hash it keeps. */
static void
grow(struct htab *t)
{
    size_t nb = (t->mask + 1) * 2;
    struct hnode **b;

    if (nb > SIZE_MAX / sizeof(*b) || (b = calloc(nb, sizeof(*b))) == NULL) {
        return;
    }
    for (size_t i = 0; i <= t->mask; i++) {
        struct hnode *e = t->b[i];

        while (e != NULL) {
            struct hnode *next = e->next;
            struct hnode **head = &b[e->hash & (nb - 1)];

            e->next = *head;
            *head = e;
            e = next;
        }
    }
    free(t->b);
    t->b = b;
    t->mask = nb - 1;
}

struct hnode *
htab_find(const struct htab *t, const void *key, size_t len, uint64_t h)
{
    for (struct hnode *e = t->b[h & t->mask]; e != NULL; e = e->next) {
        if (e->hash == h && e->len == len &&
            (len == 0 || memcmp(e->key, key, len) == 0)) {
            return e;
        }
    }
    return NULL;
}

void
htab_add(struct htab *t, struct hnode *e, const void *key, size_t len,
         uint64_t h)
{
    struct hnode **head;

    if (t->n > t->mask) {
        grow(t);
    }
    head = &t->b[h & t->mask];
    e->hash = h;
    e->key = key;
    e->len = len;
    e->next = *head;
    *head = e;
    t->n++;
}

void
htab_del(struct htab *t, struct hnode *e)
{
    struct hnode **pp = &t->b[e->hash & t->mask];

    while (*pp != NULL && *pp != e) {
        pp = &(*pp)->next;
    }
    if (*pp == e) {
        *pp = e->next;
        e->next = NULL;
        t->n--;
    }
}

void
htab_drain(struct htab *t, void (*fn)(struct hnode *e, void *arg), void *arg)
{
    for (size_t i = 0; t->b != NULL && i <= t->mask; i++) {
        struct hnode *e = t->b[i];

        t->b[i] = NULL;
        while (e != NULL) {
            struct hnode *next = e->next;

            t->n--;
            fn(e, arg);
            e = next;
        }
    }
}
