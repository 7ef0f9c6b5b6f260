#!/usr/bin/env python3
"""Independent check of boxlayer's detector path (issue #25; tests/detect_python_crosscheck.rs calls it).

Re-implements, from a detector folder's `detector.toml` (docs/detectors.md) and with numpy and
onnxruntime only, what `boxlayer detect` does with one sweep: point features (`scale`, `offset`,
`tanh`, the `zero` source), the pillariser (range, pillar size, first come first kept pillars and
points, the `openpcdet` and `centerpoint` channel orders with f32 pillar means and cell centres),
the encoder run, the scatter onto the NCHW or NHWC canvas, the head run, the `center_heatmap` or
`anchor` decoder, and the post-processing (score threshold, pre-NMS top-k, rotated BEV IoU NMS by
its own polygon clipping, over all boxes or per class, post-NMS top-k). It shares no code with
boxlayer or with tools/train/.

Supported: the split pillar family with a point-major encoder, which is what the bundled detectors
use; any other manifest option (single graph, channel-major pillars, other feature orders, circle
NMS, feature sources other than x, y, z, intensity and zero) is refused with a message naming it.

The sweep is a raw little-endian float32 `.bin` (`--fields`, default x,y,z,intensity), read as
boxlayer's `kitti-bin` reader reads it (points with a non-finite x, y or z dropped).

Without `--against` it prints the boxes as JSON lines {"class", "label", "score", "box": [x, y, z,
l, w, h, yaw]}. With `--against BOXLAYER.jsonl` (the output of `boxlayer detect --json`) it
compares: every box scoring at least `--score-floor` on either side must have a box of the same
class on the other within 1 mm in x, y, z, l, w, h, 1e-4 rad in yaw (modulo 2π) and 1e-4 in score.
Boxes whose presence hinges on float rounding are reported, not failed: a score within 1e-4 of
the threshold, the floor or a top-k cut, two overlapping boxes whose scores tie within 1e-4 (NMS
order), an IoU within 2e-3 of the NMS threshold (what a 1 mm shift of a small box moves it by),
and boxes that such a box may or may not suppress. The last line is a JSON summary with the
largest differences found. Exit 0 when everything agrees, 1 naming the mismatches otherwise,
2 for a refused manifest or bad input.

Usage:
  python3 tools/check_detector_onnx.py --detector DIR --sweep SWEEP.bin [--fields x,y,z,intensity]
                                       [--against BOXLAYER.jsonl] [--score-floor S] [--json OUT.jsonl]
"""

import argparse
import json
import math
import sys
import tomllib
from pathlib import Path

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:  # pragma: no cover - reported to the Rust test
    print(f"check_detector_onnx.py: {e.name} is not installed (pip install -r tools/requirements-test.txt)",
          file=sys.stderr)
    sys.exit(2)

F32 = np.float32
# Agreement tolerances (issue #25).
CENTER_SIZE_TOL_M = 1e-3
YAW_TOL_RAD = 1e-4
SCORE_TOL = 1e-4
# An IoU this close to the NMS threshold may fall either side of it: a 1 mm shift of a 0.5 m box
# changes its IoU with a neighbour by about this much.
IOU_SLACK = 2e-3


class CheckError(Exception):
    """A refused manifest option or unreadable input; exit status 2."""


# ---------------------------------------------------------------------------------------------
# Manifest


def check_keys(t, allowed, where):
    """Returns the table `t`, refusing keys outside `allowed`."""
    if not isinstance(t, dict):
        raise CheckError(f"{where}: expected a table")
    unknown = sorted(set(t) - set(allowed))
    if unknown:
        raise CheckError(f"{where}: key(s) {', '.join(unknown)} not supported by this check")
    return t


def table(parent, key, allowed, where):
    """The sub-table `key` of `parent` ({} when absent), refusing keys outside `allowed`."""
    return check_keys(parent.get(key, {}), allowed, where)


def refuse_unless(value, supported, where):
    """`value`, when it is one of `supported`; else a CheckError naming the option."""
    if value not in supported:
        choices = ", ".join(map(repr, supported))
        raise CheckError(f"{where} = {value!r} is not supported by this check (supported: {choices})")
    return value


