/* Flags of pcoll-train and the task defaults.
 *
 * Defaults were chosen by experiment on the project's 2-core machine (numbers
 * in tools/train/README.md):
 *   fmnist:     batch 32 per rank, lr 0.02 with a cosine decay, momentum 0.9,
 *               8 epochs (one rank: 89.4% test accuracy in 25 s; a constant lr
 *               leaves the accuracy jumping by +-1% between epochs);
 *   hyperplane: batch 256 per rank and 48 epochs (the paper's 2048 over 8
 *               ranks for 48 epochs), lr 0.001 constant, momentum 0.9: with
 *               unit-variance features in D = 8192 dimensions a minibatch
 *               step is stable only for lr / (1 - momentum) of order B / D
 *               (measured at one rank: 0.001 reaches MSE 0.016 in 4 epochs,
 *               0.003 oscillates, 0.01 diverges); 32768 training and 4096
 *               validation points, noise 0.1 (best possible MSE 0.01). */
#include "options.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "err.h"
#include "exchange.h"
#include "gemm.h"
#include "imbalance.h"
#include "mlp.h"
#include "tool.h"

static const char *prog = "pcoll-train";

static const char *help =
    "usage: mpirun -np P pcoll-train [flags]\n"
    "Data-parallel SGD over MPI with a choice of gradient exchange, under simulated\n"
    "load imbalance.  Rank 0 prints one line per epoch and a summary.\n"
    "\n"
    "task and data\n"
    "  --task T              fmnist | hyperplane (default fmnist)\n"
    "  --data DIR            Fashion-MNIST IDX files (default " FMNIST_DEFAULT_DIR ",\n"
    "                        Debian package " FMNIST_PACKAGE ")\n"
    "  --layers W,W,...      fmnist MLP widths, ReLU between layers, softmax\n"
    "                        cross-entropy (default 784,512,256,128,10); WxN stands for\n"
    "                        N layers of width W (784,512x12,10: 13 dense layers)\n"
    "  --train-limit N       fmnist: use only the first N training images (default 0 = all 60000)\n"
    "  --dim D               hyperplane: dimension (default 8192)\n"
    "  --train-points N      hyperplane: training points (default 32768)\n"
    "  --val-points N        hyperplane: validation points (default 4096)\n"
    "  --noise SD            hyperplane: standard deviation of the noise on y (default 0.1)\n"
    "\n"
    "gradient exchange\n"
    "  --algo A              mpi       MPI_Allreduce of the gradients every step\n"
    "                        sync      pcoll_allreduce every step\n"
    "                        solo | majority | quorum:Q\n"
    "                                  eager-SGD: pcoll partial allreduce, ACCUMULATE\n"
    "                        wagma | wagma:S\n"
    "                                  WAGMA-SGD: a local SGD step, then the models are\n"
    "                                  averaged in groups of S (default max(2, round(sqrt(P))))\n"
    "                                  that rotate every round (pcoll GROUP object in\n"
    "                                  PCOLL_AVERAGE mode: the library's averaging rule)\n"
    "                        preduce:SPEC\n"
    "                                  Partial Reduce / Ripples: a local SGD step, then the\n"
    "                                  model is averaged with a group of ready ranks that a\n"
    "                                  controller (rank 0) forms; SPEC is one of\n"
    "                                    fifo[:P][:const|:dyn][:noavoid][:window=T][:alpha=A]\n"
    "                                    ripples:random[:S]\n"
    "                                    ripples:smart[:S][:c=C][:ii]\n"
    "                                    ripples:static\n"
    "                                  with [:ctl=RANK] after it (e.g. preduce:fifo:3:dyn);\n"
    "                                  every rank's model is averaged at the end\n"
    "                        (default sync)\n"
    "  --sync-every TAU      partial modes: every TAU-th round is synchronous, a global\n"
    "                        average for wagma (default 10 for wagma, else 0 = never)\n"
    "  --model-sync-epochs N after every N-th epoch but the last, flush the partial exchange\n"
    "                        and average the models across ranks (MPI_Allreduce / P)\n"
    "                        (default 0 = never)\n"
    "  --fusion S            mpi and sync: reduce the gradient in buckets of consecutive\n"
    "                        layers, each started the moment backprop completes its last\n"
    "                        layer (MG-WFBP): S = optimal | mgwfbp | wfbp (one per layer) |\n"
    "                        single (one after backprop) | fixed:BYTES (size-capped, as\n"
    "                        DDP); planned from the layers' measured backward times and a\n"
    "                        cost model (default none: one allreduce after backprop)\n"
    "  --fusion-model A,B    the plan's cost model T(M) = A us + B us/byte x M (default:\n"
    "                        calibrated on the job, with the exchange's own allreduce)\n"
    "\n"
    "optimization (defaults: fmnist | hyperplane)\n"
    "  --lr X                learning rate (0.02 | 0.001)\n"
    "  --lr-schedule S       constant | cosine: lr (1 + cos(pi step/steps)) / 2 over the\n"
    "                        planned steps (cosine | constant)\n"
    "  --momentum X          SGD momentum, 0 <= X < 1 (0.9 | 0.9)\n"
    "  --batch N             samples per rank and step (32 | 256)\n"
    "  --epochs N            passes over the training set (8 | 48)\n"
    "  --max-steps N         stop after N steps (default 0 = no limit)\n"
    "  --seed N              data, initial model, shuffling and imbalance (default 1)\n"
    "\n"
    "load imbalance (milliseconds may be fractional)\n"
    "  --imbalance SPEC      none            (default)\n"
    "                        random:K:MS     K ranks drawn at random each step sleep MS\n"
    "                        skew:MIN:MAX    rank delays spread from MIN to MAX, shifted\n"
    "                                        by one rank each step\n"
    "                        slow:R[,R...]:F[:MS]\n"
    "                                        the listed ranks are F times slower: each\n"
    "                                        sleeps (F-1) x MS a step (MS: a normal\n"
    "                                        step), or without MS (F-1) x its compute\n"
    "                                        time of the step\n"
    "                        dist:MEAN:SD    lognormal delay per rank and step\n"
    "\n"
    "failures\n"
    "  --on-failure A        abort: a failed exchange (a rank died: PCOLL_TIMEOUT_S names\n"
    "                        it) ends the job (default); shrink: the live ranks go on\n"
    "                        without the dead (pcoll_shrink): the models and momenta are\n"
    "                        averaged, the training set is sharded among them, the step\n"
    "                        schedule stays; rank 0 must live (pcoll algorithms only)\n"
    "  --failure-timeout S   with shrink: PCOLL_TIMEOUT_S when none is set (default 5)\n"
    "  --inject F            a failure (tests and experiments): kill:R:STEP, rank R\n"
    "                        kills itself (SIGKILL) before its step STEP;\n"
    "                        stop:R[,R...]:STEP:S, each rank listed stops (SIGSTOP)\n"
    "                        there for S seconds (a helper process sends SIGCONT); the\n"
    "                        summary then gives the other ranks' steps/s meanwhile;\n"
    "                        freeze:R[,R...]:STEP:S, the same, but a helper process\n"
    "                        sends the SIGSTOP at a random moment of the next 50 ms,\n"
    "                        wherever the rank's threads are (as a scheduler or a\n"
    "                        debugger would)\n"
    "  --checkpoint DIR      write a checkpoint to DIR/checkpoint (replaced atomically):\n"
    "                        the partial exchanges are flushed, the models and momenta\n"
    "                        averaged (every rank the same), rank 0 writes the model,\n"
    "                        momentum and position; and once more at the end (the\n"
    "                        final models averaged: the accuracy reported is rank 0's)\n"
    "  --checkpoint-every N  ... every N steps (default 0 = at every epoch's end)\n"
    "  --resume DIR          start from DIR/checkpoint, with any number of ranks: its\n"
    "                        model, momentum, step and place in its epoch (with another\n"
    "                        rank count the epoch's steps are scaled to its share done);\n"
    "                        the other flags are this run's (not --algo preduce)\n"
    "\n"
    "output\n"
    "  --csv FILE            per-epoch log (default none)\n"
    "  --json FILE           run summary as one JSON object (default none)\n"
    "  --timeline PREFIX     record a timeline of the training (the library's events\n"
    "                        and the phases forward, backward, delay, exchange, step):\n"
    "                        rank R writes PREFIX.R.jsonl; merge them with pcoll-trace\n"
    "                        (default none; PCOLL_TIMELINE=PREFIX does the same from\n"
    "                        pcoll_init on)\n"
    "  --target X            report the time to reach test accuracy >= X (fmnist) or\n"
    "                        validation MSE <= X (hyperplane) (default none)\n"
    "  --eval-every N        keep (and evaluate after training) the model every N epochs;\n"
    "                        the final model is always evaluated (default 1)\n"
    "  --gemm K              matrix kernel: auto | avx512 | avx2 | generic (default\n"
    "                        $PCOLL_TRAIN_GEMM, else auto: the best this CPU runs)\n"
    "  --quiet               no per-epoch table\n"
    "  --help                this text\n"
    "\n"
    "Accuracy is measured after training on copies of rank 0's model taken at epoch\n"
    "ends, so evaluation never slows the timed run.  At the end, partial modes flush\n"
    "(a synchronous round); the largest difference between the ranks' models before\n"
    "and after it is printed.\n";

