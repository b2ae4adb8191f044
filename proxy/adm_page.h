/* adm_page.h: the control port's page (GET /) and the data it shows
 * (GET /v1/recent): routes, recent marks, recent refusals. */
#ifndef TM_ADM_PAGE_H
#define TM_ADM_PAGE_H

struct evbuffer;
struct recent;
struct tm_config;

/* The page: self-contained HTML, no external assets. */
void adm_page_html(struct evbuffer *out);

/* {"routes": [...], "marks": [...], "refusals": [...]}, newest first:
 * cfg's routes, r's marks and refusals. */
void adm_recent_json(const struct recent *r, const struct tm_config *cfg,
                     struct evbuffer *out);

#endif