def load_manifest(folder):
    """Reads detector.toml into a flat dict of the settings this check implements (defaults from docs/detectors.md)."""
    path = folder / "detector.toml"
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise CheckError(f"{path}: {e}") from e
    # `input_frame` says which frame the points should be in; both sides here get the same points.
    top = {"name", "family", "decoder", "input_frame", "models", "points", "pillars", "scatter", "head",
           "classes", "postprocess", "runtime"}
    check_keys(raw, top, str(path))
    m = {"name": raw.get("name", folder.name)}
    refuse_unless(raw.get("family", "split_pillar"), ["split_pillar"], "family")
    m["decoder"] = refuse_unless(raw.get("decoder", "anchor"), ["anchor", "center_heatmap"], "decoder")

    models = table(raw, "models", {"encoder", "head", "graph", "allow_outside_folder"}, "[models]")
    if "graph" in models:
        raise CheckError("[models.graph] (single graph) is not supported by this check")
    encoder = table(models, "encoder", {"file", "sha256", "input", "output"}, "[models.encoder]")
    head = table(models, "head", {"file", "sha256", "input"}, "[models.head]")
    if "file" not in encoder or "file" not in head:
        raise CheckError("[models.encoder] and [models.head] need a `file`")
    m["encoder_file"] = folder / encoder["file"]
    m["encoder_input"] = encoder.get("input", "input.1")
    m["encoder_output"] = encoder.get("output", "")
    m["head_file"] = folder / head["file"]
    m["head_input"] = head.get("input", "")

    points = table(raw, "points", {"features"}, "[points]")
    features = points.get("features", [{"source": s} for s in ("x", "y", "z", "intensity")])
    m["features"] = []
    for k, feature in enumerate(features):
        check_keys(feature, {"source", "scale", "offset", "tanh"}, f"points.features[{k}]")
        source = feature.get("source", "zero")
        refuse_unless(source, ["x", "y", "z", "intensity", "zero"], f"points.features[{k}].source")
        m["features"].append((source, F32(feature.get("scale", 1.0)), F32(feature.get("offset", 0.0)),
                              bool(feature.get("tanh", False))))

    pillars = table(raw, "pillars", {"point_cloud_range", "pillar_size", "max_points_per_pillar", "max_pillars",
                                     "layout", "feature_order", "encoder_batch"}, "[pillars]")
    m["range"] = [float(v) for v in pillars.get("point_cloud_range", [0, -39.68, -3, 69.12, 39.68, 1])]
    m["pillar_size"] = [float(v) for v in pillars.get("pillar_size", [0.16, 0.16, 4])]
    m["max_points"] = int(pillars.get("max_points_per_pillar", 32))
    m["max_pillars"] = int(pillars.get("max_pillars", 12000))
    refuse_unless(pillars.get("layout", "point_major"), ["point_major"], "pillars.layout")
    m["feature_order"] = refuse_unless(pillars.get("feature_order", "openpcdet"), ["openpcdet", "centerpoint"],
                                       "pillars.feature_order")
    r, s = m["range"], m["pillar_size"]
    m["nx"] = max(0, round((r[3] - r[0]) / s[0]))
    m["ny"] = max(0, round((r[4] - r[1]) / s[1]))

    scatter = table(raw, "scatter", {"channels", "layout"}, "[scatter]")
    m["channels"] = int(scatter.get("channels", 64))
    m["canvas_layout"] = refuse_unless(scatter.get("layout", "nchw"), ["nchw", "nhwc"], "scatter.layout")

    head_cfg = table(raw, "head", {"layout", "score_activation", "anchor", "center"}, "[head]")
    m["map_layout"] = refuse_unless(head_cfg.get("layout", "nchw"), ["nchw", "nhwc"], "head.layout")
    m["activation"] = refuse_unless(head_cfg.get("score_activation", "sigmoid"), ["sigmoid", "none"],
                                    "head.score_activation")
    if m["decoder"] == "anchor":
        a = table(head_cfg, "anchor", {"cls", "box", "dir_cls", "labels", "feature_stride", "align_center",
                                       "box_code_size", "num_dir_bins", "dir_offset", "dir_limit_offset",
                                       "dir_reversed", "size_exp_clamp", "anchors"}, "[head.anchor]")
        if "labels" not in a:
            raise CheckError("head.anchor.labels is required")
        m["anchor"] = {
            "cls": a.get("cls", "cls_preds"), "box": a.get("box", "box_preds"),
            "dir_cls": a.get("dir_cls", "dir_cls_preds"), "labels": list(a["labels"]),
            "stride": int(a.get("feature_stride", 2)), "align_center": bool(a.get("align_center", False)),
            "code": int(a.get("box_code_size", 7)), "bins": int(a.get("num_dir_bins", 2)),
            "dir_offset": float(a.get("dir_offset", 0.78539)),
            "dir_limit_offset": float(a.get("dir_limit_offset", 0.0)),
            "dir_reversed": bool(a.get("dir_reversed", False)), "exp_clamp": a.get("size_exp_clamp"),
            "anchors": [],
        }
        for k, entry in enumerate(a.get("anchors", [])):
            check_keys(entry, {"label", "sizes", "rotations", "bottom_height"}, f"head.anchor.anchors[{k}]")
            m["anchor"]["anchors"].append({
                "sizes": [[float(v) for v in size] for size in entry.get("sizes", [[3.9, 1.6, 1.56]])],
                "rotations": [float(v) for v in entry.get("rotations", [0.0, math.pi / 2])],
                "bottom": float(entry.get("bottom_height", -1.78)),
            })
        m["labels"] = m["anchor"]["labels"]
    else:
        c = table(head_cfg, "center", {"out_size_factor", "dim_log", "peak_kernel", "tasks"}, "[head.center]")
        m["center"] = {"factor": int(c.get("out_size_factor", 4)), "dim_log": bool(c.get("dim_log", True)),
                       "kernel": int(c.get("peak_kernel", 3)), "tasks": []}
        for k, task in enumerate(c.get("tasks", [])):
            check_keys(task, {"labels", "heatmap", "reg", "height", "dim", "rot", "vel"}, f"head.center.tasks[{k}]")
            m["center"]["tasks"].append(task)
        m["labels"] = [label for task in m["center"]["tasks"] for label in task["labels"]]

    m["classes"] = dict(raw.get("classes", {}))
    pp = table(raw, "postprocess", {"score_threshold", "nms", "nms_threshold", "nms_per_class", "pre_nms_top_k",
                                    "post_nms_top_k"}, "[postprocess]")
    m["threshold"] = F32(pp.get("score_threshold", 0.1))
    m["nms"] = refuse_unless(pp.get("nms", "rotated_iou"), ["rotated_iou", "none"], "postprocess.nms")
    m["nms_threshold"] = float(pp.get("nms_threshold", 0.01))
    m["per_class"] = bool(pp.get("nms_per_class", False))
    m["pre_k"] = int(pp.get("pre_nms_top_k", 1000))
    m["post_k"] = int(pp.get("post_nms_top_k", 100))
    runtime = table(raw, "runtime", {"execution_provider", "device_id", "threads", "sessions"}, "[runtime]")
    m["threads"] = int(runtime.get("threads", 0))
    return m


