/* reqcheck.h: checks that keep a request from reaching the backend as a
 * method other than the one tidemark matched its routes with: methods in
 * lower case and method overrides. Pure: no I/O, no globals. */
#ifndef TM_REQCHECK_H
#define TM_REQCHECK_H

#include <stdbool.h>
#include <stddef.h>

/* NULL when the request method m[0..len) reads the same to every
 * backend; else why it is refused (400): a lower-case letter, since
 * Werkzeug and others upper-case the method ("put" runs as PUT while
 * no route names "put"). */
const char *reqcheck_method(const char *m, size_t len);

/* Whether a header named name[0..len) asks the backend to run another
 * method: X-HTTP-Method-Override, X-HTTP-Method or X-Method-Override, in
 * any case and with '_' for '-'. */
bool reqcheck_override_header(const char *name, size_t len);

/* Whether the query string q[0..len) (after the '?') carries a _method
 * parameter: names split at '&' or ';', percent- and '+'-decoded, in any
 * case, and with ' ', '.' or '[' for '_' (PHP reads those as '_'). */
bool reqcheck_override_query(const char *q, size_t len);

/* The detail of a 400 for a method override. */
#define REQCHECK_OVERRIDE_DETAIL                                               \
    "method overrides are refused: send the method itself"

#endif
