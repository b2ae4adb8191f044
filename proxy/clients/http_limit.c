/* http_limit.c: failing an evhttp client connection that holds too much
 * unread (http_limit.h). */
#include "http_limit.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

bool
http_limit_unread(struct bufferevent *bev, const struct evbuffer *in,
                  const struct evbuffer_cb_info *info, size_t max)
{
    if (info->n_added == 0 || evbuffer_get_length(in) <= max ||
        (bufferevent_get_enabled(bev) & EV_READ) == 0) {
        return false;
    }
    bufferevent_disable(bev, EV_READ);
    bufferevent_trigger_event(bev, BEV_EVENT_READING | BEV_EVENT_ERROR,
                              BEV_TRIG_DEFER_CALLBACKS);
    return true;
}
