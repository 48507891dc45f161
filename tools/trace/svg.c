/* pcoll-trace svg: a band per rank over a window of time; the
 * application's marks as light bars (nested ones inside), the library's
 * calls on top with the part spent waiting for others darker, background
 * bucket allreduces below, round completions as ticks, flow lines from a
 * round's initiator when there are few.  Bars narrower than a pixel that
 * touch are merged, so the picture stays small whatever the trace. */
#include "svg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "merged.h"
#include "util.h"

enum {
    HUGE_CALLS = 2000,   /* a trace whose busiest rank made more calls is drawn in a window */
    WINDOW_CALLS = 200,  /* of this many of its calls */
    MAX_FLOWS = 60,      /* flow lines only when the window has this many or fewer */
    MARK_DEPTHS = 4,     /* nested marks drawn one inside the other; deeper ones as the 4th */
    MARK_COLOURS = 10,   /* distinct mark names with a colour of their own; the rest share one */
    LEFT = 64, RIGHT = 16, TOP = 34
};

/* Layers of a band, drawn in this order */
typedef enum layer { L_MARK0, L_CALL = L_MARK0 + MARK_DEPTHS, L_WAIT, L_BUCKET, L_TICK, NLAYERS } layer_t;

typedef enum call_kind { K_ALLREDUCE, K_PARTIAL, K_PREDUCE, K_FUSION, NKINDS } call_kind_t;
static const char *const kind_names[NKINDS] = {"allreduce", "partial call", "preduce", "fusion"};
static const char *const kind_fill[NKINDS] = {"#4c78a8", "#f58518", "#54a24b", "#b279a2"};
static const char *const kind_dark[NKINDS] = {"#22446b", "#9c4f07", "#2c6626", "#72406a"};
/* light, but far apart in hue: nested marks must stay told apart */
static const char *const mark_fill[MARK_COLOURS + 1] = {"#e8e8e8", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5",
                                                        "#9edae5", "#f7b6d2", "#dbdb8d", "#c49c94", "#ff9896",
                                                        "#f2f2f2"};

#define NCOLOURS (MARK_COLOURS + 1 + 2 * NKINDS + 2) /* marks, calls, their waiting, round tick, stall */
#define COLOUR_TICK (MARK_COLOURS + 1 + 2 * NKINDS)
#define COLOUR_STALL (COLOUR_TICK + 1)

/* One lane: a layer of a rank's band in one colour, with the bar being grown */
typedef struct lane {
    double x0, x1; /* pixels; x1 < x0: none pending */
} lane_t;

typedef struct picture {
    FILE *out;
    const trace_t *t;
    const analysis_t *a;
    const svg_options_t *opt;
    double from_us, to_us; /* the window */
    double plot_w, band_h, gap;
    lane_t *lanes; /* [rank][layer][colour] */
    int32_t mark_colour_of[MARK_COLOURS]; /* the mark names (string ids) with a colour, -1 free */
    int used_kinds[NKINDS], used_marks, used_wait, used_ticks, used_stall;
} picture_t;

static double x_of(const picture_t *p, double us)
{
    double x = (us - p->from_us) / (p->to_us - p->from_us) * p->plot_w;
    return LEFT + (x < 0 ? 0 : x > p->plot_w ? p->plot_w : x);
}

static double band_y(const picture_t *p, int rank)
{
    return TOP + rank * (p->band_h + p->gap);
}

static const char *colour(int c)
{
    if (c <= MARK_COLOURS) return mark_fill[c];
    c -= MARK_COLOURS + 1;
    if (c < NKINDS) return kind_fill[c];
    if (c < 2 * NKINDS) return kind_dark[c - NKINDS];
    return c == 2 * NKINDS ? "#333333" : "#d62728";
}

