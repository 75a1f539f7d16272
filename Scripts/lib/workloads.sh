# The metadata benchmarks' workloads and their inputs (Scripts/bench-metadata, Scripts/bench-ab).
# Source this file.
#   creates DIR N            -> makes DIR, then N empty files in it, one open(O_CREAT) and close each
#   make_small_files DIR     -> 1,000 files of 4 KiB of random bytes in DIR (made already)
#   make_tree DIR N ARCHIVE  -> a source tree of N files in DIR (sizes mixed up to 1 MiB, the
#                               same every time) and its tar archive

creates() { python3 -c "
import os, sys
os.mkdir(sys.argv[1])
for i in range(int(sys.argv[2])):
    os.close(os.open(f'{sys.argv[1]}/empty-{i:05d}', os.O_CREAT | os.O_WRONLY, 0o644))
" "$1" "$2"; }

make_small_files() {
    local i
    for i in $(seq 1 1000); do head -c 4096 /dev/urandom > "$1/file-$i.bin"; done
}

make_tree() {
    python3 - "$@" <<'PY'
import os, random, sys, tarfile
root, count, archive = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(7)
for i in range(count):
    folder = f"{root}/pkg-{i % 20:02d}/mod-{i % 100 // 20}"
    os.makedirs(folder, exist_ok=True)
    size = min(1 << 20, int(rng.paretovariate(1.2) * 2048))
    with open(f"{folder}/file-{i:04d}.c", "wb") as f:
        f.write(rng.randbytes(size))
with tarfile.open(archive, "w") as tar:
    tar.add(root, arcname="srctree")
PY
}
