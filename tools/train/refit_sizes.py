"""Refits the size regressor of a trained pillar detector to new labels: the last 1×1
convolution's size rows, by ridge regression on the features that feed it. A CenterPoint head's
three `dim` rows (log length, width, height) are fitted at the labelled objects' centre cells; an
OpenPCDet anchor head's three size-residual rows of each anchor (log(l / l_a), …) at the anchors
the assigner makes positive for the new labels (`train.anchor_targets`). Everything else in the
network stays as trained.

    python3 tools/train/refit_sizes.py --detector detectors/NAME \\
        --data /work/refit/vehicle /work/refit/drone /work/refit/quadruped

Why: until 2026-12-04 the simulator labelled a pedestrian with its body-tight box (0.25–0.45 m
front to back) and its vehicles had no side mirrors; it now draws people as the datasets'
annotators do (0.7–1.1 × 0.7–1.0 m) and vehicles with mirrors (cars 0.2 m wider;
docs/simulator.md). Networks trained before keep finding objects where they are but size them to
the old convention, which misses IoU 0.5 for people against the new labels. Their size regressor
is a linear map of the features at a cell (32 for the bundled centre heads, 64 for the anchor
head), so refitting it is a closed-form least-squares problem over the training sweeps' objects,
with the same targets as training (`train.targets`: log l, w, h at the centre cell;
`train.anchor_targets`: the residuals).

The fit uses the sweeps of the seeds before the last fifth, reports the mean absolute log-size
error per class on that last fifth before and after, then fits on all of them and writes
head.onnx (only those rows and their biases changed), its sha256 in detector.toml and
`refit_sizes.json` (command, samples and errors). Deterministic: no random draws.
"""

import argparse
import hashlib
import json
import pathlib
import re
import sys
import tomllib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import train  # noqa: E402


def grid(manifest):
    """train.Grid for the manifest's pillar settings (square range, stride 2 head; anchors as
    train.ANCHORS)."""
    p = manifest["pillars"]
    r = p["point_cloud_range"]
    if r[0] != -r[3] or r[1] != -r[4] or r[0] != r[1]:
        raise SystemExit(f"point_cloud_range {r}: only square ranges about the origin are supported")
    head = manifest["head"]
    stride = head["center"]["out_size_factor"] if "center" in head else head["anchor"]["feature_stride"]
    if stride != 2:
        raise SystemExit("only a stride-2 head is supported")
    if "anchor" in head:
        sizes = [(a["label"], a["sizes"][0], a["rotations"], a["bottom_height"]) for a in head["anchor"]["anchors"]]
        ground = manifest.get("ground_z_m") or 0.0
        ours = [(c, size, train.ROTATIONS, bottom + ground) for c, (size, bottom, _, _) in zip(train.CLASSES, train.ANCHORS)]
        if any(a[0] != b[0] or not np.allclose(a[1], b[1]) or not np.allclose(a[2], b[2]) or a[3] != b[3] for a, b in zip(sizes, ours)):
            raise SystemExit(f"anchors {sizes} differ from train.ANCHORS")
    args = argparse.Namespace(
        range=r[3], pillar=p["pillar_size"][0], z_min=r[2], z_max=r[5], max_points=p["max_points_per_pillar"],
        max_pillars=p["max_pillars"], feature_order=p["feature_order"],
    )
    g = train.Grid(args)
    g.ground = manifest.get("ground_z_m") or 0.0
    return g


def size_conv(model, output):
    """The Conv node that makes head output `output` (directly, or through a Slice), and its
    weight and bias initializer names."""
    producers = {o: n for n in model.graph.node for o in n.output}
    conv = producers[output]
    if conv.op_type == "Slice":
        conv = producers[conv.input[0]]
    if conv.op_type != "Conv" or len(conv.input) < 3:
        raise SystemExit(f"`{output}` is not made by a biased Conv ({conv.op_type})")
    return conv, conv.input[1], conv.input[2]


