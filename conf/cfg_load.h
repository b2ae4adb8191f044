/* cfg_load.h: the loader's state while one configuration is read, shared
 * by the files that read the INI text (cfg_read.c), apply the environment
 * (cfg_env.c), build the config from the sections (cfg_build.c) and run
 * it all (cfg.c). Internal to conf/. */
#ifndef TM_CFG_LOAD_H
#define TM_CFG_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cfg.h"
#include "cfg_opts.h"

#define ENV_PREFIX "TIDEMARK_"

/* Where a value came from: a line of the file, or an env variable. */
struct origin {
    int line;  /* 0: not from the file */
    char *env; /* the variable's name, owned; NULL: not from env */
};

struct raw_val {
    bool set;
    char *value;
    struct origin at;
};

/* A section as read, before the table is applied to it. */
struct raw_sect {
    enum cfg_sect kind;
    char *name;           /* NULL for [proxy], [admin], [store] */
    char *env_name;       /* "ROUTE_DOCUMENTS" */
    int line;             /* of the header; 0: not in the file */
    struct raw_val *vals; /* cfg_nopts of them, indexed like cfg_opts */
};

enum reading {
    READ_NONE = 0, /* before the first section header */
    READ_SECT,     /* keys go to sects[cur] */
    READ_SKIP,     /* in a section already reported as wrong */
};

struct loader {
    const char *file;
    const char *text; /* the file's contents, given: cfg_load_string */
    struct cfg_errors *errs;
    size_t errs_before; /* errs->n when loading started */
    int *err_keys;      /* per new error: where it sorts */
    bool oom;
    FILE *fp;
    char *line;
    size_t linecap;
    int lineno;
    enum reading reading;
    size_t cur;
    struct raw_sect *sects;
    size_t nsects;
    char *const *envp;
    char *env_links; /* service-link variables set aside (env_link) */
};

/* ---- cfg_read.c: the INI text ---- */

/* Where at is, "FILE:LINE", "env:NAME" or "FILE" (at NULL or from
 * neither): a string to free(), NULL when out of memory. */
char *cfg_where(const struct loader *l, const struct origin *at);

/* A problem at at ("FILE:LINE: ", "env:NAME: " or "FILE: " when at is
 * NULL or from neither), collected in l->errs; out of memory sets
 * l->oom. */
void cfg_add_err(struct loader *l, const struct origin *at, const char *fmt,
                 ...) __attribute__((format(printf, 3, 4)));

/* Stable sort of the new errors by their keys: the file's problems in
 * line order, then the environment's. */
void cfg_sort_errs(struct loader *l);

/* "[store]" or "[route documents]", for messages. */
const char *cfg_sect_label(const struct raw_sect *s, char *buf, size_t len);

/* The section of kind kind named name (NULL: a singleton), or NULL. */
struct raw_sect *cfg_find_sect(struct loader *l, enum cfg_sect kind,
                               const char *name);

/* Append a section; NULL when out of memory. */
struct raw_sect *cfg_new_sect(struct loader *l, enum cfg_sect kind,
                              const char *name, int line);

/* Read l's file (or text) into l->sects through inih. */
void cfg_read_file(struct loader *l);

/* ---- cfg_env.c: the environment ---- */

/* One TIDEMARK_ variable: find the one section and key it names and
 * replace the file's value. */
void cfg_apply_env(struct loader *l, const char *var);

/* The value of NAME (len bytes) in envp, or NULL. */
const char *cfg_env_lookup(char *const *envp, const char *name, size_t len);

/* v with each ${VAR} replaced by the environment's value (malloc); an
 * unset variable is an error at at, "WHAT: ${VAR} is not set in the
 * environment", naming it, never a value. NULL when out of memory. */
char *cfg_expand_env(struct loader *l, const struct origin *at,
                     const char *what, const char *v);

/* Replace ${VAR} in add_header values by the environment's value. */
void cfg_expand_headers(struct loader *l, const struct raw_sect *s,
                        struct cfg_upstream *u);

/* ---- cfg_build.c: the config from the sections ---- */

/* Where to report a problem of a whole section: its header; for a
 * singleton not in the file, the override that caused it. */
const struct origin *cfg_sect_origin(const struct raw_sect *s,
                                     struct origin *at);

/* Apply the table to every section read into c, with each section's and
 * each cross-section check. */
void cfg_build(struct loader *l, struct tm_config *c);

/* What concerns the file as a whole, once every section is read. */
void cfg_check_whole(struct loader *l, struct tm_config *c);

/* Where key of s was set; NULL: it keeps its default (s NULL: the
 * section is absent). */
const struct origin *cfg_key_origin(const struct raw_sect *s, const char *key);

/* A line "WHERE: warning: msg" (cfg_where) appended to c->warnings. */
void cfg_add_warning(struct loader *l, struct tm_config *c,
                     const struct origin *at, const char *msg);

/* ---- cfg_tls.c: the TLS files a section names ---- */

/* Errors at s's ca_file, cert_file or key_file when t's files cannot be
 * read as a CA certificate, a client certificate and its private key,
 * when only one of cert_file and key_file is set, or when the key does
 * not match the certificate. Reads the files; keeps nothing. */
void cfg_check_tls(struct loader *l, const struct raw_sect *s,
                   const struct cfg_tls *t);

/* ---- cfg_probe.c: what --check asks of the host ---- */

/* Each lmdb file's directory can be made and written (an error where
 * the path was set), each upstream's host resolves (a warning). */
void cfg_probe(struct loader *l, struct tm_config *c);

#endif