# ---------------------------------------------------------------------------------------------
# Sweep, point features, pillars


def read_sweep(path, fields):
    """The sweep's columns by field name, f32, without points whose x, y or z is not finite."""
    data = np.fromfile(path, dtype="<f4")
    if data.size % len(fields):
        raise CheckError(f"{path}: {data.size * 4} bytes is not a whole number of {len(fields)}-float points")
    data = data.reshape(-1, len(fields)).astype(F32)
    cols = {name: data[:, k] for k, name in enumerate(fields)}
    for axis in "xyz":
        if axis not in cols:
            raise CheckError(f"--fields {','.join(fields)}: no `{axis}`")
    finite = np.isfinite(cols["x"]) & np.isfinite(cols["y"]) & np.isfinite(cols["z"])
    cols = {k: v[finite] for k, v in cols.items()}
    if "intensity" not in cols:
        cols["intensity"] = np.zeros_like(cols["x"])
    return cols


def point_features(m, cols):
    """Per-point feature columns (value = tanh?(raw · scale + offset) in f32), dropping the points
    whose feature inputs are not finite, and the x, y, z columns of the kept points."""
    keep = np.ones(cols["x"].shape, dtype=bool)
    for source, _, _, _ in m["features"]:
        if source != "zero":
            keep &= np.isfinite(cols[source])
    cols = {k: v[keep] for k, v in cols.items()}
    features = []
    for source, scale, offset, tanh in m["features"]:
        if source == "zero":
            features.append(np.zeros_like(cols["x"]))
            continue
        v = (cols[source] * scale + offset).astype(F32)
        if tanh:
            v = np.tanh(v.astype(np.float64)).astype(F32)
        features.append(v)
    return cols["x"], cols["y"], cols["z"], features


