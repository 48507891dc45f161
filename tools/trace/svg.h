/* pcoll-trace svg: a picture of a window of a merged trace. */
#ifndef PCOLL_TRACE_SVG_H
#define PCOLL_TRACE_SVG_H

typedef struct svg_options {
    const char *out_path;
    const char *title; /* NULL: the file's name and the window */
    double from_ms, to_ms; /* from the trace's start */
    int has_from, has_to;
    int width; /* pixels */
} svg_options_t;

/* 0, or 1 after a message. */
int svg_run(const char *path, const svg_options_t *opt);

#endif
