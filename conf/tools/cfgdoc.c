/* cfgdoc: tidemark's option table as documentation (a build-time tool).
 *   cfgdoc man                        the CONFIGURATION entries, in roff
 *   cfgdoc ini                        every key as an example INI
 *   cfgdoc md                         the configuration reference's
 *                                     entries, in Markdown
 *   cfgdoc check MAN INI REF [MD...]  exit 1, naming each place where
 *                                     the files disagree with the table:
 *                                     REF holds the configuration
 *                                     reference; in REF and each MD, every
 *                                     key named must be the table's */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cfg_doc.h"

/* The whole of path, NUL-terminated (malloc'd), or NULL. */
static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t n = 0, cap = 0, got;

    if (f == NULL) {
        perror(path);
        return NULL;
    }
    do {
        if (cap - n < 4096) {
            char *more = realloc(text, cap + 65536);

            if (more == NULL) {
                free(text);
                fclose(f);
                return NULL;
            }
            text = more;
            cap += 65536;
        }
        got = fread(text + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    fclose(f);
    text[n] = '\0';
    return text;
}

static bool
check(const char *path,
      bool (*fn)(const char *, const char *, struct cfg_errors *),
      struct cfg_errors *errs)
{
    char *text = slurp(path);
    bool ok;

    if (text == NULL) {
        return false;
    }
    ok = fn(path, text, errs);
    free(text);
    return ok;
}

static void
usage(void)
{
    fprintf(stderr, "usage: cfgdoc man | ini | md | check MAN INI REF "
                    "[MD...]\n");
}

int
main(int argc, char **argv)
{
    struct cfg_errors errs = {0};
    bool ok;

    if (argc == 2 && strcmp(argv[1], "man") == 0) {
        cfg_doc_man(stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "ini") == 0) {
        cfg_doc_ini(stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "md") == 0) {
        cfg_doc_md(stdout);
        return 0;
    }
    if (argc < 5 || strcmp(argv[1], "check") != 0) {
        usage();
        return 2;
    }
    ok = check(argv[2], cfg_doc_check_man, &errs);
    ok &= check(argv[3], cfg_doc_check_ini, &errs);
    ok &= check(argv[4], cfg_doc_check_ref, &errs);
    for (int i = 4; i < argc; i++) {
        ok &= check(argv[i], cfg_doc_check_readme, &errs);
    }
    for (size_t i = 0; i < errs.n; i++) {
        fprintf(stderr, "%s\n", errs.msgs[i]);
    }
    cfg_errors_free(&errs);
    if (ok) {
        printf("cfgdoc: %s, %s and %d Markdown file%s agree with the option "
               "table\n",
               argv[2], argv[3], argc - 4, argc - 4 == 1 ? "" : "s");
    }
    return ok ? 0 : 1;
}
