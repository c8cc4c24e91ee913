R=$OUT; export OUT=$R; source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader | tee -a $OUT/steps.txt
export FLASHTRITON_COMMIT=9dfe75b
step fp8tests 200 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_fp8.py tests/test_launch.py tests/test_configs.py > $OUT/fp8tests.log 2>&1
tail -3 $OUT/fp8tests.log
step host 170 python3 scripts/fp8_host_probe.py --out $OUT/host.json --headdims 64,128,256 --seqlen 1024,2048 --causal both --rep-ms 200 --compare-plans > $OUT/host.log 2>&1
cat $OUT/host.log | cut -c1-600
step bench 200 python3 -m flashtriton bench --feature float8 --headdims 64 128 256 --seqlens 1024 2048 --causal both --rounds 2 --plain --out $OUT/bench.json > $OUT/bench.log 2>&1
tail -30 $OUT/bench.log
