#!/usr/bin/env python3
"""Independent checker for `boxlayer export 3eed` output, against the shards it was made from.

Usage:
    python3 tools/check_3eed_export.py EXPORT_DIR SHARDS_DIR [--seed N] [--crop fov|none] [--all-frames] [--images pinhole|log]

Conventions: docs/export.md (`export 3eed`), docs/schema.md and 3EED's loader (liuzengyun/3EED
src/joint_det_dataset.py, per m3ed-format.md B1/B3 and waymo-format.md §5); nothing from the Rust
code. Per view folder EXPORT_DIR/<drone|quad|waymo>/<sequence>/<NNNN>_<k>/:
  * the loader's read: lidar.bin float32 reshape(-1, 4) (Waymo: lidar.npy, numpy.load, == lidar.bin),
    16,384 indices from a seeded numpy Generator (with replacement when N < 16384), finite xyz;
    intensity in [0, 1];
  * meta_info.json: the spec's keys, E 4x4 rigid, K pinhole ([:3, :3]), distortion zeros, pose 4x4,
    paths relative to EXPORT_DIR naming this folder's files, folder = 4-digit frame index and view k
    (Waymo CameraName order - 1, else position in the frame's `cameras`); image.jpg decodes to image_size;
  * ground_info: class car/pedestrian/cyclist, bbox_3d of 7 (waymo) / 9 values, caption fields, all
    8 corners (geometric centre, R = Rz(yaw) Ry(pitch) Rx(roll)) at depth > 0.01, bbox_2d_proj ==
    the clipped min/max of the corners through K E (u = fx x/z + cx) within 1 px;
  * vs the shards (found by manifest.json platform/sequence; waymo -> vehicle, quad -> quadruped):
    same box_id in the frame, class (vehicle -> car), bbox_3d == box_sensor / box_normalized (1e-6),
    not rejected, track_id/score/review_status/flags, `others`; the target set both ways (non-rejected
    known-class boxes, corners at depth > 0.01, centre inside the image); timestamp; pose = first
    frame's export frame <- this frame's, from world_from_sensor (and normalized_from_sensor);
  * points, when coordinate_frame is sensor and the frame kept every point: each exported xyz is a
    stored float32 xyz with intensity tanh(i) (Waymo) / min(i/255, 1), and each stored point clearly
    inside the crop is exported; with the default crop every point projects inside the image.
Also splits/<platform>_{train,val}.txt: disjoint, together the exported sequences.
Prints each failure and `check_3eed_export: N views passed, M failed`; exit 1 if M > 0 or N == 0.
"""

import argparse
import json
import math
import os
import re
import sys

import numpy as np
import pyarrow.parquet as pq
from PIL import Image

PLATFORMS = {"waymo": "vehicle", "drone": "drone", "quad": "quadruped"}
CLASSES = {"vehicle": "car", "pedestrian": "pedestrian", "cyclist": "cyclist"}
WAYMO_CAMERAS = ["FRONT", "FRONT_LEFT", "FRONT_RIGHT", "SIDE_LEFT", "SIDE_RIGHT"]
NUM_POINTS, MIN_DEPTH, EPS = 16384, 0.01, 1e-6
EPS_PX = 1e-3  # boundary margin (px) for in-image decisions the checker cannot make exactly
ENTRY_KEYS = ["class", "bbox_3d", "bbox_2d_proj", "caption", "caption_zh", "attri", "attri_zh", "others",
              "others_num", "track_id", "box_id", "score", "review_status", "flags"]
META_KEYS = ["sequence_name", "frame_index", "camera", "coordinate_frame", "image_path", "lidar_path_proj",
             "image_extrinsic", "image_intrinsic", "camera_distortion", "image_size", "pose", "timestamp",
             "ground_info"]


def rot(yaw, pitch=0.0, roll=0.0):
    cy, sy, cp, sp, cr, sr = math.cos(yaw), math.sin(yaw), math.cos(pitch), math.sin(pitch), math.cos(roll), math.sin(roll)
    return (np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1.0]]) @ np.array([[cp, 0, sp], [0, 1.0, 0], [-sp, 0, cp]])
            @ np.array([[1.0, 0, 0], [0, cr, -sr], [0, sr, cr]]))


