set -e
START=$1; LABEL=$2
pip install -q --no-index --no-deps --target /tmp/deps .whl/*.whl 2>&1 | tail -2
nproc; python3 --version
for i in 0 1 2 3 4; do
  S=$((START + i*2000))
  PYTHONPATH=$PWD:/tmp/deps timeout 130 python3 benchmarks/bench_simulated.py --incidents 2000 --start $S --workers 16 --solver-label $LABEL --results /tmp/res$S > $OUT/s$S.log 2>&1 || echo "chunk $S rc=$?"
  grep -m1 '\*\*' $OUT/s$S.log || true
done
