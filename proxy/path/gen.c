/* gen.c: generations: one configuration and the upstream pools built
 * from it, held by the requests that run under it, freed when the last
 * one ends after a reload retired it. */
#include "gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../conf/cfg.h"
#include "../tidemark.h"
#include "up.h"
#include "view.h"

void
gen_free(struct gen *g)
{
    for (size_t i = 0; g->pools != NULL && i < g->cfg->nupstreams; i++) {
        up_pool_free(g->pools[i]);
    }
    free(g->pools);
    if (g->owned) {
        tm_config_free(g->cfg);
    }
    free(g);
}

/* The pool of prev's upstream named as p's hands p what it keeps across
 * a reload (its signing credentials). */
static void
inherit(struct up_pool *p, const struct gen *prev)
{
    const char *name = up_cfg(p)->name;

    for (size_t i = 0; prev != NULL && i < prev->cfg->nupstreams; i++) {
        if (strcmp(prev->cfg->upstreams[i].name, name) == 0) {
            up_inherit(p, prev->pools[i]);
            return;
        }
    }
}

/* A generation for cfg with its pools. NULL with err on failure. */
struct gen *
gen_new(struct event_base *base, struct tm_config *cfg, struct up_names *names,
        bool owned, const struct gen *prev, char *err, size_t errlen)
{
    struct gen *g = calloc(1, sizeof(*g));

    if (g == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    g->cfg = cfg;
    g->refs = 1;
    g->pools = calloc(cfg->nupstreams + 1, sizeof(*g->pools));
    if (g->pools == NULL) {
        snprintf(err, errlen, "out of memory");
        free(g);
        return NULL;
    }
    for (size_t i = 0; i < cfg->nupstreams; i++) {
        g->pools[i] = up_pool_new(base, &cfg->upstreams[i], names, err, errlen);
        if (g->pools[i] == NULL) {
            g->owned = false;
            gen_free(g);
            return NULL;
        }
        inherit(g->pools[i], prev);
    }
    g->owned = owned;
    return g;
}

struct gen *
gen_hold(struct path_view *px)
{
    px->gen->refs++;
    return px->gen;
}

void
gen_drop(struct path_view *px, struct gen *g)
{
    struct gen **pp;

    if (--g->refs > 0) {
        return;
    }
    for (pp = &px->retired; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    }
    gen_free(g);
}
