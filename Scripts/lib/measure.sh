# Shell helpers the benchmarks share. Source this file (after emulator.sh for reset_stats).
#   ratio A B        -> A / B with two decimals
#   seconds CMD...   -> the command's wall time in seconds (its output discarded)
#   median A B C     -> the middle of three numbers (the benches' figures are medians of 3 rounds)
#   reset_stats      -> zeroes the emulator's per-route counters
#   server_data_dir  -> where the emulator keeps its data: in memory (/dev/shm) when it has
#                       room, else under $work. The emulator stands for Dropbox's servers,
#                       whose disk is not this machine's: on the local disk its files (one
#                       per upload) competed with the mount and the reference for the disk
#                       being measured; measured, 1,000 4 KiB uploads cost the emulator
#                       1.1 ms of CPU each on this machine's ext4 and 0.5 ms in memory.

ratio() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$1" "$2"; }

seconds() {
    local start end
    start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N)
    python3 -c "print(f'{float(\"$end\") - float(\"$start\"):.3f}')"
}

median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }

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