/* The vertical extent of a layer within a band */
static void layer_extent(const picture_t *p, int layer, double *y, double *h)
{
    double b = p->band_h;
    if (layer < L_CALL) { /* marks: each depth inset from the one around it */
        double inset = layer * b * 0.08;
        *y = inset;
        *h = b - 2 * inset;
    } else if (layer == L_CALL || layer == L_WAIT) {
        *y = b * 0.3;
        *h = b * 0.45;
    } else if (layer == L_BUCKET) {
        *y = b * 0.78;
        *h = b * 0.17;
    } else {
        *y = 0;
        *h = b * 0.28;
    }
}

/* ---- bars, merged per lane ---- */

typedef struct canvas {
    picture_t *p;
    strbuf_t layers[NLAYERS];
    strbuf_t flows;
} canvas_t;

static lane_t *lane_of(const picture_t *p, int rank, int layer, int c)
{
    return &p->lanes[((size_t)rank * NLAYERS + (size_t)layer) * NCOLOURS + (size_t)c];
}

static void flush_lane(canvas_t *cv, int rank, int layer, int c)
{
    picture_t *p = cv->p;
    lane_t *l = lane_of(p, rank, layer, c);
    if (l->x1 < l->x0) return;
    double y, h;
    layer_extent(p, layer, &y, &h);
    double w = l->x1 - l->x0 < 0.6 ? 0.6 : l->x1 - l->x0; /* a tick or a short call stays visible */
    sb_printf(&cv->layers[layer], "<rect class=\"c%d\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n", c,
              l->x0, band_y(p, rank) + y, w, h);
    l->x1 = l->x0 - 1;
}

/* A bar from..to (us) in a lane: merged with the one before when either is
 * narrower than a pixel and they (nearly) touch.  0 when it is outside the
 * window. */
static int draw_bar(canvas_t *cv, int rank, int layer, int c, double from, double to)
{
    picture_t *p = cv->p;
    if (to < p->from_us || from > p->to_us) return 0;
    double x0 = x_of(p, from), x1 = x_of(p, to);
    lane_t *l = lane_of(p, rank, layer, c);
    int pending = l->x1 >= l->x0;
    if (pending && x0 - l->x1 < 1.0 && (x1 - x0 < 1.0 || l->x1 - l->x0 < 1.0)) {
        if (x1 > l->x1) l->x1 = x1;
        if (x0 < l->x0) l->x0 = x0; /* bars may come out of order (marks are drawn when they end) */
        return 1;
    }
    if (pending) flush_lane(cv, rank, layer, c);
    l->x0 = x0;
    l->x1 = x1;
    return 1;
}

static void flush_all(canvas_t *cv)
{
    for (int r = 0; r < cv->p->t->ranks; r++)
        for (int layer = 0; layer < NLAYERS; layer++)
            for (int c = 0; c < NCOLOURS; c++) flush_lane(cv, r, layer, c);
}

/* ---- events ---- */

/* Open marks per (rank, thread), found by a key "rank/tid" */
typedef struct mark_stacks {
    strtab_t keys;
    size_t **open; /* [key]: event indices of the open marks, innermost last */
    size_t *nopen, *cap_open;
    size_t cap;
} mark_stacks_t;

static size_t thread_key(mark_stacks_t *m, const tr_event_t *e)
{
    char key[32];
    int n = snprintf(key, sizeof key, "%d/%d", e->rank, e->tid);
    size_t id = (size_t)strtab_intern(&m->keys, key, (size_t)n);
    if (id >= m->cap) {
        size_t old = m->cap, c2 = old, c3 = old;
        GROW(m->open, m->cap, id + 1);
        GROW(m->nopen, c2, id + 1);
        GROW(m->cap_open, c3, id + 1);
        for (size_t i = old; i < m->cap; i++) m->open[i] = NULL, m->nopen[i] = m->cap_open[i] = 0;
    }
    return id;
}

static int mark_colour(picture_t *p, int32_t name)
{
    for (int c = 0; c < MARK_COLOURS; c++) {
        if (p->mark_colour_of[c] == name) return c;
        if (p->mark_colour_of[c] < 0) {
            p->mark_colour_of[c] = name;
            return c;
        }
    }
    return MARK_COLOURS;
}

