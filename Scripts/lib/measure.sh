# Shell helpers the benchmarks share. Source this file (after emulator.sh for reset_stats).
#   ratio A B        -> A / B with two decimals
#   seconds CMD...   -> the command's wall time in seconds (its output discarded)
#   reset_stats      -> zeroes the emulator's per-route counters

ratio() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$1" "$2"; }

seconds() {
    local start end
    start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N)
    python3 -c "print(f'{float(\"$end\") - float(\"$start\"):.3f}')"
}

reset_stats() { curl -s -X POST "$EMULATOR_URL/_emulator/stats/reset" >/dev/null; }
