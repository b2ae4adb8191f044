/* creds.h: the credentials an upstream with sign = aws-sigv4 signs with,
 * kept current: static ones from the configuration or the environment, a
 * shared-credentials file read again when it changes, or temporary ones
 * from web identity (STS), the container endpoint or IMDSv2, renewed
 * sign_refresh_ms before they expire. */
#ifndef TM_CREDS_H
#define TM_CREDS_H

struct event_base;
struct cfg_upstream;
struct up_names;
struct creds;
struct sigv4_creds;

/* The credentials of u (which signs), the source picked now in the SDKs'
 * order; fetching starts on the loop. An endpoint's host name is looked
 * up through names->dns, never blocking the loop, each lookup counted in
 * names->asked. NULL only when out of memory. u and names must outlive
 * the result. */
struct creds *creds_new(struct event_base *base, const struct cfg_upstream *u,
                        struct up_names *names);

/* c, new at a reload, takes old's temporary set when both have the same
 * kind of source and c has none yet; c still fetches its own at once.
 * Either may be NULL. */
void creds_inherit(struct creds *c, const struct creds *old);

/* Stop every fetch and timer, wipe and free. NULL is fine. */
void creds_free(struct creds *c);

/* The whole set to sign with now, or NULL with why (a constant fit for a
 * problem's detail): none came yet, or the last one expired and nothing
 * new came. Valid until the loop runs again. */
const struct sigv4_creds *creds_now(struct creds *c, const char **why);

/* When the set creds_now would give expires, in seconds since the epoch:
 * INFINITY for one that does not (the environment's, a file's), 0 when
 * there is none to use. For /metrics. */
double creds_expiry(struct creds *c);

#endif
