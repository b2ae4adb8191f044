/* test_cfg_doc.c: the documentation says what the option table says.
 * The checked-in man page, example INI, configuration reference and the
 * README and doc/ pages pass the checks (run from the top of the tree);
 * what the table writes passes them; and each kind of drift (a key
 * missing or unknown, a default, a restart mark) is caught with its exact
 * message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../conf/cfg_doc.h"

typedef bool (*check_fn)(const char *, const char *, struct cfg_errors *);

/* The whole of path, NUL-terminated; the caller frees. */
static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text;
    long n;

    if (f == NULL) {
        fail_msg("cannot open %s (run from the top of the tree)", path);
    }
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* What fn writes, as a string; the caller frees. */
static char *
written(void (*fn)(FILE *), const char *before)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);

    assert_non_null(f);
    fputs(before, f);
    fn(f);
    assert_int_equal(fclose(f), 0);
    return text;
}

/* text with its first old replaced by new; the caller frees. */
static char *
replaced(const char *text, const char *old, const char *new)
{
    const char *at = strstr(text, old);
    size_t n = strlen(text) - strlen(old) + strlen(new) + 1;
    char *out = malloc(n);

    if (at == NULL) {
        fail_msg("\"%s\" is not in the text", old);
    }
    assert_non_null(out);
    snprintf(out, n, "%.*s%s%s", (int)(at - text), text, new, at + strlen(old));
    return out;
}

static void
print_errs(const struct cfg_errors *errs)
{
    for (size_t i = 0; i < errs->n; i++) {
        print_message("  got: %s\n", errs->msgs[i]);
    }
}

static void
expect_ok(check_fn fn, const char *name, const char *text)
{
    struct cfg_errors errs = {0};

    if (!fn(name, text, &errs) || errs.n != 0) {
        print_errs(&errs);
        fail_msg("%s disagrees with the option table", name);
    }
    cfg_errors_free(&errs);
}

/* The message of err after "NAME:" and any "LINE:". */
static const char *
message(const char *err)
{
    const char *msg = strchr(err, ':') + 1;

    msg += strspn(msg, "0123456789");
    msg += *msg == ':';
    msg += *msg == ' ';
    return msg;
}

/* fn finds in text exactly the problems want (NULL-terminated, at most
 * two), as messages after "NAME:" and any "LINE:". */
static void
expect_errs(check_fn fn, const char *text, const char *const *want)
{
    struct cfg_errors errs = {0};
    size_t n = want[1] != NULL ? 2 : 1;

    assert_false(fn("doc", text, &errs));
    if (errs.n != n) {
        print_errs(&errs);
        fail_msg("want %zu problems: %s", n, want[0]);
    }
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(message(errs.msgs[i]), want[i]);
    }
    cfg_errors_free(&errs);
}

static void
expect_one(check_fn fn, const char *text, const char *want)
{
    const char *const w[] = {want, NULL};

    expect_errs(fn, text, w);
}

/* The line number of the first line of text that is line. */
static int
line_of(const char *text, const char *line)
{
    const char *at = strstr(text, line);
    int n = 1;

    assert_non_null(at);
    for (const char *p = text; p < at; p++) {
        n += *p == '\n';
    }
    return n;
}

/* The files as checked in agree with the table. */
static void
test_checked_in(void **state)
{
    static const struct {
        const char *path;
        check_fn fn;
    } files[] = {
        {"doc/tidemark.8", cfg_doc_check_man},
        {"conf/tidemark.ini", cfg_doc_check_ini},
        {"doc/operations.md", cfg_doc_check_ref},
        {"README.md", cfg_doc_check_readme},
        {"doc/guide.md", cfg_doc_check_readme},
        {"doc/operations.md", cfg_doc_check_readme},
        {"doc/embedding.md", cfg_doc_check_readme},
        {"doc/design.md", cfg_doc_check_readme},
        {"doc/contributing.md", cfg_doc_check_readme},
    };

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char *text = slurp(files[i].path);

        expect_ok(files[i].fn, files[i].path, text);
        free(text);
    }
}

/* What the table writes passes its own checks. */
static void
test_written(void **state)
{
    char *man = written(cfg_doc_man, ".SH CONFIGURATION\n");
    char *ini = written(cfg_doc_ini, "");
    char *ref = written(cfg_doc_md, "## Configuration reference\n");

    expect_ok(cfg_doc_check_man, "man", man);
    expect_ok(cfg_doc_check_ini, "ini", ini);
    expect_ok(cfg_doc_check_ref, "ref", ref);
    free(man);
    free(ini);
    free(ref);
}

struct drift {
    const char *old, *new;
    const char *want[2]; /* the problems found, in order */
};

