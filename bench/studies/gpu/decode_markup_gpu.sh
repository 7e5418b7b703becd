#!/bin/bash
# One prepared command for a lent GPU (docs/notebook/gpu.md): the CUDA tests, `make bench`'s gpu part
# (transformer-small, 1,600 updates, then greedy and beam 5 over the test set), the torch engine of
# this tree against an earlier commit's on the same model (whole `mtkit translate` commands,
# alternated), and two recipe models trained side by side for the same minutes, one with
# `data.markup_augmentation: 0.2` and one without, with their placeholder lines measured
# (bench/studies/placeholder_rescue.py) and their test BLEU. Everything lands in $OUT: logs.tgz
# (timeline, results, hypotheses) and the two models, split into pieces of 15 MB
# (`cat models.tgz.* | tar xz`).
# Run from the repository root with .gpu/deb-en-de (train.{en,de}.gz, dev.*, test.*) and .gpu/base
# (the mtkit package of the commit to compare with):
#   OUT=/tmp/out DEADLINE=540 bash bench/studies/gpu/decode_markup_gpu.sh
# Env: DEV (cuda), DEADLINE (seconds the whole script may take), STEPS (1600, the bench's updates),
# MAX_MT (4: the most minutes each recipe model trains), ROUNDS (2: rounds of the decode comparison),
# DECODE_MODEL (the model of the decode comparison; default: the bench's gpu-small).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
DEV=${DEV:-cuda}; DEADLINE=${DEADLINE:-540}; STEPS=${STEPS:-1600}; MAX_MT=${MAX_MT:-4}; ROUNDS=${ROUNDS:-2}
G=${GPU_DATA:-$PWD/.gpu}; D=$G/deb-en-de; W=${WORKDIR:-/tmp/dm}; L=$W/logs
rm -rf $W; mkdir -p $W $L $OUT
T0=$(date +%s)
t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $L/timeline.txt; }
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
pack() {
  t "packing"
  cp $W/bench/*.json $W/*.tsv $W/*.log $L/ 2>/dev/null
  cp $W/bench/logs/*.log $L/ 2>/dev/null
  tar czf $OUT/logs.tgz -C $W logs $(cd $W && ls -d hyps 2>/dev/null)
  models=$(cd $W && ls -d aug-*/ 2>/dev/null)
  if [ -n "$models" ]; then
    (cd $W && tar cz --exclude='checkpoint_last.pt' --exclude='checkpoint_step*' --exclude='.lock' $models) \
      | split -b 15m - $OUT/models.tgz.
  fi
}
trap pack EXIT

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee $L/gpu.txt
python3 -c "import torch, sentencepiece, sacrebleu; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | tee -a $L/gpu.txt
git log -1 --format=%h 2>/dev/null | tee -a $L/gpu.txt

t "CUDA tests beside three preparations (the bench's, and the recipe's with and without markup)"
(timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_train_cuda.py tests/test_decode_cuda.py \
   > $L/cuda-tests.txt 2>&1; echo "rc $?" >> $L/cuda-tests.txt) &
timeout 200 python3 bench/run.py --data $D --only prepare --work $W/bench --out $W/bench/results.json \
  > $W/bench-prepare.log 2>&1 &
R=recipes/deb-en-de/transformer.yaml
DATA="--set data.train_src=$D/train.en.gz --set data.train_tgt=$D/train.de.gz --set data.dev_src=$D/dev.en
  --set data.dev_tgt=$D/dev.de --set data.test_src=$D/test.en --set data.test_tgt=$D/test.de"
for a in 0.0 0.2; do
  timeout 200 python3 -m mtkit prepare $R $DATA --set data.dir=$W/bin-$a --set data.markup_augmentation=$a \
    > $W/prepare-$a.log 2>&1 &
done
wait; t "prepared"; tail -2 $L/cuda-tests.txt

t "bench gpu part: transformer-small, $STEPS updates, greedy and beam 5"
timeout $(( $(left) - 200 )) python3 bench/run.py --data $D --only gpu --gpu-runs small --gpu-steps $STEPS \
  --work $W/bench --out $W/bench/results.json > $W/bench-gpu.log 2>&1; t "bench rc $?"
python3 -c "
import json; g = json.load(open('$W/bench/results.json')).get('gpu', {}); s = g.get('small', {})
print(g.get('device'), s.get('summary'), s.get('greedy'), s.get('beam5'))" 2>&1 | tee -a $L/timeline.txt