void train_opts_default(train_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->task = TASK_FMNIST;
    o->algo = "sync";
    o->layers = "784,512,256,128,10";
    o->data_dir = FMNIST_DEFAULT_DIR;
    o->dim = 8192;
    o->train_points = 32768;
    o->val_points = 4096;
    o->noise = 0.1;
    o->lr = NAN;
    o->lr_schedule = LR_DEFAULT;
    o->momentum = NAN;
    o->seed = 1;
    o->sync_every = -1; /* unset: 10 for wagma, else 0 */
    o->imbalance = "none";
    o->eval_every = 1;
    o->target = NAN;
    o->gemm = NULL; /* PCOLL_TRAIN_GEMM, else auto */
    o->failure_timeout = 5;
    o->inject = INJECT_NONE;
}

void train_opts_resolve(train_opts_t *o)
{
    const int fm = o->task == TASK_FMNIST;
    if (isnan(o->lr)) o->lr = fm ? 0.02 : 0.001;
    if (o->lr_schedule == LR_DEFAULT) o->lr_schedule = fm ? LR_COSINE : LR_CONSTANT;
    if (isnan(o->momentum)) o->momentum = 0.9;
    if (o->batch == 0) o->batch = fm ? 32 : 256;
    if (o->epochs == 0) o->epochs = fm ? 8 : 48;
    if (o->sync_every < 0) o->sync_every = strncmp(o->algo, "wagma", 5) == 0 ? 10 : 0;
}