def corners(box):
    b = list(box) + [0.0] * (9 - len(box))
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
    return (signs * (np.array(b[3:6]) / 2.0)) @ rot(*b[6:9]).T + np.array(b[:3])


def project(E, K, pts):
    """-> (u, v, depth) of points (N, 3) through p_cam = E [p; 1] and the pinhole of K."""
    c = np.asarray(pts, float) @ E[:3, :3].T + E[:3, 3]
    z = c[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        return K[0, 0] * c[:, 0] / z + K[0, 2], K[1, 1] * c[:, 1] / z + K[1, 2], z


def in_view(u, v, z, W, H, s):
    """Depth > 0.01 and pixel inside the image; s = +1: clearly (by the margins), s = -1: allowing them."""
    return (z > MIN_DEPTH + s * EPS) & (u > s * EPS_PX) & (u < W - s * EPS_PX) & (v > s * EPS_PX) & (v < H - s * EPS_PX)


def mat(v, n, m, what):
    a = np.asarray(v, dtype=float)
    if a.ndim != 2 or a.shape[0] < n or a.shape[1] < m or not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: not a finite {n}x{m} matrix")
    return a


def mat4(v):
    return np.asarray(v, float).reshape(4, 4)

def float_keys(xyz):
    """Rows of float32 xyz as hashable bytes (-0.0 made +0.0)."""
    a = np.ascontiguousarray(np.asarray(xyz, np.float32) + np.float32(0.0))
    return [r.tobytes() for r in a]


class Shards:
    """Shard sequence folders under a root, found by their manifest.json (platform, sequence)."""

    def __init__(self, root):
        self.dirs, self.cache = {}, {}
        for d, subdirs, files in os.walk(root):
            subdirs[:] = [s for s in subdirs if not s.endswith(".partial") and s != "points"]
            if "manifest.json" in files:
                try:
                    m = json.load(open(os.path.join(d, "manifest.json"), encoding="utf-8"))
                    self.dirs[(m["platform"], m["sequence"])] = (d, m)
                except Exception as e:  # noqa: BLE001
                    print(f"note {d}/manifest.json: unreadable ({e}); folder ignored")

    def get(self, platform, sequence):
        key = (platform, sequence)
        if key not in self.cache:
            if key not in self.dirs:
                raise ValueError(f"no shard folder with platform {platform!r} and sequence {sequence!r}")
            d, m = self.dirs[key]
            frames = {r["frame_index"]: r for r in pq.read_table(os.path.join(d, "frames.parquet")).to_pylist()}
            boxes = {}
            for r in pq.read_table(os.path.join(d, "boxes.parquet")).to_pylist():
                boxes.setdefault(r["frame_index"], []).append(r)
            self.cache[key] = {"dir": d, "frames": frames, "boxes": boxes, "first": frames[min(frames)] if frames else None,
                               "waymo": str(m.get("source_kind", "")).startswith("waymo")}
        return self.cache[key]

    @staticmethod
    def points(seq, frame):
        t = pq.read_table(os.path.join(seq["dir"], frame["points_file"]), filters=[("frame_index", "=", frame["frame_index"])])
        xyz = np.stack([t.column(c).to_numpy() for c in ("x_sensor_m", "y_sensor_m", "z_sensor_m")], axis=1)
        return xyz.astype(np.float32), t.column("intensity").to_numpy().astype(np.float64)


def check_view(export_dir, pdir, seqname, name, shards, args):
    """Returns a list of failure strings for one view folder."""
    errs = []
    folder = os.path.join(export_dir, pdir, seqname, name)
    m = re.fullmatch(r"(\d{4,})_(\d+)", name)
    if not m:
        return [f"folder name {name!r} is not <NNNN>_<k>"]
    fi, k = int(m.group(1)), int(m.group(2))
    if m.group(1) != f"{fi:04d}":
        errs.append(f"frame part {m.group(1)!r} is not the index zero-padded to 4 digits")
    # -- points, as the loader reads them
    pts = None
    try:
        raw = open(os.path.join(folder, "lidar.bin"), "rb").read()
        if len(raw) % 16:
            raise ValueError(f"{len(raw)} bytes, not a multiple of 16 (float32 x4)")
        pts = np.frombuffer(raw, dtype=np.float32).reshape(-1, 4)
        if pdir == "waymo":
            npy = np.load(os.path.join(folder, "lidar.npy"))
            if npy.dtype != np.float32 or npy.ndim != 2 or npy.shape[1] != 4 or not np.array_equal(npy, pts):
                errs.append(f"lidar.npy ({npy.dtype}, {npy.shape}) is not lidar.bin's float32 {pts.shape} array")
        n = len(pts)
        if n == 0:
            errs.append("lidar.bin: no points (the loader cannot sample 16,384 from none)")
        elif not np.all(np.isfinite(pts[np.random.default_rng(args.seed).choice(n, NUM_POINTS, replace=n < NUM_POINTS), :3])):
            errs.append("lidar.bin: the loader's 16,384 sampled xyz hold non-finite values")
        if not np.all(np.isfinite(pts)):
            errs.append(f"lidar.bin: {int(np.sum(~np.isfinite(pts).all(axis=1)))} rows with non-finite values")
        if np.any((pts[:, 3] < 0) | (pts[:, 3] > 1)):
            errs.append(f"lidar.bin: {int(np.sum((pts[:, 3] < 0) | (pts[:, 3] > 1)))} intensities outside [0, 1]")
    except Exception as e:  # noqa: BLE001
        errs, pts = errs + [f"lidar: {type(e).__name__}: {e}"], None
    # -- meta_info.json
    try:
        meta = json.load(open(os.path.join(folder, "meta_info.json"), encoding="utf-8"))
    except Exception as e:  # noqa: BLE001
        return errs + [f"meta_info.json: {type(e).__name__}: {e}"]
    if [key for key in META_KEYS if key not in meta]:
        return errs + [f"meta_info.json: keys missing: {[key for key in META_KEYS if key not in meta]}"]
    try:
        E = mat(meta["image_extrinsic"], 4, 4, "image_extrinsic")
        K = mat(meta["image_intrinsic"], 3, 3, "image_intrinsic")[:3, :3]
        pose = mat(meta["pose"], 4, 4, "pose")
        W, H = (int(x) for x in meta["image_size"])
        dist = [float(x) for x in meta["camera_distortion"]]
    except Exception as e:  # noqa: BLE001
        return errs + [f"meta_info.json: {e}"]
    if E.shape != (4, 4) or pose.shape != (4, 4):
        return errs + ["image_extrinsic / pose: not 4x4"]
    R = E[:3, :3]
    if np.max(np.abs(R @ R.T - np.eye(3))) > 1e-6 or abs(np.linalg.det(R) - 1) > 1e-6 or np.any(np.abs(E[3] - [0, 0, 0, 1]) > 0):
        errs.append("image_extrinsic: not a rigid transform (R orthonormal, det 1, last row 0 0 0 1)")
    if K[0, 0] <= 0 or K[1, 1] <= 0 or np.any(np.abs(K[2] - [0, 0, 1]) > 0):
        errs.append(f"image_intrinsic: not a pinhole K: {K.tolist()}")
    if args.images == "pinhole" and dist != [0.0] * 5:
        errs.append(f"camera_distortion {dist}: the images are undistorted, so [0, 0, 0, 0, 0]")
    if args.images == "log" and (len(dist) not in (4, 5) or not all(np.isfinite(dist))):
        errs.append(f"camera_distortion {dist}: the lens' 5 (radtan) or 4 (fisheye) coefficients expected")
    if (meta["sequence_name"], meta["frame_index"]) != (seqname, fi):
        errs.append(f"sequence_name, frame_index {meta['sequence_name']!r}, {meta['frame_index']} but the folder is {seqname!r}, {fi}")
    cf = meta["coordinate_frame"]
    if cf not in ("sensor", "normalized"):
        errs.append(f"coordinate_frame {cf!r}")
    for key, allowed in (("image_path", ["image.jpg"]), ("lidar_path_proj", ["lidar.bin", "lidar.npy"])):
        p = os.path.normpath(os.path.join(export_dir, str(meta[key])))
        if os.path.isabs(str(meta[key])) or p not in [os.path.normpath(os.path.join(folder, a)) for a in allowed]:
            errs.append(f"{key} {meta[key]!r} does not name this folder's {' or '.join(allowed)} relative to the export")
    try:
        with Image.open(os.path.join(folder, "image.jpg")) as im:
            fmt, size = im.format, im.size
            im.load()
        if fmt != "JPEG" or size != (W, H):
            errs.append(f"image.jpg: {fmt} {size}, meta image_size {[W, H]}")
    except Exception as e:  # noqa: BLE001
        errs.append(f"image.jpg: {type(e).__name__}: {e}")
    # -- ground_info, geometry only
    gi = meta["ground_info"]
    if not isinstance(gi, list):
        return errs + ["ground_info: not a list"]
    if not gi and not args.all_frames:
        errs.append("ground_info is empty (the default export drops views without targets)")
    nval = 7 if pdir == "waymo" else 9
    for j, g in enumerate(gi):
        where = f"ground_info[{j}]"
        miss = [key for key in ENTRY_KEYS if key not in g] if isinstance(g, dict) else ENTRY_KEYS
        if miss:
            errs.append(f"{where}: keys missing: {miss}")
            continue
        if g["class"] not in CLASSES.values():
            errs.append(f"{where}: class {g['class']!r}")
        b = g["bbox_3d"]
        if not isinstance(b, list) or len(b) != nval or not all(isinstance(x, (int, float)) for x in b):
            errs.append(f"{where}: bbox_3d {b!r} is not {nval} numbers")
            continue
        u, v, z = project(E, K, corners(b))
        if np.any(z <= MIN_DEPTH - EPS):
            errs.append(f"{where}: a corner at depth {z.min():.4g} m (a target's corners lie at depth > {MIN_DEPTH})")
            continue
        want = [max(0.0, min(W, u.min())), max(0.0, min(H, v.min())), max(0.0, min(W, u.max())), max(0.0, min(H, v.max()))]
        got = g["bbox_2d_proj"]
        if not isinstance(got, list) or len(got) != 4 or np.max(np.abs(np.array(got, float) - want)) > 1.0:
            errs.append(f"{where}: bbox_2d_proj {got} but the clipped corner projection is {np.round(want, 2).tolist()}")
        if g["others_num"] != len(g["others"]) or any(not isinstance(o, dict) or {"class", "bbox_3d_other", "track_id"} - set(o) for o in g["others"]):
            errs.append(f"{where}: others_num {g['others_num']} / others entries without class, bbox_3d_other, track_id")
    # -- against the shards
    try:
        seq = shards.get(PLATFORMS[pdir], seqname)
    except Exception as e:  # noqa: BLE001
        return errs + [f"shards: {e}"]
    fr = seq["frames"].get(fi)
    if fr is None:
        return errs + [f"shards: frame {fi} not in frames.parquet of {seq['dir']}"]
    if meta["timestamp"] != fr["timestamp_us"]:
        errs.append(f"timestamp {meta['timestamp']} != shard timestamp_us {fr['timestamp_us']}")
    cams = fr["cameras"] or []
    cam = meta["camera"]
    want_k = WAYMO_CAMERAS.index(cam) if cam in WAYMO_CAMERAS else (cams.index(cam) if cam in cams else None)
    if cam not in cams:
        errs.append(f"camera {cam!r} not among the frame's cameras {cams}")
    elif want_k != k:
        errs.append(f"view k = {k}, camera {cam!r} gives {want_k}")
    first = seq["first"]
    try:
        if cf == "normalized":
            if fr["normalized_from_sensor"] is None or first["normalized_from_sensor"] is None:
                raise ValueError("coordinate_frame normalized but the shards hold no normalized_from_sensor")
            want = mat4(first["normalized_from_sensor"]) @ np.linalg.inv(mat4(first["world_from_sensor"])) @ mat4(fr["world_from_sensor"]) @ np.linalg.inv(mat4(fr["normalized_from_sensor"]))
        else:
            want = np.linalg.inv(mat4(first["world_from_sensor"])) @ mat4(fr["world_from_sensor"])
        if np.max(np.abs(want - pose)) > 1e-5:
            errs.append(f"pose is not frame {first['frame_index']}'s export frame <- this frame's (max diff {np.max(np.abs(want - pose)):.3g})")
    except Exception as e:  # noqa: BLE001
        errs.append(f"pose: {e}")
    col = "box_normalized" if cf == "normalized" else "box_sensor"
    live = [b for b in seq["boxes"].get(fi, []) if b["review_status"] != "rejected"]
    by_id = {b["box_id"]: b for b in seq["boxes"].get(fi, [])}
    got_ids = []
    for j, g in enumerate(gi):
        if not isinstance(g, dict) or any(key not in g for key in ENTRY_KEYS):
            continue
        where = f"ground_info[{j}] (box_id {g['box_id']})"
        b = by_id.get(g["box_id"])
        if b is None:
            errs.append(f"{where}: no shard box with this box_id in frame {fi}")
            continue
        got_ids.append(b["box_id"])
        if b["review_status"] == "rejected":
            errs.append(f"{where}: the shard box is rejected")
        if CLASSES.get(b["class"]) != g["class"]:
            errs.append(f"{where}: class {g['class']!r}, shard class {b['class']!r}")
        ref = b[col]
        if ref is None:
            errs.append(f"{where}: shard {col} is null")
        elif len(g["bbox_3d"]) == nval and np.max(np.abs(np.array(g["bbox_3d"], float) - ref[:nval])) > 1e-6:
            errs.append(f"{where}: bbox_3d {g['bbox_3d']} != shard {col} {ref[:nval]}")
        for key in ("track_id", "review_status", "flags"):
            if g[key] != b[key]:
                errs.append(f"{where}: {key} {g[key]!r} != shard {b[key]!r}")
        if not isinstance(g["score"], (int, float)) or abs(g["score"] - b["score"]) > 1e-9:
            errs.append(f"{where}: score {g['score']!r} != shard {b['score']}")
        others = sorted(o.get("track_id") for o in g["others"] if isinstance(o, dict))
        want_o = sorted(o["track_id"] for o in live if o["box_id"] != b["box_id"])
        if others != want_o:
            errs.append(f"{where}: others track_ids {others}, the frame's other non-rejected boxes {want_o}")
    if len(set(got_ids)) != len(got_ids):
        errs.append("ground_info lists a box twice")
    sure, maybe = set(), set()  # targets for certain / within the boundary margins
    for b in live:
        if b["class"] not in CLASSES or b[col] is None:
            continue
        _, _, zc = project(E, K, corners(b[col]))
        u, v, z = project(E, K, np.array([b[col][:3]]))
        z[0] = min(z[0], zc.min())
        (sure if in_view(u, v, z, W, H, 1)[0] else maybe if in_view(u, v, z, W, H, -1)[0] else set()).add(b["box_id"])
    if sure - set(got_ids):
        errs.append(f"targets missing from ground_info: box_ids {sorted(sure - set(got_ids))}")
    if set(got_ids) - sure - maybe:
        errs.append(f"ground_info lists non-targets (corner behind the camera or centre outside the image): box_ids {sorted(set(got_ids) - sure - maybe)}")
    # -- points against the stored points and the crop
    if pts is None or len(pts) == 0:
        return errs
    u, v, z = project(E, K, pts[:, :3].astype(np.float64))
    if args.crop == "fov":
        out = ~in_view(u, v, z, W, H, -1)
        if out.any():
            errs.append(f"lidar.bin: {int(out.sum())} of {len(pts)} points outside the camera's view (depth <= 0.01 or pixel outside the image)")
    if cf != "sensor" or fr["points_file"] is None or fr["num_points_kept"] != fr["num_points"]:
        return errs
    try:
        sxyz, sint = Shards.points(seq, fr)
    except Exception as e:  # noqa: BLE001
        return errs + [f"shards: points of frame {fi} unreadable: {e}"]
    stored = dict(zip(float_keys(sxyz), sint))
    keys = float_keys(pts[:, :3])
    hit = np.array([key in stored for key in keys], bool)
    if not hit.all():
        j = int(np.flatnonzero(~hit)[0])
        errs.append(f"lidar.bin: {int((~hit).sum())} of {len(pts)} points are not stored points of frame {fi} (e.g. row {j}: {pts[j, :3].tolist()})")
    if hit.any():
        si = np.array([stored[key] for key, h in zip(keys, hit) if h])
        want = np.tanh(si) if seq["waymo"] else np.minimum(si / 255.0, 1.0)
        bad = np.abs(pts[hit, 3] - want) > 1e-6
        if bad.any():
            errs.append(f"lidar.bin: {int(bad.sum())} intensities are not {'tanh(i)' if seq['waymo'] else 'min(i/255, 1)'} of the stored intensity")
    need = in_view(*project(E, K, sxyz.astype(np.float64)), W, H, 1) if args.crop == "fov" else np.ones(len(sxyz), bool)
    have = set(keys)
    lost = sum(1 for key, n in zip(float_keys(sxyz), need) if n and key not in have)
    if lost:
        errs.append(f"lidar.bin: {lost} stored points of frame {fi} {'inside the camera view ' if args.crop == 'fov' else ''}are not exported")
    return errs


def check_splits(export_dir, pdir, seqs):
    errs, lists = [], {}
    for part in ("train", "val"):
        p = os.path.join(export_dir, "splits", f"{pdir}_{part}.txt")
        try:
            lists[part] = {ln.strip() for ln in open(p, encoding="utf-8") if ln.strip()}
        except Exception as e:  # noqa: BLE001
            errs.append(f"FAIL {p}: {type(e).__name__}: {e}")
            lists[part] = set()
    where = f"FAIL {export_dir}/splits/{pdir}_*.txt"
    if lists["train"] & lists["val"]:
        errs.append(f"{where}: sequences in both train and val: {sorted(lists['train'] & lists['val'])}")
    if not errs and lists["train"] | lists["val"] != set(seqs):
        errs.append(f"{where}: list {sorted(lists['train'] | lists['val'])}, exported sequences are {sorted(seqs)}")
    return errs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export_dir", metavar="EXPORT_DIR")
    ap.add_argument("shards_dir", metavar="SHARDS_DIR")
    ap.add_argument("--seed", type=int, default=0, help="seed of the loader's 16,384-point sampling (default 0)")
    ap.add_argument("--crop", choices=["fov", "none"], default="fov", help="the export's --crop (default: the FOV crop)")
    ap.add_argument("--all-frames", action="store_true", help="the export was written with --all-frames")
    ap.add_argument("--images", choices=["pinhole", "log"], default="pinhole",
                    help="the export's --images: pinhole images carry zero distortion, the log's their lens'")
    a = ap.parse_args()
    shards = Shards(a.shards_dir)
    passed = failed = 0
    other = []
    for pdir in sorted(PLATFORMS):
        proot = os.path.join(a.export_dir, pdir)
        if not os.path.isdir(proot):
            continue
        seqs = sorted(s for s in os.listdir(proot) if os.path.isdir(os.path.join(proot, s)))
        other += check_splits(a.export_dir, pdir, seqs)
        for s in seqs:
            for name in sorted(os.listdir(os.path.join(proot, s))):
                if not os.path.isdir(os.path.join(proot, s, name)):
                    continue
                try:
                    errs = check_view(a.export_dir, pdir, s, name, shards, a)
                except Exception as e:  # noqa: BLE001  (bad data must not hide the report)
                    errs = [f"a check could not run: {type(e).__name__}: {e}"]
                print("".join(f"FAIL {os.path.join(a.export_dir, pdir, s, name)}: {e}\n" for e in errs), end="")
                failed, passed = failed + bool(errs), passed + (not errs)
    print("".join(e + "\n" for e in other), end="")
    print(f"check_3eed_export: {passed} views passed, {failed} failed" + (f" (+ {len(other)} split failures)" if other else ""))
    sys.exit(1 if failed or other or passed == 0 else 0)


if __name__ == "__main__":
    main()