def pillarize(m, x, y, z, features, row_limit):
    """Encoder input `[rows, max_points, channels]`, each pillar's cell `(ix, iy)` and point count.

    Pillars are made by their first point in point order, at most `max_pillars` (and `row_limit`
    for a static pillar axis); a pillar keeps its first `max_points` points."""
    r, s = m["range"], m["pillar_size"]
    lo = [F32(v) for v in r[:3]]
    size = [F32(v) for v in s]
    nx, ny, mp = m["nx"], m["ny"], m["max_points"]
    fx, fy, fz = (x - lo[0]) / size[0], (y - lo[1]) / size[1], (z - lo[2]) / size[2]
    inside = ((fx >= 0) & (fx < F32(nx)) & (fy >= 0) & (fy < F32(ny)) & (fz >= 0) & (fz < F32(1)))
    idx = np.nonzero(inside)[0]
    ix = np.floor(fx[idx]).astype(np.int64)
    iy = np.floor(fy[idx]).astype(np.int64)
    cell = iy * nx + ix
    limit = m["max_pillars"] if row_limit is None else min(m["max_pillars"], row_limit)
    cells, first = np.unique(cell, return_index=True)
    pillar_cells = cells[np.argsort(first, kind="stable")][:limit]
    pillar_of_cell = np.full(nx * ny, -1, dtype=np.int64)
    pillar_of_cell[pillar_cells] = np.arange(len(pillar_cells))
    pid = pillar_of_cell[cell]
    in_pillar = pid >= 0
    idx, pid = idx[in_pillar], pid[in_pillar]
    # Slot of each point in its pillar: its rank among the pillar's points, in point order.
    order = np.argsort(pid, kind="stable")
    sorted_pid = pid[order]
    starts = np.searchsorted(sorted_pid, sorted_pid, side="left")
    slot = np.empty_like(pid)
    slot[order] = np.arange(len(pid)) - starts
    kept = slot < mp
    idx, pid, slot = idx[kept], pid[kept], slot[kept]
    n_pillars = len(pillar_cells)
    counts = np.bincount(pid, minlength=n_pillars).astype(np.int64)

    # Pillar means from f32 sums added point by point in slot order (as OpenPCDet's scatter-add).
    means = []
    for v in (x, y, z):
        grid = np.zeros((n_pillars, mp), dtype=F32)
        grid[pid, slot] = v[idx]
        total = np.zeros(n_pillars, dtype=F32)
        for j in range(mp):
            total = (total + grid[:, j]).astype(F32)
        means.append((total / np.maximum(counts, 1).astype(F32)).astype(F32))
    p_ix, p_iy = pillar_cells % nx, pillar_cells // nx
    centers = [
        (p_ix.astype(F32) * size[0] + (size[0] / F32(2) + lo[0])).astype(F32),
        (p_iy.astype(F32) * size[1] + (size[1] / F32(2) + lo[1])).astype(F32),
        np.full(n_pillars, size[2] / F32(2) + lo[2], dtype=F32),
    ]
    xyz = (x[idx], y[idx], z[idx])
    channels = [f[idx] for f in features]
    channels += [xyz[a] - means[a][pid] for a in range(3)]
    n_centre = 3 if m["feature_order"] == "openpcdet" else 2
    channels += [xyz[a] - centers[a][pid] for a in range(n_centre)]

    rows = max(n_pillars, 1) if row_limit is None else row_limit
    tensor = np.zeros((rows, mp, len(channels)), dtype=F32)
    tensor[pid, slot, :] = np.stack(channels, axis=1).astype(F32)
    return tensor, np.stack([p_ix, p_iy], axis=1), counts


# ---------------------------------------------------------------------------------------------
# ONNX runs


def session(path, threads):
    """An onnxruntime CPU session of `path`."""
    if not path.is_file():
        raise CheckError(f"model file {path} not found")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def only_name(items, given, what):
    """`given`, or the name of the only input/output when `given` is empty."""
    if given:
        return given
    if len(items) != 1:
        raise CheckError(f"{what}: the model has {len(items)}; the manifest must name one")
    return items[0].name


def run_network(m, x, y, z, features):
    """Pillarise, encode, scatter and run the head; the head outputs by name, as `(C, H, W)` arrays."""
    encoder = session(m["encoder_file"], m["threads"])
    head = session(m["head_file"], m["threads"])
    enc_in = next((i for i in encoder.get_inputs() if i.name == m["encoder_input"]), None)
    if enc_in is None:
        raise CheckError(f"{m['encoder_file']}: no input `{m['encoder_input']}`")
    static = enc_in.shape[0] if isinstance(enc_in.shape[0], int) and enc_in.shape[0] > 0 else None
    tensor, cells, _ = pillarize(m, x, y, z, features, static)
    enc_out = only_name(encoder.get_outputs(), m["encoder_output"], "encoder outputs")
    (encoded,) = encoder.run([enc_out], {m["encoder_input"]: tensor})
    encoded = encoded.reshape(tensor.shape[0], m["channels"])

    canvas = np.zeros((m["ny"], m["nx"], m["channels"]), dtype=F32)
    canvas[cells[:, 1], cells[:, 0], :] = encoded[: len(cells)]
    canvas = canvas[None] if m["canvas_layout"] == "nhwc" else np.ascontiguousarray(canvas.transpose(2, 0, 1)[None])
    head_in = only_name(head.get_inputs(), m["head_input"], "head inputs")
    names = [o.name for o in head.get_outputs()]
    outputs = dict(zip(names, head.run(names, {head_in: canvas})))
    maps = {}
    for name, value in outputs.items():
        if value.ndim == 4:
            maps[name] = value[0].transpose(2, 0, 1) if m["map_layout"] == "nhwc" else value[0]
    return maps, len(cells)


