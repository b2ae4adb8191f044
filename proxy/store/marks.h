/* marks.h: a bounded in-memory cache of marks. A mark only grows, so a
 * cached value is a lower bound of the durable one. */
#ifndef TM_MARKS_H
#define TM_MARKS_H

#include <stddef.h>
#include <stdint.h>

struct marks;

/* A cache holding at most cap resources (cap >= 16). Allocates; free
 * with marks_free. NULL when out of memory. */
struct marks *marks_new(size_t cap);
void marks_free(struct marks *m);

/* The cached mark of res, or 0 when not cached. */
int64_t marks_get(struct marks *m, const char *res, size_t len);

/* Record that res's durable mark is at least mark; a lower value never
 * replaces a higher one. When full, evicts some other entry. */
void marks_put(struct marks *m, const char *res, size_t len, int64_t mark);

size_t marks_count(const struct marks *m);

#endif
