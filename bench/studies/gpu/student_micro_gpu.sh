#!/bin/bash
# One more student on a lent GPU (docs/notebook, "Students": the micro student): prepare a distilled
# corpus (gzipped, made by `mtkit distill` from the teacher's translations) with the teacher's BPE model,
# train recipes/deb-en-de/student-micro.yaml for MT minutes, hand back the model directory's small files.
# Inputs in GPU_DATA (default .gpu2/): distilled.{en,de}.gz, bpe.model, dev.*, test.*, student-micro.yaml.
#   OUT=/tmp/out MT=1.6 bash bench/studies/gpu/student_micro_gpu.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
G=${GPU_DATA:-$PWD/.gpu2}; W=${WORKDIR:-/tmp/micro}; MT=${MT:-1.5}; DEV=${DEV:-cuda}; mkdir -p $W $OUT
cd $PWD/recipes/deb-en-de
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $OUT/timeline.txt; }
DATA="--set data.dev_src=$G/dev.en --set data.dev_tgt=$G/dev.de --set data.test_src=$G/test.en --set data.test_tgt=$G/test.de"
python3 -m mtkit prepare transformer.yaml --set data.train_src=$G/distilled.en.gz --set data.train_tgt=$G/distilled.de.gz \
  $DATA --set data.dir=$W/bin --set bpe.model_from=$G/bpe.model > $W/prepare.log 2>&1; t "prepare rc $?"
timeout -k 5 $(python3 -c "print(int($MT*60+60))") python3 -m mtkit train $G/student-micro.yaml --device $DEV --max-time $MT \
  --set data.dir=$W/bin --set training.model_dir=$W/m --set training.keep_best=1 $DATA > $W/train.log 2>&1; t "train rc $?"
grep -E "parameters|^speed|^done" $W/train.log; grep "^valid" $W/train.log | tail -2
for f in checkpoint_best.pt meta.json config.yaml metrics.jsonl bpe.model; do cp $W/m/$f $OUT/ 2>/dev/null; done
cp $W/train.log $OUT/; cat $W/prepare.log >> $OUT/timeline.txt; ls -la $OUT