# ---------------------------------------------------------------------------------------------
# Decoders


def activate(v, activation):
    """The score of raw head values (f32 sigmoid, or unchanged)."""
    v = v.astype(F32)
    return (F32(1) / (F32(1) + np.exp(-v))).astype(F32) if activation == "sigmoid" else v


def wrap(a):
    """An angle wrapped into [-π, π)."""
    r = (a + math.pi) % (2 * math.pi) - math.pi
    return r - 2 * math.pi if r >= math.pi else r


def need_map(maps, name, channels, height, width):
    """The head output `name`, checked to be `(channels, height, width)`."""
    if name not in maps:
        raise CheckError(f"head has no output `{name}` (it has {', '.join(sorted(maps))})")
    if maps[name].shape != (channels, height, width):
        raise CheckError(f"head output `{name}`: shape {maps[name].shape}, expected {(channels, height, width)}")
    return maps[name]


def decode_center(m, maps, floor):
    """CenterPoint decoding: heatmap peaks scoring at least `floor`, in (task, channel, row, column) order."""
    c = m["center"]
    f, kernel = c["factor"], c["kernel"]
    w, h = m["nx"] // f, m["ny"] // f
    px, py = m["pillar_size"][0], m["pillar_size"][1]
    x0, y0 = m["range"][0], m["range"][1]
    boxes, label_offset = [], 0
    for task in c["tasks"]:
        n = len(task["labels"])
        hm = need_map(maps, task["heatmap"], n, h, w)
        reg = need_map(maps, task["reg"], 2, h, w)
        height = need_map(maps, task["height"], 1, h, w)
        dim = need_map(maps, task["dim"], 3, h, w)
        rot = need_map(maps, task["rot"], 2, h, w)
        # Max-pool peak test (ties kept): no value in the clipped window exceeds the cell's.
        r = kernel // 2
        padded = np.pad(hm, ((0, 0), (r, r), (r, r)), constant_values=-np.inf)
        window = np.full(hm.shape, -np.inf, dtype=F32)
        for dy in range(kernel):
            for dx in range(kernel):
                window = np.fmax(window, padded[:, dy:dy + h, dx:dx + w])
        score = activate(hm, m["activation"])
        candidate = (score >= floor) & (hm >= window)
        for ch, yy, xx in zip(*np.nonzero(candidate)):
            ch, yy, xx = int(ch), int(yy), int(xx)
            cx = (xx + float(reg[0, yy, xx])) * f * px + x0
            cy = (yy + float(reg[1, yy, xx])) * f * py + y0
            size = [math.exp(float(d)) if c["dim_log"] else float(d) for d in dim[:, yy, xx]]
            yaw = wrap(math.atan2(float(rot[0, yy, xx]), float(rot[1, yy, xx])))
            boxes.append({"label": label_offset + ch, "score": float(score[ch, yy, xx]),
                          "box": [cx, cy, float(height[0, yy, xx]), *size, yaw]})
        label_offset += n
    return boxes


def anchor_centres(lo, hi, cells, align_center):
    """Anchor centre coordinates along one axis: cell centres, or min..max inclusive (OpenPCDet)."""
    if align_center:
        step = (hi - lo) / cells
        return [lo + (i + 0.5) * step for i in range(cells)]
    step = (hi - lo) / (cells - 1) if cells > 1 else 0.0
    return [lo + i * step for i in range(cells)]


def limit_period(value, offset, period):
    """OpenPCDet's limit_period."""
    return value - math.floor(value / period + offset) * period


