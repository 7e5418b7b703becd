#!/bin/bash
# Training speed of the multilingual model against a bilingual one of the same size, each alone on the
# GPU (the "tokens/s unchanged"): recipes/deb-multi's multi.yaml and en-de.yaml, STEPS updates
# each, alternated REPEATS times; prints each run's `speed:` line. Data as for bench/studies/gpu/multi_gpu.sh.
#   OUT=/tmp/out STEPS=1500 REPEATS=2 bash bench/studies/gpu/multi_speed_gpu.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
DEV=${DEV:-cuda}; STEPS=${STEPS:-1500}; REPEATS=${REPEATS:-2}; G=${GPU_DATA:-$PWD/.gpu3}; W=${WORKDIR:-/tmp/speed}
mkdir -p $W $OUT; cd recipes/deb-multi; mkdir -p work/data
for f in $G/*.3way.*; do cp $f work/data/; done
for f in $G/train.*.gz; do b=$(basename $f .gz); [ -f work/data/$b ] || gunzip -c $f > work/data/$b; done
for m in en-de multi; do python3 -m mtkit prepare $m.yaml > $W/$m-prepare.log 2>&1 & done; wait
for r in $(seq $REPEATS); do
  for m in en-de multi; do
    python3 -m mtkit train $m.yaml --device $DEV --max-steps $STEPS --set training.model_dir=$W/$m-$r \
      --set training.validate_every=100000 > $W/$m-$r.log 2>&1
    echo "$m run $r: $(grep -E '^speed' $W/$m-$r.log)" | tee -a $OUT/speed.txt
  done
done
