#!/bin/sh
# pcoll-sim's experiments at scale (docs/sim.md): JSON lines and SVG plots
# under results/sim/.
#
#   scripts/sim-experiments.sh [--bin DIR] [--out DIR] [--max-ranks P] [EXPERIMENT...]
#
# Experiments (default: all):
#   scale     4,096 ranks: allreduce of 1 MiB, skew rounds of 64 B (sync,
#             solo, majority), group rounds of 64 B; wall time and memory
#   eager     eager-SGD's microbenchmark against P (8 to 1,024): MPI, solo and
#             majority latency, majority against its (P^2 - 1) / 6P limit
#   wagma     WAGMA's group rounds against a global allreduce, P 16 to 1,024
#             at 64 B, to 512 at 4 MiB
#   mgwfbp    MG-WFBP on GoogleNet's profile (data/mgwfbp), 4 to 64 nodes of
#             one rank: wfbp, single (SyncEASGD), mgwfbp, on a switch whose
#             factors are fitted to the paper's 10 GbE cluster (its OSU
#             allreduce curves at 2, 4 and 8 nodes, data/mgwfbp), without
#             and with a shared backplane, and with ring buckets (the paper's
#             model; a what-if)
#   preduce   the dynamic-group controller: groups per second and wait
#             against P (8 to 1,024), fifo:3 and ripples:smart:3
#   train     time per epoch against P (1 to 1,024), sync and fusion
# Platforms: a two-level fat tree with the datacenter defaults (pcoll-sim
# --help), 10 Gbit/s links.  gnuplot (gnuplot-nox) draws the plots.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin="$here/../build/bin"; out="$here/../results/sim"; maxp=1024
while [ $# -gt 0 ]; do
    case "$1" in
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --max-ranks) maxp=$2; shift 2 ;;
    -h|--help) sed -n 2,24p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "sim-experiments.sh: unknown flag \"$1\"" >&2; exit 2 ;;
    *) break ;;
    esac
done
sim="$bin/pcoll-sim"
[ -x "$sim" ] || { echo "sim-experiments.sh: no $sim (build first, or --bin DIR)" >&2; exit 1; }
mkdir -p "$out"
exps=${*:-scale eager wagma mgwfbp preduce train}
plat="--platform fattree --link-rate 10gbit"
ranks_upto() { p=$1; while [ "$p" -le "$maxp" ]; do printf '%s ' "$p"; p=$((p * 2)); done; }

# plot OUT.svg TITLE XLABEL YLABEL DATA-SPECS...: gnuplot lines, log x (2) and y
plot() {
    svg=$1 title=$2 xl=$3 yl=$4
    shift 4
    command -v gnuplot >/dev/null || { echo "sim-experiments.sh: no gnuplot: $svg not drawn" >&2; return 0; }
    {
        echo "set terminal svg size 720,440 dynamic; set output '$svg'"
        echo "set title '$title'; set xlabel '$xl'; set ylabel '$yl'"
        echo "set logscale x 2; set logscale y; set key left top; set grid"
        printf 'plot '
        sep=""
        for spec in "$@"; do printf '%s%s' "$sep" "$spec"; sep=", "; done
        echo
    } | gnuplot
}

# col FILE FILTER-KEY FILTER-VALUE X-KEY Y-KEY [SCALE]: "x y" rows from JSON lines
col() {
    awk -v fk="\"$2\":" -v fv="$3" -v xk="\"$4\":" -v yk="\"$5\":" -v sc="${6:-1}" '
        function val(k,   i, s) { i = index($0, k); if (!i) return ""; s = substr($0, i + length(k));
                                  sub(/^ */, "", s); sub(/^"/, "", s); sub(/[",}].*/, "", s); return s }
        fk == "\"\":" || val(fk) == fv { x = val(xk); y = val(yk); if (x != "" && y != "") print x, y * sc }' "$1"
}

