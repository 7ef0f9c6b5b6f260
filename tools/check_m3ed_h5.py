"""Lists an M3ED `<seq>_data.h5` (and optionally `<seq>_pose_gt.h5`) with h5py and checks the
documented tree (shared/reference/m3ed-format.md A1.1, A1.4): every dataset boxlayer reads, its
dtype, shape and LZF compression, the metadata JSON, the OVC RGB images (one image per chunk) with
their times and calibration when present, ordered sweep times, `Ln_T_L0[0]` = identity,
and that no object stores a modification time (so equal content gives equal bytes).

Usage: python3 tools/check_m3ed_h5.py DATA.h5 [POSE_GT.h5]
Prints one line per object (`PATH DTYPE SHAPE [lzf]`) then `ok`; exits 1 naming each problem.
"""
import json
import sys

try:
    import h5py
    import numpy as np
except ImportError as e:  # the Rust test runs this script: say what to install
    sys.exit(f"check_m3ed_h5.py needs h5py and numpy ({e}); pip install -r tools/requirements-test.txt")

problems = []


def listing(f):
    mtimes = []

    def visit(name, obj):
        mtimes.append(h5py.h5g.get_objinfo(obj.id).mtime)
        if isinstance(obj, h5py.Dataset):
            lzf = " lzf" if obj.compression == "lzf" else ""
            print(f"/{name} {obj.dtype} {obj.shape}{lzf}")
        else:
            print(f"/{name}/")

    f.visititems(visit)
    mtimes.append(h5py.h5g.get_objinfo(f.id).mtime)
    if any(mtimes):
        problems.append(f"{f.filename}: {sum(1 for t in mtimes if t)} objects store a modification time")
    else:
        print(f"mtime 0 for all {len(mtimes)} objects of {f.filename}")


def expect(f, path, dtype, shape=None, lzf=False):
    if path not in f:
        problems.append(f"{f.filename}: missing {path}")
        return None
    ds = f[path]
    if ds.dtype != np.dtype(dtype):
        problems.append(f"{f.filename}: {path} is {ds.dtype}, expected {dtype}")
    if shape is not None and ds.shape != shape:
        problems.append(f"{f.filename}: {path} has shape {ds.shape}, expected {shape}")
    if lzf and ds.compression != "lzf":
        problems.append(f"{f.filename}: {path} is not LZF-compressed")
    return ds


def check_data(path):
    with h5py.File(path, "r") as f:
        listing(f)
        for attr in ("version", "raw_bag_name", "creation_date"):
            if attr not in f.attrs:
                problems.append(f"{path}: missing root attribute {attr}")
        meta = json.loads(f["ouster/metadata"][()].decode() if "ouster/metadata" in f else "{}")
        fmt = meta.get("data_format", meta.get("lidar_data_format", {}))
        rows = fmt.get("pixels_per_column", 64)
        packets = fmt.get("columns_per_frame", 2048) // fmt.get("columns_per_packet", 16)
        slot = (16 + 12 * rows + 4) * fmt.get("columns_per_packet", 16) + 1
        data = expect(f, "ouster/data", "uint8", lzf=True)
        n = data.shape[0] if data is not None else 0
        if data is not None and data.shape[1:] != (packets, slot):
            problems.append(f"{path}: /ouster/data rows are {data.shape[1:]}, expected {(packets, slot)}")
        for name in ("ts_start", "ts_end"):
            expect(f, f"ouster/{name}", "int64", (n,), lzf=True)
        if "ouster/ts_start" in f and "ouster/ts_end" in f:
            start, end = f["ouster/ts_start"][:], f["ouster/ts_end"][:]
            if not (np.all(np.diff(start) > 0) and np.all(end > start)):
                problems.append(f"{path}: sweep times are not increasing")
        expect(f, "ouster/calib/T_to_prophesee_left", "float64", (4, 4))
        imu_ts = expect(f, "ovc/imu/ts", "int64")
        m = imu_ts.shape[0] if imu_ts is not None else 0
        expect(f, "ovc/imu/accel", "float64", (m, 3))
        expect(f, "ovc/imu/omega", "float64", (m, 3))
        expect(f, "ovc/imu/calib/T_to_prophesee_left", "float64", (4, 4))
        if "ovc/imu/accel" in f:
            nan_rows = int(np.isnan(f["ovc/imu/accel"][:]).any(axis=1).sum())
            print(f"imu rows {m} ({nan_rows} NaN)")
        if "ovc/rgb" in f:
            rgb = expect(f, "ovc/rgb/data", "uint8", lzf=True)
            k = rgb.shape[0] if rgb is not None else 0
            res = expect(f, "ovc/rgb/calib/resolution", "int64", (2,))
            if rgb is not None and res is not None:
                w, h = (int(v) for v in res[:])
                if rgb.shape[1:] != (h, w, 3) or rgb.chunks != (1, h, w, 3):
                    problems.append(f"{path}: /ovc/rgb/data is {rgb.shape} chunked {rgb.chunks}, expected (N, {h}, {w}, 3) in single images")
            ts = expect(f, "ovc/ts", "int64", (k,))
            if ts is not None and k > 1 and not np.all(np.diff(ts[:]) > 0):
                problems.append(f"{path}: /ovc/ts is not increasing")
            expect(f, "ovc/rgb/calib/intrinsics", "float64", (4,))
            expect(f, "ovc/rgb/calib/distortion_coeffs", "float64", (4,))
            expect(f, "ovc/rgb/calib/T_to_prophesee_left", "float64", (4, 4))
            for name in ("camera_model", "distortion_model"):
                if f"ovc/rgb/calib/{name}" not in f:
                    problems.append(f"{path}: missing /ovc/rgb/calib/{name}")
            print(f"rgb images {k}")
        if len(meta.get("beam_altitude_angles", [])) != rows:
            problems.append(f"{path}: metadata has {len(meta.get('beam_altitude_angles', []))} beam altitudes")
        return n


def check_pose(path, sweeps):
    with h5py.File(path, "r") as f:
        listing(f)
        poses = expect(f, "Ln_T_L0", "float64", (sweeps, 4, 4))
        expect(f, "Cn_T_C0", "float64", (sweeps, 4, 4))
        expect(f, "ts", "int64", (sweeps,))
        expect(f, "ts_map_prophesee_left", "uint64", (sweeps,))
        if poses is not None and sweeps and not np.allclose(poses[0], np.eye(4), atol=1e-12):
            problems.append(f"{path}: Ln_T_L0[0] is not the identity")


sweeps = check_data(sys.argv[1])
if len(sys.argv) > 2:
    check_pose(sys.argv[2], sweeps)
for p in problems:
    print(f"problem: {p}", file=sys.stderr)
if problems:
    sys.exit(1)
print("ok")
