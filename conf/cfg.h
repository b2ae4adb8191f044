/* cfg.h: loading tidemark's configuration (its model: policies/cfg_model.h):
 * the INI loader, the one table of options, validation and
 * TIDEMARK_<SECTION>_<KEY> overrides. */
#ifndef TM_CFG_H
#define TM_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../policies/cfg_model.h"

/* Problems found while loading, each "FILE:LINE: message". */
struct cfg_errors {
    char **msgs;
    size_t n;
};

/* Load path into c, then apply overrides from envp (NULL-terminated
 * "NAME=value" strings, environ in the daemon). Every problem found is
 * appended to errs; returns true only when there are none. c is filled
 * even on failure and must be released with cfg_free. */
bool cfg_load(struct tm_config *c, const char *path, char *const *envp,
              struct cfg_errors *errs) __attribute__((warn_unused_result));
/* As cfg_load, and then what --check asks of the host (cfg_probe): an
 * lmdb path that cannot be opened, or a Unix socket's listen_group that
 * does not exist, is an error, an upstream host that does not resolve a
 * warning. */
bool cfg_load_probe(struct tm_config *c, const char *path, char *const *envp,
                    struct cfg_errors *errs)
    __attribute__((warn_unused_result));
/* As cfg_load, from the INI text (NUL-terminated) instead of a file;
 * name stands for the file name in messages. */
bool cfg_load_string(struct tm_config *c, const char *name, const char *text,
                     char *const *envp, struct cfg_errors *errs)
    __attribute__((warn_unused_result));
void cfg_free(struct tm_config *c);

/* For a reload: every key the option table marks restart-only (a
 * listener, the store, the lock backend, the token key) whose value in
 * nw differs from old takes old's value again, so that nw says what
 * runs. Each such key is reported once through changed, with its name
 * ("[locks] timeout_ms") and the value kept as a file would write it
 * ("2000"; "(secret)" for a password). false when out of memory: nw is
 * then half-kept and must not be used. */
bool cfg_keep_restart_only(struct tm_config *nw, const struct tm_config *old,
                           void (*changed)(void *arg, const char *key,
                                           const char *kept),
                           void *arg) __attribute__((warn_unused_result));
void cfg_errors_free(struct cfg_errors *errs);

/* The group id of group, a name or a number ([proxy] listen_group);
 * false when there is no such group. */
bool cfg_group_id(const char *group, gid_t *gid)
    __attribute__((warn_unused_result));

/* Split "host:port" or "[v6]:port" into parts (malloc'd, caller frees).
 * false on a bad address. */
bool cfg_split_hostport(const char *s, char **host, char **port);

/* The largest file cfg_read_private reads. */
#define CFG_PRIVATE_MAX 65536

/* Read a file that only its owner (and group) may read, up to
 * CFG_PRIVATE_MAX bytes, into a malloc'd buffer (*out, *n: the caller
 * wipes and frees it). NULL, or a message (in buf, len bytes, or a
 * constant) that never quotes the file. */
const char *cfg_read_private(const char *path, char **out, size_t *n, char *buf,
                             size_t len);

#endif
