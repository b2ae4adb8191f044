/* adm_page.h: the control port's page (GET /), an operator's dashboard,
 * and the data it shows (GET /v1/recent): readiness, version, uptime,
 * counts, refusals, current marks, held leases and routes. */
#ifndef TM_ADM_PAGE_H
#define TM_ADM_PAGE_H

#include <stdbool.h>

struct evbuffer;
struct recent;
struct tm_config;

/* What the control port knows of the parts the page reports on. */
struct page_status {
    bool store_ready;
    bool locks_on;      /* a lock service runs */
    bool locks_ready;   /* and its backend can be used */
    bool watches_on;    /* [watch] sections run */
    bool watches_ready; /* and every one follows its locks (required
                         * or not) */
    bool draining;
};

/* The page: self-contained HTML, no external assets. */
void adm_page_html(struct evbuffer *out);

/* {"version", "started", "now_ms", "ready", "accepted", "refused",
 *  "routes", "marks", "locks", "refusals"}: cfg's routes; r's marks one
 * per resource, most recently written first, its refusals newest first,
 * its leases still live; st's readiness. */
void adm_recent_json(const struct recent *r, const struct tm_config *cfg,
                     const struct page_status *st, struct evbuffer *out);

#endif