static void draw_mark(canvas_t *cv, size_t begin, size_t depth, double end)
{
    const tr_event_t *b = &cv->p->t->events[begin];
    int d = depth < MARK_DEPTHS ? (int)depth : MARK_DEPTHS - 1;
    if (draw_bar(cv, b->rank, L_MARK0 + d, mark_colour(cv->p, b->label), b->ts, end)) cv->p->used_marks = 1;
}

static void mark_event(canvas_t *cv, mark_stacks_t *m, size_t i)
{
    const trace_t *t = cv->p->t;
    const tr_event_t *e = &t->events[i];
    size_t k = thread_key(m, e);
    if (e->type == TR_MARK_B) {
        GROW(m->open[k], m->cap_open[k], m->nopen[k] + 1);
        m->open[k][m->nopen[k]++] = i;
        return;
    }
    size_t at = m->nopen[k];
    while (at > 0 && t->events[m->open[k][at - 1]].label != e->label) at--;
    if (at == 0) return; /* an end without a begin: nothing to draw */
    for (size_t d = m->nopen[k]; d-- > at - 1;) draw_mark(cv, m->open[k][d], d, e->ts); /* inner ones end too */
    m->nopen[k] = at - 1;
}

/* Marks still open at the end of the trace last until then */
static void close_marks(canvas_t *cv, mark_stacks_t *m)
{
    for (size_t k = 0; k < m->keys.count; k++) {
        for (size_t d = m->nopen[k]; d-- > 0;) draw_mark(cv, m->open[k][d], d, cv->p->t->end_us);
        free(m->open[k]);
    }
    free(m->open);
    free(m->nopen);
    free(m->cap_open);
    strtab_free(&m->keys);
}

static int call_kind(const tr_event_t *e)
{
    switch ((tr_type_t)e->type) {
    case TR_ALLREDUCE: return K_ALLREDUCE;
    case TR_PARTIAL_CALL: return K_PARTIAL;
    case TR_PREDUCE: return K_PREDUCE;
    case TR_FUSION_WAIT:
    case TR_FUSION_BUCKET: return K_FUSION;
    default: return -1;
    }
}

static void draw_event(canvas_t *cv, mark_stacks_t *m, size_t i)
{
    picture_t *p = cv->p;
    const tr_event_t *e = &p->t->events[i];
    int kind = call_kind(e);
    if (e->type == TR_MARK_B || e->type == TR_MARK_E) {
        mark_event(cv, m, i);
    } else if (e->type == TR_FUSION_BUCKET) {
        if (draw_bar(cv, e->rank, L_BUCKET, MARK_COLOURS + 1 + kind, e->ts, e->ts + e->dur)) p->used_kinds[kind] = 1;
    } else if (kind >= 0) {
        if (draw_bar(cv, e->rank, L_CALL, MARK_COLOURS + 1 + kind, e->ts, e->ts + e->dur)) p->used_kinds[kind] = 1;
        double wait = p->a->waiting_us[i];
        if (wait > 0 && draw_bar(cv, e->rank, L_WAIT, MARK_COLOURS + 1 + NKINDS + kind, e->ts, e->ts + wait))
            p->used_wait = 1;
    } else if (e->type == TR_ROUND || e->type == TR_STALL) {
        int stall = e->type == TR_STALL;
        if (draw_bar(cv, e->rank, L_TICK, stall ? COLOUR_STALL : COLOUR_TICK, e->ts, e->ts)) {
            if (stall) p->used_stall = 1;
            else p->used_ticks = 1;
        }
    }
}

/* Flow lines: from each round's root (its round_start) to the other
 * ranks' completions, when the window holds few of them */
