#!/bin/bash
# The GPU half of `make -C recipes/deb-multi` as one command, for a machine that takes one prepared
# script (the lent device of docs/notebook, "Multilingual"): prepare every model's data-bin, train
# the models side by side at an equal budget in updates (N each for the bilingual models, 4 × N for a
# multilingual one: the same max_tokens per update, so updates × tokens are equal), then translate the
# three-way test set with each (beam 5): the four trained directions, the zero-shot de→es and es→de
# directly and through English (pivot). Hypotheses, logs and metrics are packed under $OUT; scoring
# (sacrebleu, paired bootstrap, off-target rate) is done afterwards on any machine.
# Run from the repository root with the clean split (recipes/deb-multi/split.py) in $GPU_DATA
# (train.en-de.{en,de}.gz, train.en-es.{en,es}.gz, {dev,test}.3way.{en,de,es}):
#   OUT=/tmp/out N=5000 MODELS="multi en-de en-es de-en es-en" bash bench/studies/gpu/multi_gpu.sh
# Env: DEV (cuda), N (updates per bilingual model), MODELS (config names of recipes/deb-multi; a name
# starting with "multi" gets 4 × N), VALID (validate every VALID updates), CAP (minutes: no model trains
# longer, whatever its updates), WORKDIR (/tmp/multi).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
DEV=${DEV:-cuda}; N=${N:-5000}; MODELS=${MODELS:-multi en-de en-es de-en es-en}; VALID=${VALID:-1000}
CAP=${CAP:-6}; G=${GPU_DATA:-$PWD/.gpu3}; W=${WORKDIR:-/tmp/multi}; R=$PWD/recipes/deb-multi
mkdir -p $W/hyp $OUT/logs
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $OUT/logs/timeline.txt; }
M="python3 -m mtkit"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $OUT/logs/gpu.txt
pack() {
  t "packing"
  for m in $MODELS; do
    [ -d $R/work/$m ] && mkdir -p $OUT/logs/$m && cp $R/work/$m/metrics.jsonl $R/work/$m/config.yaml $OUT/logs/$m/ 2>/dev/null
  done
  cp $W/*.log $OUT/logs/ 2>/dev/null
  tar czf $OUT/hyp.tgz -C $W hyp
  tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $OUT/logs
}
trap pack EXIT

cd $R  # the configs' relative paths (work/data, work/bin-*, work/MODEL) are from here
mkdir -p work/data
for f in $G/*.3way.* ; do cp $f work/data/; done
for f in $G/train.*.gz; do b=$(basename $f .gz); [ -f work/data/$b ] || gunzip -c $f > work/data/$b; done
t "data in place"
for m in $MODELS; do $M prepare $m.yaml > $W/$m-prepare.log 2>&1 & done
wait; t "prepared"; grep -h "done in" $W/*-prepare.log

for m in $MODELS; do
  steps=$N; [[ $m == multi* ]] && steps=$((4 * N))
  timeout -k 5 $(( CAP * 60 + 90 )) $M train $m.yaml --device $DEV --max-steps $steps --max-time $CAP \
    --set training.validate_every=$VALID --set training.threads=2 > $W/$m-train.log 2>&1 &
done
wait; t "trained"
for m in $MODELS; do echo "$m: $(grep -E '^valid' $W/$m-train.log | tail -1)"; grep -E '^(speed|done)' $W/$m-train.log; done

xl() {  # xl MODEL SRC TGT IN OUT
  $M translate --model work/$1 --device $DEV --beam 5 $( [[ $1 == multi* ]] && echo --tgt-lang $3 ) \
    -i $4 -o $5 > $W/translate-$(basename $5 .txt).log 2>&1 || echo "translate $5 failed"
}
for m in $MODELS; do
  if [[ $m == multi* ]]; then
    for d in en-de en-es de-en es-en de-es es-de; do
      xl $m ${d%-*} ${d#*-} work/data/test.3way.${d%-*} $W/hyp/$m.$d.txt &
    done
  else
    xl $m ${m%-*} ${m#*-} work/data/test.3way.${m%-*} $W/hyp/bi.$m.txt &
  fi
done
wait; t "translated"
for m in $MODELS; do
  [[ $m == multi* ]] || continue
  xl $m de es $W/hyp/$m.de-en.txt $W/hyp/$m.pivot.de-es.txt &
  xl $m es de $W/hyp/$m.es-en.txt $W/hyp/$m.pivot.es-de.txt &
done
wait; t "pivoted"
for h in $W/hyp/*.txt; do
  b=$(basename $h .txt); tgt=${b##*-}
  echo "$b $(python3 -m sacrebleu work/data/test.3way.$tgt -i $h -m bleu chrf -b | tr '\n' ' ')"
done | tee $W/scores.log
