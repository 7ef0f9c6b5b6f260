#!/usr/bin/env bash
# One-time, idempotent set-up for building and running boxlayer on Debian/Ubuntu:
#   - libhdf5-dev (system HDF5 for the M3ED reader), fontconfig, FreeType and the DejaVu fonts
#     (text in renders and plots) and Chromium (the report's browser test), from apt when missing;
#   - ONNX Runtime 1.31.1's libonnxruntime.so, taken from the `onnxruntime` PyPI wheel into .ort/;
#   - the Python packages the test suite's cross-checks use (tools/requirements-test.txt).
# Re-running when everything is present takes well under a second and touches nothing.
set -euo pipefail

ORT_VERSION=1.31.1
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ort_dir="$repo/.ort"

say() { printf 'setup: %s\n' "$*" >&2; }

need_cmd() {
  command -v "$1" >/dev/null 2>&1 || { say "missing '$1': $2"; exit 1; }
}

need_cmd cargo "install Rust from https://rustup.rs"
need_cmd python3 "install Python 3 (apt-get install python3 python3-pip)"

# --- System packages -------------------------------------------------------------------------
# libhdf5-dev: the M3ED reader; fontconfig, FreeType and DejaVu: text in renders and plots;
# chromium: the HTML report's browser test (tools/check_report.py).
apt_packages=(libhdf5-dev pkg-config libfontconfig1-dev libfreetype-dev fonts-dejavu-core chromium)
missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    say "installing ${missing[*]} with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    say "missing system packages; run:  sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
fi

# --- ONNX Runtime ---------------------------------------------------------------------------
if [ "$(cat "$ort_dir/VERSION" 2>/dev/null)" != "$ORT_VERSION" ] || [ ! -e "$ort_dir/libonnxruntime.so" ]; then
  say "fetching libonnxruntime.so $ORT_VERSION from the onnxruntime wheel"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "onnxruntime==$ORT_VERSION"
  wheel=$(ls "$tmp"/onnxruntime-*.whl)
  rm -rf "$ort_dir.partial" && mkdir -p "$ort_dir.partial"
  python3 - "$wheel" "$ort_dir.partial" <<'PY'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    libs = [n for n in z.namelist() if n.startswith("onnxruntime/capi/libonnxruntime.so")]
    if not libs:
        sys.exit(f"{wheel}: no onnxruntime/capi/libonnxruntime.so* inside")
    for n in libs:
        with z.open(n) as src, open(os.path.join(out, os.path.basename(n)), "wb") as dst:
            dst.write(src.read())
PY
  real=$(cd "$ort_dir.partial" && ls libonnxruntime.so.* | head -n 1)
  ln -sf "$real" "$ort_dir.partial/libonnxruntime.so"
  echo "$ORT_VERSION" > "$ort_dir.partial/VERSION"
  rm -rf "$ort_dir" && mv "$ort_dir.partial" "$ort_dir"
  say "ONNX Runtime ready in $ort_dir"
fi

# --- Python packages for the test suite's cross-checks ------------------------------------------
if ! python3 "$repo/tools/check_requirements.py" "$repo/tools/requirements-test.txt" 2>/dev/null; then
  say "installing Python test requirements (tools/requirements-test.txt)"
  python3 -m pip install --quiet --disable-pip-version-check -r "$repo/tools/requirements-test.txt"
fi
