#!/usr/bin/env bash
# PyKokkos's ExaMiniMD port (its workload and standalone variants, unmodified) on kfuse, eager and fused, side by
# side: 16^3 cells, 100 steps, each run pinned to 4 cores with 4 OpenMP threads (16 cores in all). Prints whether
# eager and fused thermo rows are equal and each run's PERFORMANCE line; the fused runs' --explain summary is in
# $OUT/port_<variant>_fused_<round>.err. Round 1 compiles; the README quotes rounds 2 and 3.
#   benchmarks/examinimd_port.sh /path/to/pykokkos [out-folder]
set -u
pykokkos="$(cd "$1" && pwd)"; OUT="${2:-$(mktemp -d)}"; mkdir -p "$OUT"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"; py="${PYTHON:-$repo/.venv/bin/python}"
sed 's/^region.*/region box block 0 16 0 16 0 16/; s/^run.*/run 100/' \
  "$pykokkos/examples/ExaMiniMD/workload/input/in.lj" > "$OUT/in16.lj"
port() {  # variant mode cores round
  local flags=(); [ "$2" = fused ] && flags=(--fusion --explain)
  (cd "$pykokkos/examples/ExaMiniMD/$1" && KFUSE_NUM_THREADS=4 taskset -c "$3" "$py" -m kfuse run "${flags[@]}" \
     src/main.py -il "$OUT/in16.lj" --fill > "$OUT/port_$1_$2_$4.out" 2> "$OUT/port_$1_$2_$4.err")
}
for round in 1 2 3; do
  port workload eager 0-3 $round & port workload fused 4-7 $round &
  port standalone eager 8-11 $round & port standalone fused 12-15 $round &
  wait
done
thermo() { grep -E '^[0-9]+ [0-9.]+ -' "$1" | cut -d' ' -f1-4; }
for v in workload standalone; do
  for r in 2 3; do
    if diff <(thermo "$OUT/port_${v}_eager_$r.out") <(thermo "$OUT/port_${v}_fused_$r.out") > /dev/null; then
      echo "$v round $r: eager and fused thermo (step T PE ETot) equal"; else echo "$v round $r: THERMO DIFFERS"; fi
    grep PERFORMANCE "$OUT/port_${v}_eager_$r.out" | sed 's/^/  eager: /'
    grep PERFORMANCE "$OUT/port_${v}_fused_$r.out" | sed 's/^/  fused: /'
  done
done
thermo "$OUT/port_workload_fused_3.out" | tr '\n' ';'; echo
cat "$OUT/port_workload_fused_3.err"
