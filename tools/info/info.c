/*
 * pcoll-info: what this build of pcoll contains and how it is configured,
 * as ompi_info and ucc_info -c do: the version, the MPI library, the
 * algorithms and kinds the library offers, and every PCOLL_* variable that
 * pcoll_init reads with its value in this environment, its default and its
 * meaning (the library's own table: pcoll_config_var).  Needs no MPI job.
 *
 *   pcoll-info              the build, then a line per variable
 *   pcoll-info --markdown   the variables as the README's table
 *   pcoll-info --json       one JSON object per variable
 */
#include <stdio.h>
#include <string.h>

#include "pcoll.h"
#include "tool.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: pcoll-info [--markdown | --json]\n"
                 "  (none)       the build (version, MPI, algorithms) and every PCOLL_* variable:\n"
                 "               name, value here, default, meaning\n"
                 "  --markdown   the variables as a Markdown table (the README's)\n"
                 "  --json       one JSON object per variable\n");
}

/* text with "|" escaped for a Markdown table cell, into buf */
static const char *cell(const char *text, char *buf, size_t len)
{
    size_t at = 0;
    for (; *text && at + 3 < len; text++) {
        if (*text == '|') buf[at++] = '\\';
        buf[at++] = *text;
    }
    buf[at] = '\0';
    return buf;
}

/* The value in this environment, or why it is not one */
static const char *value_here(const char *name, char *buf, size_t len)
{
    if (pcoll_config_get(name, buf, len) != PCOLL_SUCCESS) snprintf(buf, len, "invalid (%s)", pcoll_last_error());
    return buf;
}

static void build(void)
{
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpi, &len);
    char *nl = strchr(mpi, '\n');
    if (nl) *nl = '\0';
    printf("pcoll %d.%d.%d\n", PCOLL_VERSION_MAJOR, PCOLL_VERSION_MINOR, PCOLL_VERSION_PATCH);
#if defined(__clang__)
    printf("  compiler           clang %s\n", __VERSION__);
#elif defined(__GNUC__)
    printf("  compiler           gcc %s\n", __VERSION__);
#endif
    printf("  MPI                %s\n", mpi);
    printf("  allreduce          auto");
    for (int a = PCOLL_ALGO_RECDBL; a <= PCOLL_ALGO_DIRECT; a++)
        printf(", %s", pcoll_allreduce_algo_name((pcoll_allreduce_algo_t)a));
    printf("\n  partial kinds     ");
    for (int k = 0; pcoll_partial_kind_name((pcoll_partial_kind_t)k); k++)
        printf("%s %s", k ? "," : "", pcoll_partial_kind_name((pcoll_partial_kind_t)k));
    printf("\n  dynamic groups    ");
    for (int p = 0; pcoll_preduce_policy_name((pcoll_preduce_policy_t)p); p++)
        printf("%s %s", p ? "," : "", pcoll_preduce_policy_name((pcoll_preduce_policy_t)p));
    printf("\n  fusion strategies ");
    for (int s = PCOLL_FUSION_OPTIMAL; s <= PCOLL_FUSION_FIXED; s++) {
        pcoll_fusion_spec_t spec = {.strategy = (pcoll_fusion_strategy_t)s, .fixed_bytes = 0};
        char name[64];
        pcoll_fusion_spec_name(&spec, name, sizeof name);
        if (s == PCOLL_FUSION_FIXED) snprintf(name, sizeof name, "fixed:BYTES");
        printf("%s %s", s ? "," : "", name);
    }
    printf("\n  types              ");
    for (int d = PCOLL_FLOAT32; d <= PCOLL_INT64; d++) printf("%s%s", d ? ", " : "", pcoll_dtype_name((pcoll_dtype_t)d));
    printf("\n\n");
}

int main(int argc, char **argv)
{
    enum { PLAIN, MARKDOWN, JSON } format = PLAIN;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--markdown") == 0)
            format = MARKDOWN;
        else if (strcmp(argv[i], "--json") == 0)
            format = JSON;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "pcoll-info: unknown argument \"%s\"\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    pcoll_set_log_level(PCOLL_LOG_NONE); /* a malformed variable is shown, not logged */
    char value[160];
    int wide = 12; /* the value and default columns: as wide as their widest */
    for (int i = 0; format == PLAIN && pcoll_config_var(i); i++) {
        const pcoll_config_var_t *v = pcoll_config_var(i);
        int a = (int)strlen(v->default_value), b = (int)strlen(value_here(v->name, value, sizeof value));
        if (a > wide) wide = a;
        if (b > wide) wide = b;
    }
    if (format == PLAIN) {
        build();
        printf("%-29s %-*s %-*s %s\n", "variable", wide, "value here", wide, "default", "meaning");
    } else if (format == MARKDOWN) {
        printf("| variable | meaning | default | range | API |\n|---|---|---|---|---|\n");
    }
    for (int i = 0; pcoll_config_var(i); i++) {
        const pcoll_config_var_t *v = pcoll_config_var(i);
        if (format == PLAIN) {
            printf("%-29s %-*s %-*s %s%s\n", v->name, wide, value_here(v->name, value, sizeof value), wide,
                   v->default_value, v->description, v->must_agree ? " (every rank alike)" : "");
        } else if (format == MARKDOWN) {
            char range[200];
            printf("| `%s`%s | %s | %s | %s | %s%s%s |\n", v->name, v->must_agree ? " (agree)" : "", v->description,
                   v->default_value, cell(v->range, range, sizeof range), v->api[0] ? "`" : "",
                   v->api[0] ? v->api : "none", v->api[0] ? "`" : "");
        } else {
            tool_json_t j;
            tool_json_begin(&j);
            tool_json_str(&j, "name", v->name);
            tool_json_str(&j, "value", value_here(v->name, value, sizeof value));
            tool_json_str(&j, "default", v->default_value);
            tool_json_str(&j, "range", v->range);
            tool_json_str(&j, "description", v->description);
            tool_json_str(&j, "api", v->api);
            tool_json_int(&j, "must_agree", v->must_agree);
            tool_json_end(&j, stdout);
        }
    }
    return 0;
}