# the same model for the earlier commit: its config without the keys that commit does not know
M=${DECODE_MODEL:-$W/bench/gpu-small}; MB=$W/gpu-small-base
if [ -f $M/checkpoint_last.pt ]; then
  cp -r $M $MB && rm -f $MB/.lock $MB/checkpoint_step*.pt
  for _ in $(seq 20); do
    msg=$(cd $G/base && python3 -c "from mtkit.config.experiment import load_config; load_config('$MB/config.yaml')" 2>&1) && break
    key=$(echo "$msg" | grep -o "unknown key '[^']*'" | head -1 | sed "s/unknown key '\(.*\)'/\1/")
    [ -z "$key" ] && { echo "$msg" | tail -1; break; }
    echo "base: dropping $key" >> $L/timeline.txt
    python3 -c "
import glob, torch, yaml
section, name = '$key'.split('.', 1)
d = yaml.safe_load(open('$MB/config.yaml')); d[section].pop(name, None)
open('$MB/config.yaml', 'w').write(yaml.safe_dump(d, sort_keys=False))
for path in glob.glob('$MB/checkpoint*.pt'):  # each checkpoint holds its config too
    c = torch.load(path, map_location='cpu', weights_only=True); c['config'][section].pop(name, None)
    torch.save(c, path)"
  done
  t "decode: this tree against .gpu/base, $ROUNDS rounds, whole commands, 2,000 test lines"
  mkdir -p $W/hyps; echo -e "round\tsystem\tsearch\tseconds\tbleu" > $W/decode.tsv
  for r in $(seq $ROUNDS); do
    for sys in new base; do
      tree=$PWD; model=$M; [ $sys = base ] && { tree=$G/base; model=$MB; }
      for mode in greedy beam5; do
        flags="--greedy"; [ $mode = beam5 ] && flags="--beam 5"
        [ $(left) -lt 260 ] && break 3
        hyp=$W/hyps/$sys.$mode
        s=$(date +%s.%N)
        (cd $tree && PYTHONPATH=$tree timeout 120 python3 -m mtkit translate --model $model --checkpoint last \
          --device $DEV $flags -i $D/test.en -o $hyp.$r > $W/translate-$sys-$mode.log 2>&1)
        e=$(date +%s.%N)
        b=$(python3 -m sacrebleu $D/test.de -i $hyp.$r -m bleu -b 2>/dev/null)
        echo -e "$r\t$sys\t$mode\t$(python3 -c "print(round($e - $s, 2))")\t$b" | tee -a $W/decode.tsv
      done
    done
  done
  for mode in greedy beam5; do
    [ -f $W/hyps/new.$mode.1 ] && [ -f $W/hyps/base.$mode.1 ] && echo "$mode: lines equal to base" \
      "$(paste -d '\t' $W/hyps/new.$mode.1 $W/hyps/base.$mode.1 | awk -F'\t' '$1==$2' | wc -l)" | tee -a $L/timeline.txt
  done
fi

MT=$(python3 -c "print(round(min($MAX_MT, ($(left) - 130) / 60), 2))")
t "recipe transformer with and without markup augmentation, $MT minutes each, side by side"
for a in 0.0 0.2; do
  timeout -k 5 $(python3 -c "print(int($MT * 60 + 60))") python3 -m mtkit train $R $DATA --device $DEV \
    --max-time $MT --set data.dir=$W/bin-$a --set training.model_dir=$W/aug-$a --set training.threads=4 \
    > $W/train-aug-$a.log 2>&1 &
done
wait; t "trained"
for a in 0.0 0.2; do grep -E "valid|speed" $W/train-aug-$a.log | tail -2; done | tee -a $L/timeline.txt

for a in 0.0 0.2; do
  [ -f $W/aug-$a/checkpoint_best.pt ] || continue
  [ $(left) -lt 25 ] && break
  timeout $(( $(left) / 2 - 5 )) python3 bench/studies/placeholder_rescue.py --model $W/aug-$a --data $D --beam 5 \
    --device $DEV --paths "plain;placeholders, rescue off;placeholders, mask unwritable" --hyps $W/hyps/ph-$a \
    --json $L/placeholders-$a.json > $W/placeholders-$a.log 2>&1
  tail -3 $W/placeholders-$a.log | tee -a $L/timeline.txt
  timeout 60 python3 -m mtkit translate --model $W/aug-$a --device $DEV --beam 5 -i $D/test.en \
    -o $W/hyps/aug-$a.test.beam5 > $W/translate-aug-$a.log 2>&1
  echo "aug $a test beam 5: $(python3 -m sacrebleu $D/test.de -i $W/hyps/aug-$a.test.beam5 -m bleu chrf -b | tr '\n' ' ')" \
    | tee -a $L/timeline.txt
done
t "done"
