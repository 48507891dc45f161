/* pcoll-trace report: prints the analysis (analyze.c) as tables or as one
 * JSON object.  Every number's definition is in docs/timeline.md. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "json.h"
#include "merged.h"
#include "util.h"

enum { RANK_COLUMNS = 8 }; /* the shares table shows ranks one by one up to this many */

static double total_traced(const analysis_t *a)
{
    double sum = 0;
    for (int r = 0; r < a->ranks; r++) sum += a->rank[r].traced_us;
    return sum;
}

static double sum_over_ranks(const double *v, int ranks)
{
    double sum = 0;
    for (int r = 0; r < ranks; r++) sum += v[r];
    return sum;
}

static double share(double part, double whole)
{
    return whole > 0 ? part / whole : NAN;
}

static double total_compute_share(const analysis_t *a)
{
    double compute = 0;
    for (int r = 0; r < a->ranks; r++) {
        double c = a->rank[r].traced_us - a->rank[r].calls_us;
        compute += c > 0 ? c : 0;
    }
    return share(compute, total_traced(a));
}

/* The kinds in the order of their names */
static size_t *kinds_by_name(const analysis_t *a)
{
    size_t *order = xmalloc((a->nkinds ? a->nkinds : 1) * sizeof *order);
    for (size_t i = 0; i < a->nkinds; i++) order[i] = i;
    for (size_t i = 1; i < a->nkinds; i++) /* a handful: insertion sort */
        for (size_t j = i; j > 0; j--) {
            const char *x = strtab_get(&a->kind_names, a->kinds[order[j - 1]].name);
            const char *y = strtab_get(&a->kind_names, a->kinds[order[j]].name);
            if (strcmp(x, y) <= 0) break;
            size_t tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    return order;
}

/* ---- text ---- */

static void text_number(double v, int width, int decimals)
{
    if (isnan(v)) printf(" %*s", width, "-");
    else printf(" %*.*f", width, decimals, v);
}

static void text_ranks(const analysis_t *a)
{
    printf("%-20s%-33s%-8s%-18s%s\n", "", "   lateness (ms)", "", "   waiting (s)", "    preduce wait (ms)");
    printf("rank exchanges  last   median     p90     max    mean  missed   caused  avoided     median     max\n");
    for (int r = 0; r < a->ranks; r++) {
        const rank_stats_t *s = &a->rank[r];
        printf("%4d %9zu %5zu", r, s->exchanges, s->last);
        text_number(s->late_median_ms, 8, 3);
        text_number(s->late_p90_ms, 7, 3);
        text_number(s->late_max_ms, 7, 3);
        text_number(s->late_mean_ms, 7, 3);
        printf(" %7zu", s->missed_rounds);
        text_number(s->caused_us / 1e6, 8, 3);
        text_number(s->avoided_us / 1e6, 8, 3);
        text_number(s->preduce_median_ms, 10, 3);
        text_number(s->preduce_max_ms, 7, 3);
        printf("\n");
    }
}

static void text_straggler(const analysis_t *a)
{
    if (a->straggler < 0) {
        printf("straggler: none (nobody arrived last at an exchange while others waited)\n");
        return;
    }
    const rank_stats_t *s = &a->rank[a->straggler];
    printf("straggler: rank %d (lateness median %.3f ms, last in %zu of %zu exchanges)\n", a->straggler,
           s->late_median_ms, s->last, s->exchanges);
}

/* Only when a rank was silent (PCOLL_EXCLUDE_MS): who, and for how many rounds */
static void text_left_out(const analysis_t *a)
{
    int any = 0;
    for (int r = 0; r < a->ranks; r++) any |= a->rank[r].left_out_rounds || a->rank[r].caught_up;
    if (!any) return;
    printf("\nsilent ranks (rounds went on without them, PCOLL_EXCLUDE_MS):\n");
    for (int r = 0; r < a->ranks; r++) {
        const rank_stats_t *s = &a->rank[r];
        if (s->left_out_rounds || s->caught_up)
            printf("rank %d: left out of %zu rounds; caught up %zu rounds in %zu catch-ups\n", r, s->left_out_rounds,
                   s->caught_up_rounds, s->caught_up);
    }
}

static void text_share_cell(double exchange, double waiting)
{
    char cell[32];
    if (isnan(exchange)) snprintf(cell, sizeof cell, "-");
    else snprintf(cell, sizeof cell, "%.1f%% / %.1f%%", 100 * exchange, 100 * waiting);
    printf(" %16s", cell);
}

static void text_percent(double share_of_one)
{
    if (isnan(share_of_one)) printf(" %16s", "-");
    else printf(" %15.1f%%", 100 * share_of_one);
}

static void text_shares(const analysis_t *a)
{
    int shown = a->ranks <= RANK_COLUMNS ? a->ranks : 0;
    double traced = total_traced(a);
    printf("time shares (of each rank's traced time: in the calls / waiting in them for the last member; a kind's "
           "calls that overlap count once, but kinds may overlap each other (a preduce holds its group's allreduce), "
           "so the shares need not add up to 1):\n");
    printf("%-24s %16s", "kind", "all ranks");
    for (int r = 0; r < shown; r++) {
        char head[24];
        snprintf(head, sizeof head, "rank %d", r);
        printf(" %16s", head);
    }
    printf("\n");
    size_t *order = kinds_by_name(a);
    for (size_t i = 0; i < a->nkinds; i++) {
        const kind_stats_t *k = &a->kinds[order[i]];
        printf("%-24s", strtab_get(&a->kind_names, k->name));
        text_share_cell(share(sum_over_ranks(k->exchange_us, a->ranks), traced),
                        share(sum_over_ranks(k->waiting_us, a->ranks), traced));
        for (int r = 0; r < shown; r++)
            text_share_cell(share(k->exchange_us[r], a->rank[r].traced_us), share(k->waiting_us[r], a->rank[r].traced_us));
        printf("\n");
    }
    free(order);
    printf("%-24s", "compute (outside calls)");
    text_percent(total_compute_share(a));
    for (int r = 0; r < shown; r++) text_percent(a->rank[r].compute_share);
    printf("\n");
    if (!shown) printf("(per rank: --json)\n");
}

static void text_fusion(const trace_t *t, const analysis_t *a)
{
    if (!a->nbuckets) return;
    printf("\nfusion buckets (medians over steps and ranks; exposed: its end after the step's last layer was ready):\n");
    printf("%-8s %6s %6s   %-20s  %-20s\n", "", "", "", "exposed (ms)", "duration (ms)");
    printf("%-8s %6s %6s   measured predicted  measured predicted\n", "obj", "bucket", "steps");
    for (size_t i = 0; i < a->nbuckets; i++) {
        const bucket_stats_t *b = &a->buckets[i];
        printf("%-8s %6lld %6zu  ", strtab_get(&t->strings, b->obj), b->bucket, b->steps);
        text_number(b->measured_exposed_ms, 8, 3);
        text_number(b->predicted_exposed_ms, 9, 3);
        text_number(b->measured_duration_ms, 9, 3);
        text_number(b->predicted_duration_ms, 9, 3);
        printf("\n");
    }
}

static void text_report(const trace_t *t, const analysis_t *a)
{
    printf("%s: %d ranks, %zu exchanges: %zu synchronous allreduces, %zu partial rounds (%zu synchronous), "
           "%zu iteration steps (of %zu dynamic groups)\n",
           t->path, a->ranks, a->allreduces + a->rounds + a->iteration_steps, a->allreduces, a->rounds, a->sync_rounds,
           a->iteration_steps, a->groups);
    if (a->allreduces_incomplete)
        printf("(%zu allreduces left out: some member's call is not in the trace)\n", a->allreduces_incomplete);
    printf("\n");
    text_ranks(a);
    printf("\n");
    text_straggler(a);
    text_left_out(a);
    printf("\n");
    text_shares(a);
    text_fusion(t, a);
    printf("\nclock check: %zu pairs of a cause and its effect on two ranks; the effect at most %.3f us before its "
           "cause; %zu beyond the clocks' error bounds (%.3f us at most per clock): %s\n",
           a->clock.pairs, a->clock.worst_us, a->clock.violations, a->clock.bound_us,
           a->clock.ok ? "ok" : "NOT OK: the clocks are not aligned as the trace claims");
}

/* ---- JSON ---- */

static void json_key_number(const char *key, double v, int comma)
{
    printf("%s\"%s\":", comma ? "," : "", key);
    json_fwrite_number(stdout, v);
}

static void json_rank(const analysis_t *a, int r)
{
    const rank_stats_t *s = &a->rank[r];
    printf("%s\n  {\"rank\":%d,\"exchanges\":%zu,\"last\":%zu,\"lateness_ms\":{", r ? "," : "", r, s->exchanges, s->last);
    json_key_number("median", s->late_median_ms, 0);
    json_key_number("p90", s->late_p90_ms, 1);
    json_key_number("max", s->late_max_ms, 1);
    json_key_number("mean", s->late_mean_ms, 1);
    printf("},\"missed_rounds\":%zu,\"left_out_rounds\":%zu,\"caught_up\":%zu,\"caught_up_rounds\":%zu",
           s->missed_rounds, s->left_out_rounds, s->caught_up, s->caught_up_rounds);
    json_key_number("wait_caused_s", s->caused_us / 1e6, 1);
    json_key_number("wait_avoided_s", s->avoided_us / 1e6, 1);
    printf(",\"preduce_wait_ms\":");
    if (s->npreduce) {
        printf("{");
        json_key_number("median", s->preduce_median_ms, 0);
        json_key_number("max", s->preduce_max_ms, 1);
        printf("}");
    } else {
        printf("null");
    }
    json_key_number("traced_s", s->traced_us / 1e6, 1);
    json_key_number("compute_share", s->compute_share, 1);
    printf("}");
}

static void json_kinds(const analysis_t *a)
{
    double traced = total_traced(a);
    size_t *order = kinds_by_name(a);
    printf(",\n\"kinds\":[");
    for (size_t i = 0; i < a->nkinds; i++) {
        const kind_stats_t *k = &a->kinds[order[i]];
        printf("%s\n  {\"kind\":", i ? "," : "");
        const char *name = strtab_get(&a->kind_names, k->name);
        json_fwrite_string(stdout, name, strlen(name));
        json_key_number("exchange_share", share(sum_over_ranks(k->exchange_us, a->ranks), traced), 1);
        json_key_number("waiting_share", share(sum_over_ranks(k->waiting_us, a->ranks), traced), 1);
        printf(",\"ranks\":[");
        for (int r = 0; r < a->ranks; r++) {
            printf("%s{\"rank\":%d", r ? "," : "", r);
            json_key_number("exchange_share", share(k->exchange_us[r], a->rank[r].traced_us), 1);
            json_key_number("waiting_share", share(k->waiting_us[r], a->rank[r].traced_us), 1);
            printf("}");
        }
        printf("]}");
    }
    free(order);
    printf("%s\n  {\"kind\":\"compute\"", a->nkinds ? "," : "");
    json_key_number("compute_share", total_compute_share(a), 1);
    printf(",\"ranks\":[");
    for (int r = 0; r < a->ranks; r++) {
        printf("%s{\"rank\":%d", r ? "," : "", r);
        json_key_number("compute_share", a->rank[r].compute_share, 1);
        printf("}");
    }
    printf("]}]");
}

static void json_fusion(const trace_t *t, const analysis_t *a)
{
    printf(",\n\"fusion\":[");
    for (size_t i = 0; i < a->nbuckets; i++) {
        const bucket_stats_t *b = &a->buckets[i];
        printf("%s\n  {\"obj\":%s,\"bucket\":%lld,\"steps\":%zu", i ? "," : "", strtab_get(&t->strings, b->obj),
               b->bucket, b->steps);
        json_key_number("measured_exposed_ms", b->measured_exposed_ms, 1);
        json_key_number("predicted_exposed_ms", b->predicted_exposed_ms, 1);
        json_key_number("measured_duration_ms", b->measured_duration_ms, 1);
        json_key_number("predicted_duration_ms", b->predicted_duration_ms, 1);
        printf("}");
    }
    printf("]");
}

static void json_report(const trace_t *t, const analysis_t *a)
{
    printf("{\"trace\":");
    json_fwrite_string(stdout, t->path, strlen(t->path));
    printf(",\"size\":%d,\n\"exchanges\":{\"allreduces\":%zu,\"allreduces_incomplete\":%zu,\"partial_rounds\":%zu,"
           "\"sync_rounds\":%zu,\"dynamic_groups\":%zu,\"iteration_steps\":%zu},\n",
           a->ranks, a->allreduces, a->allreduces_incomplete, a->rounds, a->sync_rounds, a->groups, a->iteration_steps);
    if (a->straggler >= 0) printf("\"straggler\":%d", a->straggler);
    else printf("\"straggler\":null");
    json_key_number("straggler_lateness_ms", a->straggler >= 0 ? a->rank[a->straggler].late_median_ms : NAN, 1);
    printf(",\n\"ranks\":[");
    for (int r = 0; r < a->ranks; r++) json_rank(a, r);
    printf("]");
    json_kinds(a);
    json_fusion(t, a);
    printf(",\n\"clock_check\":{\"pairs\":%zu,\"violations\":%zu", a->clock.pairs, a->clock.violations);
    json_key_number("worst_violation_us", a->clock.worst_us, 1);
    json_key_number("bound_us", a->clock.bound_us, 1);
    printf(",\"ok\":%s}}\n", a->clock.ok ? "true" : "false");
}

int report_run(const char *path, int json)
{
    trace_t t;
    if (trace_read(path, &t)) {
        trace_free(&t);
        return 1;
    }
    analysis_t a;
    analyze(&t, &a);
    if (json) json_report(&t, &a);
    else text_report(&t, &a);
    analysis_free(&a);
    trace_free(&t);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        errorf("standard output: write error");
        return 1;
    }
    return 0;
}
