/* proxy_view.c: what the control port reads of the proxy, one call a
 * part; beside proxy.c rather than in it, so that the control port,
 * which proxy.c starts, never calls up into proxy.c. */
#include "adm/proxy_view.h"

#include "proxy_int.h"
#include "tidemark.h"

struct event_base *
proxy_base(const struct tm_proxy *px)
{
    return px->path.base;
}

const struct tm_log *
proxy_log(const struct tm_proxy *px)
{
    return &px->path.log;
}

void
proxy_set_log_level(struct tm_proxy *px, enum tm_log_level level)
{
    if (px->path.log.fn != NULL) {
        px->path.log.level = (int)level;
    }
}

const struct tm_config *
proxy_cfg(const struct tm_proxy *px)
{
    return px->path.cfg;
}

struct up_pool *
proxy_pool(const struct tm_proxy *px, size_t i)
{
    return px->pools[i];
}

struct fence *
proxy_fence(const struct tm_proxy *px)
{
    return px->path.fence;
}

struct order *
proxy_order(const struct tm_proxy *px)
{
    return px->path.order;
}

struct metrics *
proxy_metrics(const struct tm_proxy *px)
{
    return px->path.metrics;
}

const struct watches *
proxy_watches(const struct tm_proxy *px)
{
    return px->watches;
}

struct recent *
proxy_recent(struct tm_proxy *px)
{
    return &px->path.recent;
}

struct lock_service *
proxy_locks(const struct tm_proxy *px)
{
    return px->locks;
}

struct carriers *
proxy_carriers(const struct tm_proxy *px)
{
    return px->path.carriers;
}

size_t
proxy_clients(const struct tm_proxy *px)
{
    return px->path.nclients;
}

bool
proxy_draining(const struct tm_proxy *px)
{
    return px->path.draining;
}

void
proxy_drain(struct tm_proxy *px)
{
    tm_proxy_drain(px, -1, NULL, NULL);
}

int
tm_proxy_log_level(const struct tm_proxy *px)
{
    return px->path.log.fn != NULL ? px->path.log.level : -1;
}
