#!/bin/bash
# N `mtkit translate` commands started together on the same cores, timed as a whole (the slowest), with
# OpenMP's idle threads spinning as mtkit sets it (SPIN=new: GOMP_SPINCOUNT=3000 for commands that
# decode) or as GOMP_SPINCOUNT=SPIN says (300000 is libgomp's default). Run from the repository root:
#   bash bench/studies/concurrent_commands.sh N SPIN MODEL INPUT [translate options…]
#   e.g. for s in new 300000; do bash bench/studies/concurrent_commands.sh 2 $s M test300.en --beam 5; done
# (docs/notebook/engines.md, "Two commands on the same cores").
set -u
N=$1; SPIN=$2; MODEL=$3; INPUT=$4; shift 4
OUTDIR=$(mktemp -d); trap 'rm -rf $OUTDIR' EXIT
start=$(date +%s.%N)
for i in $(seq "$N"); do
  if [ "$SPIN" = new ]; then
    env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT python3 -m mtkit translate -m "$MODEL" -i "$INPUT" -o "$OUTDIR/$i" "$@" 2>/dev/null &
  else
    env -u OMP_WAIT_POLICY GOMP_SPINCOUNT="$SPIN" python3 -m mtkit translate -m "$MODEL" -i "$INPUT" -o "$OUTDIR/$i" "$@" 2>/dev/null &
  fi
done
wait
end=$(date +%s.%N)
echo "N=$N spin=$SPIN $(basename "$MODEL") $* wall $(python3 -c "print(round($end - $start, 2))") s"