def with_features_output(model, name):
    """A copy of the head with tensor `name` added as an output."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    return m


def samples(folders, g, encoder, head, feature_name, size_output, anchors):
    """Per sample: (seed, class, anchor slot (0 for a centre head), features, log-size target, the
    head's own size output there). Centre head: one sample per labelled object at its centre
    cell; anchor head: one per positive anchor."""
    rows = []
    for folder in folders:
        folder = pathlib.Path(folder)
        seeds = [json.loads(line)["seed"] for line in (folder / "labels.jsonl").read_text().splitlines()]
        for (path, boxes, labels, columns), seed in zip(train.load_set(folder, 1), seeds):
            points = np.fromfile(path, "<f4").reshape(-1, columns)[:, :4]
            pillars, cells = train.pillarize(points, g)
            feats = encoder.run(None, {"pillars": pillars})[0]
            canvas = np.zeros((1, g.ny, g.nx, feats.shape[1]), np.float32)
            canvas[0, cells[:, 0], cells[:, 1]] = feats[: len(cells)]
            sizes, x = head.run([size_output, feature_name], {"canvas": canvas})
            flat_x = x[0].reshape(x.shape[1], -1)
            if anchors is not None:
                cls_t, box_t, _ = train.anchor_targets(boxes, labels, g, anchors)
                own = sizes[0].reshape(train.NUM_ANCHORS, 7, -1)
                for cell, slot in zip(*np.nonzero(cls_t.reshape(-1, train.NUM_ANCHORS) > 0)):
                    rows.append((
                        seed, slot // len(train.ROTATIONS), slot, flat_x[:, cell],
                        box_t.reshape(-1, train.NUM_ANCHORS, 7)[cell, slot, 3:6], own[slot, 3:6, cell],
                    ))
                continue
            _, ind, mask, tgt = train.targets(boxes, labels, g)
            n = int(mask.sum())
            # targets() keeps the objects in order, skipping those outside the map.
            inside = [
                0 <= int(np.floor((b[0] - g.range[0]) / (g.pillar[0] * g.stride))) < g.w
                and 0 <= int(np.floor((b[1] - g.range[1]) / (g.pillar[0] * g.stride))) < g.h
                for b in boxes
            ]
            classes = np.asarray(labels)[np.array(inside, bool)][:n]
            flat_dim = sizes[0].reshape(3, -1)
            for k in range(n):
                rows.append((seed, int(classes[k]), 0, flat_x[:, ind[k]], tgt[k, 3:6], flat_dim[:, ind[k]]))
    return rows


def ridge(x, y, lam):
    """Least squares with an intercept and an L2 penalty `lam` (relative to the feature scale) on
    the weights: (W [3, C], b [3])."""
    xa = np.concatenate([x, np.ones((len(x), 1))], 1).astype(np.float64)
    reg = lam * np.trace(xa[:, :-1].T @ xa[:, :-1]) / max(x.shape[1], 1) * np.eye(xa.shape[1])
    reg[-1, -1] = 0
    sol = np.linalg.solve(xa.T @ xa + reg, xa.T @ y.astype(np.float64))
    return sol[:-1].T, sol[-1]


def errors(pred, target, classes):
    """Mean absolute log-size error (l, w, h) per class name."""
    out = {}
    for ci, name in enumerate(train.CLASSES):
        sel = classes == ci
        if sel.any():
            out[name] = {"n": int(sel.sum()), "abs_log_lwh": [round(float(v), 4) for v in np.abs(pred[sel] - target[sel]).mean(0)]}
    return out


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--detector", required=True, help="detector folder (split pillar, center_heatmap or anchor head)")
    ap.add_argument("--data", nargs="+", required=True, help="export_training_set folders with the new labels")
    ap.add_argument("--lam", type=float, default=1e-3, help="ridge penalty relative to the mean feature energy")
    args = ap.parse_args()
    folder = pathlib.Path(args.detector)
    manifest = tomllib.loads((folder / "detector.toml").read_text())
    decoder = manifest.get("decoder")
    if decoder not in ("center_heatmap", "anchor"):
        raise SystemExit(f"{folder}: decoder {decoder!r}: only center_heatmap and anchor heads are supported")
    if manifest.get("ground_z_m") != train.ground_level(args.data):
        raise SystemExit(
            f"{folder}: the model sees the ground at {manifest.get('ground_z_m')} (`ground_z_m`), "
            f"the --data folders at {train.ground_level(args.data)} (their meta.json): export them with that --ground-z"
        )
    g = grid(manifest)
    anchors = train.anchor_grid(g) if decoder == "anchor" else None
    size_output = manifest["head"]["anchor"]["box"] if anchors is not None else "dim"
    first_row = 3  # of the dim slice (centre head: channels 3..6 of the box conv) or of each anchor's 7
    head_path = folder / manifest["models"]["head"]["file"]
    model = onnx.load(head_path)
    conv, w_name, b_name = size_conv(model, size_output)
    feature_name = conv.input[0]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    encoder = ort.InferenceSession(str(folder / manifest["models"]["encoder"]["file"]), opts)
    head = ort.InferenceSession(with_features_output(model, feature_name).SerializeToString(), opts)
    rows = samples(args.data, g, encoder, head, feature_name, size_output, anchors)
    seeds = np.array([r[0] for r in rows])
    classes = np.array([r[1] for r in rows])
    slots = np.array([r[2] for r in rows])
    x = np.stack([r[3] for r in rows])
    y = np.stack([r[4] for r in rows])
    own = np.stack([r[5] for r in rows])
    inits = {i.name: i for i in model.graph.initializer}
    weight = numpy_helper.to_array(inits[w_name]).copy()
    bias = numpy_helper.to_array(inits[b_name]).copy()
    # Rows of each anchor slot (centre head: the one `dim` slice).
    rows_of = {a: slice(a * 7 + first_row, a * 7 + first_row + 3) for a in np.unique(slots)}
    # The extraction reproduces the head's own size output from the features and the current rows.
    recomputed = np.stack([x[k] @ weight[rows_of[a], :, 0, 0].T + bias[rows_of[a]] for k, a in enumerate(slots)])
    drift = float(np.abs(recomputed - own).max())
    if drift > 1e-3:
        raise SystemExit(f"features do not reproduce the head's size output (max difference {drift})")
    cut = np.sort(np.unique(seeds))[int(0.8 * len(np.unique(seeds)))]
    fit, val = seeds < cut, seeds >= cut
    pred = np.zeros_like(y, dtype=np.float64)
    for a, rows_a in rows_of.items():
        sel = slots == a
        w_fit, b_fit = ridge(x[fit & sel], y[fit & sel], args.lam)
        pred[sel] = x[sel] @ w_fit.T + b_fit
        w_all, b_all = ridge(x[sel], y[sel], args.lam)
        weight[rows_a, :, 0, 0] = w_all
        bias[rows_a] = b_all
    before = errors(own[val], y[val], classes[val])
    after = errors(pred[val], y[val], classes[val])
    print(f"{len(rows)} samples ({int(fit.sum())} fit, {int(val.sum())} validation, seeds ≥ {cut})")
    for name in before:
        print(f"  {name}: |log l, w, h| error {before[name]['abs_log_lwh']} -> {after[name]['abs_log_lwh']} (n {before[name]['n']})")
    inits[w_name].CopyFrom(numpy_helper.from_array(weight.astype(np.float32), w_name))
    inits[b_name].CopyFrom(numpy_helper.from_array(bias.astype(np.float32), b_name))
    onnx.save(model, head_path)
    text = (folder / "detector.toml").read_text()
    old = manifest["models"]["head"]["sha256"]
    text = text.replace(f'sha256 = "{old}"', f'sha256 = "{sha256(head_path)}"')
    if "refit_sizes.py" not in text:
        text = re.sub(
            r"^(name = )", "# head.onnx: size rows refit to the 2026-12-04 labels (pedestrians, vehicle mirrors) by tools/train/refit_sizes.py "
            "(refit_sizes.json).\n\\1", text, count=1, flags=re.M,
        )
    (folder / "detector.toml").write_text(text)
    (folder / "refit_sizes.json").write_text(json.dumps({
        "command": " ".join(["python3", "tools/train/refit_sizes.py"] + sys.argv[1:]),
        "samples": len(rows), "validation_seeds_from": int(cut), "lam": args.lam,
        "validation_before": before, "validation_after": after,
    }, indent=1) + "\n")
    print(f"wrote {head_path} (dim rows refit), detector.toml, refit_sizes.json")


if __name__ == "__main__":
    main()