def decode_anchor(m, maps, floor):
    """OpenPCDet AnchorHeadSingle + ResidualCoder decoding of anchors whose best class scores at
    least `floor`, in (row, column, anchor) order."""
    a = m["anchor"]
    stride, k, code, bins = a["stride"], len(a["labels"]), a["code"], a["bins"]
    w, h = m["nx"] // stride, m["ny"] // stride
    anchors = [(size, yaw, entry["bottom"] + size[2] / 2)
               for entry in a["anchors"] for size in entry["sizes"] for yaw in entry["rotations"]]
    n = len(anchors)
    cls = need_map(maps, a["cls"], n * k, h, w).reshape(n, k, h, w)
    box = need_map(maps, a["box"], n * code, h, w).reshape(n, code, h, w)
    direction = need_map(maps, a["dir_cls"], n * bins, h, w).reshape(n, bins, h, w) if a["dir_cls"] else None
    xs = anchor_centres(m["range"][0], m["range"][3], w, a["align_center"])
    ys = anchor_centres(m["range"][1], m["range"][4], h, a["align_center"])
    best = cls.max(axis=1)
    label = cls.argmax(axis=1)
    score = activate(best, m["activation"])
    hits = np.nonzero(score >= floor)
    period = 2 * math.pi / bins
    boxes = []
    clamp = math.inf if a["exp_clamp"] is None else float(a["exp_clamp"])
    for ai, yy, xx in sorted(zip(*hits), key=lambda t: (int(t[1]), int(t[2]), int(t[0]))):
        ai, yy, xx = int(ai), int(yy), int(xx)
        (la, wa, ha), yaw_a, za = anchors[ai]
        r = [float(v) for v in box[ai, :7, yy, xx]]
        diagonal = math.sqrt(la * la + wa * wa)
        yaw = yaw_a + r[6]
        if direction is not None:
            b = int(np.argmax(direction[ai, :, yy, xx]))
            b = bins - 1 - b if a["dir_reversed"] else b
            yaw = limit_period(yaw - a["dir_offset"], a["dir_limit_offset"], period) + a["dir_offset"] + period * b
        boxes.append({"label": int(label[ai, yy, xx]), "score": float(score[ai, yy, xx]),
                      "box": [r[0] * diagonal + xs[xx], r[1] * diagonal + ys[yy], r[2] * ha + za,
                              la * math.exp(min(r[3], clamp)), wa * math.exp(min(r[4], clamp)),
                              ha * math.exp(min(r[5], clamp)), wrap(yaw)]})
    return boxes


# ---------------------------------------------------------------------------------------------
# Rotated BEV IoU (Sutherland–Hodgman clipping) and NMS


def footprint(b):
    """The BEV corners of box `b`, counter-clockwise."""
    x, y, l, w, yaw = b[0], b[1], b[3], b[4], b[6]
    c, s = math.cos(yaw), math.sin(yaw)
    return [(x + c * dx - s * dy, y + s * dx + c * dy)
            for dx, dy in ((l / 2, w / 2), (-l / 2, w / 2), (-l / 2, -w / 2), (l / 2, -w / 2))]


def polygon_area(poly):
    """Shoelace area of a polygon (positive when counter-clockwise)."""
    return 0.5 * sum(poly[i - 1][0] * poly[i][1] - poly[i][0] * poly[i - 1][1] for i in range(len(poly)))


def clip(subject, a, b):
    """The part of polygon `subject` left of the directed line a → b."""
    def side(p):
        return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])
    out = []
    for i, p in enumerate(subject):
        q = subject[i - 1]
        sp, sq = side(p), side(q)
        if (sp >= 0) != (sq >= 0):
            t = sq / (sq - sp)
            out.append((q[0] + t * (p[0] - q[0]), q[1] + t * (p[1] - q[1])))
        if sp >= 0:
            out.append(p)
    return out


def iou_bev(a, b):
    """Rotated BEV IoU of two boxes (x, y, _, l, w, _, yaw)."""
    area_a, area_b = a[3] * a[4], b[3] * b[4]
    if not (area_a > 0 and area_b > 0):
        return 0.0
    poly = footprint(a)
    rect = footprint(b)
    for i in range(4):
        if not poly:
            break
        poly = clip(poly, rect[i], rect[(i + 1) % 4])
    inter = abs(polygon_area(poly)) if len(poly) >= 3 else 0.0
    union = area_a + area_b - inter
    return min(inter / union, 1.0) if inter > 0 and union > 0 else 0.0


def postprocess(m, candidates):
    """Boxlayer's selection: score threshold, sort (ties by decode order), pre-NMS top-k, NMS (per
    class or over all), sort, post-NMS top-k. Marks each candidate `uncertain` when its fate may
    flip with float rounding (see the module doc); returns the kept candidates in output order."""
    thr = float(m["threshold"])
    for i, c in enumerate(candidates):
        c["order"], c["uncertain"], c["why"], c["fate"] = i, False, [], "kept"
    def doubt(c, why):
        c["uncertain"] = True
        c["why"].append(why)
    for c in candidates:
        if abs(c["score"] - thr) < SCORE_TOL:
            doubt(c, "score at the threshold")
    live = sorted((c for c in candidates if F32(c["score"]) >= m["threshold"]), key=lambda c: -c["score"])
    for c in candidates:
        if F32(c["score"]) < m["threshold"]:
            c["fate"] = "below the score threshold"

    def cut(items, k, what):
        if len(items) > k:
            edge = items[k - 1]["score"]
            for c in items:
                if abs(c["score"] - edge) < SCORE_TOL:
                    doubt(c, f"score at the {what} cut")
            for c in items[k:]:
                c["fate"] = f"beyond {what}"
        return items[:k]

    live = cut(live, m["pre_k"], "pre_nms_top_k")
    groups = [live] if not m["per_class"] else [[c for c in live if c["label"] == lab]
                                                 for lab in sorted({c["label"] for c in live})]
    kept = []
    for group in groups:
        kept += nms(m, group)
    kept.sort(key=lambda c: -c["score"])
    return cut(kept, m["post_k"], "post_nms_top_k")


