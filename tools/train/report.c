/* Tables and logs of a training run (rank 0). */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "err.h"
#include "tool.h"

static int is_fmnist(const train_result_t *r) { return r->opts.task == TASK_FMNIST; }

void report_header(FILE *out, const train_result_t *r)
{
    const train_opts_t *o = &r->opts;
    fprintf(out, "# pcoll-train: task %s, algo %s", train_task_name(o->task), o->algo);
    if (o->sync_every) fprintf(out, " (sync every %d)", o->sync_every);
    fprintf(out, ", %d ranks, imbalance %s\n", r->ranks, r->imbalance);
    fprintf(out, "# model %s (%zu parameters), batch %zu per rank, lr %g (%s), momentum %g, epochs %ld, seed %llu",
            r->model, r->nparams, o->batch, o->lr, lr_schedule_name(o->lr_schedule), o->momentum, o->epochs,
            (unsigned long long)o->seed);
    if (o->model_sync_epochs) fprintf(out, ", model sync every %ld epochs", o->model_sync_epochs);
    fprintf(out, ", gemm %s\n", r->gemm_kernel);
}

void report_table(FILE *out, const train_result_t *r)
{
    const int fm = is_fmnist(r);
    fprintf(out, "%5s %9s %7s %8s %11s %9s %7s %6s %6s %9s %8s %8s\n", "epoch", "elapsed_s", "steps", "steps/s",
            "train_loss", fm ? "test_acc" : "val_mse", "rounds", "empty", "active", "compute", "sleep", "exch_ms");
    for (size_t i = 0; i < r->nepochs; i++) {
        const epoch_record_t *e = &r->epochs[i];
        if (e->epoch == 0) continue; /* before the checkpoint a resumed run started from */
        char q[32] = "-";
        if (e->evaluated) snprintf(q, sizeof q, fm ? "%.4f" : "%.5g", fm ? e->test_accuracy : e->val_mse);
        fprintf(out, "%5ld %9.2f %7llu %8.1f %11.5g %9s %7llu %6llu %6.2f %9.2f %8.2f %8.2f\n", e->epoch, e->elapsed_s,
                (unsigned long long)e->steps, e->steps_per_s, e->train_loss, q, (unsigned long long)e->rounds,
                (unsigned long long)e->empty_steps, e->mean_active, e->compute_ms, e->sleep_ms, e->exchange_ms);
    }
}

void report_summary(FILE *out, const train_result_t *r)
{
    fprintf(out, "final: %llu steps in %.2f s (%.1f steps/s), train loss %.5g, ", (unsigned long long)r->steps,
            r->wall_s, r->steps_per_s, r->final_loss);
    if (is_fmnist(r)) fprintf(out, "test accuracy %.4f (test loss %.4f)\n", r->test_accuracy, r->test_loss);
    else fprintf(out, "validation MSE %.5g\n", r->val_mse);
    fprintf(out, "per step (mean over ranks): compute %.2f ms, injected delay %.2f ms, exchange %.2f ms; "
                 "dense layers %.1f GFLOP/s per rank\n",
            r->compute_ms, r->sleep_ms, r->exchange_ms, r->gflops);
    if (r->fusion[0])
        fprintf(out, "fusion %s: %d buckets; planned step %.2f ms (compute %.2f ms, update %.2f ms) with T(M) = %.1f us "
                     "+ %.5f us/B x M%s; measured step %.2f ms (compute with the buckets' starts %.2f ms, exposed "
                     "exchange %.2f ms)\n",
                r->fusion, r->fusion_buckets, r->fusion_predicted_ms, r->fusion_compute_ms, r->fusion_update_ms,
                r->fusion_a_us, r->fusion_b_us, r->fusion_piecewise ? " (piecewise)" : "",
                r->steps_per_s > 0 ? 1e3 / r->steps_per_s : NAN, r->compute_ms, r->exchange_ms);
    if (!isnan(r->opts.target)) {
        if (isnan(r->time_to_target_s)) fprintf(out, "target %g: not reached\n", r->opts.target);
        else fprintf(out, "target %g: reached after %.2f s\n", r->opts.target, r->time_to_target_s);
    }
    const exchange_stats_t *x = &r->exchange_stats;
    if (r->steps_executed != r->steps - r->resumed_at)
        fprintf(out, "rank 0 computed %llu of its %llu steps (its groups' larger iterations moved it ahead)\n",
                (unsigned long long)r->steps_executed, (unsigned long long)r->steps);
    if (x->groups_joined) {
        fprintf(out, "groups: rank 0 averaged in %llu groups, waited %.2f ms per group for its group to start",
                (unsigned long long)x->groups_joined, 1e3 * x->wait_s / (double)x->groups_joined);
        if (x->ctl_open_s > 0) /* rank 0 is the controller */
            fprintf(out, "; by then the controller (rank 0) had formed %llu groups (%.0f per s) in %.1f%% of its "
                         "time",
                    (unsigned long long)x->ctl_groups, (double)x->ctl_groups / x->ctl_open_s,
                    100.0 * x->ctl_busy_s / x->ctl_open_s);
        fputc('\n', out);
    }
    if (r->opts.inject == INJECT_STOP)
        fprintf(out, "stop: %s %s %s stopped for %.2f s at step %ld; the other ranks (the slowest) made %.1f "
                     "steps/s meanwhile, %.1f in as long before; the next step ended %.3f s after SIGCONT\n",
                r->opts.ninject_ranks > 1 ? "ranks" : "rank", r->opts.inject_ranks_text,
                r->opts.ninject_ranks > 1 ? "were" : "was", r->stop_s, r->opts.inject_step, r->others_steps_per_s_during,
                r->others_steps_per_s_before, r->resume_step_s);
    if (r->left_out_rounds || r->caught_up)
        fprintf(out, "left out: up to %llu rounds at a rank went on without a silent rank (PCOLL_EXCLUDE_MS); %llu "
                     "rounds were kept for silent ranks and delivered when they went on\n",
                (unsigned long long)r->left_out_rounds, (unsigned long long)r->caught_up);
    if (r->shrinks)
        fprintf(out, "failure: ranks died at step %llu; %d of %d ranks went on after %.2f s in pcoll_shrink and the "
                     "rebuild (%d shrink%s)\n",
                (unsigned long long)r->shrink_step, r->ranks_at_end, r->ranks, r->recovery_s, r->shrinks,
                r->shrinks > 1 ? "s" : "");
    if (r->resumed)
        fprintf(out, "resumed from a checkpoint of %d ranks at its step %llu: this run started at step %llu "
                     "(times and epochs above count from there)\n",
                r->resumed_ranks, (unsigned long long)r->resumed_step, (unsigned long long)r->resumed_at);
    if (r->checkpoints)
        fprintf(out, "checkpoints: %d written to %s/checkpoint (the last after training), %.2f s in all\n",
                r->checkpoints, r->opts.checkpoint_dir, r->checkpoint_s);
    fprintf(out, "models differ by at most %.3g before the final synchronous round, %.3g after it (max over "
                 "parameters of max-min over ranks)\n",
            r->model_max_diff_before_sync, r->model_max_diff);
}

