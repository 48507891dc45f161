/* pcoll-sim: pcoll's schedules, rules and planners on a simulated platform. */
#include <stdio.h>
#include <string.h>

#include "sim.h"

static const char *usage =
    "usage: pcoll-sim <command> [flags]\n"
    "\n"
    "pcoll's own code (schedules from src/algo run by src/engine's scheduler,\n"
    "the partial rounds' rules, WAGMA's rotation, the dynamic-group controller,\n"
    "the fusion planner) on SimGrid, with every rank an actor and its progress\n"
    "thread a daemon actor: the pcoll-bench commands at rank counts this machine\n"
    "cannot run.  Times are simulated; see docs/sim.md for the model.\n"
    "\n"
    "commands:\n"
    "  allreduce   pcoll-bench allreduce's size sweep\n"
    "  skew        pcoll-bench skew: linearly skewed ranks, partial rounds\n"
    "  group       pcoll-bench group: WAGMA's group rounds\n"
    "  preduce     pcoll-bench preduce: dynamic groups (the controller)\n"
    "  fusion      pcoll-bench fusion --measure: merged-gradient plans run\n"
    "  train       time per epoch of a training run against rank count\n"
    "  calibrate   fit the model's factors to pcoll-bench JSON of the emulated\n"
    "              cluster, and validate them on the points not fitted\n"
    "\n"
    "pcoll-sim <command> --help lists the command's flags.\n";

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    argv[1] = argv[0];
    argc--;
    argv++;
    if (!strcmp(cmd, "allreduce")) return sim_cmd_allreduce(argc, argv);
    if (!strcmp(cmd, "skew")) return sim_cmd_skew(argc, argv, 0);
    if (!strcmp(cmd, "group")) return sim_cmd_skew(argc, argv, 1);
    if (!strcmp(cmd, "preduce")) return sim_cmd_preduce(argc, argv);
    if (!strcmp(cmd, "fusion")) return sim_cmd_fusion(argc, argv);
    if (!strcmp(cmd, "train")) return sim_cmd_train(argc, argv);
    if (!strcmp(cmd, "calibrate")) return sim_cmd_calibrate(argc, argv);
    fprintf(stderr, "pcoll-sim: unknown command \"%s\"\n\n%s", cmd, usage);
    return 2;
}
