#!/bin/bash
# The GPU half of `make -C recipes/deb-en-de student` (recipes/student.mk) as one command, for a
# machine that takes one prepared script (the lent device of docs/notebook, "Students"): the
# teacher (recipes/deb-en-de/transformer.yaml) -> its beam-5 translation of the training source ->
# mtkit distill -> the students (base and tiny on the distilled corpus, base on the original pairs:
# the control) side by side -> int8 exports with and without shortlists, packed under $OUT.
# Run from the repository root with the data in .gpu/ (train.en.gz, dev.*, test.*, and a
# ctranslate2 wheel when WHL=1) and recipes/deb-en-de/work/data-bin prepared:
#   OUT=/tmp/out TT=2 ST=2.25 bash bench/studies/gpu/student_gpu.sh
# Env: DEV (cuda), TT teacher minutes, ST student minutes, NLINES (0 = all training lines), WHL (1 =
# install the ctranslate2 wheel in .gpu/ first), WORKDIR (/tmp/st).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
DEV=${DEV:-cuda}; TT=${TT:-2}; ST=${ST:-2.25}; NLINES=${NLINES:-0}
R=$PWD/recipes/deb-en-de; G=${GPU_DATA:-$PWD/.gpu}; W=${WORKDIR:-/tmp/st}; mkdir -p $W $OUT/logs
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $OUT/logs/timeline.txt; }
if [ "${WHL:-1}" = 1 ]; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $G/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site; fi
M="python3 -m mtkit"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $OUT/logs/gpu.txt
python3 -c "import ctranslate2, torch; print('ct2', ctranslate2.__version__, 'torch', torch.__version__)" | tee -a $OUT/logs/gpu.txt
cd $R  # the recipe's relative paths (work/data-bin, work/data) are from here
mkdir -p $R/work/data
for f in dev.en dev.de test.en test.de train.en.gz; do ln -sfn $G/$f $R/work/data/$f; done
DATA="--set data.dev_src=$G/dev.en --set data.dev_tgt=$G/dev.de --set data.test_src=$G/test.en --set data.test_tgt=$G/test.de"
pack() {
  t "packing"
  cd $W/export
  for s in teacher student-base-distilled student-tiny-distilled student-base-original; do
    [ -d $s-int8 ] && tar czf $OUT/$s-int8.tgz $s-int8
  done
  sha256sum */model.bin > $OUT/logs/model-sha256.txt 2>/dev/null
  tar czf $OUT/shortlists.tgz --exclude=model.bin $(ls -d *-int8-sl 2>/dev/null) 2>/dev/null
  cd $W
  [ -f teacher.hyp ] && gzip -c teacher.hyp > $OUT/teacher.hyp.gz
  for m in teacher student-base-distilled student-tiny-distilled student-base-original; do
    [ -d $m ] && mkdir -p $OUT/logs/$m && cp $m/metrics.jsonl $m/config.yaml $OUT/logs/$m/ 2>/dev/null
  done
  cp $W/*.log $W/distill.json $OUT/logs/ 2>/dev/null
  tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $OUT/logs
}
trap pack EXIT

t "teacher: $TT min"
timeout -k 5 $(python3 -c "print(int($TT*60+90))") $M train $R/transformer.yaml --device $DEV --max-time $TT \
  --set training.model_dir=$W/teacher $DATA > $W/teacher-train.log 2>&1; t "teacher rc $?"
grep -E "valid|speed" $W/teacher-train.log | tail -3

SRCF=$G/train.en.gz
if [ "$NLINES" != 0 ]; then zcat $G/train.en.gz | head -n $NLINES > $W/source.en; SRCF=$W/source.en; fi
t "teacher beam 5 over $SRCF"
timeout -k 5 200 $M translate --model $W/teacher --device $DEV --beam 5 --scores --resume -i $SRCF -o $W/teacher.hyp > $W/teacher-translate.log 2>&1; t "translate rc $? lines $(wc -l < $W/teacher.hyp)"
[ "$NLINES" = 0 ] && { zcat $SRCF > $W/source.en; }
# a translation cut short by the timeout keeps its finished chunks: distil those lines only
n=$(wc -l < $W/teacher.hyp); if [ $n -lt $(wc -l < $W/source.en) ]; then t "PARTIAL: $n lines"; head -n $n $W/source.en > $W/source.tmp && mv $W/source.tmp $W/source.en; fi
$M distill --source $W/source.en --translations $W/teacher.hyp --out-source $W/distilled.en --out-target $W/distilled.de \
  --report $W/distill.json --min-confidence 0.05 --max-length-ratio 3 > $W/distill.log 2>&1; t "distill rc $?"; cat $W/distill.json
$M prepare $R/transformer.yaml --set data.train_src=$W/distilled.en --set data.train_tgt=$W/distilled.de $DATA \
  --set data.dir=$W/bin-distilled --set bpe.model_from=$W/teacher > $W/prepare.log 2>&1; t "prepare rc $?"

t "students: $ST min each, side by side"
for s in base-distilled tiny-distilled base-original; do
  arch=${s%-*}; data=${s##*-}; bin=$W/bin-distilled; [ $data = original ] && bin=$R/work/data-bin
  timeout -k 5 $(python3 -c "print(int($ST*60+90))") $M train $R/student-$arch.yaml --device $DEV --max-time $ST \
    --set data.dir=$bin --set training.model_dir=$W/student-$s --set training.threads=4 $DATA > $W/student-$s-train.log 2>&1 &
done
wait; t "students done"
for s in base-distilled tiny-distilled base-original; do grep -E "valid" $W/student-$s-train.log | tail -1; done

t "exports"
mkdir -p $W/export
for m in teacher student-base-distilled student-tiny-distilled student-base-original; do
  data=$R/work/data-bin; [[ $m == *distilled ]] && data=$W/bin-distilled
  $M export --model $W/$m -o $W/export/$m-int8 --quantization int8 > $W/export-$m.log 2>&1 &
  $M export --model $W/$m -o $W/export/$m-int8-sl --quantization int8 --shortlist 50 --shortlist-frequent 500 \
    --shortlist-data $data > $W/export-$m-sl.log 2>&1 &
done
# the torch models' own test BLEU (beam 5) on this device, for the log
for m in teacher student-base-distilled student-tiny-distilled student-base-original; do
  $M translate --model $W/$m --device $DEV --beam 5 -i $G/test.en -o $W/$m.test.beam5 > $W/test-$m.log 2>&1
  echo "$m torch beam5 test $(python3 -m sacrebleu $G/test.de -i $W/$m.test.beam5 -m bleu chrf -b | tr '\n' ' ')" | tee -a $W/torch-test.log
done
wait; t "exports done"; ls -la $W/export/*/model.bin
