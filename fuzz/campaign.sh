#!/usr/bin/env bash
# The fuzz campaign of docs/reliability.md: each target for a set time, seeded with simulated
# files, with the limits the issue asks for (no hang over 20 s, no RSS over 1 GiB). The three
# targets are built once, then run side by side (one process each).
#   fuzz/campaign.sh [TFRECORD_S] [FRAME_S] [M3ED_S]      (default 1800 1800 3600)
# Needs a nightly toolchain and `cargo install cargo-fuzz`. Logs go to fuzz/logs/<target>.log;
# the last line of each is libFuzzer's summary (executions, peak RSS); crashes land in
# fuzz/artifacts/<target>/ and make this script exit non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
tfrecord_s=${1:-1800}
frame_s=${2:-1800}
m3ed_s=${3:-3600}
seeds=fuzz/seeds
mkdir -p fuzz/logs "$seeds" fuzz/corpus/{tfrecord_reader,frame_proto,m3ed_open}
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$PWD/.ort/libonnxruntime.so}
export HDF5_USE_FILE_LOCKING=FALSE
# BOXLAYER_BIN: a built boxlayer to simulate the seeds with (default: build one here).
bin=${BOXLAYER_BIN:-target/release/boxlayer}
[ -n "${BOXLAYER_BIN:-}" ] || cargo build --release --locked --bin boxlayer
# Seeds: a 2-sweep drone sequence (M3ED) and a 2-frame Waymo segment without images.
[ -f "$seeds/falcon_sim_seed7_data.h5" ] || $bin simulate --platform drone --frames 2 --seed 7 --out "$seeds" >/dev/null
[ -f "$seeds/segment-sim_seed7_with_camera_labels.tfrecord" ] ||
  $bin simulate --platform vehicle --frames 2 --seed 7 --cameras none --out "$seeds" >/dev/null
cp "$seeds/segment-sim_seed7_with_camera_labels.tfrecord" fuzz/corpus/tfrecord_reader/seed.tfrecord
# M3ED inputs are edit lists over the pristine file (fuzz_targets/m3ed_open.rs): the file itself,
# then a few seeded edits, half in the first 64 kB (superblock, object headers, metadata heap).
python3 - "$seeds/falcon_sim_seed7_data.h5" fuzz/corpus/m3ed_open <<'PY'
import os, random, struct, sys
size = os.path.getsize(sys.argv[1])
rng = random.Random(18)
open(f"{sys.argv[2]}/pristine", "wb").write(b"\x00")
for k in range(16):
    span = min(size, 64 << 10) if k % 2 == 0 else size
    edits = b"".join(struct.pack("<IBB", rng.randrange(span), rng.randrange(1, 256), 1) for _ in range(1 + k % 3))
    open(f"{sys.argv[2]}/edit{k}", "wb").write(b"\x00" + edits)
PY
# Frame protos: the records' payloads (TFRecord framing: u64 length, u32 CRC, data, u32 CRC).
python3 - "$seeds/segment-sim_seed7_with_camera_labels.tfrecord" fuzz/corpus/frame_proto <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
at, k = 0, 0
while at + 12 <= len(data):
    (n,) = struct.unpack_from("<Q", data, at)
    open(f"{sys.argv[2]}/record{k}.pb", "wb").write(data[at + 12 : at + 12 + n])
    at, k = at + 16 + n, k + 1
PY
max_frame=$(( $(ls -l fuzz/corpus/frame_proto | awk 'NR>1 {print $5}' | sort -n | tail -1) + 4096 ))
# Every target: no input may run 20 s or allocate 1 GiB at once. RSS: 1 GiB for the M3ED reader
# (its corpus is edit lists, so RSS is the reader's); 6 GiB for the Waymo targets, whose corpus
# of MB-sized records libFuzzer holds in memory.
common=(-timeout=20 -malloc_limit_mb=1024 -detect_leaks=0 -print_final_stats=1)
cargo +nightly fuzz build --fuzz-dir fuzz
status=0
run() {
  local target=$1 seconds=$2; shift 2
  echo "fuzz $target for ${seconds}s (log fuzz/logs/$target.log)"
  if ! cargo +nightly fuzz run --fuzz-dir fuzz "$target" "fuzz/corpus/$target" -- \
      -max_total_time="$seconds" "${common[@]}" "$@" >"fuzz/logs/$target.log" 2>&1; then
    echo "  $target FAILED: see fuzz/logs/$target.log and fuzz/artifacts/$target/"
    status=1
  fi
  grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "fuzz/logs/$target.log" |
    sed "s/^/  $target: /" || true
  return $status
}
pids=()
[ "$tfrecord_s" -gt 0 ] && { run tfrecord_reader "$tfrecord_s" -rss_limit_mb=6144 -dict=fuzz/tfrecord.dict & pids+=($!); }
[ "$frame_s" -gt 0 ] && { run frame_proto "$frame_s" -rss_limit_mb=6144 -max_len="$max_frame" & pids+=($!); }
if [ "$m3ed_s" -gt 0 ]; then
  # libhdf5 asks malloc for the sizes a damaged header declares and handles a NULL (a clear
  # `memory allocation failed` error, 17 MB RSS, checked natively); ASan's allocator aborts on
  # such sizes instead, so it is told to return NULL as glibc does. Rust allocations that fail
  # still abort and count as crashes; any that succeed over 1 GiB trip -malloc_limit_mb. The exit
  # leak check is off too: libhdf5 1.10 keeps about 100 bytes of internal state at exit.
  { ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=0 BOXLAYER_FUZZ_SEED="$seeds/falcon_sim_seed7_data.h5" BOXLAYER_FUZZ_POSE="$seeds/falcon_sim_seed7_pose_gt.h5" \
    BOXLAYER_FUZZ_TMP=/dev/shm run m3ed_open "$m3ed_s" -rss_limit_mb=1024 -max_len=4096 & pids+=($!); }
fi
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