static void
test_man_drift(void **state)
{
    static const struct drift cases[] = {
        {"within this.\n[10000]\n",
         "within this.\n[1000]\n",
         {"[proxy] header_timeout_ms: [1000], but the table's default is "
          "10000"}},
        {"[127.0.0.1:7070] (restart)\n",
         "[127.0.0.1:7070]\n",
         {"[proxy] listen: not marked (restart), but the table says it needs "
          "a restart"}},
        {"[Fencing-Token]\n",
         "[Fencing-Token] (restart)\n",
         {"[proxy] token_header: marked (restart), but the table says it "
          "applies on reload"}},
        {"[Fencing-Token]\n",
         "",
         {"[proxy] token_header: no [Fencing-Token] line, the table's "
          "default"}},
        {".B url\nredis:",
         ".B url\n[x]\nredis:",
         {"[store] url: [x], but the table has no default"}},
        {".B key_file\nfile holding",
         ".B key_files\nfile holding",
         {"[tokens] key_files is not a key of the table",
          "[tokens] key_file is not documented under .SH CONFIGURATION"}},
        {".SS [tokens]\n",
         ".SS [token]\n",
         {"[token]: no such section",
          "[tokens] key_file is not documented under .SH CONFIGURATION"}},
    };
    char *man = written(cfg_doc_man, ".SH CONFIGURATION\n");
    char *text, want[128];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        text = replaced(man, cases[i].old, cases[i].new);
        expect_errs(cfg_doc_check_man, text, cases[i].want);
        free(text);
    }
    /* Outside CONFIGURATION, nothing is an entry. */
    text = replaced(man, ".TP\n.B listen\nhost:port for application",
                    ".TP\n.B nothing\nhost:port for application");
    {
        size_t n = strlen(text) + 64;
        char *moved = malloc(n);

        assert_non_null(moved);
        snprintf(moved, n, "%s.SH OPTIONS\n.SS [proxy]\n.TP\n.B listen\n",
                 text);
        expect_errs(
            cfg_doc_check_man, moved,
            (const char *const[]){"[proxy] nothing is not a key of the table",
                                  "[proxy] listen is not documented under "
                                  ".SH CONFIGURATION"});
        free(moved);
    }
    free(text);
    /* A key twice: the second is named, with where the first is. */
    text = replaced(man, "[64]\n", "[64]\n.TP\n.B max_idle\n[64]\n");
    snprintf(want, sizeof(want), "[upstream] max_idle again (first on line %d)",
             line_of(text, ".B max_idle\n"));
    expect_one(cfg_doc_check_man, text, want);
    free(text);
    free(man);
}

static void
test_ref_drift(void **state)
{
    static const struct drift cases[] = {
        {"`header_timeout_ms`** `[10000]`:",
         "`header_timeout_ms`** `[1000]`:",
         {"[proxy] header_timeout_ms: [1000], but the table's default is "
          "10000"}},
        {"`[127.0.0.1:7070]` (restart):",
         "`[127.0.0.1:7070]`:",
         {"[proxy] listen: not marked (restart), but the table says it needs "
          "a restart"}},
        {"`token_header`** `[Fencing-Token]`:",
         "`token_header`** `[Fencing-Token]` (restart):",
         {"[proxy] token_header: marked (restart), but the table says it "
          "applies on reload"}},
        {"`token_header`** `[Fencing-Token]`:",
         "`token_header`**:",
         {"[proxy] token_header: no [Fencing-Token] line, the table's "
          "default"}},
        {"`token_header`** `[Fencing-Token]`:",
         "`token_header`** `[Fencing-Token]` the header:",
         {"an entry's key, default and (restart) end with ':'"}},
        {"- **`key_file`** (restart): file",
         "- **`key_files`** (restart): file",
         {"[tokens] key_files is not a key of the table",
          "[tokens] key_file is not in the configuration reference"}},
        {"### [tokens]\n",
         "### [token]\n",
         {"[token]: no such section",
          "[tokens] key_file is not in the configuration reference"}},
    };
    char *ref = written(cfg_doc_md, "## Configuration reference\n");

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = replaced(ref, cases[i].old, cases[i].new);

        expect_errs(cfg_doc_check_ref, text, cases[i].want);
        free(text);
    }
    /* Under another heading, nothing is an entry; and the reference must
     * be there. */
    {
        struct cfg_errors errs = {0};

        assert_false(cfg_doc_check_ref(
            "doc", ref + strlen("## Configuration reference"), &errs));
        assert_true(errs.n > 1);
        assert_string_equal(errs.msgs[0],
                            "doc: no \"## Configuration reference\" section");
        assert_string_equal(
            errs.msgs[1],
            "doc: [proxy] listen is not in the configuration reference");
        cfg_errors_free(&errs);
    }
    free(ref);
}

