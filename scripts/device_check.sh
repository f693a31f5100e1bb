#!/usr/bin/env bash
# The checks that need a GPU, as one run on a machine with one (from the repository root, with a
# python3 that holds torch with CUDA, gpytorch and botorch):
#
#   bash scripts/device_check.sh OUTPUT_FOLDER [STAGE ...]
#
# (STAGE: statistics_pass_cuda, statistics_pass_cpu, cuda_tests, suite; default all, in this order)
# 1. the statistics pass on the GPU (benchmarks/statistics_pass.py, chunks of 262,144 rows and a
#    whole pass over 10^7 rows, float64 and float32) and its peer in the same run: the same
#    benchmark on the same machine's CPU at all its cores, so the ratio is one machine's;
# 2. the test files that carry CUDA tests (they run where torch sees a GPU);
# 3. the whole default suite on the machine's cores (pytest-xdist, one thread a worker). The
#    controller imports botorch first: xdist's controller imports a warning's module when a worker
#    reports one, and importing linear_operator there while another thread does deadlocks
#    (seen on an H200 machine: "_DeadlockError ... linear_operator.utils.warnings", a worker lost).
# Every stage is bounded by `timeout`, its log and JSON go to OUTPUT_FOLDER, and a stage that fails
# does not stop the next; the exit status is the number of stages that failed.
set -u
out=${1:?give the folder for the logs and JSON}
shift
wanted=" ${*:-statistics_pass_cuda statistics_pass_cpu cuda_tests suite} "
mkdir -p "$out"
export PYTHONPATH=src PYTHONUNBUFFERED=1
cores=$(nproc)
failed=0

stage() {  # stage NAME SECONDS COMMAND...: runs COMMAND under a time limit, logs to OUTPUT/NAME.log
    local name=$1 seconds=$2
    shift 2
    [[ $wanted == *" $name "* ]] || return 0
    local start=$SECONDS
    echo "== $name (at most ${seconds} s)"
    timeout "$seconds" "$@" >"$out/$name.log" 2>&1
    local status=$?
    tail -n 12 "$out/$name.log"
    echo "== $name: exit $status after $((SECONDS - start)) s"
    [ "$status" = 0 ] || failed=$((failed + 1))
}

{ nvidia-smi -L; python3 -c "import torch, gpytorch, botorch; print('torch', torch.__version__,
'cuda', torch.version.cuda, torch.cuda.get_device_name(0), '| gpytorch', gpytorch.__version__,
'| botorch', botorch.__version__)"; echo "cpu cores: $cores"; } | tee "$out/environment.txt"

stage statistics_pass_cuda 110 python3 benchmarks/statistics_pass.py --device cuda --rows 262144 \
    --pass-rows 10000000 --repeats 3 --output "$out/statistics_pass_cuda.json"
stage statistics_pass_cpu 150 env OMP_NUM_THREADS="$cores" python3 benchmarks/statistics_pass.py \
    --device cpu --threads "$cores" --rows 262144 --pass-rows 10000000 --repeats 3 \
    --output "$out/statistics_pass_cpu.json"
stage cuda_tests 120 env OMP_NUM_THREADS=1 python3 -m pytest -p no:cacheprovider -rs \
    tests/test_statistics_pass.py tests/test_benchmark_statistics_pass_device.py \
    tests/test_contract.py tests/test_experiment_dkm_mnist.py tests/test_experiment_reproductions.py
stage suite 240 env OMP_NUM_THREADS=1 python3 -c "import sys, botorch, pytest
sys.exit(pytest.main(sys.argv[1:]))" -p no:cacheprovider -p no:benchmark -rfE -n "$cores"
exit "$failed"