static void csv_num(FILE *f, double v, const char *fmt)
{
    if (isfinite(v)) fprintf(f, fmt, v);
}

int report_csv(const char *path, const train_result_t *r)
{
    FILE *f = fopen(path, "w");
    if (!f) return tr_fail("--csv %s: %s", path, strerror(errno));
    const int fm = is_fmnist(r);
    fprintf(f, "epoch,elapsed_s,steps,steps_per_s,loss,%s,test_loss,rounds,empty_steps,mean_active,compute_ms,"
               "sleep_ms,exchange_ms\n",
            fm ? "test_accuracy" : "val_mse");
    for (size_t i = 0; i < r->nepochs; i++) {
        const epoch_record_t *e = &r->epochs[i];
        if (e->epoch == 0) continue; /* before the checkpoint a resumed run started from */
        fprintf(f, "%ld,%.4f,%llu,", e->epoch, e->elapsed_s, (unsigned long long)e->steps);
        csv_num(f, e->steps_per_s, "%.3f");
        fputc(',', f);
        csv_num(f, e->train_loss, "%.6g");
        fputc(',', f);
        if (e->evaluated) csv_num(f, fm ? e->test_accuracy : e->val_mse, "%.6g");
        fputc(',', f);
        if (e->evaluated) csv_num(f, e->test_loss, "%.6g");
        fprintf(f, ",%llu,%llu,", (unsigned long long)e->rounds, (unsigned long long)e->empty_steps);
        csv_num(f, e->mean_active, "%.3f");
        fputc(',', f);
        csv_num(f, e->compute_ms, "%.4f");
        fputc(',', f);
        csv_num(f, e->sleep_ms, "%.4f");
        fputc(',', f);
        csv_num(f, e->exchange_ms, "%.4f");
        fputc('\n', f);
    }
    if (ferror(f) | (fclose(f) != 0)) return tr_fail("--csv %s: write error", path);
    return 0;
}

