# Shell helpers the benchmarks share. Source this file (after emulator.sh for reset_stats).
#   ratio A B        -> A / B with two decimals
#   seconds CMD...   -> the command's wall time in seconds (its output discarded); if the
#                       command fails, no time but the failure on stderr, and status 1
#   median A B C     -> the middle of three numbers (the benches' figures are medians of 3
#                       rounds); fails if one is missing (a round whose command failed)
#   reset_stats      -> zeroes the emulator's per-route counters
#   server_data_dir  -> where the emulator keeps its data: in memory (/dev/shm) when it has
#                       room, else under $work. The emulator stands for Dropbox's servers,
#                       whose disk is not this machine's: on the local disk its files (one
#                       per upload) competed with the mount and the reference for the disk
#                       being measured; measured, 1,000 4 KiB uploads cost the emulator
#                       1.1 ms of CPU each on this machine's ext4 and 0.5 ms in memory.

ratio() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$1" "$2"; }

# A command that fails is not timed: its time would be taken for a figure. passthrough_ll,
# out of descriptors, gave up on a third `tar x` with "Too many open files" after a third of
# the tree, and its 0.4-0.65 s was read as its speed on a quiet disk (the errors were discarded).
seconds() {
    local start end status=0 errors
    errors=$(mktemp)
    start=$(date +%s.%N); "$@" >/dev/null 2>"$errors" || status=$?; end=$(date +%s.%N)
    if [ "$status" != 0 ]; then
        { echo "bench: failed (exit $status), so not timed: $*"; head -n 5 "$errors"; } >&2
        rm -f "$errors"
        return 1
    fi
    rm -f "$errors"
    python3 -c "print(f'{float(\"$end\") - float(\"$start\"):.3f}')"
}

median() {
    local value
    for value in "$@"; do
        if ! [[ "$value" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
            echo "bench: a round has no time ('$value'): its command failed (above)" >&2
            return 1
        fi
    done
    printf '%s\n' "$@" | sort -g | sed -n 2p
}

reset_stats() { curl -s -X POST "$EMULATOR_URL/_emulator/stats/reset" >/dev/null; }

server_data_dir() {
    local free_kib
    free_kib=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
    if [ -n "$free_kib" ] && [ "$free_kib" -gt $((4 * 1024 * 1024)) ]; then
        mktemp -d /dev/shm/dropboxfs-bench-server.XXXXXX
    else
        mkdir -p "$work/server" && echo "$work/server"
    fi
}
