/* cfg_set.h: what the option table (cfg_opts.c) names besides the types'
 * own setters: each entry's ops (cfg_custom.c sets options of several
 * fields, cfg_check.c checks text values), and the helpers those files
 * share with cfg_value.c and cfg_sect.c. Internal to conf/. */
#ifndef TM_CFG_SET_H
#define TM_CFG_SET_H

#include <stdbool.h>
#include <stddef.h>

#include "../policies/slice.h"
#include "cfg_opts.h"

/* The field of o in the section's struct obj, as a type *. */
#define CFG_FIELD(obj, o, type) ((type *)(void *)((char *)(obj) + (o)->off))

#define CFG_OOM "out of memory"

/* The largest secret a key file may hold (the table's max). */
#define CFG_SECRET_MAX 4096

static inline bool
cfg_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static inline bool
cfg_is_alnum(char c)
{
    return cfg_is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Replace the string at *field by a copy of v. NULL, or CFG_OOM. */
const char *cfg_store_str(char **field, const char *v);

/* Whether s[0..n) is an HTTP field name (RFC 9110 token). */
bool cfg_field_name_ok(const char *s, size_t n);

/* A port: 1 to 65535 in decimal; 0 when p[0..n) is not one. */
int cfg_parse_port(const char *p, size_t n);

/* Split s[0..n) into a host and an optional port: "host", "host:port",
 * "[v6]" or "[v6]:port". The host slice excludes the brackets. */
bool cfg_split_authority(const char *s, size_t n, struct tm_slice *host,
                         struct tm_slice *port, bool *bracketed);

/* A Redis url and cluster flag of section sect together: several seeds
 * need cluster = yes, and a cluster has no database number. NULL, or a
 * message in buf. */
const char *cfg_check_redis_pair(const char *sect, const char *url,
                                 bool cluster, char *buf, size_t len);

/* Options of several fields (cfg_custom.c). */
extern const struct cfg_ops cfg_add_header_ops;
extern const struct cfg_ops cfg_strip_header_ops;
extern const struct cfg_ops cfg_upstream_url_ops;
extern const struct cfg_ops cfg_methods_ops;
extern const struct cfg_ops cfg_path_ops;
extern const struct cfg_ops cfg_resource_ops;

/* Checks of text values (cfg_check.c). */
extern const struct cfg_ops cfg_listen_ops;
extern const struct cfg_ops cfg_proxy_listen_ops;
extern const struct cfg_ops cfg_listen_mode_ops;
extern const struct cfg_ops cfg_s3_endpoints_ops;
extern const struct cfg_ops cfg_aws_name_ops;
extern const struct cfg_ops cfg_profile_ops;
extern const struct cfg_ops cfg_header_name_ops;
extern const struct cfg_ops cfg_allowed_hosts_ops;
extern const struct cfg_ops cfg_redis_url_ops;
extern const struct cfg_ops cfg_dsn_ops;
extern const struct cfg_ops cfg_endpoints_ops;
extern const struct cfg_ops cfg_watch_prefix_ops;
extern const struct cfg_ops cfg_watch_backend_ops;
extern const struct cfg_ops cfg_watch_resource_ops;
extern const struct cfg_ops cfg_zk_hosts_ops;
extern const struct cfg_ops cfg_resolver_ops;
extern const struct cfg_ops cfg_zk_root_ops;
extern const struct cfg_ops cfg_section_ref_ops;
extern const struct cfg_ops cfg_carrier_ref_ops;
extern const struct cfg_ops cfg_lease_lock_ops;
extern const struct cfg_ops cfg_health_url_ops;

#endif
