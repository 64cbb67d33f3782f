#include "cli/cli_args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/config_alias.h"
#include "parallel/world.h"
#include "util/nearest.h"

void cli_args_init(cli_args_t *a, const char *cmd, void (*usage)(FILE *), const cli_option_t *options, int mpi,
                   int *argc, char ***argv)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->usage = usage;
    a->options = options;
    a->mpi = mpi;
    a->argc = argc;
    a->argv = argv;
    a->next = 1;
    a->positional = fb_calloc((size_t)*argc + 1, sizeof *a->positional);
    for (const cli_option_t *o = options; o->name; o++)
        if (!strcmp(o->name, "set"))
            a->hint = cli_hint_config_key;
}

void cli_args_set_hint(cli_args_t *a, cli_hint_fn hint) { a->hint = hint; }

const char *cli_hint_config_key(const char *word, char *buf, size_t n)
{
    const config_alias_t *alias = config_alias_find(word);
    if (alias && !alias->key) {
        snprintf(buf, n, " (%s's setting, which fabula does not have: %s)", alias->origin, alias->how);
        return buf;
    }
    const char *key = config_key_for_word(word);
    if (!key)
        return NULL;
    snprintf(buf, n, "; did you mean '--set %s=VALUE'?", key);
    return buf;
}

const char *cli_unknown_word(const char *noun, const char *word, const char *const *names, size_t n, char *buf,
                             size_t len)
{
    const char *near = nearest_name(word, names, n);
    if (near)
        snprintf(buf, len, "unknown %s '%s'; did you mean '%s'?", noun, word, near);
    else
        snprintf(buf, len, "unknown %s '%s'", noun, word);
    return buf;
}

/* The tail of the message of an unknown --name: the nearest option of the
 * command, else the command's hint. */
static const char *unknown_hint(const cli_args_t *a, const char *name, size_t len, char *buf, size_t n)
{
    char word[128];
    if (len == 0 || len >= sizeof word)
        return "";
    memcpy(word, name, len);
    word[len] = '\0';
    const char *names[128];
    size_t k = 0;
    for (const cli_option_t *o = a->options; o->name && k < sizeof names / sizeof *names; o++)
        names[k++] = o->name;
    const char *near = nearest_name(word, names, k);
    if (near) {
        snprintf(buf, n, "; did you mean '--%s'?", near);
        return buf;
    }
    const char *h = a->hint ? a->hint(word, buf, n) : NULL;
    return h ? h : "";
}

void cli_args_free(cli_args_t *a)
{
    free(a->positional);
    a->positional = NULL;
    a->npositional = 0;
}

void cli_args_fail(const cli_args_t *a, int with_usage, const char *fmt, ...)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        fb_fatal(FB_EXIT_INTERNAL, "%s: out of memory for a usage message", a->cmd);
    va_list ap;
    va_start(ap, fmt);
    fprintf(f, "%s: ", a->cmd);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (with_usage) {
        fputs("\n\n", f);
        a->usage(f);
    }
    if (fclose(f) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "%s: out of memory for a usage message", a->cmd);
    while (len > 0 && text[len - 1] == '\n')
        text[--len] = 0;
    /* Every rank parses the same words and fails alike: with MPI up, rank 0
     * alone prints and every rank leaves MPI cleanly. */
    if (a->mpi)
        parallel_init(a->argc, a->argv);
    fb_fatal_all(FB_EXIT_USAGE, "%s", text);
}

static const cli_option_t *find_long(const cli_args_t *a, const char *name, size_t len)
{
    for (const cli_option_t *o = a->options; o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len))
            return o;
    return NULL;
}

static const cli_option_t *find_letter(const cli_args_t *a, char c)
{
    for (const cli_option_t *o = a->options; o->name; o++)
        if (o->letter == c)
            return o;
    return NULL;
}

static void help(const cli_args_t *a)
{
    a->usage(stdout);
    fflush(stdout);
    exit(FB_EXIT_OK);
}

int cli_args_next(cli_args_t *a)
{
    int argc = *a->argc;
    char **argv = *a->argv;
    while (a->next < argc) {
        char *w = argv[a->next++];
        if (a->options_done || w[0] != '-' || w[1] == 0) {
            a->positional[a->npositional++] = w;
            continue;
        }
        if (!strcmp(w, "--")) {
            a->options_done = 1;
            continue;
        }
        const cli_option_t *o;
        const char *inline_value = NULL;
        if (w[1] == '-') {
            const char *name = w + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            if (len == 4 && !strncmp(name, "help", 4) && !eq)
                help(a);
            o = find_long(a, name, len);
            if (!o) {
                char hint[512];
                cli_args_fail(a, 1, "unknown option '%.*s'%s", (int)(len + 2), w,
                              unknown_hint(a, name, len, hint, sizeof hint));
            }
            if (eq) {
                if (!o->takes_value)
                    cli_args_fail(a, 1, "option --%s takes no value, not '%s'", o->name, eq + 1);
                inline_value = eq + 1;
            }
        } else {
            if (w[1] == 'h' && w[2] == 0)
                help(a);
            o = find_letter(a, w[1]);
            if (!o || (w[2] != 0 && !o->takes_value))
                cli_args_fail(a, 1, "unknown option '%s'", w);
            if (w[2] != 0)
                inline_value = w + 2; /* -oFILE */
        }
        a->option = o->name;
        a->value = NULL;
        if (o->takes_value) {
            if (inline_value)
                a->value = inline_value;
            else if (a->next < argc)
                a->value = argv[a->next++];
            else
                cli_args_fail(a, 1, "option --%s expects a value", o->name);
        }
        return o->id;
    }
    return 0;
}

long long cli_args_int_of(const cli_args_t *a, const char *s, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        cli_args_fail(a, 0, "--%s expects an integer in [%lld, %lld], got '%s'", a->option, lo, hi, s);
    return v;
}

long long cli_args_int(const cli_args_t *a, long long lo, long long hi)
{
    return cli_args_int_of(a, a->value, lo, hi);
}

double cli_args_real(const cli_args_t *a, double lo, double hi, int hi_open)
{
    char *end;
    errno = 0;
    double v = strtod(a->value, &end);
    int in = v >= lo && (hi_open ? v < hi : v <= hi);
    if (errno || end == a->value || *end || !in) {
        if (isinf(hi))
            cli_args_fail(a, 0, "--%s expects a number >= %g, got '%s'", a->option, lo, a->value);
        cli_args_fail(a, 0, "--%s expects a number in [%g, %g%c, got '%s'", a->option, lo, hi, hi_open ? ')' : ']',
                      a->value);
    }
    return v;
}
