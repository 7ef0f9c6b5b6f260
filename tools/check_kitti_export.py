#!/usr/bin/env python3
"""Independent checker for `boxlayer export kitti` output, against the shards it was made from.

Usage:
    python3 tools/check_kitti_export.py KITTI_DIR SHARDS_DIR [--all-boxes]

Labels are read back with the KITTI devkit / OpenPCDet conventions only (calibration.py rect_to_lidar,
box_utils.boxes3d_kitti_camera_to_lidar): the bottom centre goes through inv(R0_rect . Tr_velo_to_cam),
then z += h/2, heading = -(pi/2 + ry), size (l, w, h); nothing assumes the spec's permutation `Tr`
(docs/export.md states it; it is checked separately). Expected contents from docs/export.md
(`export kitti`) and docs/schema.md; nothing is taken from the Rust code. Needs numpy, pyarrow, Pillow.

Per line `NNNNNN platform sequence frame_index camera` of sample_map.txt:
  * calib: P0..P3 (12 numbers, all equal to P2), R0_rect (9, identity), Tr_velo_to_cam (12, the
    spec's axis permutation), Tr_imu_to_velo (12, identity); frames without cameras a nominal P2;
  * image_2: a PNG when the frame has cameras (its size bounds the image);
  * velodyne: float32 N x 4, finite, reflectance in [0, 1]; when the frame kept every point in the
    shards' points/, the same xyz (float32, exact, same order) and reflectance tanh(i) (Waymo) or
    min(i/255, 1);
  * label_2: 15 fields, type Car/Pedestrian/Cyclist/Misc; each label converted to the LiDAR frame
    matches the nearest-centre unused non-rejected shard box of the frame (x, y, z, l, w, h within
    1e-4, heading mod 2 pi within 1e-4, class); alpha = wrap(ry - atan2(x, z)); truncated in [0, 1];
    occluded from the box's camera occlusion; the 2D box inside the image and equal (1 px) to the
    clipped projection of the 8 corners through P2 . R0_rect . Tr_velo_to_cam when all are in front;
  * both directions: every shard box whose centre projects inside the image in front of the camera
    is labelled and no other (every non-rejected box with --all-boxes).
Also: sample numbers 000000.. in order of sorted sequences then frames; ImageSets/train.txt (+ val.txt) list them.
Prints each failure and `check_kitti_export: N samples passed, M failed`; exit 1 if M > 0 or N == 0.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import pyarrow.parquet as pq
from PIL import Image

TYPES = {"Car": "vehicle", "Pedestrian": "pedestrian", "Cyclist": "cyclist", "Misc": "unknown"}
PLATFORM_ALIASES = {"waymo": "vehicle", "quad": "quadruped"}
CALIB = {"P0": 12, "P1": 12, "P2": 12, "P3": 12, "R0_rect": 9, "Tr_velo_to_cam": 12, "Tr_imu_to_velo": 12}
PERM = np.array([[0, -1, 0, 0], [0, 0, -1, 0], [1, 0, 0, 0]], float)  # spec: x -> -y, y -> -z, z -> x
NOMINAL = (721.5377, 721.5377, 609.5593, 172.854)
TOL, EPS_PX, MIN_DEPTH = 1e-4, 1e-3, 0.01


def wrap(a):
    return (a + math.pi) % (2 * math.pi) - math.pi


def angle_diff(a, b):
    return abs(wrap(a - b))


def rot(yaw, pitch=0.0, roll=0.0):
    cy, sy, cp, sp, cr, sr = math.cos(yaw), math.sin(yaw), math.cos(pitch), math.sin(pitch), math.cos(roll), math.sin(roll)
    return (np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1.0]]) @ np.array([[cp, 0, sp], [0, 1.0, 0], [-sp, 0, cp]])
            @ np.array([[1.0, 0, 0], [0, cr, -sr], [0, sr, cr]]))


def corners(box):
    b = list(box) + [0.0] * (9 - len(box))
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
    return (signs * (np.array(b[3:6]) / 2.0)) @ rot(*b[6:9]).T + np.array(b[:3])


def hom(m34):
    return np.vstack([m34, [0, 0, 0, 1.0]])


def project(P, pts):
    """P (3x4) on (N, 3) points -> u, v, depth."""
    h = np.asarray(pts, float) @ P[:, :3].T + P[:, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        return h[:, 0] / h[:, 2], h[:, 1] / h[:, 2], h[:, 2]


def read_calib(path):
    out = {}
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if not line.strip():
            continue
        key, _, rest = line.partition(":")
        vals = [float(x) for x in rest.split()]
        if key.strip() in CALIB and len(vals) != CALIB[key.strip()]:
            raise ValueError(f"line {n}: {key.strip()} has {len(vals)} numbers, not {CALIB[key.strip()]}")
        out[key.strip()] = np.array(vals)
    missing = [k for k in CALIB if k not in out]
    if missing:
        raise ValueError(f"keys missing: {missing}")
    return {k: v.reshape(3, 3) if k == "R0_rect" else v.reshape(3, 4) for k, v in out.items() if k in CALIB}


def read_labels(path):
    labels = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        f = line.split()
        if not f:
            continue
        if len(f) != 15 or f[0] not in TYPES:
            raise ValueError(f"line {n}: {line.strip()!r} is not `type truncated occluded alpha x1 y1 x2 y2 h w l x y z ry` of a known type")
        v = [float(x) for x in f[1:]]
        if not all(math.isfinite(x) for x in v):
            raise ValueError(f"line {n}: non-finite number")
        labels.append({"type": f[0], "truncated": v[0], "occluded": v[1], "alpha": v[2], "bbox": v[3:7],
                       "h": v[7], "w": v[8], "l": v[9], "loc": np.array(v[10:13]), "ry": v[13], "line": n})
    return labels


class Shards:
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
        key = (PLATFORM_ALIASES.get(platform, platform), sequence)
        if key not in self.cache:
            if key not in self.dirs:
                raise ValueError(f"no shard folder with platform {key[0]!r} and sequence {sequence!r}")
            d, m = self.dirs[key]
            frames = {r["frame_index"]: r for r in pq.read_table(os.path.join(d, "frames.parquet")).to_pylist()}
            boxes = {}
            for r in pq.read_table(os.path.join(d, "boxes.parquet")).to_pylist():
                boxes.setdefault(r["frame_index"], []).append(r)
            self.cache[key] = {"dir": d, "frames": frames, "boxes": boxes, "waymo": str(m.get("source_kind", "")).startswith("waymo")}
        return self.cache[key]


def occluded_code(occ):
    return 3 if occ is None else 0 if occ < 0.25 else 1 if occ < 0.6 else 2


def check_sample(root, sid, platform, sequence, fi, camera, shards, args):
    errs = []
    seq = shards.get(platform, sequence)
    fr = seq["frames"].get(fi)
    if fr is None:
        return [f"shards: frame {fi} not in frames.parquet of {seq['dir']}"]
    cams = fr["cameras"] or []
    tr = os.path.join(root, "training")
    try:
        cal = read_calib(os.path.join(tr, "calib", f"{sid}.txt"))
    except Exception as e:  # noqa: BLE001  (a bad calib stops the sample)
        return [f"calib/{sid}.txt: {type(e).__name__}: {e}"]
    P2, R0, Tr = cal["P2"], cal["R0_rect"], cal["Tr_velo_to_cam"]
    for k in ("P0", "P1", "P3"):
        if np.max(np.abs(cal[k] - P2)) > 1e-9:
            errs.append(f"calib: {k} != P2")
    if np.max(np.abs(R0 - np.eye(3))) > 1e-9 or np.max(np.abs(Tr - PERM)) > 1e-9 or np.max(np.abs(cal["Tr_imu_to_velo"] - np.eye(3, 4))) > 1e-9:
        errs.append("calib: R0_rect not the identity, Tr_velo_to_cam not the spec's axis permutation or Tr_imu_to_velo not the identity")
    velo_to_rect = hom(np.hstack([R0, np.zeros((3, 1))])) @ hom(Tr)
    rect_to_velo = np.linalg.inv(velo_to_rect)
    P = P2 @ velo_to_rect  # lidar -> image_2
    size = None
    png = os.path.join(tr, "image_2", f"{sid}.png")
    if os.path.exists(png):
        try:
            with Image.open(png) as im:
                fmt, size = im.format, im.size
                im.load()
            if fmt != "PNG":
                errs.append(f"image_2/{sid}.png: a {fmt} file")
        except Exception as e:  # noqa: BLE001
            errs.append(f"image_2/{sid}.png: {type(e).__name__}: {e}")
    elif cams:
        errs.append(f"image_2/{sid}.png missing, the frame has cameras {cams}")
    if cams and camera not in cams:
        errs.append(f"camera {camera!r} not among the frame's cameras {cams}")
    if not cams and np.max(np.abs(P2[:, :3] - [[NOMINAL[0], 0, NOMINAL[2]], [0, NOMINAL[1], NOMINAL[3]], [0, 0, 1]])) > 1e-4:
        errs.append(f"calib: a frame without cameras, P2 {P2.tolist()} is not the nominal pinhole")

    # -- velodyne
    try:
        raw = open(os.path.join(tr, "velodyne", f"{sid}.bin"), "rb").read()
        if len(raw) % 16:
            raise ValueError(f"{len(raw)} bytes, not a multiple of 16")
        pts = np.frombuffer(raw, np.float32).reshape(-1, 4)
        if not np.all(np.isfinite(pts)) or np.any((pts[:, 3] < 0) | (pts[:, 3] > 1)):
            errs.append(f"velodyne/{sid}.bin: non-finite values or reflectance outside [0, 1]")
        if fr["points_file"] is not None and fr["num_points_kept"] == fr["num_points"]:
            t = pq.read_table(os.path.join(seq["dir"], fr["points_file"]), filters=[("frame_index", "=", fi)])
            sxyz = np.stack([t.column(c).to_numpy().astype(np.float32) for c in ("x_sensor_m", "y_sensor_m", "z_sensor_m")], 1)
            si = t.column("intensity").to_numpy().astype(np.float64)
            if sxyz.shape != pts[:, :3].shape or not np.array_equal(sxyz, pts[:, :3]):
                errs.append(f"velodyne/{sid}.bin: {len(pts)} points, not the {len(sxyz)} stored points of frame {fi} in order")
            elif np.any(np.abs(pts[:, 3] - (np.tanh(si) if seq["waymo"] else np.minimum(si / 255.0, 1.0))) > 1e-6):
                errs.append(f"velodyne/{sid}.bin: reflectance is not {'tanh(i)' if seq['waymo'] else 'min(i/255, 1)'} of the stored intensity")
    except Exception as e:  # noqa: BLE001
        errs.append(f"velodyne/{sid}.bin: {type(e).__name__}: {e}")

    # -- labels
    try:
        labels = read_labels(os.path.join(tr, "label_2", f"{sid}.txt"))
    except Exception as e:  # noqa: BLE001
        return errs + [f"label_2/{sid}.txt: {type(e).__name__}: {e}"]
    live = [b for b in seq["boxes"].get(fi, []) if b["review_status"] != "rejected"]
    sure, maybe = set(), set()
    for b in live:
        u, v, z = project(P, np.array([b["box_sensor"][:3]]))
        if args.all_boxes:
            sure.add(b["box_id"])
        elif size is not None:
            W, H = size
            if z[0] > MIN_DEPTH + 1e-6 and EPS_PX < u[0] < W - EPS_PX and EPS_PX < v[0] < H - EPS_PX:
                sure.add(b["box_id"])
            elif z[0] > -1e-6 and -EPS_PX <= u[0] <= W + EPS_PX and -EPS_PX <= v[0] <= H + EPS_PX:
                maybe.add(b["box_id"])
    used = set()
    for lab in labels:
        where = f"label_2/{sid}.txt line {lab['line']}"
        h, w, l, ry = lab["h"], lab["w"], lab["l"], lab["ry"]
        c = (rect_to_velo @ np.append(lab["loc"], 1.0))[:3]
        c[2] += h / 2.0
        heading = -(math.pi / 2 + ry)
        cand = [b for b in live if b["box_id"] not in used]
        if not cand:
            errs.append(f"{where}: no unused non-rejected shard box left in frame {fi}")
            continue
        b = min(cand, key=lambda b: float(np.sum((np.array(b["box_sensor"][:3]) - c) ** 2)))
        used.add(b["box_id"])
        bs = np.array(b["box_sensor"], float)
        d = np.abs(np.concatenate([c, [l, w, h]]) - bs[:6])
        if d.max() > TOL or angle_diff(heading, bs[6]) > TOL:
            errs.append(f"{where}: x,y,z,l,w,h,heading {np.round(np.concatenate([c, [l, w, h, heading]]), 5).tolist()} != nearest shard box {b['box_id']} {np.round(bs[:7], 5).tolist()}")
        if TYPES[lab["type"]] != b["class"]:
            errs.append(f"{where}: type {lab['type']}, shard box {b['box_id']} class {b['class']!r}")
        if not args.all_boxes and size is not None and b["box_id"] not in sure | maybe:
            errs.append(f"{where}: shard box {b['box_id']}'s centre does not project inside the image in front of the camera")
        if angle_diff(lab["alpha"], wrap(ry - math.atan2(lab["loc"][0], lab["loc"][2]))) > TOL or abs(ry) > math.pi + 1e-6:
            errs.append(f"{where}: alpha {lab['alpha']} != wrap(ry - atan2(x, z)) or ry {ry} outside [-pi, pi]")
        if not 0 <= lab["truncated"] <= 1:
            errs.append(f"{where}: truncated {lab['truncated']} outside [0, 1]")
        ent = [e for e in (b.get("cameras") or []) if e["camera"] == camera]
        if lab["occluded"] not in (0, 1, 2, 3) or (ent and lab["occluded"] != occluded_code(ent[0]["occlusion"])):
            errs.append(f"{where}: occluded {lab['occluded']}, the box's {camera} occlusion {ent[0]['occlusion'] if ent else None} gives {occluded_code(ent[0]['occlusion']) if ent else '0..3'}")
        x1, y1, x2, y2 = lab["bbox"]
        if size is None:
            continue
        W, H = size
        if not (-EPS_PX <= x1 <= x2 <= W + EPS_PX and -EPS_PX <= y1 <= y2 <= H + EPS_PX):
            errs.append(f"{where}: 2D box {lab['bbox']} not inside the {W}x{H} image")
        u, v, z = project(P, corners([*c, l, w, h, heading]))
        if np.all(z > 0):
            want = [min(max(u.min(), 0), W), min(max(v.min(), 0), H), min(max(u.max(), 0), W), min(max(v.max(), 0), H)]
            if np.max(np.abs(np.array(lab["bbox"]) - want)) > 1.0:
                u9, v9, _ = project(P, corners(bs))
                w9 = [min(max(u9.min(), 0), W), min(max(v9.min(), 0), H), min(max(u9.max(), 0), W), min(max(v9.max(), 0), H)]
                hint = " (it is the 9-dof shard box's projection: pitch/roll kept)" if np.max(np.abs(np.array(lab["bbox"]) - w9)) <= 1.0 else ""
                errs.append(f"{where}: 2D box {lab['bbox']}, the clipped projection of the label's corners is {np.round(want, 2).tolist()}{hint}")
    if sure - used:
        errs.append(f"label_2/{sid}.txt: {len(labels)} labels; shard boxes {sorted(sure - used)} {'(non-rejected)' if args.all_boxes else 'project inside the image'} but have no label")
    if args.all_boxes and len(labels) != len(live):
        errs.append(f"label_2/{sid}.txt: {len(labels)} labels, {len(live)} non-rejected shard boxes (--all-boxes)")
    if not args.all_boxes and size is None and labels:
        print(f"note {sid}: no image_2, so which boxes belong in the label file is not checked")
    return errs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kitti_dir", metavar="KITTI_DIR")
    ap.add_argument("shards_dir", metavar="SHARDS_DIR")
    ap.add_argument("--all-boxes", action="store_true", help="the export was written with --all-boxes")
    a = ap.parse_args()
    shards = Shards(a.shards_dir)
    passed = failed = 0
    other, samples = [], []
    smap = os.path.join(a.kitti_dir, "sample_map.txt")
    try:
        lines = open(smap, encoding="utf-8").read().splitlines()
    except Exception as e:  # noqa: BLE001
        lines = []
        other.append(f"FAIL {smap}: {type(e).__name__}: {e}")
    for n, line in enumerate(lines, 1):
        f = line.split()
        if not f:
            continue
        if len(f) != 5 or not (len(f[0]) == 6 and f[0].isdigit()) or not f[3].lstrip("-").isdigit():
            other.append(f"FAIL {smap} line {n}: {line!r} is not `NNNNNN platform sequence frame_index camera`")
            continue
        samples.append((f[0], f[1], f[2], int(f[3]), f[4]))
    ids = [s[0] for s in samples]
    if ids != [f"{i:06d}" for i in range(len(ids))]:
        other.append(f"FAIL {smap}: sample numbers are not 000000.. in order")
    keys = [(s[2], s[3]) for s in samples]
    if keys != sorted(keys) and [(s[1], s[2], s[3]) for s in samples] != sorted((s[1], s[2], s[3]) for s in samples):
        other.append(f"FAIL {smap}: samples are not in sorted sequence order, frame by frame")
    try:  # train.txt (the spec); a val.txt beside it (a --val split) takes its share of the ids
        sets = os.path.join(a.kitti_dir, "ImageSets")
        listed = [x.strip() for n in ("train.txt", "val.txt") if n == "train.txt" or os.path.exists(os.path.join(sets, n))
                  for x in open(os.path.join(sets, n), encoding="utf-8") if x.strip()]
        if sorted(listed) != sorted(ids):
            other.append(f"FAIL {sets}/train.txt (+ val.txt): list {len(listed)} ids, sample_map.txt {len(ids)} (or other ids, or an id twice)")
    except Exception as e:  # noqa: BLE001
        other.append(f"FAIL {a.kitti_dir}/ImageSets/train.txt: {type(e).__name__}: {e}")
    for sub, ext in (("velodyne", ".bin"), ("label_2", ".txt"), ("calib", ".txt"), ("image_2", ".png")):
        d = os.path.join(a.kitti_dir, "training", sub)
        extra = sorted(set(os.listdir(d)) - {i + ext for i in ids}) if os.path.isdir(d) else []
        if extra:
            other.append(f"FAIL {d}: files of no sample: {extra[:5]}")
    for sid, platform, sequence, fi, camera in samples:
        try:
            errs = check_sample(a.kitti_dir, sid, platform, sequence, fi, camera, shards, a)
        except Exception as e:  # noqa: BLE001  (a missing file or bad line is a failure, not a traceback)
            errs = [f"{type(e).__name__}: {e}"]
        for e in errs:
            print(f"FAIL {a.kitti_dir} sample {sid} ({platform}/{sequence} frame {fi}): {e}")
        failed += bool(errs)
        passed += not errs
    for e in other:
        print(e)
    print(f"check_kitti_export: {passed} samples passed, {failed} failed" + (f" (+ {len(other)} other failures)" if other else ""))
    sys.exit(1 if failed or other or passed == 0 else 0)


if __name__ == "__main__":
    main()