def nms(m, group):
    """Greedy rotated-BEV NMS over `group` (sorted by score): a box is dropped when its IoU with a
    kept box exceeds the threshold. Propagates doubt from ties, borderline IoUs and doubtful boxes."""
    if m["nms"] == "none" or not group:
        return list(group)
    thr = m["nms_threshold"]
    centres = np.array([[c["box"][0], c["box"][1]] for c in group])
    radius = np.array([0.5 * math.hypot(c["box"][3], c["box"][4]) for c in group])
    near = (np.linalg.norm(centres[:, None] - centres[None], axis=2) <= radius[:, None] + radius[None])
    overlap = {}
    for i in range(len(group)):
        for j in np.nonzero(near[i, :i])[0]:
            iou = iou_bev(group[int(j)]["box"], group[i]["box"])
            if iou > thr - IOU_SLACK:
                overlap.setdefault(i, []).append((int(j), iou))
    # Scores tied within the tolerance may be visited in the other order.
    for i, pairs in overlap.items():
        for j, _ in pairs:
            if abs(group[i]["score"] - group[j]["score"]) < SCORE_TOL:
                for c in (group[i], group[j]):
                    if not c["uncertain"]:
                        c["uncertain"] = True
                        c["why"].append("score tied with an overlapping box")
    kept_flags = [False] * len(group)
    for i, c in enumerate(group):
        suppressor = None
        for j, iou in overlap.get(i, []):
            if group[j]["uncertain"] or abs(iou - thr) <= IOU_SLACK:
                if group[j]["uncertain"] or kept_flags[j]:
                    if not c["uncertain"]:
                        c["uncertain"] = True
                        c["why"].append(f"IoU {iou:.4f} with a box that may or may not suppress it")
            if kept_flags[j] and iou > thr and suppressor is None:
                suppressor = j
        if suppressor is None:
            kept_flags[i] = True
        else:
            c["fate"] = f"suppressed by the {group[suppressor]['score']:.6f} box (NMS)"
    return [c for c, k in zip(group, kept_flags) if k]


# ---------------------------------------------------------------------------------------------
# Comparison with boxlayer's JSON lines


def read_boxlayer(path):
    """Boxlayer's boxes from `detect --json` lines: class, score, 7 box values (pitch, roll must be 0)."""
    rows, frames = [], set()
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            d = json.loads(line)
            v = [float(t) for t in d["box"]]
            if len(v) not in (7, 9):
                raise CheckError(f"{path}: line {n}: box has {len(v)} values, expected 7 or 9")
            if len(v) == 9 and (v[7] != 0 or v[8] != 0):
                raise CheckError(f"{path}: line {n}: pitch/roll {v[7:]} on a detector box")
            frames.add((d.get("sequence"), d.get("frame")))
            rows.append({"line": n, "class": d["class"], "score": float(d["score"]), "box": v[:7]})
    if len(frames) > 1:
        raise CheckError(f"{path}: boxes of {len(frames)} frames; give one frame's boxes")
    return rows


def differences(a, b):
    """(largest |Δ| of x, y, z, l, w, h in m, |Δyaw| modulo 2π, |Δscore|) of two boxes."""
    d = max(abs(p - q) for p, q in zip(a["box"][:6], b["box"][:6]))
    yaw = abs(wrap(a["box"][6] - b["box"][6]))
    return d, yaw, abs(a["score"] - b["score"])


def geometry_matches(a, b):
    """Same class, centre and sizes within 1 mm and yaw within 1e-4 rad."""
    if a["class"] != b["class"]:
        return False
    d, yaw, _ = differences(a, b)
    return d <= CENTER_SIZE_TOL_M and yaw <= YAW_TOL_RAD


def describe(b):
    """A short text naming a box."""
    v = ", ".join(f"{t:.4f}" for t in b["box"])
    return f"{b['class']} {b['score']:.6f} [{v}]"


