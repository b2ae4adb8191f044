/* metricsdoc: the metrics registry as documentation (a build-time tool).
 *   metricsdoc list                 every family's name, type and help
 *   metricsdoc check DOC [MD...]    exit 1, naming each line where the
 *                                   pages disagree with TM_METRICS: DOC's
 *                                   "## Metrics" section names every
 *                                   family, and names no other; anywhere
 *                                   in DOC and each MD, a name with a
 *                                   metric's suffix is a family */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../metrics.h"

struct family {
    const char *name;
    const char *type;
    const char *help;
};

static const struct family families[] = {
#define FAMILY(name, type, source, help) {#name, #type, help},
    TM_METRICS(FAMILY)
#undef FAMILY
};

#define NFAMILIES (sizeof(families) / sizeof(families[0]))

/* The family named s[0..n), or -1. */
static int
family_of(const char *s, size_t n)
{
    for (size_t i = 0; i < NFAMILIES; i++) {
        if (strlen(families[i].name) == n &&
            memcmp(families[i].name, s, n) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/* Whether s[0..n) looks like a metric's name: tidemark_ or process_ and
 * a suffix Prometheus names end with. */
static bool
metric_like(const char *s, size_t n)
{
    static const char *const prefixes[] = {"tidemark_", "process_"};
    static const char *const suffixes[] = {"_total", "_seconds", "_bytes",
                                           "_ms",    "_info",    "_fds"};
    bool prefixed = false;

    for (size_t i = 0; i < 2; i++) {
        prefixed |= n > strlen(prefixes[i]) &&
                    memcmp(s, prefixes[i], strlen(prefixes[i])) == 0;
    }
    for (size_t i = 0; prefixed && i < sizeof(suffixes) / sizeof(*suffixes);
         i++) {
        size_t k = strlen(suffixes[i]);

        if (n > k && memcmp(s + n - k, suffixes[i], k) == 0) {
            return true;
        }
    }
    return false;
}

/* The length of the name at s: [a-z0-9_]. */
static size_t
name_len(const char *s)
{
    size_t n = 0;

    while (islower((unsigned char)s[n]) || isdigit((unsigned char)s[n]) ||
           s[n] == '_') {
        n++;
    }
    return n;
}

/* Check one page; home: it holds the "## Metrics" section. */
static bool
check(const char *path, FILE *f, bool home)
{
    bool seen[NFAMILIES] = {false};
    bool in_section = false, was_section = false, ok = true;
    char line[4096];
    int lineno = 0;

    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        if (strncmp(line, "## ", 3) == 0) {
            in_section = strcmp(line, "## Metrics\n") == 0;
            was_section |= in_section;
            continue;
        }
        for (char *tick = strchr(line, '`'); tick != NULL;
             tick = strchr(tick + 1, '`')) {
            char *end = strchr(tick + 1, '`');
            size_t n = name_len(tick + 1);
            int fam = family_of(tick + 1, n);
            bool named = n > 0 && (tick[1 + n] == '`' || tick[1 + n] == '{');

            if (end == NULL) {
                break;
            }
            if (named && fam >= 0 && in_section) {
                seen[fam] = true;
            } else if (named && fam < 0 &&
                       (metric_like(tick + 1, n) ||
                        (in_section &&
                         (strncmp(tick + 1, "tidemark_", 9) == 0 ||
                          strncmp(tick + 1, "process_", 8) == 0)))) {
                fprintf(stderr, "%s:%d: `%.*s` is not in TM_METRICS\n", path,
                        lineno, (int)n, tick + 1);
                ok = false;
            }
            tick = end;
        }
    }
    if (!home) {
        return ok;
    }
    if (!was_section) {
        fprintf(stderr, "%s: no \"## Metrics\" section\n", path);
        return false;
    }
    for (size_t i = 0; i < NFAMILIES; i++) {
        if (!seen[i]) {
            fprintf(stderr, "%s: \"## Metrics\" does not name `%s`\n", path,
                    families[i].name);
            ok = false;
        }
    }
    return ok;
}

static bool
check_file(const char *path, bool home)
{
    FILE *f = fopen(path, "r");
    bool ok;

    if (f == NULL) {
        perror(path);
        return false;
    }
    ok = check(path, f, home);
    fclose(f);
    return ok;
}

int
main(int argc, char **argv)
{
    bool ok;

    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (size_t i = 0; i < NFAMILIES; i++) {
            printf("%s %s %s\n", families[i].name, families[i].type,
                   families[i].help);
        }
        return 0;
    }
    if (argc < 3 || strcmp(argv[1], "check") != 0) {
        fprintf(stderr, "usage: metricsdoc list | check DOC [MD...]\n");
        return 2;
    }
    ok = check_file(argv[2], true);
    for (int i = 3; i < argc; i++) {
        ok &= check_file(argv[i], false);
    }
    if (ok) {
        printf("metricsdoc: %s names every family of TM_METRICS, and %d "
               "other page%s no other\n",
               argv[2], argc - 3, argc - 3 == 1 ? " names" : "s name");
    }
    return ok ? 0 : 1;
}
