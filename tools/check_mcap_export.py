"""Checks a `boxlayer export mcap` file against the sequence folder it was exported from, with the
PyPI `mcap` reader, pyarrow and numpy only (no boxlayer code):

- the channel list: `/lidar/points` (foxglove.PointCloud), `/boxes` (foxglove.SceneUpdate), `/tf`
  (foxglove.FrameTransform), `/pose` (foxglove.PoseInFrame) and, when exported with the log,
  `/camera/<NAME>/image` (foxglove.CompressedImage) and `/camera/<NAME>/calibration`
  (foxglove.CameraCalibration) for every camera `frames.parquet` names; `jsonschema` schemas,
  `json` messages;
- message counts per topic: one point cloud, one SceneUpdate (with one entity per box row of the
  frame), one pose per frame; per frame a world→sensor transform, a sensor→normalized one where the
  frame has `normalized_from_sensor`, and with the log one per camera; one image and one
  calibration per camera per frame that lists it; log times = frame timestamps (ns);
- one frame's boxes (`--frame N`, default the frame with the most boxes): each cube's position,
  orientation (R = Rz(yaw)·Ry(pitch)·Rx(roll), as a quaternion up to sign) and size (l, w, h) equal
  the `box_sensor` (or `box_normalized`) row of its track to 1e-6; that frame's `/pose` and
  world→sensor transform equal `world_from_sensor`;
- every point cloud: x, y, z, intensity float32 with a 16-byte stride, and as many points as
  `num_points_kept` (exported from stored points) or `num_points` (from the log); with stored points
  in the sensor frame, frame N's points equal the stored ones.

Which frame and point source the file was written with is read from its `boxlayer` metadata record;
`--expect-log yes|no` and `--expect-frame sensor|normalized` make the check insist on them.

Usage: python3 tools/check_mcap_export.py OUT.mcap SEQUENCE_DIR [--frame N] [--expect-log yes|no]
       [--expect-frame sensor|normalized]
Prints `check_mcap_export: ok (...)` and exits 0, or exits 1 naming each mismatch.
"""
import argparse
import base64
import json
import os
import re
import sys

try:
    import numpy as np
    import pyarrow.parquet as pq
    from mcap.reader import make_reader
except ImportError as e:  # the Rust test runs this script: say what to install
    sys.exit(f"check_mcap_export.py needs mcap, pyarrow and numpy ({e}); pip install -r tools/requirements-test.txt")

TOL = 1e-6
FLOAT32 = 7


def rot(yaw, pitch, roll):
    cy, sy, cp, sp, cr, sr = np.cos(yaw), np.sin(yaw), np.cos(pitch), np.sin(pitch), np.cos(roll), np.sin(roll)
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    return rz @ ry @ rx


def quat_matrix(q):
    """Rotation matrix of a unit quaternion dict {x, y, z, w}."""
    x, y, z, w = (float(q[k]) for k in ("x", "y", "z", "w"))
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def vec(v):
    return np.array([float(v["x"]), float(v["y"]), float(v["z"])])