def compare(python_kept, candidates, theirs, floor):
    """Matches boxlayer's boxes with Python's; returns (mismatches, reported, summary)."""
    def near_floor(b):
        return abs(b["score"] - floor) < SCORE_TOL

    mine = [b for b in python_kept if b["score"] >= floor]
    theirs = [b for b in theirs if b["score"] >= floor]
    mismatches, reported = [], []
    used = set()
    worst = [0.0, 0.0, 0.0]
    for t in theirs:
        options = [(differences(t, p), i) for i, p in enumerate(mine) if i not in used and geometry_matches(t, p)]
        if options:
            (d, yaw, ds), i = min(options, key=lambda o: o[0][0] + o[0][1])
            used.add(i)
            worst = [max(worst[0], d), max(worst[1], yaw), max(worst[2], ds)]
            if ds > SCORE_TOL:
                mismatches.append(f"boxlayer line {t['line']}: {describe(t)}: score differs from python's "
                                  f"{mine[i]['score']:.6f} by {ds:.2e}")
            continue
        twin = next((c for c in candidates if geometry_matches(t, c)), None)
        if twin is not None and (twin["uncertain"] or near_floor(t)):
            reported.append(f"boxlayer line {t['line']}: {describe(t)}: python has it {twin['fate']} "
                            f"({'; '.join(twin['why']) or 'score at the floor'})")
        elif near_floor(t):
            reported.append(f"boxlayer line {t['line']}: {describe(t)}: no python box (score at the floor)")
        elif twin is not None:
            mismatches.append(f"boxlayer line {t['line']}: {describe(t)}: python has it {twin['fate']}")
        else:
            mismatches.append(f"boxlayer line {t['line']}: {describe(t)}: no python box within 1 mm / 1e-4 rad")
    for i, p in enumerate(mine):
        if i in used:
            continue
        if p["uncertain"] or near_floor(p):
            reported.append(f"python {describe(p)}: not in boxlayer's output "
                            f"({'; '.join(p['why']) or 'score at the floor'})")
        else:
            mismatches.append(f"python {describe(p)}: no boxlayer box within 1 mm / 1e-4 rad")
    summary = {"python_boxes": len(mine), "boxlayer_boxes": len(theirs), "matched": len(used),
               "max_center_size_mm": worst[0] * 1e3, "max_yaw_rad": worst[1], "max_score": worst[2],
               "reported": len(reported), "mismatches": len(mismatches)}
    return mismatches, reported, summary


# ---------------------------------------------------------------------------------------------


def detect(m, sweep, fields):
    """Python's boxes for the sweep, and every decoded candidate (with its fate) for the comparison."""
    cols = read_sweep(sweep, fields)
    x, y, z, features = point_features(m, cols)
    maps, n_pillars = run_network(m, x, y, z, features)
    # Decode a little below the threshold, so boxes at it on boxlayer's side are found and reported.
    floor = F32(float(m["threshold"]) - SCORE_TOL)
    decoded = decode_center(m, maps, floor) if m["decoder"] == "center_heatmap" else decode_anchor(m, maps, floor)
    for c in decoded:
        c["class"] = m["classes"].get(m["labels"][c["label"]], "unknown")
    kept = postprocess(m, decoded)
    return kept, decoded, len(x), n_pillars


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--detector", required=True, type=Path, help="detector folder (holding detector.toml)")
    parser.add_argument("--sweep", required=True, type=Path, help="raw little-endian float32 .bin sweep")
    parser.add_argument("--fields", default="x,y,z,intensity", help="the .bin's float32 fields in order")
    parser.add_argument("--against", type=Path, help="boxlayer's `detect --json` output to compare with")
    parser.add_argument("--score-floor", type=float, default=0.0, help="compare only boxes scoring at least this")
    parser.add_argument("--json", type=Path, help="also write Python's boxes as JSON lines here")
    args = parser.parse_args()
    folder = args.detector.parent if args.detector.name == "detector.toml" else args.detector
    try:
        m = load_manifest(folder)
        kept, decoded, n_points, n_pillars = detect(m, args.sweep, args.fields.split(","))
        theirs = read_boxlayer(args.against) if args.against else None
    except CheckError as e:
        print(f"check_detector_onnx.py: {folder}: {e}", file=sys.stderr)
        return 2
    lines = [json.dumps({"class": b["class"], "label": m["labels"][b["label"]], "score": b["score"], "box": b["box"]})
             for b in kept]
    if args.json:
        args.json.write_text("".join(line + "\n" for line in lines))
    if theirs is None:
        print("\n".join(lines))
        return 0
    mismatches, reported, summary = compare(kept, decoded, theirs, args.score_floor)
    summary.update({"detector": m["name"], "points": n_points, "pillars": n_pillars})
    for text in reported:
        print(f"reported: {text}")
    for text in mismatches:
        print(f"MISMATCH: {text}")
    print(json.dumps(summary))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
