#!/bin/bash
# Issue #42 as one prepared command for a lent GPU (docs/notebook, "Students of the transformer-base
# teacher"): the transformer-base teacher (recipes/deb-en-de/transformer-base.yaml, as `make gpu` trains
# it, for TT minutes), its last 5 checkpoints averaged -> its beam-5 translation of the training source
# (two halves side by side on the card) -> mtkit distill -> mtkit prepare with the teacher's BPE -> the
# tiny and the micro student on that corpus and the deployed model (transformer.yaml, trained on the
# original pairs) side by side, for whatever minutes are left before DEADLINE seconds -> test BLEU of
# every torch model on the card -> the small models' directories packed under $OUT (int8 exports and
# their timing are made on the CPU afterwards: recipes/student_table.py).
# Run from the repository root with .gpu/ holding train.en.gz, dev.{en,de}, test.{en,de} and
# recipes/deb-en-de/work/data-bin prepared (the recipe's joint BPE 8,000):
#   OUT=/tmp/out TT=3.5 DEADLINE=560 bash bench/studies/gpu/student_base_gpu.sh
# Env: DEV (cuda), TT teacher minutes, DEADLINE (seconds from the start by which the students stop and
# packing begins, minus ~45 s), NLINES (0 = every training line), STUDENT_LS (label smoothing of the
# students, 0), WORKDIR (/tmp/sb), SKIP_TEACHER (1: the teacher in WORKDIR is kept, as on the same warm
# machine after an earlier call), TTR_FIX (seconds for the teacher's translation of the training source).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
DEV=${DEV:-cuda}; TT=${TT:-3.5}; DEADLINE=${DEADLINE:-560}; NLINES=${NLINES:-0}; LS=${STUDENT_LS:-0}
R=$PWD/recipes/deb-en-de; G=${GPU_DATA:-$PWD/.gpu}; W=${WORKDIR:-/tmp/sb}; mkdir -p $W $OUT/logs
T0=$(date +%s); now() { echo $(( $(date +%s) - T0 )); }
t() { echo "[$(now) s] $*" | tee -a $OUT/logs/timeline.txt; }
M="python3 -m mtkit"; STUDENTS="student-tiny student-micro deployed"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/logs/gpu.txt
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])" | tee -a $OUT/logs/gpu.txt
cd $R  # the recipe's relative paths (work/data-bin) are from here
DATA="--set data.dev_src=$G/dev.en --set data.dev_tgt=$G/dev.de --set data.test_src=$G/test.en --set data.test_tgt=$G/test.de"

