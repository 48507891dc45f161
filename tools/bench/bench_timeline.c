/*
 * pcoll-bench timeline: what recording a timeline costs (docs/timeline.md).
 *
 *   per event      each rank records --events marks with a timeline on, and
 *                  makes as many calls with it off: CPU nanoseconds of the
 *                  calling thread per call (the copies of full buffers into
 *                  the spill file included; their formatting as JSON lines
 *                  happens at the stop, not timed)
 *   allreduce      blocks of --calls blocking allreduces of --bytes, with
 *                  the timeline off and on in turn (--reps of each, the
 *                  start and stop outside the timed blocks): microseconds per
 *                  call, and on / off
 *
 * The files go to a directory under /tmp whose name rank 0 makes (every
 * node that lacks it makes it too), removed at the end unless --keep; or
 * to --prefix.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tool.h"

static const char *help =
    "usage: mpirun -np P pcoll-bench timeline [flags]\n"
    "  --events N     marks per rank and repetition for the per-event cost (default 200000)\n"
    "  --calls N      blocking allreduces per timed block (default 2000)\n"
    "  --bytes B      their size (default 8)\n"
    "  --reps R       blocks with the timeline off and on, in turn (default 5)\n"
    "  --prefix P     the timeline files' prefix (default: a new directory in /tmp)\n"
    "  --keep         keep the files\n"
    "  --json         one JSON object: bench, ranks, bytes, calls, reps, event_ns_on,\n"
    "                 event_ns_off (CPU ns per mark: medians, the slowest rank), allreduce_us_off,\n"
    "                 allreduce_us_on (medians of the blocks, the slowest rank),\n"
    "                 allreduce_ratio (on / off), events_per_call\n";

typedef struct opts {
    long events, calls, reps;
    size_t bytes;
    const char *prefix;
    int keep, json;
} opts_t;

static void parse(int argc, char **argv, int rank, opts_t *o)
{
    const char *prog = "pcoll-bench timeline";
    static struct option opts[] = {{"events", required_argument, 0, 'e'}, {"calls", required_argument, 0, 'c'},
                                   {"bytes", required_argument, 0, 'b'},  {"reps", required_argument, 0, 'r'},
                                   {"prefix", required_argument, 0, 'p'}, {"keep", no_argument, 0, 'k'},
                                   {"json", no_argument, 0, 'j'},         {"help", no_argument, 0, 'h'},
                                   {0, 0, 0, 0}};
    *o = (opts_t){200000, 2000, 5, 8, NULL, 0, 0};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e': o->events = tool_flag_long(prog, "--events", optarg, 2, 100000000); break;
        case 'c': o->calls = tool_flag_long(prog, "--calls", optarg, 1, 100000000); break;
        case 'b': o->bytes = tool_flag_bytes(prog, "--bytes", optarg); break;
        case 'r': o->reps = tool_flag_long(prog, "--reps", optarg, 1, 1000); break;
        case 'p': o->prefix = optarg; break;
        case 'k': o->keep = 1; break;
        case 'j': o->json = 1; break;
        case 'h':
            if (rank == 0) fputs(help, stdout);
            exit(0);
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (o->bytes < 4 || o->bytes % 4) tool_usage_error(prog, "--bytes: a multiple of 4 (float32 elements)");
}

static void must(int rc, const char *what)
{
    if (rc == PCOLL_SUCCESS) return;
    fprintf(stderr, "pcoll-bench timeline: %s: %s\n", what, pcoll_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* this thread's CPU time: a rank that shares its core with others is not
 * charged for their turns */
static double thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* CPU nanoseconds per mark call (n of them, begin and end in turn) */
static double marks_ns(pcoll_t *ctx, long n)
{
    double t0 = thread_cpu_ns();
    for (long i = 0; i < n; i += 2) {
        must(pcoll_timeline_mark(ctx, "bench", PCOLL_MARK_BEGIN), "pcoll_timeline_mark");
        must(pcoll_timeline_mark(ctx, "bench", PCOLL_MARK_END), "pcoll_timeline_mark");
    }
    return (thread_cpu_ns() - t0) / (double)n;
}

/* microseconds per blocking allreduce, the slowest rank's */
static double allreduce_us(pcoll_t *ctx, float *v, size_t count, long calls)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = tool_now_us();
    for (long i = 0; i < calls; i++)
        must(pcoll_allreduce(ctx, PCOLL_IN_PLACE, v, count, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0), "pcoll_allreduce");
    double us = (tool_now_us() - t0) / (double)calls, mx;
    MPI_Allreduce(&us, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return mx;
}

