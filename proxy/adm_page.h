/* adm_page.h: the control port's page (GET /) and the data it shows
 * (GET /v1/recent): routes, recent marks, recent refusals. */
#ifndef TM_ADM_PAGE_H
#define TM_ADM_PAGE_H

struct evbuffer;
struct tm_proxy;

/* The page: self-contained HTML, no external assets. */
void adm_page_html(struct evbuffer *out);

/* {"routes": [...], "marks": [...], "refusals": [...]}, newest first. */
void adm_recent_json(const struct tm_proxy *px, struct evbuffer *out);

#endif