static size_t flag_size(const char *flag, const char *v, long min)
{
    return (size_t)tool_flag_long(prog, flag, v, min, 1L << 40);
}

/* --inject stop's RANK[,RANK...] (digits and commas): 1 if each rank
 * appears once and there are at most as many as inject_ranks holds */
static int parse_ranks(const char *text, train_opts_t *o)
{
    const int cap = (int)(sizeof o->inject_ranks / sizeof o->inject_ranks[0]);
    o->ninject_ranks = 0;
    for (const char *p = text; *p;) {
        char *end;
        long r = strtol(p, &end, 10);
        if (end == p || r < 0 || r > 1000000 || o->ninject_ranks == cap || (*end && *end != ',') ||
            (*end == ',' && !end[1]))
            return 0;
        for (int i = 0; i < o->ninject_ranks; i++)
            if (o->inject_ranks[i] == (int)r) return 0;
        o->inject_ranks[o->ninject_ranks++] = (int)r;
        p = *end ? end + 1 : end;
    }
    return o->ninject_ranks > 0;
}

int train_opts_parse(int argc, char **argv, int rank, train_opts_t *o)
{
    enum {
        F_TASK = 256, F_DATA, F_LAYERS, F_TRAIN_LIMIT, F_DIM, F_TRAIN_POINTS, F_VAL_POINTS, F_NOISE, F_ALGO,
        F_SYNC_EVERY, F_MODEL_SYNC, F_LR, F_LR_SCHEDULE, F_MOMENTUM, F_BATCH, F_EPOCHS, F_MAX_STEPS, F_SEED, F_IMBALANCE, F_CSV,
        F_JSON, F_TARGET, F_EVAL_EVERY, F_GEMM, F_QUIET, F_HELP, F_FUSION, F_FUSION_MODEL, F_TIMELINE,
        F_ON_FAILURE, F_FAILURE_TIMEOUT, F_INJECT, F_CHECKPOINT, F_CHECKPOINT_EVERY, F_RESUME
    };
    static const struct option flags[] = {
        {"task", required_argument, 0, F_TASK},
        {"data", required_argument, 0, F_DATA},
        {"layers", required_argument, 0, F_LAYERS},
        {"train-limit", required_argument, 0, F_TRAIN_LIMIT},
        {"dim", required_argument, 0, F_DIM},
        {"train-points", required_argument, 0, F_TRAIN_POINTS},
        {"val-points", required_argument, 0, F_VAL_POINTS},
        {"noise", required_argument, 0, F_NOISE},
        {"algo", required_argument, 0, F_ALGO},
        {"sync-every", required_argument, 0, F_SYNC_EVERY},
        {"model-sync-epochs", required_argument, 0, F_MODEL_SYNC},
        {"lr", required_argument, 0, F_LR},
        {"lr-schedule", required_argument, 0, F_LR_SCHEDULE},
        {"momentum", required_argument, 0, F_MOMENTUM},
        {"batch", required_argument, 0, F_BATCH},
        {"epochs", required_argument, 0, F_EPOCHS},
        {"max-steps", required_argument, 0, F_MAX_STEPS},
        {"seed", required_argument, 0, F_SEED},
        {"imbalance", required_argument, 0, F_IMBALANCE},
        {"csv", required_argument, 0, F_CSV},
        {"json", required_argument, 0, F_JSON},
        {"timeline", required_argument, 0, F_TIMELINE},
        {"target", required_argument, 0, F_TARGET},
        {"eval-every", required_argument, 0, F_EVAL_EVERY},
        {"gemm", required_argument, 0, F_GEMM},
        {"quiet", no_argument, 0, F_QUIET},
        {"fusion", required_argument, 0, F_FUSION},
        {"fusion-model", required_argument, 0, F_FUSION_MODEL},
        {"on-failure", required_argument, 0, F_ON_FAILURE},
        {"failure-timeout", required_argument, 0, F_FAILURE_TIMEOUT},
        {"inject", required_argument, 0, F_INJECT},
        {"checkpoint", required_argument, 0, F_CHECKPOINT},
        {"checkpoint-every", required_argument, 0, F_CHECKPOINT_EVERY},
        {"resume", required_argument, 0, F_RESUME},
        {"help", no_argument, 0, F_HELP},
        {0, 0, 0, 0},
    };
    train_opts_default(o);
    opterr = 0;
    int c;
    /* leading ':' makes a missing value return ':' rather than '?' */
    while ((c = getopt_long(argc, argv, ":h", flags, NULL)) != -1) {
        const char *v = optarg;
        switch (c) {
        case F_TASK:
            if (strcmp(v, "fmnist") == 0) o->task = TASK_FMNIST;
            else if (strcmp(v, "hyperplane") == 0) o->task = TASK_HYPERPLANE;
            else tool_usage_error(prog, "--task: \"%s\" is not fmnist or hyperplane", v);
            break;
        case F_DATA: o->data_dir = v; break;
        case F_LAYERS: {
            size_t *w, n;
            if (mlp_parse_widths(v, &w, &n)) tool_usage_error(prog, "--layers: %s", tr_error());
            free(w);
            o->layers = v;
            break;
        }
        case F_TRAIN_LIMIT: o->train_limit = flag_size("--train-limit", v, 0); break;
        case F_DIM: o->dim = flag_size("--dim", v, 1); break;
        case F_TRAIN_POINTS: o->train_points = flag_size("--train-points", v, 1); break;
        case F_VAL_POINTS: o->val_points = flag_size("--val-points", v, 1); break;
        case F_NOISE: o->noise = tool_flag_double(prog, "--noise", v, 0, 1e6); break;
        case F_ALGO: o->algo = v; break;
        case F_SYNC_EVERY: o->sync_every = (int)tool_flag_long(prog, "--sync-every", v, 0, 1000000000); break;
        case F_MODEL_SYNC: o->model_sync_epochs = tool_flag_long(prog, "--model-sync-epochs", v, 0, 1000000000); break;
        case F_LR:
            o->lr = tool_flag_double(prog, "--lr", v, 0, 1e6);
            if (!(o->lr > 0)) tool_usage_error(prog, "--lr: must be > 0");
            break;
        case F_LR_SCHEDULE:
            if (strcmp(v, "constant") == 0) o->lr_schedule = LR_CONSTANT;
            else if (strcmp(v, "cosine") == 0) o->lr_schedule = LR_COSINE;
            else tool_usage_error(prog, "--lr-schedule: \"%s\" is not constant or cosine", v);
            break;
        case F_MOMENTUM:
            o->momentum = tool_flag_double(prog, "--momentum", v, 0, 1);
            if (o->momentum >= 1) tool_usage_error(prog, "--momentum: must be < 1");
            break;
        case F_BATCH: o->batch = flag_size("--batch", v, 1); break;
        case F_EPOCHS: o->epochs = tool_flag_long(prog, "--epochs", v, 1, 1000000); break;
        case F_MAX_STEPS: o->max_steps = tool_flag_long(prog, "--max-steps", v, 0, 1L << 50); break;
        case F_SEED: o->seed = (uint64_t)tool_flag_long(prog, "--seed", v, 0, 1L << 62); break;
        case F_IMBALANCE: {
            imbalance_t imb;
            if (imbalance_parse(v, 0, &imb)) tool_usage_error(prog, "%s", tr_error());
            o->imbalance = v;
            break;
        }
        case F_CSV: o->csv_path = v; break;
        case F_JSON: o->json_path = v; break;
        case F_TIMELINE:
            if (!v[0]) tool_usage_error(prog, "--timeline: the prefix is empty");
            o->timeline = v;
            break;
        case F_TARGET: o->target = tool_flag_double(prog, "--target", v, -1e300, 1e300); break;
        case F_EVAL_EVERY: o->eval_every = tool_flag_long(prog, "--eval-every", v, 1, 1000000); break;
        case F_GEMM:
            if (gemm_select_kernel(v)) tool_usage_error(prog, "--gemm: %s", tr_error());
            o->gemm = v;
            break;
        case F_QUIET: o->quiet = 1; break;
        case F_ON_FAILURE:
            if (strcmp(v, "abort") == 0) o->on_failure_shrink = 0;
            else if (strcmp(v, "shrink") == 0) o->on_failure_shrink = 1;
            else tool_usage_error(prog, "--on-failure: \"%s\" is not abort or shrink", v);
            break;
        case F_FAILURE_TIMEOUT: o->failure_timeout = tool_flag_double(prog, "--failure-timeout", v, 0.1, 3600); break;
        case F_INJECT: {
            int rk = -1, used = 0;
            long st;
            double sec = 0;
            char ranks[64] = "";
            if (sscanf(v, "kill:%d:%ld%n", &rk, &st, &used) == 2 && v[used] == '\0' && rk >= 0 && st >= 0) {
                o->inject = INJECT_KILL;
                o->ninject_ranks = 1;
                o->inject_ranks[0] = rk;
                snprintf(o->inject_ranks_text, sizeof o->inject_ranks_text, "%d", rk);
            } else if (((used = 0, sscanf(v, "stop:%63[0-9,]:%ld:%lf%n", ranks, &st, &sec, &used)) == 3 ||
                        (used = 0, sscanf(v, "freeze:%63[0-9,]:%ld:%lf%n", ranks, &st, &sec, &used)) == 3) &&
                       v[used] == '\0' && st >= 0 && sec > 0 && sec <= 3600 && parse_ranks(ranks, o)) {
                o->inject = INJECT_STOP;
                o->inject_outside = v[0] == 'f';
                snprintf(o->inject_ranks_text, sizeof o->inject_ranks_text, "%s", ranks);
            } else {
                tool_usage_error(prog, "--inject: \"%s\" is not kill:RANK:STEP, stop:RANK[,RANK...]:STEP:SECONDS or "
                                 "freeze:RANK[,RANK...]:STEP:SECONDS "
                                 "(0 < SECONDS <= 3600, at most %d ranks, each once)", v,
                                 (int)(sizeof o->inject_ranks / sizeof o->inject_ranks[0]));
            }
            o->inject_step = st;
            o->inject_seconds = sec;
            break;
        }
        case F_CHECKPOINT:
            if (!v[0]) tool_usage_error(prog, "--checkpoint: the directory is empty");
            o->checkpoint_dir = v;
            break;
        case F_CHECKPOINT_EVERY:
            o->checkpoint_every = tool_flag_long(prog, "--checkpoint-every", v, 0, 1L << 50);
            break;
        case F_RESUME:
            if (!v[0]) tool_usage_error(prog, "--resume: the directory is empty");
            o->resume_dir = v;
            break;
        case F_FUSION: {
            pcoll_fusion_spec_t spec;
            if (pcoll_fusion_spec_parse(v, &spec) != PCOLL_SUCCESS) tool_usage_error(prog, "--fusion: %s", pcoll_last_error());
            o->fusion = v;
            break;
        }
        case F_FUSION_MODEL: {
            pcoll_cost_model_t m;
            if (pcoll_cost_model_parse(v, &m) != PCOLL_SUCCESS)
                tool_usage_error(prog, "--fusion-model: %s", pcoll_last_error());
            o->fusion_model = v;
            break;
        }
        case 'h':
        case F_HELP:
            if (rank == 0) fputs(help, stdout);
            return 1;
        case ':': tool_usage_error(prog, "%s needs a value", argv[optind - 1]);
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
    if (strcmp(o->algo, "mpi") != 0 && strcmp(o->algo, "sync") != 0 && strcmp(o->algo, "solo") != 0 &&
        strcmp(o->algo, "majority") != 0 && strncmp(o->algo, "quorum:", 7) != 0 && strcmp(o->algo, "wagma") != 0 &&
        strncmp(o->algo, "wagma:", 6) != 0 && strncmp(o->algo, "preduce:", 8) != 0)
        tool_usage_error(prog, "--algo: \"%s\" is not mpi, sync, solo, majority, quorum:Q, wagma, wagma:S or "
                         "preduce:SPEC", o->algo);
    if (strncmp(o->algo, "preduce:", 8) == 0) {
        pcoll_preduce_config_t pc;
        pcoll_preduce_config_default(&pc);
        if (pcoll_preduce_config_parse(o->algo + 8, &pc) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--algo %s: %s", o->algo, pcoll_last_error());
        if (o->model_sync_epochs > 0 || o->sync_every > 0)
            tool_usage_error(prog, "--algo %s: --model-sync-epochs and --sync-every do not apply (its groups "
                             "span epochs; the models are averaged at the end)", o->algo);
    }
    if (o->task != TASK_FMNIST && o->train_limit) tool_usage_error(prog, "--train-limit applies to --task fmnist");
    if (o->fusion && strcmp(o->algo, "mpi") != 0 && strcmp(o->algo, "sync") != 0)
        tool_usage_error(prog, "--fusion applies to --algo mpi and sync, not %s", o->algo);
    if (o->fusion_model && !o->fusion) tool_usage_error(prog, "--fusion-model needs --fusion");
    if (o->checkpoint_every && !o->checkpoint_dir) tool_usage_error(prog, "--checkpoint-every needs --checkpoint DIR");
    if ((o->checkpoint_dir || o->resume_dir) && strncmp(o->algo, "preduce:", 8) == 0)
        tool_usage_error(prog, "--%s applies to every algorithm but preduce:SPEC (its ranks skip steps: no step is "
                         "reached by every rank)", o->checkpoint_dir ? "checkpoint" : "resume");
    if (o->on_failure_shrink && strcmp(o->algo, "mpi") == 0)
        tool_usage_error(prog, "--on-failure shrink needs a pcoll algorithm (pcoll_shrink), not --algo mpi");
    return 0;
}