static void draw_flows(canvas_t *cv, const size_t *order)
{
    picture_t *p = cv->p;
    const trace_t *t = p->t;
    size_t nstarts = 0, cap = 0;
    const tr_event_t **starts = NULL;
    for (size_t k = 0; k < t->n; k++) {
        const tr_event_t *e = &t->events[order[k]];
        if (e->type != TR_ROUND_START || e->rank != e->u.round.root || e->ts > p->to_us || e->ts < p->from_us) continue;
        if (nstarts == MAX_FLOWS) { /* too many to tell apart: none */
            free(starts);
            return;
        }
        GROW(starts, cap, nstarts + 1);
        starts[nstarts++] = e;
    }
    for (size_t k = 0; nstarts && k < t->n; k++) {
        const tr_event_t *e = &t->events[order[k]];
        if (e->type != TR_ROUND || e->ts < p->from_us || e->ts > p->to_us) continue;
        for (size_t s = 0; s < nstarts; s++) {
            const tr_event_t *st = starts[s];
            if (st->obj != e->obj || st->u.round.round != e->u.round.round || st->rank == e->rank) continue;
            sb_printf(&cv->flows, "<line class=\"fl\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                      x_of(p, st->ts), band_y(p, st->rank) + p->band_h / 2, x_of(p, e->ts),
                      band_y(p, e->rank) + p->band_h / 2);
        }
    }
    free(starts);
}

/* ---- window, axis, legend ---- */

static int cmp_ts(const void *a, const void *b, void *arg)
{
    const trace_t *t = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    double x = t->events[i].ts, y = t->events[j].ts;
    if (x != y) return x < y ? -1 : 1;
    return (i > j) - (i < j);
}

static int is_drawn_call(const tr_event_t *e)
{
    return call_kind(e) >= 0 && e->type != TR_FUSION_BUCKET;
}

/* The default window: the whole trace, or, when its busiest rank made more
 * than HUGE_CALLS calls, WINDOW_CALLS of them from the middle of the run (the
 * start is often a warm-up or a calibration) */
static void default_window(const trace_t *t, const size_t *order, double *from_us, double *to_us)
{
    size_t *calls = xcalloc((size_t)t->ranks, sizeof *calls), busiest = 0;
    int rank = 0;
    *from_us = t->start_us;
    *to_us = t->end_us;
    for (size_t k = 0; k < t->n; k++)
        if (is_drawn_call(&t->events[order[k]])) calls[t->events[order[k]].rank]++;
    for (int r = 0; r < t->ranks; r++)
        if (calls[r] > busiest) busiest = calls[r], rank = r;
    if (busiest > HUGE_CALLS) {
        size_t first = busiest / 2 - WINDOW_CALLS / 2, seen = 0;
        for (size_t k = 0; k < t->n; k++) {
            const tr_event_t *e = &t->events[order[k]];
            if (e->rank != rank || !is_drawn_call(e)) continue;
            if (seen == first) *from_us = e->ts;
            if (seen++ == first + WINDOW_CALLS) {
                *to_us = e->ts;
                break;
            }
        }
        warnf("svg: the trace is long (%zu calls at rank %d): drawing %d of them from the middle, --from %.3f --to "
              "%.3f (ms)", busiest, rank, WINDOW_CALLS, (*from_us - t->start_us) / 1000.0,
              (*to_us - t->start_us) / 1000.0);
    }
    free(calls);
}

static double nice_step(double span)
{
    double raw = span / 8, mag = pow(10, floor(log10(raw)));
    const double steps[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++)
        if (steps[i] * mag >= raw) return steps[i] * mag;
    return 10 * mag;
}

static void draw_axis(const picture_t *p, strbuf_t *out, double y)
{
    double from_ms = (p->from_us - p->t->start_us) / 1000.0, to_ms = (p->to_us - p->t->start_us) / 1000.0;
    double step = nice_step(to_ms - from_ms);
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    sb_printf(out, "<line class=\"ax\" x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", LEFT, y, LEFT + p->plot_w, y);
    for (double v = ceil(from_ms / step - 1e-9) * step; v <= to_ms + step * 1e-9; v += step) {
        if (fabs(v) < step * 1e-9) v = 0; /* not "-0" */
        double x = x_of(p, p->t->start_us + v * 1000.0);
        sb_printf(out, "<line class=\"ax\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, y, x, y + 4);
        sb_printf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.*f</text>\n", x, y + 15, decimals, v);
    }
    sb_printf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">ms</text>\n", LEFT + p->plot_w, y + 28);
}

