/*
 * pcoll-trace: reads the timelines pcoll records (docs/timeline.md).
 *
 *   pcoll-trace merge PREFIX -o FILE     PREFIX.R.jsonl -> one Chrome trace, clocks aligned
 *   pcoll-trace report FILE [--json]     who held the others back, time shares, fusion, clocks
 *   pcoll-trace svg FILE -o OUT.svg [--from MS] [--to MS] [--width PX] [--title TEXT]
 *
 * Exit status: 0 done, 1 bad input (a message names the file and line) or a
 * write error, 2 a usage error.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "merge.h"
#include "report.h"
#include "svg.h"
#include "util.h"

enum { EXIT_USAGE = 2 };

static const char usage_text[] =
    "usage: pcoll-trace merge PREFIX -o FILE\n"
    "       pcoll-trace report FILE [--json]\n"
    "       pcoll-trace svg FILE -o OUT.svg [--from MS] [--to MS] [--width PX] [--title TEXT]\n"
    "\n"
    "  merge    reads PREFIX.0.jsonl .. PREFIX.(P-1).jsonl (P from their headers) and writes\n"
    "           one Chrome Trace Event Format file (Perfetto, chrome://tracing): a track per\n"
    "           rank, every clock mapped onto rank 0's; -o - writes to standard output\n"
    "  report   the straggler report of a merged trace: per rank its exchanges, lateness,\n"
    "           the rounds it missed and the waiting it caused or the others avoided; time\n"
    "           shares per kind of exchange; fusion buckets against their plan; a clock\n"
    "           check.  --json: one JSON object instead of the tables\n"
    "  svg      a picture of a window of a merged trace: a band per rank, marks, calls,\n"
    "           rounds.  --from/--to in ms from the trace's start (default: all of it; when\n"
    "           its busiest rank made over 2000 calls, 200 of them from the middle), --width\n"
    "           in pixels (default 900), --title\n"
    "\n"
    "exit status: 0 done, 1 bad input or a write error, 2 usage error.  docs/timeline.md\n"
    "describes the files and every number of the report.\n";

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", TRACE_PROG);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(%s --help for the usage)\n", TRACE_PROG);
    return EXIT_USAGE;
}

static int is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

/* A flag's value: argv[*i + 1], or a usage error */
static const char *flag_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) return NULL;
    return argv[++*i];
}

static int parse_double(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int cmd_merge(int argc, char **argv)
{
    const char *prefix = NULL, *out = NULL;
    for (int i = 2; i < argc; i++) {
        if (is_help(argv[i])) return fputs(usage_text, stdout), 0;
        if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
            if (!(out = flag_value(argc, argv, &i))) return usage_error("merge: %s needs a file name", argv[i]);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage_error("merge: unknown option %s", argv[i]);
        } else if (prefix) {
            return usage_error("merge: one PREFIX only (a second: %s)", argv[i]);
        } else {
            prefix = argv[i];
        }
    }
    if (!prefix) return usage_error("merge: no PREFIX (the files are PREFIX.R.jsonl)%s", "");
    if (!out) return usage_error("merge: no output file (-o FILE)%s", "");
    return merge_run(prefix, out);
}

static int cmd_report(int argc, char **argv)
{
    const char *file = NULL;
    int json = 0;
    for (int i = 2; i < argc; i++) {
        if (is_help(argv[i])) return fputs(usage_text, stdout), 0;
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (argv[i][0] == '-' && argv[i][1]) return usage_error("report: unknown option %s", argv[i]);
        else if (file) return usage_error("report: one FILE only (a second: %s)", argv[i]);
        else file = argv[i];
    }
    if (!file) return usage_error("report: no FILE (a merged trace)%s", "");
    return report_run(file, json);
}

static int svg_flag(int argc, char **argv, int *i, svg_options_t *opt)
{
    const char *flag = argv[*i], *value = flag_value(argc, argv, i);
    if (!value) return usage_error("svg: %s needs a value", flag);
    if (strcmp(flag, "-o") == 0 || strcmp(flag, "--output") == 0) {
        opt->out_path = value;
    } else if (strcmp(flag, "--title") == 0) {
        opt->title = value;
    } else if (strcmp(flag, "--from") == 0 || strcmp(flag, "--to") == 0) {
        double ms;
        if (parse_double(value, &ms) || ms < 0) return usage_error("svg: %s needs milliseconds >= 0", flag);
        if (flag[2] == 'f') opt->from_ms = ms, opt->has_from = 1;
        else opt->to_ms = ms, opt->has_to = 1;
    } else {
        double px;
        if (parse_double(value, &px) || px != floor(px) || px < 300 || px > 20000)
            return usage_error("svg: %s needs a whole number of pixels from 300 to 20000", flag);
        opt->width = (int)px;
    }
    return 0;
}

static int cmd_svg(int argc, char **argv)
{
    svg_options_t opt = {.width = 900};
    const char *file = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) return fputs(usage_text, stdout), 0;
        if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--title") || !strcmp(a, "--from") ||
            !strcmp(a, "--to") || !strcmp(a, "--width")) {
            int rc = svg_flag(argc, argv, &i, &opt);
            if (rc) return rc;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("svg: unknown option %s", a);
        } else if (file) {
            return usage_error("svg: one FILE only (a second: %s)", a);
        } else {
            file = a;
        }
    }
    if (!file) return usage_error("svg: no FILE (a merged trace)%s", "");
    if (!opt.out_path) return usage_error("svg: no output file (-o OUT.svg)%s", "");
    if (opt.has_from && opt.has_to && opt.to_ms <= opt.from_ms) return usage_error("svg: --to must be after --from%s", "");
    return svg_run(file, &opt);
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage_error("no command (merge, report or svg)%s", "");
    const char *cmd = argv[1];
    if (is_help(cmd)) return fputs(usage_text, stdout), 0;
    if (strcmp(cmd, "merge") == 0) return cmd_merge(argc, argv);
    if (strcmp(cmd, "report") == 0) return cmd_report(argc, argv);
    if (strcmp(cmd, "svg") == 0) return cmd_svg(argc, argv);
    return usage_error("unknown command \"%s\" (merge, report or svg)", cmd);
}
