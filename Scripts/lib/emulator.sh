# Shell helpers to run dropbox-emulator from scripts. Source this file.
#   start_emulator BINARY DATA_DIR [ARGS...]  -> sets EMULATOR_URL and EMULATOR_PID
#   stop_emulator
# The emulator prints "dropbox-emulator listening on URL" once it serves; we wait for that
# line (bounded: EMULATOR_START_SECONDS, default 120; seeding a million entries takes longer)
# instead of sleeping.

start_emulator() {
    local binary=$1 data=$2
    shift 2
    EMULATOR_LOG=$(mktemp)
    "$binary" --data "$data" "$@" >"$EMULATOR_LOG" 2>&1 &
    EMULATOR_PID=$!
    local waited=0 limit=$(( ${EMULATOR_START_SECONDS:-120} * 10 ))
    until EMULATOR_URL=$(grep -o 'http://[^ ]*' "$EMULATOR_LOG" 2>/dev/null) && [ -n "$EMULATOR_URL" ]; do
        if ! kill -0 "$EMULATOR_PID" 2>/dev/null; then
            cat "$EMULATOR_LOG" >&2
            echo "dropbox-emulator exited before listening" >&2
            return 1
        fi
        if [ "$waited" -ge "$limit" ]; then
            echo "dropbox-emulator did not start within ${EMULATOR_START_SECONDS:-120} s" >&2
            return 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    export EMULATOR_URL EMULATOR_PID
}

stop_emulator() {
    if [ -n "${EMULATOR_PID:-}" ] && kill -0 "$EMULATOR_PID" 2>/dev/null; then
        kill "$EMULATOR_PID" 2>/dev/null || true
        wait "$EMULATOR_PID" 2>/dev/null || true
    fi
    rm -f "${EMULATOR_LOG:-}"
    EMULATOR_PID=
}
