/* gen.h: generations: one configuration and the upstream pools built
 * from it. A request keeps the generation it started under alive (refs)
 * until it ends, so a reload never pulls a route or a pool from under
 * it. */
#ifndef TM_GEN_H
#define TM_GEN_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct path_view;
struct tm_config;
struct up_names;
struct up_pool;

struct gen {
    struct tm_config *cfg;
    struct up_pool **pools; /* one per cfg->upstreams */
    size_t refs;            /* requests under way, +1 while current */
    bool owned;             /* cfg came from tm_proxy_reload */
    struct gen *next;       /* retired, waiting for refs to drop */
};

/* A generation for cfg with its pools, whose hosts names looks up
 * (owned: cfg is freed with it), each taking over what prev's pool of
 * the same upstream keeps across a reload (prev NULL: none). NULL with
 * err on failure. */
struct gen *gen_new(struct event_base *base, struct tm_config *cfg,
                    struct up_names *names, bool owned, const struct gen *prev,
                    char *err, size_t errlen);
void gen_free(struct gen *g);
/* Take and drop a reference to the current generation (px->gen); the
 * last drop of a retired one (on px->retired) frees it. */
struct gen *gen_hold(struct path_view *px);
void gen_drop(struct path_view *px, struct gen *g);

#endif