int report_json(const char *path, const train_result_t *r)
{
    const train_opts_t *o = &r->opts;
    FILE *f = fopen(path, "w");
    if (!f) return tr_fail("--json %s: %s", path, strerror(errno));
    tool_json_t j;
    tool_json_begin(&j);
    tool_json_str(&j, "task", train_task_name(o->task));
    tool_json_str(&j, "algo", o->algo);
    tool_json_int(&j, "ranks", r->ranks);
    tool_json_int(&j, "ranks_at_end", r->ranks_at_end);
    tool_json_int(&j, "shrinks", r->shrinks);
    if (r->opts.inject == INJECT_STOP) {
        tool_json_num(&j, "stop_s", r->stop_s);
        tool_json_num(&j, "others_steps_per_s_during_stop", r->others_steps_per_s_during);
        tool_json_num(&j, "others_steps_per_s_before_stop", r->others_steps_per_s_before);
        tool_json_num(&j, "resume_step_s", r->resume_step_s);
    }
    if (r->shrinks) {
        tool_json_int(&j, "shrink_step", (long long)r->shrink_step);
        tool_json_num(&j, "recovery_s", r->recovery_s);
    }
    if (o->checkpoint_dir) {
        tool_json_str(&j, "checkpoint", o->checkpoint_dir);
        tool_json_int(&j, "checkpoint_every", o->checkpoint_every);
        tool_json_int(&j, "checkpoints", r->checkpoints);
        tool_json_num(&j, "checkpoint_s", r->checkpoint_s);
    }
    if (r->resumed) {
        tool_json_str(&j, "resume", o->resume_dir);
        tool_json_int(&j, "resumed_from_step", (long long)r->resumed_step);
        tool_json_int(&j, "resumed_from_ranks", r->resumed_ranks);
        tool_json_int(&j, "resumed_at_step", (long long)r->resumed_at);
    }
    if (!r->models_exchanged && !r->shrinks) { /* a dead rank's gradients cannot be counted */
        tool_json_int(&j, "contributions_made", (long long)r->contributions_made);
        tool_json_int(&j, "contributions_delivered_min", (long long)r->contributions_delivered_min);
        tool_json_int(&j, "contributions_delivered_max", (long long)r->contributions_delivered_max);
    }
    if (r->left_out_rounds || r->caught_up) {
        tool_json_int(&j, "left_out_rounds", (long long)r->left_out_rounds);
        tool_json_int(&j, "caught_up_rounds", (long long)r->caught_up);
    }
    tool_json_str(&j, "imbalance", r->imbalance);
    tool_json_int(&j, "steps", (long long)r->steps);
    tool_json_num(&j, "wall_s", r->wall_s);
    tool_json_num(&j, "steps_per_s", r->steps_per_s);
    tool_json_num(&j, "final_loss", r->final_loss);
    /* NAN prints as null: hyperplane has no accuracy, fmnist no val_mse */
    tool_json_num(&j, "test_accuracy", r->test_accuracy);
    tool_json_num(&j, "val_mse", r->val_mse);
    tool_json_num(&j, "test_loss", r->test_loss);
    tool_json_num(&j, "target", o->target);
    tool_json_num(&j, "time_to_target_s", r->time_to_target_s);
    tool_json_num(&j, "model_max_diff", r->model_max_diff);
    tool_json_num(&j, "model_max_diff_before_sync", r->model_max_diff_before_sync);
    tool_json_int(&j, "epochs", (long long)r->nepochs);
    tool_json_int(&j, "batch", (long long)o->batch);
    tool_json_num(&j, "lr", o->lr);
    tool_json_str(&j, "lr_schedule", lr_schedule_name(o->lr_schedule));
    tool_json_num(&j, "momentum", o->momentum);
    tool_json_int(&j, "seed", (long long)o->seed);
    tool_json_int(&j, "sync_every", o->sync_every);
    tool_json_int(&j, "model_sync_epochs", o->model_sync_epochs);
    tool_json_str(&j, "model", r->model);
    tool_json_int(&j, "parameters", (long long)r->nparams);
    tool_json_num(&j, "compute_ms", r->compute_ms);
    tool_json_num(&j, "sleep_ms", r->sleep_ms);
    tool_json_num(&j, "exchange_ms", r->exchange_ms);
    tool_json_num(&j, "gflops", r->gflops);
    tool_json_str(&j, "gemm", r->gemm_kernel);
    const exchange_stats_t *x = &r->exchange_stats;
    tool_json_int(&j, "steps_executed", (long long)r->steps_executed);
    tool_json_num(&j, "step_ms", r->steps_per_s > 0 ? 1e3 / r->steps_per_s : NAN);
    if (r->fusion[0]) {
        tool_json_str(&j, "fusion", r->fusion);
        tool_json_int(&j, "fusion_buckets", r->fusion_buckets);
        tool_json_num(&j, "fusion_predicted_step_ms", r->fusion_predicted_ms);
        tool_json_num(&j, "fusion_predicted_compute_ms", r->fusion_compute_ms);
        tool_json_num(&j, "fusion_update_ms", r->fusion_update_ms);
        tool_json_num(&j, "fusion_model_a_us", r->fusion_a_us);
        tool_json_num(&j, "fusion_model_b_us", r->fusion_b_us);
    }
    if (x->groups_joined) {
        tool_json_int(&j, "groups_joined", (long long)x->groups_joined);
        tool_json_num(&j, "group_wait_ms", 1e3 * x->wait_s / (double)x->groups_joined);
    }
    if (x->ctl_open_s > 0) { /* rank 0 is the controller: up to its last step */
        tool_json_int(&j, "controller_groups", (long long)x->ctl_groups);
        tool_json_num(&j, "controller_busy_share", x->ctl_busy_s / x->ctl_open_s);
    }
    tool_json_end(&j, f);
    if (ferror(f) | (fclose(f) != 0)) return tr_fail("--json %s: write error", path);
    return 0;
}