for e in $exps; do
    echo "sim-experiments: $e" >&2
    case $e in
    scale)
        f="$out/scale.json"; : >"$f"
        # off the cluster platform the simulation is deterministic and has no
        # state to warm (no tbf buckets): one call of each variant
        "$sim" allreduce --ranks 4096 --min-bytes 1M --max-bytes 1M --warmup 0 $plat --json >>"$f"
        "$sim" skew --ranks 4096 --modes sync,solo,majority --min-bytes 64 --max-bytes 64 --iters 2 --warmup 1 \
            $plat --json >>"$f"
        "$sim" group --ranks 4096 --modes group --min-bytes 64 --max-bytes 64 --iters 4 --warmup 1 $plat --json >>"$f"
        grep '"bench": "sim"' "$f" >&2 ;;
    eager)
        f="$out/eager.json"; : >"$f"
        for p in $(ranks_upto 8); do
            "$sim" skew --ranks "$p" --modes mpi,solo,majority --min-bytes 64 --max-bytes 64 --iters 64 $plat --json \
                >>"$f"
        done
        for m in mpi solo majority; do col "$f" mode "$m" ranks avg_latency_us 0.001 >"$out/eager-$m.dat"; done
        for p in $(ranks_upto 8); do echo "$p $(awk -v p="$p" 'BEGIN { print (p * p - 1) / (6 * p) }')"; done \
            >"$out/eager-limit.dat"
        plot "$out/eager.svg" "eager-SGD microbenchmark, 1 ms skew per rank (simulated)" ranks "latency (ms)" \
            "'$out/eager-mpi.dat' w lp t 'MPI\\_Allreduce'" "'$out/eager-majority.dat' w lp t 'majority'" \
            "'$out/eager-limit.dat' w l dt 2 t 'majority limit (P^2-1)/6P'" "'$out/eager-solo.dat' w lp t 'solo'" ;;
    wagma)
        f="$out/wagma.json"; : >"$f"
        # 4 MiB up to 512 ranks: the simulation's wall time grows about 5x
        # per doubling there (217 s at 256, 1,128 s at 512)
        for p in $(ranks_upto 16); do
            for b in 64 4M; do
                [ $b = 4M ] && [ "$p" -gt 512 ] && continue
                "$sim" group --ranks "$p" --modes mpi,sync,group --min-bytes $b --max-bytes $b --iters 6 $plat --json \
                    >>"$f"
            done
        done
        for m in mpi sync group; do
            grep '"bytes":4194304' "$f" | col /dev/stdin mode "$m" ranks avg_latency_us 0.001 >"$out/wagma-$m.dat"
        done
        plot "$out/wagma.svg" "WAGMA group rounds vs global allreduce, 4 MiB, 1 ms skew (simulated)" ranks \
            "latency (ms)" "'$out/wagma-mpi.dat' w lp t 'MPI\\_Allreduce'" "'$out/wagma-sync.dat' w lp t 'pcoll allreduce'" \
            "'$out/wagma-group.dat' w lp t 'group rounds'" ;;
    mgwfbp)
        # the platform of the paper's simulation: its 10 GbE cluster's OSU
        # allreduce curves (data/mgwfbp, 2, 4 and 8 nodes: Open MPI's
        # MPI_Allreduce, against the MPI stand-in) fitted, the network
        # extrapolated to 16-64 nodes
        cal="$out/mgwfbp-measured"; mkdir -p "$cal"
        for n in 2 4 8; do
            awk -F, 'NR > 1 { printf "{\"bench\":\"allreduce\",\"bytes\":%s,\"mpi_us\":%s}\n", $1, $2 }' \
                "$here/../data/mgwfbp/osu-allreduce-${n}nodes.csv" >"$cal/allreduce-${n}x1-10gbit.json"
        done
        # two networks fitted to the same curves: an ideal switch (every
        # pair of nodes meets only its own links, as the paper's a + bM
        # model extrapolates), and a switch whose backplane all traffic
        # shares (its rate fitted too: the 8-node curve grows faster with
        # size than per-node links allow)
        prof="$here/../data/mgwfbp/googlenet-k80-layers.csv"
        for net in switch backbone; do
            fitf="msg-cost,wake,latency,bw-factor"; start=""
            [ $net = backbone ] && { fitf="$fitf,backbone-rate"; start="--backbone-rate 20gbit"; }
            "$sim" calibrate --measured "$cal" --variant mpi --platform switch --link-rate 10gbit $start --fit "$fitf" \
                --evals 80 --quiet --out "$out/mgwfbp-$net-calibration.json" >"$out/mgwfbp-$net-calibration.txt"
            tail -2 "$out/mgwfbp-$net-calibration.txt" >&2
            f="$out/mgwfbp-$net.json"; : >"$f"
            for p in 4 8 16 32 64; do
                "$sim" fusion --ranks "$p" --profile "$prof" --strategies wfbp,single,mgwfbp --iters 2 --platform switch \
                    --link-rate 10gbit --sim-model "$out/mgwfbp-$net-calibration.json" --json >>"$f"
            done
            for s in wfbp single mgwfbp; do
                col "$f" strategy "$s" ranks measured_iter_us 0.001 >"$out/mgwfbp-$net-$s.dat"
            done
        done
        # the paper's own model: every bucket a ring allreduce, whose start-up
        # 2 (N - 1) a grows with N (a what-if, --algo ring: pcoll's buckets
        # take recursive doubling or Rabenseifner), on the ideal switch
        f="$out/mgwfbp-ring.json"; : >"$f"
        for p in 4 8 16 32 64; do
            "$sim" fusion --ranks "$p" --profile "$prof" --strategies wfbp,single,mgwfbp --iters 2 --platform switch \
                --link-rate 10gbit --sim-model "$out/mgwfbp-switch-calibration.json" --algo ring --json >>"$f"
        done
        for s in wfbp single mgwfbp; do
            col "$f" strategy "$s" ranks measured_iter_us 0.001 >"$out/mgwfbp-ring-$s.dat"
        done
        plot "$out/mgwfbp.svg" "GoogleNet iteration, MG-WFBP vs WFBP vs single (simulated)" nodes "iteration (ms)" \
            "'$out/mgwfbp-switch-wfbp.dat' w lp t 'WFBP'" "'$out/mgwfbp-switch-single.dat' w lp t 'single (SyncEASGD)'" \
            "'$out/mgwfbp-switch-mgwfbp.dat' w lp t 'MG-WFBP'" \
            "'$out/mgwfbp-backbone-wfbp.dat' w lp dt 2 t 'WFBP, shared backplane'" \
            "'$out/mgwfbp-backbone-single.dat' w lp dt 2 t 'single, shared backplane'" \
            "'$out/mgwfbp-backbone-mgwfbp.dat' w lp dt 2 t 'MG-WFBP, shared backplane'" \
            "'$out/mgwfbp-ring-wfbp.dat' w lp dt 3 t 'WFBP, ring buckets'" \
            "'$out/mgwfbp-ring-single.dat' w lp dt 3 t 'single, ring'" \
            "'$out/mgwfbp-ring-mgwfbp.dat' w lp dt 3 t 'MG-WFBP, ring buckets'" ;;
    preduce)
        f="$out/preduce.json"; : >"$f"
        for p in $(ranks_upto 8); do
            "$sim" preduce --ranks "$p" --policies fifo:3:const,ripples:smart:3 --calls 200 $plat --json >>"$f"
        done
        for s in fifo:3:const ripples:smart:3; do
            col "$f" policy "$s" ranks groups_per_s >"$out/preduce-$(echo "$s" | tr ':' '-').dat"
        done
        plot "$out/preduce.svg" "dynamic groups: groups formed per second (simulated)" ranks "groups/s" \
            "'$out/preduce-fifo-3-const.dat' w lp t 'fifo:3'" "'$out/preduce-ripples-smart-3.dat' w lp t 'ripples:smart:3'" ;;
    train)
        prof="$here/../data/mgwfbp/googlenet-k80-layers.csv"
        for x in sync fusion; do
            "$sim" train --ranks-list "$(ranks_upto 1 | tr ' ' ',' | sed 's/,$//')" --profile "$prof" --samples 1281167 \
                --batch 32 --exchange "$x" $plat --json --svg "$out/train-$x.svg" >"$out/train-$x.json"
        done ;;
    *) echo "sim-experiments.sh: unknown experiment \"$e\"" >&2; exit 2 ;;
    esac
done