static void xml_text(strbuf_t *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '&') sb_puts(out, "&amp;");
        else if (*s == '<') sb_puts(out, "&lt;");
        else if (*s == '>') sb_puts(out, "&gt;");
        else if (*s == '"') sb_puts(out, "&quot;");
        else if ((unsigned char)*s >= 0x20 || *s == '\t') sb_putc(out, *s);
    }
}

/* A legend entry at (*x, *y), wrapping to a new row at the right edge */
static void legend_item(const picture_t *p, strbuf_t *out, double *x, double *y, const char *swatch, const char *label)
{
    double w = 18 + 6.2 * (double)strlen(label) + 14;
    if (*x + w > LEFT + p->plot_w && *x > LEFT) {
        *x = LEFT;
        *y += 16;
    }
    sb_printf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" %s/>\n", *x, *y - 9, swatch);
    sb_printf(out, "<text x=\"%.1f\" y=\"%.1f\">", *x + 16, *y);
    xml_text(out, label);
    sb_puts(out, "</text>\n");
    *x += w;
}

/* The legend from y on; returns the y below it */
static double draw_legend(const picture_t *p, strbuf_t *out, double y)
{
    double x = LEFT;
    char swatch[64];
    for (int k = 0; k < NKINDS; k++) {
        if (!p->used_kinds[k]) continue;
        snprintf(swatch, sizeof swatch, "fill=\"%s\"", kind_fill[k]);
        legend_item(p, out, &x, &y, swatch, kind_names[k]);
    }
    snprintf(swatch, sizeof swatch, "fill=\"%s\"", kind_dark[K_ALLREDUCE]);
    if (p->used_wait) legend_item(p, out, &x, &y, swatch, "waiting for others (darker)");
    if (p->used_ticks) legend_item(p, out, &x, &y, "fill=\"#333333\"", "round complete");
    if (p->used_stall) legend_item(p, out, &x, &y, "fill=\"#d62728\"", "stall warning");
    for (int c = 0; p->used_marks && c < MARK_COLOURS && p->mark_colour_of[c] >= 0; c++) {
        snprintf(swatch, sizeof swatch, "fill=\"%s\" stroke=\"#999\" stroke-width=\"0.5\"", mark_fill[c]);
        legend_item(p, out, &x, &y, swatch, strtab_get(&p->t->strings, p->mark_colour_of[c]));
    }
    if (p->used_marks && p->mark_colour_of[MARK_COLOURS - 1] >= 0) {
        snprintf(swatch, sizeof swatch, "fill=\"%s\" stroke=\"#999\" stroke-width=\"0.5\"", mark_fill[MARK_COLOURS]);
        legend_item(p, out, &x, &y, swatch, "other marks");
    }
    return y + 10;
}

/* ---- the document ---- */

static void put_buffer(FILE *out, const strbuf_t *sb)
{
    if (sb->len) fwrite(sb->data, 1, sb->len, out);
}

static void write_document(const picture_t *p, canvas_t *cv, const char *title)
{
    const trace_t *t = p->t;
    strbuf_t tail = {0};
    double axis_y = band_y(p, t->ranks) + 2;
    draw_axis(p, &tail, axis_y);
    double height = draw_legend(p, &tail, axis_y + 48);
    FILE *out = p->out;
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" "
                 "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n",
            p->opt->width, height, p->opt->width, height);
    fputs("<style>", out);
    for (int c = 0; c < NCOLOURS; c++) fprintf(out, ".c%d{fill:%s}", c, colour(c));
    fputs(".fl{stroke:#555;stroke-width:0.7;opacity:0.6}.ax{stroke:#444;stroke-width:1}</style>\n", out);
    fprintf(out, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
    strbuf_t text = {0};
    xml_text(&text, title);
    fprintf(out, "<text x=\"%d\" y=\"20\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", LEFT, text.data);
    for (int r = 0; r < t->ranks; r++) {
        fprintf(out, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f6f6f6\"/>\n", LEFT, band_y(p, r),
                p->plot_w, p->band_h);
        fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"middle\">rank %d</text>\n",
                LEFT - 6, band_y(p, r) + p->band_h / 2, r);
    }
    for (int layer = 0; layer < NLAYERS; layer++) put_buffer(out, &cv->layers[layer]);
    put_buffer(out, &cv->flows);
    put_buffer(out, &tail);
    fputs("</svg>\n", out);
    sb_free(&text);
    sb_free(&tail);
}