static double slowest(double x)
{
    double mx;
    MPI_Allreduce(&x, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return mx;
}

static void print_results(const opts_t *o, int size, double ns_on, double ns_off, double us_on, double us_off)
{
    if (o->json) {
        tool_json_t j;
        tool_json_begin(&j);
        tool_json_str(&j, "bench", "timeline");
        tool_json_int(&j, "ranks", size);
        tool_json_int(&j, "bytes", (long long)o->bytes);
        tool_json_int(&j, "calls", o->calls);
        tool_json_int(&j, "reps", o->reps);
        tool_json_num(&j, "event_ns_on", ns_on);
        tool_json_num(&j, "event_ns_off", ns_off);
        tool_json_num(&j, "allreduce_us_off", us_off);
        tool_json_num(&j, "allreduce_us_on", us_on);
        tool_json_num(&j, "allreduce_ratio", us_on / us_off);
        tool_json_int(&j, "events_per_call", 1);
        tool_json_end(&j, stdout);
        return;
    }
    printf("# pcoll-bench timeline: %d ranks; medians of %ld repetitions, the slowest rank\n", size, o->reps);
    printf("recorded event (a mark): %.1f ns of CPU; the same call with no timeline: %.1f ns\n", ns_on, ns_off);
    printf("allreduce of %zu B (one event per call): %.3f us recording, %.3f us not: on / off %.4f\n", o->bytes, us_on,
           us_off, us_on / us_off);
}

int bench_timeline(int argc, char **argv, int rank, int size)
{
    opts_t o;
    parse(argc, argv, rank, &o);
    char dir[256] = "", prefix[512];
    if (!o.prefix && rank == 0) {
        snprintf(dir, sizeof dir, "/tmp/pcoll-bench-timeline-XXXXXX");
        if (!mkdtemp(dir)) {
            perror("pcoll-bench timeline: mkdtemp");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    /* ranks on other nodes: the same name there (the first to get there makes it) */
    if (!o.prefix && mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "pcoll-bench timeline: rank %d: cannot make %s: %s\n", rank, dir, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    snprintf(prefix, sizeof prefix, "%s%s", o.prefix ? o.prefix : dir, o.prefix ? "" : "/t");
    pcoll_t *ctx = tool_pcoll_init();
    size_t count = o.bytes / 4;
    float *v = calloc(count, sizeof *v);
    double *on = calloc((size_t)o.reps, sizeof *on), *off = calloc((size_t)o.reps, sizeof *off);
    double *ev_on = calloc((size_t)o.reps, sizeof *ev_on), *ev_off = calloc((size_t)o.reps, sizeof *ev_off);
    if (!v || !on || !off || !ev_on || !ev_off) must(PCOLL_ERR_NOMEM, "memory");
    must(pcoll_allreduce(ctx, PCOLL_IN_PLACE, v, count, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0), "warm-up");
    for (long r = 0; r < o.reps; r++) {
        off[r] = allreduce_us(ctx, v, count, o.calls);
        ev_off[r] = marks_ns(ctx, o.events);
        must(pcoll_timeline_start(ctx, prefix), "pcoll_timeline_start");
        on[r] = allreduce_us(ctx, v, count, o.calls);
        ev_on[r] = marks_ns(ctx, o.events);
        must(pcoll_timeline_stop(ctx), "pcoll_timeline_stop");
    }
    double us_off = tool_median(off, (size_t)o.reps), us_on = tool_median(on, (size_t)o.reps);
    double ns_on = slowest(tool_median(ev_on, (size_t)o.reps)), ns_off = slowest(tool_median(ev_off, (size_t)o.reps));
    if (rank == 0) print_results(&o, size, ns_on, ns_off, us_on, us_off);
    pcoll_finalize(&ctx);
    if (!o.prefix && !o.keep) { /* each rank its own file; the directory goes with the last of its node */
        char path[600];
        snprintf(path, sizeof path, "%s.%d.jsonl", prefix, rank);
        unlink(path);
        MPI_Barrier(MPI_COMM_WORLD);
        rmdir(dir);
    }
    free(v);
    free(on);
    free(off);
    free(ev_on);
    free(ev_off);
    return 0;
}
