/*
 * pcoll-bench allreduce --tune FILE: for sizes doubling from --min-bytes to
 * --max-bytes, time pcoll_allreduce with every algorithm that applies (the
 * node-shared path where this context has it, then recursive doubling,
 * Rabenseifner, ring, and direct while its n - 1 full-size messages stay
 * small), taking turns block by block, each the median over repetitions of
 * the slowest rank, and write
 * the fastest per size as rows of the tuning table (docs: README,
 * "Tuning"), which pcoll_init reads from PCOLL_TUNING_FILE:
 *
 *   size:   8    16   ...  4K    8K  ...  64M         rows written
 *   best:   shm  shm       shm   shm      shm    -->   P 1 64M shm
 *
 * Consecutive sizes with the same winner make one row (up to the last of
 * them); rows of other rank or node counts already in FILE are kept, those
 * of this one replaced.  Sizes above --max-bytes keep the built-in rule.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tool.h"

enum { MAX_CANDIDATES = 5, MAX_SIZES = 64, DIRECT_LIMIT = 4 << 20, BLOCKS = 5 };

/* One call of count floats with algorithm `algo` (SHM: none forced, so
 * that the node-shared path is taken); its time at this rank (us). */
static double one_call(pcoll_t *ctx, const float *in, float *out, size_t count)
{
    double t0 = MPI_Wtime();
    int rc = pcoll_allreduce(ctx, in, out, count, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0);
    if (rc != PCOLL_SUCCESS) {
        fprintf(stderr, "pcoll-bench allreduce --tune: pcoll_allreduce: %s\n", pcoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return (MPI_Wtime() - t0) * 1e6;
}

/* us[c] = the median over reps of the slowest rank's time with cand[c].
 * The candidates take turns block by block, so that a disturbance of the
 * machine falls on all of them alike. */
static void time_candidates(pcoll_t *ctx, const float *in, float *out, size_t count, int reps,
                            const pcoll_allreduce_algo_t *cand, int nc, double *us)
{
    double *t = malloc(sizeof(double) * (size_t)reps * (size_t)nc);
    double *slow = malloc(sizeof(double) * (size_t)reps);
    if (!t || !slow) {
        fprintf(stderr, "pcoll-bench allreduce --tune: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int b = 0; b < BLOCKS; b++)
        for (int c = 0; c < nc; c++) {
            pcoll_set_allreduce_algo(ctx, cand[c] == PCOLL_ALGO_SHM ? PCOLL_ALGO_AUTO : cand[c]);
            for (int w = 0; w < 2; w++) one_call(ctx, in, out, count);
            for (int r = b * reps / BLOCKS; r < (b + 1) * reps / BLOCKS; r++) {
                MPI_Barrier(MPI_COMM_WORLD);
                t[(size_t)c * (size_t)reps + (size_t)r] = one_call(ctx, in, out, count);
            }
        }
    pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_AUTO);
    for (int c = 0; c < nc; c++) {
        MPI_Allreduce(t + (size_t)c * (size_t)reps, slow, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        us[c] = tool_median(slow, (size_t)reps);
    }
    free(t);
    free(slow);
}

/* FILE's lines that are not rows of (size, nodes), then the new rows. */
static int write_table(const char *file, const char *rows, int size, int nodes)
{
    char *old = NULL;
    size_t len = 0;
    FILE *f = fopen(file, "r");
    if (f) {
        old = malloc(1 << 16);
        len = old ? fread(old, 1, (1 << 16) - 1, f) : 0;
        int whole = old && feof(f) && !ferror(f); /* pcoll_init reads at most 64 KiB too */
        fclose(f);
        if (!whole) {
            fprintf(stderr, "pcoll-bench allreduce --tune: %s is larger than 64 KiB or unreadable\n", file);
            free(old);
            return -1;
        }
        old[len] = '\0';
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    FILE *o = fopen(tmp, "w");
    if (!o) {
        free(old);
        return -1;
    }
    int header = 0;
    for (char *line = old, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        int r, n;
        char rest[2];
        if (sscanf(line, " %d %d %1s", &r, &n, rest) == 3 && r == size && n == nodes) continue;
        header |= strncmp(line, "# ranks nodes", 13) == 0;
        fprintf(o, "%s\n", line);
    }
    if (!header) fprintf(o, "# ranks nodes up-to-bytes algorithm   (pcoll-bench allreduce --tune)\n");
    fputs(rows, o);
    free(old);
    int bad = ferror(o);
    if (fclose(o) != 0 || bad || rename(tmp, file) != 0) return -1;
    return 0;
}

int bench_allreduce_tune(pcoll_t *ctx, const char *file, size_t min_bytes, size_t max_bytes, long iters, int json,
                         int rank, int size)
{
    const char *prog = "pcoll-bench allreduce --tune";
    char current[512];
    if (pcoll_config_get("PCOLL_TUNING_FILE", current, sizeof current) == PCOLL_SUCCESS && current[0])
        tool_usage_error(prog, "PCOLL_TUNING_FILE is set (%s): unset it while measuring", current);
    if (size < 2) tool_usage_error(prog, "a table has rows for 2 ranks or more: run it under mpirun -np P, P >= 2");
    int nodes = pcoll_node_count(ctx); /* the library's node map: its table rows' key */
    size_t maxcount = max_bytes / 4;
    float *in = malloc(maxcount * sizeof(float)), *out = malloc(maxcount * sizeof(float));
    if (!in || !out) {
        fprintf(stderr, "%s: out of memory for %zu-byte buffers\n", prog, max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < maxcount; i++) in[i] = (float)((int)((i * 7 + (size_t)rank * 13) % 97) - 48);
    static const pcoll_allreduce_algo_t messages[] = {PCOLL_ALGO_RECDBL, PCOLL_ALGO_RABENSEIFNER, PCOLL_ALGO_RING,
                                                      PCOLL_ALGO_DIRECT};
    size_t sizes[MAX_SIZES];
    pcoll_allreduce_algo_t best[MAX_SIZES];
    int nsizes = 0;
    if (rank == 0 && !json)
        printf("# %s: %d ranks on %d node(s), float32 sum; median of the slowest rank, us\n%10s  %-12s %s\n", prog,
               size, nodes, "bytes", "fastest", "algorithm:us ...");
    for (size_t bytes = min_bytes; bytes <= max_bytes && nsizes < MAX_SIZES; bytes *= 2) {
        size_t count = bytes / 4;
        double n = 1e8 / ((double)bytes + 1e5);
        int reps = iters ? (int)iters : n > 100 ? 100 : n < BLOCKS ? BLOCKS : (int)n;
        if (reps < BLOCKS) reps = BLOCKS;
        pcoll_allreduce_algo_t cand[MAX_CANDIDATES];
        double us[MAX_CANDIDATES];
        int nc = 0;
        if (pcoll_allreduce_algo_for(ctx, bytes, size) == PCOLL_ALGO_SHM) cand[nc++] = PCOLL_ALGO_SHM;
        for (int k = 0; k < 4; k++) {
            if (messages[k] == PCOLL_ALGO_DIRECT && (size < 3 || bytes * (size_t)(size - 1) > DIRECT_LIMIT)) continue;
            cand[nc++] = messages[k];
        }
        time_candidates(ctx, in, out, count, reps, cand, nc, us);
        int won = 0;
        for (int c = 1; c < nc; c++)
            if (us[c] < us[won]) won = c;
        sizes[nsizes] = bytes;
        best[nsizes++] = cand[won];
        if (rank != 0) continue;
        if (json) {
            tool_json_t j;
            tool_json_begin(&j);
            tool_json_str(&j, "bench", "tune");
            tool_json_int(&j, "ranks", size);
            tool_json_int(&j, "nodes", nodes);
            tool_json_int(&j, "bytes", (long long)bytes);
            tool_json_str(&j, "algo", pcoll_allreduce_algo_name(cand[won]));
            for (int c = 0; c < nc; c++) {
                char key[40];
                snprintf(key, sizeof key, "%s_us", pcoll_allreduce_algo_name(cand[c]));
                tool_json_num(&j, key, us[c]);
            }
            tool_json_end(&j, stdout);
        } else {
            printf("%10zu  %-12s", bytes, pcoll_allreduce_algo_name(cand[won]));
            for (int c = 0; c < nc; c++) printf(" %s:%.1f", pcoll_allreduce_algo_name(cand[c]), us[c]);
            printf("\n");
        }
    }
    int rc = 0;
    if (rank == 0) {
        char rows[MAX_SIZES * 64];
        size_t at = 0;
        for (int i = 0; i < nsizes; i++)
            if (i == nsizes - 1 || best[i + 1] != best[i])
                at += (size_t)snprintf(rows + at, sizeof rows - at, "%d %d %zu %s\n", size, nodes, sizes[i],
                                       pcoll_allreduce_algo_name(best[i]));
        rc = write_table(file, rows, size, nodes);
        if (rc != 0) fprintf(stderr, "%s: cannot write %s\n", prog, file);
        else if (!json) printf("# rows for %d ranks on %d node(s) written to %s:\n%s", size, nodes, file, rows);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(in);
    free(out);
    return rc == 0 ? 0 : 1;
}