static void draw_all(picture_t *p, const char *title)
{
    const trace_t *t = p->t;
    size_t *order = xmalloc((t->n ? t->n : 1) * sizeof *order);
    for (size_t i = 0; i < t->n; i++) order[i] = i;
    if (t->n > 1) qsort_r(order, t->n, sizeof *order, cmp_ts, (void *)t);
    if (!p->opt->has_from && !p->opt->has_to) default_window(t, order, &p->from_us, &p->to_us);
    if (p->to_us <= p->from_us) p->to_us = p->from_us + 1000.0; /* an empty trace: 1 ms of nothing */
    canvas_t cv = {.p = p};
    mark_stacks_t marks = {0};
    strtab_init(&marks.keys);
    for (size_t k = 0; k < t->n; k++) draw_event(&cv, &marks, order[k]);
    close_marks(&cv, &marks);
    flush_all(&cv);
    draw_flows(&cv, order);
    strbuf_t full_title = {0};
    if (title) sb_puts(&full_title, title);
    else
        sb_printf(&full_title, "%s: %d ranks, %.3f to %.3f ms", t->path, t->ranks, (p->from_us - t->start_us) / 1000.0,
                  (p->to_us - t->start_us) / 1000.0);
    write_document(p, &cv, full_title.data);
    sb_free(&full_title);
    for (int layer = 0; layer < NLAYERS; layer++) sb_free(&cv.layers[layer]);
    sb_free(&cv.flows);
    free(order);
}

static int write_svg(picture_t *p, const char *path)
{
    p->out = fopen(path, "w");
    if (!p->out) {
        errorf("%s: cannot create: %s", path, strerror(errno));
        return 1;
    }
    draw_all(p, p->opt->title);
    int failed = ferror(p->out) != 0;
    failed |= fclose(p->out) != 0;
    if (failed) errorf("%s: write error", path);
    return failed;
}

int svg_run(const char *path, const svg_options_t *opt)
{
    trace_t t;
    if (trace_read(path, &t)) {
        trace_free(&t);
        return 1;
    }
    int rc = 0;
    double length_ms = (t.end_us - t.start_us) / 1000.0;
    if (opt->has_from && opt->from_ms >= length_ms && t.n) {
        errorf("svg: --from %g: the trace is %.3f ms long", opt->from_ms, length_ms);
        rc = 2;
    }
    analysis_t a;
    analyze(&t, &a);
    picture_t p = {.t = &t, .a = &a, .opt = opt};
    p.from_us = t.start_us + (opt->has_from ? opt->from_ms * 1000.0 : 0);
    p.to_us = opt->has_to ? t.start_us + opt->to_ms * 1000.0 : t.end_us;
    p.plot_w = opt->width - LEFT - RIGHT;
    p.band_h = t.ranks <= 12 ? 28 : fmax(6, 336.0 / t.ranks);
    p.gap = fmax(1, p.band_h / 6);
    for (int c = 0; c < MARK_COLOURS; c++) p.mark_colour_of[c] = -1;
    p.lanes = xmalloc((size_t)t.ranks * NLAYERS * NCOLOURS * sizeof *p.lanes);
    for (size_t i = 0; i < (size_t)t.ranks * NLAYERS * NCOLOURS; i++) p.lanes[i] = (lane_t){0, -1};
    if (rc == 0) rc = write_svg(&p, opt->out_path);
    free(p.lanes);
    analysis_free(&a);
    trace_free(&t);
    return rc;
}
