/* s3batch.c: the resources an S3 multi-object delete's keys are fenced
 * by (s3batch.h). */
#include "s3batch.h"

#include <stdlib.h>
#include <string.h>

#include "../../policies/s3delete.h"

/* Reading the keys: where the next goes, and why one was refused. */
struct reading {
    const struct tm_config *cfg;
    const struct http_request *h;
    const struct screen *s;
    struct batch *b;
    const char *why;
};

/* Whether routes a and b fence alike: one mode, one lease. */
static bool
same_fencing(const struct cfg_route *a, const struct cfg_route *b)
{
    return a->mode == b->mode &&
           (a->lease == NULL
                ? b->lease == NULL
                : b->lease != NULL && strcmp(a->lease, b->lease) == 0);
}

static bool
add_key(void *arg, const char *key, size_t klen)
{
    struct reading *rd = arg;
    struct batch *b = rd->b;
    struct screen_keyres kr;
    struct batch_key *k;

    switch (screen_batch_key(rd->cfg, rd->h, rd->s, key, klen, &kr)) {
    case SCREEN_KEY_UNFENCED:
        return true;
    case SCREEN_KEY_REFUSED:
        rd->why = kr.why;
        return false;
    default:
        break;
    }
    if (b->route == NULL) {
        b->route = kr.route;
    } else if (!same_fencing(b->route, kr.route)) {
        rd->why = "the keys fall under routes with different modes or "
                  "leases: delete them in separate requests";
        return false;
    }
    k = &b->keys[b->n];
    memset(k, 0, sizeof(*k));
    k->res = b->names + b->n * (TM_RESOURCE_MAX + 1);
    memcpy((char *)k->res, kr.resource, kr.rlen + 1);
    k->len = kr.rlen;
    k->verify = kr.verify;
    b->n++;
    return true;
}

static int
key_cmp(const void *x, const void *y)
{
    const struct batch_key *a = x, *b = y;

    if (a->len != b->len) {
        return a->len < b->len ? -1 : 1;
    }
    return memcmp(a->res, b->res, a->len);
}

/* Keep one entry for each resource (many keys may share one: a route
 * whose resource names the bucket, a key spelled two ways). false when
 * one resource is checked two ways (two routes, two verify settings). */
static bool
distinct(struct batch *b)
{
    size_t n = 0;

    qsort(b->keys, b->n, sizeof(b->keys[0]), key_cmp);
    for (size_t i = 0; i < b->n; i++) {
        if (n > 0 && key_cmp(&b->keys[n - 1], &b->keys[i]) == 0) {
            if (b->keys[n - 1].verify != b->keys[i].verify) {
                return false;
            }
            continue;
        }
        b->keys[n++] = b->keys[i];
    }
    b->n = n;
    return true;
}

struct batch *
batch_read(const struct tm_config *cfg, const struct http_request *h,
           const struct screen *s, const char *body, size_t len,
           const char **why)
{
    struct reading rd = {cfg, h, s, NULL, NULL};
    size_t n = 0;

    if (!s3_delete_parse(body, len, NULL, NULL, &n, why)) {
        return NULL;
    }
    rd.b = calloc(1, sizeof(*rd.b) + n * sizeof(rd.b->keys[0]));
    if (rd.b == NULL ||
        (rd.b->names = malloc(n * (TM_RESOURCE_MAX + 1))) == NULL) {
        batch_free(rd.b);
        *why = NULL;
        return NULL;
    }
    if (!s3_delete_parse(body, len, add_key, &rd, &n, why) || !distinct(rd.b)) {
        *why = rd.why != NULL ? rd.why
                              : "one resource is fenced by two routes "
                                "that check tokens differently";
        batch_free(rd.b);
        return NULL;
    }
    return rd.b;
}

void
batch_free(struct batch *b)
{
    if (b != NULL) {
        free(b->names);
        free(b);
    }
}