pack() {
  t "packing"
  cd $W
  for m in $STUDENTS; do  # the model directories export needs; a file over 15 MiB travels in parts
    [ -f $m/checkpoint_best.pt ] || continue
    tar cf $W/$m.tar -C $W $m/checkpoint_best.pt $m/config.yaml $m/meta.json $m/metrics.jsonl $m/bpe.model 2>/dev/null
    split -b 15M -d $W/$m.tar $OUT/$m.tar.part
  done
  for m in teacher $STUDENTS; do
    [ -d $m ] && mkdir -p $OUT/logs/$m && cp $m/metrics.jsonl $m/config.yaml $OUT/logs/$m/ 2>/dev/null
  done
  cp $W/*.log $W/distill.json $W/*.bleu $OUT/logs/ 2>/dev/null
  tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $OUT/logs
  ls -la $OUT
}
trap pack EXIT

if [ "${SKIP_TEACHER:-0}" = 0 ]; then
t "teacher (transformer-base): $TT min"
timeout -k 5 $(python3 -c "print(int($TT*60+60))") $M train $R/transformer-base.yaml --device $DEV --max-time $TT \
  --set training.model_dir=$W/teacher $DATA > $W/teacher-train.log 2>&1; t "teacher rc $?"
grep -E "parameters|^speed|^done" $W/teacher-train.log | tail -3; grep "^valid" $W/teacher-train.log | tail -2
$M average $W/teacher --last 5 > $W/average.log 2>&1; t "average rc $?"
fi
AVG=$W/teacher/checkpoint_avg.pt

# the source in two halves, translated side by side (one process keeps the card only half busy);
# a half cut short by its timeout keeps its finished lines (--resume writes whole chunks), and only
# the translated lines are distilled
if [ "$NLINES" = 0 ]; then zcat $G/train.en.gz > $W/source.en; else zcat $G/train.en.gz | head -n $NLINES > $W/source.en; fi
n=$(wc -l < $W/source.en); h=$(( (n + 1) / 2 ))
head -n $h $W/source.en > $W/half1.en; tail -n +$(( h + 1 )) $W/source.en > $W/half2.en
TTR=$(( DEADLINE - $(now) - 230 )); [ $TTR -gt 150 ] && TTR=150; [ $TTR -lt 30 ] && TTR=30; TTR=${TTR_FIX:-$TTR}
t "teacher beam 5 over $n training sources, at most $TTR s"
for p in 1 2; do
  timeout -k 5 $TTR $M translate --model $W/teacher --checkpoint $AVG --device $DEV --beam 5 --scores --resume \
    -i $W/half$p.en -o $W/half$p.hyp > $W/translate-$p.log 2>&1 &
done
wait; t "translated $(cat $W/half1.hyp $W/half2.hyp | wc -l) of $n"
n1=$(wc -l < $W/half1.hyp); n2=$(wc -l < $W/half2.hyp)
{ head -n $n1 $W/half1.en; head -n $n2 $W/half2.en; } > $W/distill-source.en; cat $W/half1.hyp $W/half2.hyp > $W/teacher.hyp
# the teacher's own test BLEU (averaged, beam 5) while the card is free
$M translate --model $W/teacher --checkpoint $AVG --device $DEV --beam 5 -i $G/test.en -o $W/teacher.test.beam5 > $W/test-teacher.log 2>&1 & TP=$!
# the CUDA tests, once, beside the CPU work of distill and prepare
(cd ../.. && timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_train_cuda.py > $W/cuda-tests.log 2>&1) &
$M distill --source $W/distill-source.en --translations $W/teacher.hyp --out-source $W/distilled.en --out-target $W/distilled.de \
  --report $W/distill.json --min-confidence 0.05 --max-length-ratio 3 > $W/distill.log 2>&1; t "distill rc $?"; cat $W/distill.json
$M prepare $R/transformer.yaml --set data.train_src=$W/distilled.en --set data.train_tgt=$W/distilled.de $DATA \
  --set data.dir=$W/bin-distilled --set bpe.model_from=$W/teacher > $W/prepare.log 2>&1; t "prepare rc $?"
wait $TP

ST=$(python3 -c "print(round(max(0.5, ($DEADLINE - $(now) - 40) / 60), 2))")
t "students and the deployed model: $ST min each, side by side (students: label smoothing $LS)"
for m in $STUDENTS; do
  case $m in
    deployed) yaml=$R/transformer.yaml; extra="--set data.dir=$R/work/data-bin" ;;
    *) yaml=$R/$m.yaml; extra="--set data.dir=$W/bin-distilled --set training.label_smoothing=$LS" ;;
  esac
  timeout -k 5 $(python3 -c "print(int($ST*60+45))") $M train $yaml --device $DEV --max-time $ST $extra \
    --set training.model_dir=$W/$m --set training.threads=4 --set training.keep_best=1 $DATA > $W/$m-train.log 2>&1 &
done
wait; t "trained"
for m in $STUDENTS; do echo "$m: $(grep -E '^done' $W/$m-train.log | tail -1) $(grep '^valid' $W/$m-train.log | tail -1)"; done
for m in $STUDENTS; do
  $M translate --model $W/$m --device $DEV --beam 5 -i $G/test.en -o $W/$m.test.beam5 > $W/test-$m.log 2>&1 &
done
wait
for m in teacher $STUDENTS; do
  echo "$m torch beam5 test: $(python3 -m sacrebleu $G/test.de -i $W/$m.test.beam5 -m bleu chrf -b 2>/dev/null | tr '\n' ' ')" | tee $W/$m.bleu
done
t "done"