def camera_topic(name):
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mcap")
    ap.add_argument("sequence_dir")
    ap.add_argument("--frame", type=int, default=None, help="frame index whose boxes are compared")
    ap.add_argument("--expect-log", choices=["yes", "no"], default=None)
    ap.add_argument("--expect-frame", choices=["sensor", "normalized"], default=None)
    args = ap.parse_args()
    errs = []

    d = args.sequence_dir
    frames = sorted(pq.read_table(os.path.join(d, "frames.parquet")).to_pylist(), key=lambda r: r["frame_index"])
    boxes = {}
    for r in pq.read_table(os.path.join(d, "boxes.parquet")).to_pylist():
        boxes.setdefault(r["frame_index"], []).append(r)
    by_time = {r["timestamp_us"] * 1000: r for r in frames}

    # -- read the file
    channels, counts, msgs = {}, {}, {}
    metadata = {}
    with open(args.mcap, "rb") as f:
        reader = make_reader(f)
        for m in reader.iter_metadata():
            metadata[m.name] = dict(m.metadata)
        summary = reader.get_summary()
        for ch in summary.channels.values():
            s = summary.schemas.get(ch.schema_id)
            channels[ch.topic] = (s.name if s else None, s.encoding if s else None, ch.message_encoding)
            if s is not None:
                try:
                    schema = json.loads(bytes(s.data))
                    if schema.get("title") != s.name:
                        errs.append(f"schema {s.name}: JSON Schema title {schema.get('title')!r}")
                except ValueError as e:
                    errs.append(f"schema {s.name}: not JSON ({e})")
        for schema, channel, message in reader.iter_messages(log_time_order=True):
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            try:
                value = json.loads(message.data)
            except ValueError as e:
                errs.append(f"{channel.topic} at {message.log_time}: not JSON ({e})")
                continue
            msgs.setdefault(channel.topic, []).append((message.log_time, value))

    meta = metadata.get("boxlayer")
    if meta is None:
        errs.append("no `boxlayer` metadata record")
        meta = {}
    frame_kind = meta.get("frame", "sensor")
    with_log = meta.get("points") == "log"
    if args.expect_frame and frame_kind != args.expect_frame:
        errs.append(f"metadata frame {frame_kind!r}, expected {args.expect_frame!r}")
    if args.expect_log and with_log != (args.expect_log == "yes"):
        errs.append(f"metadata points {meta.get('points')!r}, expected {'log' if args.expect_log == 'yes' else 'stored'}")
    frame_id = frame_kind
    column = "box_sensor" if frame_kind == "sensor" else "box_normalized"

    # -- channel list
    expected = {
        "/lidar/points": "foxglove.PointCloud",
        "/boxes": "foxglove.SceneUpdate",
        "/tf": "foxglove.FrameTransform",
        "/pose": "foxglove.PoseInFrame",
    }
    cameras = sorted({c for r in frames for c in (r["cameras"] or [])})
    if with_log:
        for c in cameras:
            expected[f"/camera/{camera_topic(c)}/image"] = "foxglove.CompressedImage"
            expected[f"/camera/{camera_topic(c)}/calibration"] = "foxglove.CameraCalibration"
    for topic, schema in expected.items():
        if topic not in channels:
            errs.append(f"channel {topic}: missing")
        elif channels[topic] != (schema, "jsonschema", "json"):
            errs.append(f"channel {topic}: {channels[topic]}, expected ({schema}, jsonschema, json)")
    for topic in channels:
        if topic not in expected:
            errs.append(f"channel {topic}: not expected")

    # -- counts
    n = len(frames)
    normalized = sum(1 for r in frames if r["normalized_from_sensor"] is not None)
    camera_views = sum(len(r["cameras"] or []) for r in frames) if with_log else 0
    want = {"/lidar/points": n, "/boxes": n, "/pose": n, "/tf": n + normalized + camera_views}
    if with_log:
        for c in cameras:
            k = sum(1 for r in frames if c in (r["cameras"] or []))
            want[f"/camera/{camera_topic(c)}/image"] = k
            want[f"/camera/{camera_topic(c)}/calibration"] = k
    for topic, k in want.items():
        if counts.get(topic, 0) != k:
            errs.append(f"{topic}: {counts.get(topic, 0)} messages, expected {k}")
    for topic, items in msgs.items():
        stray = sorted({t for t, _ in items if t not in by_time})
        if stray:
            errs.append(f"{topic}: log times {stray[:3]} match no frame timestamp")
    for topic in ("/lidar/points", "/boxes", "/pose"):
        times = sorted(t for t, _ in msgs.get(topic, []))
        if times != sorted(by_time):
            errs.append(f"{topic}: log times are not one per frame timestamp")

    # -- boxes per frame
    for t, update in msgs.get("/boxes", []):
        row = by_time.get(t)
        if row is None:
            continue
        rows = boxes.get(row["frame_index"], [])
        entities = update.get("entities", [])
        if len(entities) != len(rows):
            errs.append(f"frame {row['frame_index']}: {len(entities)} entities, {len(rows)} box rows")
        if sorted(e.get("id") for e in entities) != sorted(str(b["track_id"]) for b in rows):
            errs.append(f"frame {row['frame_index']}: entity ids are not the frame's track ids")

    # -- one frame's box poses
    fi = args.frame
    if fi is None:
        fi = max(frames, key=lambda r: (len(boxes.get(r["frame_index"], [])), -r["frame_index"]))["frame_index"]
    frow = next((r for r in frames if r["frame_index"] == fi), None)
    compared = 0
    if frow is None:
        errs.append(f"--frame {fi}: no such frame in frames.parquet")
    else:
        t = frow["timestamp_us"] * 1000
        updates = [u for tt, u in msgs.get("/boxes", []) if tt == t]
        rows = {str(b["track_id"]): b for b in boxes.get(fi, [])}
        for u in updates[:1]:
            for e in u.get("entities", []):
                b = rows.get(e.get("id"))
                if b is None:
                    errs.append(f"frame {fi}: entity {e.get('id')!r} has no box row")
                    continue
                box = b[column]
                if box is None:
                    errs.append(f"frame {fi} track {e['id']}: {column} is null")
                    continue
                box = np.array(box, float)
                if e.get("frame_id") != frame_id:
                    errs.append(f"frame {fi} track {e['id']}: frame_id {e.get('frame_id')!r}, expected {frame_id!r}")
                cubes = e.get("cubes", [])
                if len(cubes) != 1:
                    errs.append(f"frame {fi} track {e['id']}: {len(cubes)} cubes")
                    continue
                c = cubes[0]
                pos, size = vec(c["pose"]["position"]), vec(c["size"])
                r_got = quat_matrix(c["pose"]["orientation"])
                r_want = rot(*box[6:9])
                if np.max(np.abs(pos - box[0:3])) > TOL:
                    errs.append(f"frame {fi} track {e['id']}: position {pos.tolist()} != {box[0:3].tolist()}")
                if np.max(np.abs(size - box[3:6])) > TOL:
                    errs.append(f"frame {fi} track {e['id']}: size {size.tolist()} != {box[3:6].tolist()}")
                if np.max(np.abs(r_got - r_want)) > TOL:
                    errs.append(f"frame {fi} track {e['id']}: orientation differs from yaw/pitch/roll {box[6:9].tolist()}")
                q = c["pose"]["orientation"]
                if abs(sum(float(q[k]) ** 2 for k in "xyzw") - 1.0) > TOL:
                    errs.append(f"frame {fi} track {e['id']}: orientation is not a unit quaternion")
                colour = c.get("color", {})
                if not all(0.0 <= float(colour.get(k, -1)) <= 1.0 for k in "rgba"):
                    errs.append(f"frame {fi} track {e['id']}: colour {colour} outside 0..1")
                compared += 1
        # the sensor pose of that frame
        world = np.array(frow["world_from_sensor"], float).reshape(4, 4)
        for tt, p in msgs.get("/pose", []):
            if tt == t:
                if p.get("frame_id") != "world":
                    errs.append(f"frame {fi}: /pose frame_id {p.get('frame_id')!r}")
                if np.max(np.abs(vec(p["pose"]["position"]) - world[:3, 3])) > TOL or \
                        np.max(np.abs(quat_matrix(p["pose"]["orientation"]) - world[:3, :3])) > TOL:
                    errs.append(f"frame {fi}: /pose differs from world_from_sensor")
        tfs = [m for tt, m in msgs.get("/tf", []) if tt == t and m.get("child_frame_id") == "sensor"]
        if len(tfs) != 1 or tfs[0].get("parent_frame_id") != "world":
            errs.append(f"frame {fi}: {len(tfs)} world→sensor transforms")
        elif np.max(np.abs(vec(tfs[0]["translation"]) - world[:3, 3])) > TOL or \
                np.max(np.abs(quat_matrix(tfs[0]["rotation"]) - world[:3, :3])) > TOL:
            errs.append(f"frame {fi}: world→sensor transform differs from world_from_sensor")

    # -- point clouds
    clouds = 0
    for t, cloud in msgs.get("/lidar/points", []):
        row = by_time.get(t)
        if row is None:
            continue
        fields = [(f.get("name"), f.get("offset"), f.get("type")) for f in cloud.get("fields", [])]
        if fields != [("x", 0, FLOAT32), ("y", 4, FLOAT32), ("z", 8, FLOAT32), ("intensity", 12, FLOAT32)] \
                or cloud.get("point_stride") != 16:
            errs.append(f"frame {row['frame_index']}: point fields {fields}, stride {cloud.get('point_stride')}")
            continue
        if cloud.get("frame_id") != frame_id:
            errs.append(f"frame {row['frame_index']}: point cloud frame_id {cloud.get('frame_id')!r}")
        data = base64.b64decode(cloud.get("data", ""), validate=True)
        if len(data) % 16:
            errs.append(f"frame {row['frame_index']}: {len(data)} bytes of points, not a multiple of 16")
            continue
        count = len(data) // 16
        want_count = row["num_points"] if with_log else row["num_points_kept"]
        if count != want_count:
            errs.append(f"frame {row['frame_index']}: {count} points, expected {want_count} "
                        f"({'num_points' if with_log else 'num_points_kept'})")
        if (row["frame_index"] == fi and not with_log and frame_kind == "sensor" and row["points_file"]
                and count == want_count):
            pts = np.frombuffer(data, dtype="<f4").reshape(-1, 4)
            t_ = pq.read_table(os.path.join(d, row["points_file"]), filters=[("frame_index", "=", fi)])
            stored = np.stack([t_.column(c).to_numpy() for c in ("x_sensor_m", "y_sensor_m", "z_sensor_m")], axis=1)
            a = np.unique(pts[:, :3].astype(np.float32), axis=0)
            b = np.unique(stored.astype(np.float32), axis=0)
            if a.shape != b.shape or not np.array_equal(a, b):
                errs.append(f"frame {fi}: points differ from the stored points")
        clouds += 1

    if errs:
        for e in errs:
            print(f"MISMATCH {e}")
        print(f"check_mcap_export: {len(errs)} mismatches")
        sys.exit(1)
    print(f"check_mcap_export: ok ({len(channels)} channels, {sum(counts.values())} messages, {n} frames, "
          f"{compared} boxes compared at frame {fi}, {clouds} point clouds, points from "
          f"{'log' if with_log else 'stored'}, frame {frame_kind})")


if __name__ == "__main__":
    main()