static void
test_ini_drift(void **state)
{
    static const struct drift cases[] = {
        {"max_head = 16384",
         "max_head = 16385",
         {"[proxy] max_head = 16385, but the table's default is 16384"}},
        {"max_head = 16384",
         "; max_head = 16384",
         {"[proxy] max_head has a default (16384): set it, uncommented"}},
        {"; host:port for application traffic, or unix:PATH for a Unix "
         "socket (restart)",
         "; host:port for application traffic, or unix:PATH for a Unix "
         "socket",
         {"[proxy] listen: not marked (restart), but the table says it needs "
          "a restart"}},
        {"connections to the store (restart)",
         "connections to the store",
         {"[store] pool_size: not marked (restart), but the table says it "
          "needs a restart"}},
        {"the fencing token\n",
         "the fencing token (restart)\n",
         {"[proxy] token_header: marked (restart), but the table says it "
          "applies on reload"}},
        {"; idle keep-alive connections kept in the pool",
         "",
         {"[upstream] max_idle has no comment"}},
        {"max_head = 16384",
         "max_heads = 16384",
         {"[proxy] max_heads is not a key of the table",
          "[proxy] max_head is not in the example"}},
        {"; key_file = ",
         "; key_fil = ",
         {"[tokens] key_fil is not a key of the table",
          "[tokens] key_file is not in the example"}},
        {"[tokens]",
         "[token]",
         {"[token]: no such section",
          "[tokens] key_file is not in the example"}},
        {"verify = none",
         "verify",
         {"neither a section, a key nor a comment",
          "[route] verify is not in the example"}},
    };
    char *ini = written(cfg_doc_ini, "");
    char *text, want[128];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        text = replaced(ini, cases[i].old, cases[i].new);
        expect_errs(cfg_doc_check_ini, text, cases[i].want);
        free(text);
    }
    /* A key twice in a section; a repeatable one may be. */
    text = replaced(ini, "max_idle = 64 ", "max_idle = 64 ; a\nmax_idle = 64 ");
    snprintf(want, sizeof(want), "[upstream] max_idle again (first on line %d)",
             line_of(text, "max_idle = 64 "));
    expect_one(cfg_doc_check_ini, text, want);
    free(text);
    text = replaced(
        ini, "; strip_header = ", "; strip_header = a ; x\n; strip_header = ");
    expect_ok(cfg_doc_check_ini, "ini", text);
    free(text);
    free(ini);
}

/* text with the lines of its [watch NAME] section, header first,
 * commented out ("; ") where they are not already, as an example shows
 * a section that is off. */
static char *
watch_off(const char *text)
{
    const char *at = strstr(text, "[watch NAME]");
    const char *end = "", *p;
    char *out = malloc(strlen(text) * 2 + 1);
    size_t n;

    assert_non_null(at);
    assert_non_null(out);
    n = (size_t)(at - text);
    memcpy(out, text, n);
    /* Up to the next section's header, which is kept. */
    for (p = at; *p != '\0'; p = end) {
        end = strchr(p, '\n');
        end = end != NULL ? end + 1 : p + strlen(p);
        if (p != at && *p == '[') {
            end = p;
            break;
        }
        if (*p != ';') {
            memcpy(out + n, "; ", 2);
            n += 2;
        }
        memcpy(out + n, p, (size_t)(end - p));
        n += (size_t)(end - p);
    }
    strcpy(out + n, end);
    return out;
}

/* A section shown commented out: its keys commented too, at their
 * defaults; one set under it would belong to the section above. */
static void
test_ini_section_off(void **state)
{
    char *ini = written(cfg_doc_ini, "");
    char *off = watch_off(ini);
    char *text;

    expect_ok(cfg_doc_check_ini, "ini", off);
    text = replaced(off, "; timeout_ms = 2000", "; timeout_ms = 2001");
    expect_one(cfg_doc_check_ini, text,
               "[watch] timeout_ms = 2001, but the table's default is 2000");
    free(text);
    text = replaced(off, "; required = yes", "required = yes");
    expect_one(cfg_doc_check_ini, text,
               "[watch] required is set under a commented-out section: it "
               "belongs to the section above");
    free(text);
    free(off);
    free(ini);
}

static void
test_readme(void **state)
{
    expect_ok(cfg_doc_check_readme, "md",
              "Set `[locks] timeout_ms` or `[route NAME] max_body`; "
              "`[store]`, `[x] y`, `reload: [locks] timeout_ms`.\n"
              "```ini\n[proxy]\nlisten = 127.0.0.1:1 ; a\n```\n"
              "```\n[proxy]\nlistn = 1\n```\n");
    expect_one(cfg_doc_check_readme, "Set `[locks] timout_ms` to 5.\n",
               "`[locks] timout_ms`: [locks] has no key timout_ms");
    expect_one(cfg_doc_check_readme, "```ini\n[proxy]\nlistn = 1\n```\n",
               "[proxy] has no key listn");
    expect_one(cfg_doc_check_readme, "```ini\n[proxi]\n```\n",
               "[proxi]: no such section");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checked_in),
        cmocka_unit_test(test_written),
        cmocka_unit_test(test_man_drift),
        cmocka_unit_test(test_ref_drift),
        cmocka_unit_test(test_ini_drift),
        cmocka_unit_test(test_ini_section_off),
        cmocka_unit_test(test_readme),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
