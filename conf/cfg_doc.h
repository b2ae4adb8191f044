/* cfg_doc.h: the option table (cfg_opts.h) as documentation. Writes the
 * man page's CONFIGURATION entries and an example INI from the table, and
 * checks that the checked-in tidemark.8, tidemark.ini, the configuration
 * reference (doc/operations.md) and the other Markdown pages say what the
 * table says: every key in its section, its default, and whether it
 * needs a restart. */
#ifndef TM_CFG_DOC_H
#define TM_CFG_DOC_H

#include <stdbool.h>
#include <stdio.h>

#include "cfg.h"

/* The marker of a key read at start only, in the man page (after the
 * default: "[2000] (restart)", or a line of its own) and in an INI
 * comment. */
#define CFG_DOC_RESTART "(restart)"

/* Every option as man page entries, section by section: ".SS [proxy]",
 * then ".TP", ".B key", the help, "[default]" and the restart marker. */
void cfg_doc_man(FILE *f);

/* Every option as INI lines: "key = default ; help", commented out when
 * the key has no default, the restart marker after the help. */
void cfg_doc_ini(FILE *f);

/* Every option as Markdown entries of the configuration reference,
 * section by section: "### [proxy]", then one line a key,
 * "- **`key`** `[default]` (restart): help.", the default and the marker
 * only where the key has them. */
void cfg_doc_md(FILE *f);

/* Check text, a man page named name in messages: under .SH CONFIGURATION,
 * each ".SS [sect ...]" holds one ".TP" / ".B key" entry per key of sect,
 * no other; an entry's "[default]" line is the table's default ("[empty]"
 * for ""), absent when there is none; CFG_DOC_RESTART is there exactly on
 * CFG_RESTART keys. Each disagreement is appended to errs as
 * "NAME:LINE: message"; true when there is none. */
bool cfg_doc_check_man(const char *name, const char *text,
                       struct cfg_errors *errs)
    __attribute__((warn_unused_result));

/* Check text, an example INI named name: every key of the table appears
 * in a section of its kind, no other key does, and each at most once per
 * section unless repeatable; a key with a default is set to it
 * uncommented ("key = 2000"); a key without one is commented out ("; key
 * = example") or set (a required key); a key's comment has
 * CFG_DOC_RESTART exactly when the key needs a restart. */
bool cfg_doc_check_ini(const char *name, const char *text,
                       struct cfg_errors *errs)
    __attribute__((warn_unused_result));

/* Check text, a Markdown file holding the configuration reference: under
 * "## Configuration reference", each "### [sect ...]" holds one entry per
 * key of sect, no other, each a line "- **`key`**", then " `[default]`"
 * exactly when the table has a default ("[empty]" for ""), then
 * CFG_DOC_RESTART exactly on CFG_RESTART keys, then ':' and the prose.
 * Disagreements are appended to errs as for the man page. */
bool cfg_doc_check_ref(const char *name, const char *text,
                       struct cfg_errors *errs)
    __attribute__((warn_unused_result));

/* Check text, a Markdown file: in its ```ini blocks, every "key = value"
 * names a key of its section; in the prose, every "`[sect] key`" does. */
bool cfg_doc_check_readme(const char *name, const char *text,
                          struct cfg_errors *errs)
    __attribute__((warn_unused_result));

#endif
