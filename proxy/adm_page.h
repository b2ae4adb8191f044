/* adm_page.h: the control port's page (GET /), an operator's dashboard,
 * and the data it shows (GET /v1/recent): readiness, version, uptime,
 * counts, refusals, current marks, held leases and routes. */
#ifndef TM_ADM_PAGE_H
#define TM_ADM_PAGE_H

#include <stdbool.h>

struct evbuffer;
struct tm_proxy;

/* What the control port knows of the parts the page reports on. */
struct page_status {
    bool store_ready;
    bool locks_on;    /* a lock service runs */
    bool locks_ready; /* and its backend can be used */
    bool draining;
};

/* The page: self-contained HTML, no external assets. */
void adm_page_html(struct evbuffer *out);

/* {"version", "started", "now_ms", "ready", "accepted", "refused",
 *  "routes", "marks", "locks", "refusals"}: marks one per resource, most
 * recently written first; refusals newest first; leases still live. */
void adm_recent_json(const struct tm_proxy *px, const struct page_status *st,
                     struct evbuffer *out);

#endif
