"""Trains a small CenterPoint-pillar detector on simulated sweeps and exports it as a boxlayer
split-pillar detector (encoder.onnx + head.onnx + detector.toml), the way CenterPoint-pillar is
published (CarkusL / HaohaoNJU I/O: pillars [P, 20, 10] in CenterPoint's 10-channel order ->
per-pillar features [P, C]; BEV canvas [1, C, ny, nx] -> hm / reg / height / dim / rot maps).

    python3 tools/train_detector.py --data /work/trainset --out detectors/NAME --seed 7 [--steps 3000]

The training set comes from `cargo run --release --example export_training_set` (little-endian
f32 x, y, z, intensity per point in the sensor frame + labels.jsonl with 9-value boxes). Nothing
here runs at inference: boxlayer pillarises in Rust; `pillarize` below reproduces its rule (first
come first kept, OpenPCDet centres, f32 sums for the mean) so training sees what the runtime feeds.

Model (CenterPoint, shrunk for CPU training):
  PFN:      Linear(10, C, no bias) + BatchNorm + ReLU, max over the pillar's 20 slots (one layer).
  Backbone: 2 blocks at 1/2 and 1/4 of the pillar grid, upsampled to 1/2 and concatenated.
  Head:     one task, labels vehicle/pedestrian/cyclist; heatmap (Gaussian targets, focal loss) and
            reg (2), height (1), dim (3, log), rot (sin, cos) with L1 loss at object centres.
Augmentation: random flip about x, rotation about z (±π/4), scaling (0.95–1.05).
Everything random is seeded by --seed (numpy + torch); the step count is fixed, so one command
reproduces the weights (up to floating-point differences between CPUs and thread counts).
Training uses torch's CPU threads (--threads, default 2).
"""

import argparse
import hashlib
import json
import math
import pathlib
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CLASSES = ["vehicle", "pedestrian", "cyclist"]


class Grid:
    """Pillar grid and head geometry (all of it ends up in the manifest)."""

    def __init__(self, args):
        r = args.range
        self.range = [-r, -r, args.z_min, r, r, args.z_max]
        self.pillar = [args.pillar, args.pillar, args.z_max - args.z_min]
        self.nx = int(round(2 * r / args.pillar))
        self.ny = self.nx
        self.max_points = args.max_points
        self.max_pillars = args.max_pillars
        self.stride = 2  # out_size_factor
        self.h = self.ny // self.stride
        self.w = self.nx // self.stride


def point_features(points):
    """Point features in manifest order: x, y, z, tanh(intensity), Δt = 0 (one sweep)."""
    n = len(points)
    feats = np.zeros((n, 5), np.float32)
    feats[:, :3] = points[:, :3]
    feats[:, 3] = np.tanh(points[:, 3])
    return feats


def pillarize(points, g):
    """boxlayer's pillariser in numpy: pillars [P, max_points, 10] (CenterPoint order) and cells (iy, ix)."""
    mn = np.array(g.range[:3], np.float32)
    size = np.array(g.pillar, np.float32)
    f = (points[:, :3] - mn) / size
    ok = (f[:, 0] >= 0) & (f[:, 1] >= 0) & (f[:, 2] >= 0) & (f[:, 2] < 1)
    ix = f[:, 0].astype(np.int64)
    iy = f[:, 1].astype(np.int64)
    ok &= (ix < g.nx) & (iy < g.ny)
    idx = np.nonzero(ok)[0]
    cell = iy[idx] * g.nx + ix[idx]
    order = np.argsort(cell, kind="stable")
    sc = cell[order]
    starts = np.ones(len(sc), bool)
    starts[1:] = sc[1:] != sc[:-1]
    group = np.cumsum(starts) - 1
    start_pos = np.nonzero(starts)[0]
    rank = np.arange(len(sc)) - start_pos[group]
    first_point = order[starts]  # position (in idx order) of each group's first point
    pillar_of_group = np.empty(len(first_point), np.int64)
    pillar_of_group[np.argsort(first_point, kind="stable")] = np.arange(len(first_point))
    pillar = pillar_of_group[group]
    keep = (rank < g.max_points) & (pillar < g.max_pillars)
    point = idx[order][keep]
    pillar = pillar[keep]
    slot = rank[keep]
    p_count = min(len(first_point), g.max_pillars)
    xyz = points[point, :3]
    counts = np.bincount(pillar, minlength=p_count).astype(np.float32)
    mean = np.stack([np.bincount(pillar, xyz[:, k], p_count) for k in range(3)], 1).astype(np.float32)
    mean /= counts[:, None]
    cells = sc[starts][np.argsort(first_point, kind="stable")][:p_count]
    cy, cx = cells // g.nx, cells % g.nx
    centre_x = cx.astype(np.float32) * size[0] + (size[0] / 2 + mn[0])
    centre_y = cy.astype(np.float32) * size[1] + (size[1] / 2 + mn[1])
    chans = np.zeros((len(point), 10), np.float32)
    chans[:, :5] = point_features(points[point])
    chans[:, 5:8] = xyz - mean[pillar]
    chans[:, 8] = xyz[:, 0] - centre_x[pillar]
    chans[:, 9] = xyz[:, 1] - centre_y[pillar]
    out = np.zeros((max(p_count, 1), g.max_points, 10), np.float32)
    out[pillar, slot] = chans
    return out, np.stack([cy, cx], 1)


class PillarEncoder(nn.Module):
    """CenterPoint PFNLayer (last layer): Linear + BN + ReLU, max over points."""

    def __init__(self, channels):
        super().__init__()
        self.linear = nn.Linear(10, channels, bias=False)
        self.norm = nn.BatchNorm1d(channels, eps=1e-3, momentum=0.01)

    def forward(self, pillars):
        p, n, _ = pillars.shape
        x = self.norm(self.linear(pillars.view(p * n, -1))).view(p, n, -1)
        return F.relu(x).max(dim=1).values


class FoldedEncoder(nn.Module):
    """The trained encoder with BatchNorm folded into the linear layer, for export."""

    def __init__(self, enc):
        super().__init__()
        bn = enc.norm
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        self.weight = nn.Parameter((enc.linear.weight * scale[:, None]).t().contiguous())
        self.bias = nn.Parameter(bn.bias - bn.running_mean * scale)

    def forward(self, pillars):
        return F.relu(torch.matmul(pillars, self.weight) + self.bias).max(dim=1).values


def conv(cin, cout, stride=1):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01), nn.ReLU()
    )


class Head(nn.Module):
    """Backbone + neck + CenterPoint head on the BEV canvas (fully convolutional)."""

    def __init__(self, c):
        super().__init__()
        self.block1 = conv(c, c, 2)
        self.block2 = nn.Sequential(conv(c, 2 * c, 2), conv(2 * c, 2 * c))
        self.up2 = nn.Sequential(
            nn.ConvTranspose2d(2 * c, c, 2, 2, bias=False), nn.BatchNorm2d(c, eps=1e-3, momentum=0.01), nn.ReLU()
        )
        self.hm = nn.Sequential(conv(2 * c, c // 2), nn.Conv2d(c // 2, len(CLASSES), 1))
        self.box = nn.Sequential(conv(2 * c, c // 2), nn.Conv2d(c // 2, 8, 1))
        self.hm[-1].bias.data.fill_(-2.19)

    def forward(self, canvas):
        x1 = self.block1(canvas)
        x = torch.cat([x1, self.up2(self.block2(x1))], 1)
        box = self.box(x)
        return self.hm(x), box[:, 0:2], box[:, 2:3], box[:, 3:6], box[:, 6:8]


def gaussian_radius(h, w, min_overlap=0.1):
    """CenterNet/CenterPoint radius for a box of h × w map cells."""
    a1, b1, c1 = 1, h + w, w * h * (1 - min_overlap) / (1 + min_overlap)
    r1 = (b1 + math.sqrt(b1**2 - 4 * a1 * c1)) / 2
    a2, b2, c2 = 4, 2 * (h + w), (1 - min_overlap) * w * h
    r2 = (b2 + math.sqrt(b2**2 - 4 * a2 * c2)) / 2
    a3, b3, c3 = 4 * min_overlap, -2 * min_overlap * (h + w), (min_overlap - 1) * w * h
    r3 = (b3 + math.sqrt(b3**2 - 4 * a3 * c3)) / 2
    return min(r1, r2, r3)


def draw_gaussian(heat, cx, cy, radius):
    d = 2 * radius + 1
    sigma = d / 6
    ys, xs = np.ogrid[-radius : radius + 1, -radius : radius + 1]
    g = np.exp(-(xs * xs + ys * ys) / (2 * sigma * sigma))
    h, w = heat.shape
    l, r = min(cx, radius), min(w - cx, radius + 1)
    t, b = min(cy, radius), min(h - cy, radius + 1)
    np.maximum(heat[cy - t : cy + b, cx - l : cx + r], g[radius - t : radius + b, radius - l : radius + r],
               out=heat[cy - t : cy + b, cx - l : cx + r])


def targets(boxes, labels, g, max_objs=256):
    """Heatmap [K, H, W] and per-object (index, reg/height/dim/rot target) as CenterPoint builds them."""
    heat = np.zeros((len(CLASSES), g.h, g.w), np.float32)
    ind = np.zeros(max_objs, np.int64)
    mask = np.zeros(max_objs, np.float32)
    tgt = np.zeros((max_objs, 8), np.float32)
    cell = g.pillar[0] * g.stride
    k = 0
    for b, c in zip(boxes, labels):
        x, y, z, l, w, h, yaw = b
        fx = (x - g.range[0]) / cell
        fy = (y - g.range[1]) / cell
        ix, iy = int(math.floor(fx)), int(math.floor(fy))
        if not (0 <= ix < g.w and 0 <= iy < g.h):
            continue
        radius = max(2, int(gaussian_radius(w / cell, l / cell)))
        draw_gaussian(heat[c], ix, iy, radius)
        if k < max_objs:
            ind[k] = iy * g.w + ix
            mask[k] = 1
            tgt[k] = [fx - ix, fy - iy, z, math.log(l), math.log(w), math.log(h), math.sin(yaw), math.cos(yaw)]
            k += 1
    return heat, ind, mask, tgt


def augment(points, boxes, rng):
    """Random flip about x, rotation about z and global scaling (points and 7-dof boxes)."""
    points = points.copy()
    boxes = boxes.copy()
    if rng.random() < 0.5:
        points[:, 1] = -points[:, 1]
        boxes[:, 1] = -boxes[:, 1]
        boxes[:, 6] = -boxes[:, 6]
    a = rng.uniform(-math.pi / 4, math.pi / 4)
    c, s = math.cos(a), math.sin(a)
    rot = np.array([[c, -s], [s, c]], np.float32)
    points[:, :2] = points[:, :2] @ rot.T
    boxes[:, :2] = boxes[:, :2] @ rot.T.astype(np.float64)
    boxes[:, 6] += a
    k = rng.uniform(0.95, 1.05)
    points[:, :3] *= k
    boxes[:, :6] *= k
    return points, boxes


def load_set(data, min_points):
    """Reads labels.jsonl: per sweep (file, boxes [n, 7], class indices) for objects with ≥ min_points returns."""
    items = []
    for line in (data / "labels.jsonl").read_text().splitlines():
        rec = json.loads(line)
        boxes, labels = [], []
        for o in rec["objects"]:
            if o["class"] in CLASSES and o["num_points"] >= min_points:
                b = o["box"]
                boxes.append([b[0], b[1], b[2], b[3], b[4], b[5], b[6]])
                labels.append(CLASSES.index(o["class"]))
        items.append((data / rec["file"], np.array(boxes, np.float64).reshape(-1, 7), np.array(labels, np.int64)))
    return items


def focal_loss(pred, gt):
    """CenterNet's penalty-reduced focal loss (α = 2, β = 4) on sigmoid logits."""
    p = torch.sigmoid(pred).clamp(1e-4, 1 - 1e-4)
    pos = gt.eq(1).float()
    neg = 1 - pos
    pos_loss = torch.log(p) * (1 - p) ** 2 * pos
    neg_loss = torch.log(1 - p) * p**2 * (1 - gt) ** 4 * neg
    n = pos.sum()
    return -(pos_loss.sum() + neg_loss.sum()) / torch.clamp(n, min=1)


def make_batch(items, rng, g, crop, crops_per_sweep):
    """Pillars, coordinates and targets of `crops_per_sweep` random crop × crop pillar windows of
    each (augmented) sweep. The network is fully convolutional, so it trains on windows and runs
    on the whole grid; windows start on multiples of 4 cells so the strides line up."""
    pillars, coords, heats, inds, masks, tgts = [], [], [], [], [], []
    s = g.stride
    for path, boxes, labels in items:
        pts = np.fromfile(path, "<f4").reshape(-1, 4)
        pts, boxes = augment(pts, boxes, rng)
        p, c = pillarize(pts, g)
        heat, ind, mask, tgt = targets(boxes, labels, g)
        for _ in range(crops_per_sweep):
            b = len(heats)
            ox = 4 * int(rng.integers(0, (g.nx - crop) // 4 + 1))
            oy = 4 * int(rng.integers(0, (g.ny - crop) // 4 + 1))
            inside = (c[:, 0] >= oy) & (c[:, 0] < oy + crop) & (c[:, 1] >= ox) & (c[:, 1] < ox + crop)
            pillars.append(p[inside])
            cc = c[inside] - [oy, ox]
            coords.append(np.concatenate([np.full((len(cc), 1), b), cc], 1))
            m = crop // s
            heats.append(heat[:, oy // s : oy // s + m, ox // s : ox // s + m])
            iy, ix = ind // g.w - oy // s, ind % g.w - ox // s
            ok = (mask > 0) & (iy >= 0) & (iy < m) & (ix >= 0) & (ix < m)
            inds.append(np.where(ok, iy * m + ix, 0))
            masks.append(ok.astype(np.float32))
            tgts.append(tgt)
    return (
        torch.from_numpy(np.concatenate(pillars)),
        torch.from_numpy(np.concatenate(coords)),
        torch.from_numpy(np.stack(heats)),
        torch.from_numpy(np.stack(inds)),
        torch.from_numpy(np.stack(masks)),
        torch.from_numpy(np.stack(tgts)),
    )


def scatter(features, coords, batch, ny, nx):
    c = features.shape[1]
    canvas = features.new_zeros(batch, c, ny * nx)
    flat = coords[:, 1] * nx + coords[:, 2]
    canvas[coords[:, 0], :, flat] = features
    return canvas.view(batch, c, ny, nx)


def train(args):
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    torch.set_num_threads(args.threads)
    g = Grid(args)
    items = load_set(pathlib.Path(args.data), args.min_points)
    print(f"{len(items)} sweeps; grid {g.nx}x{g.ny}, maps {g.w}x{g.h}", flush=True)
    enc, head = PillarEncoder(args.channels), Head(args.channels)
    params = list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps, pct_start=0.3)
    order = rng.permutation(len(items))
    pos = 0
    start = time.time()
    enc.train()
    head.train()
    for step in range(args.steps):
        batch = []
        for _ in range(args.sweeps_per_step):
            if pos == len(order):
                order, pos = rng.permutation(len(items)), 0
            batch.append(items[order[pos]])
            pos += 1
        pillars, coords, heat, ind, mask, tgt = make_batch(batch, rng, g, args.crop, args.crops_per_sweep)
        n = len(heat)
        canvas = scatter(enc(pillars), coords, n, args.crop, args.crop)
        hm, reg, height, dim, rot = head(canvas)
        hm_loss = focal_loss(hm, heat)
        box = torch.cat([reg, height, dim, rot], 1).flatten(2)  # [B, 8, H·W]
        pred = torch.gather(box, 2, ind[:, None, :].expand(-1, 8, -1)).permute(0, 2, 1)  # [B, n, 8]
        m = mask[..., None]
        loc_loss = (torch.abs(pred - tgt) * m).sum() / torch.clamp(m.sum(), min=1)
        loss = hm_loss + args.loc_weight * loc_loss
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, 35)
        opt.step()
        sched.step()
        if step % 50 == 0 or step == args.steps - 1:
            print(
                f"step {step} loss {loss.item():.3f} hm {hm_loss.item():.3f} loc {loc_loss.item():.3f} "
                f"lr {sched.get_last_lr()[0]:.5f} {time.time() - start:.0f} s",
                flush=True,
            )
    return enc, head, g, time.time() - start, len(items)


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export(enc, head, g, args, wall_s, n_sweeps):
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    enc.eval()
    head.eval()
    folded = FoldedEncoder(enc).eval()
    with torch.no_grad():
        probe = torch.randn(64, g.max_points, 10)
        assert torch.allclose(folded(probe), enc(probe), atol=1e-4), "BatchNorm folding changed the encoder"
        torch.onnx.export(
            folded, (probe,), out / "encoder.onnx", input_names=["pillars"], output_names=["pillar_features"],
            dynamic_axes={"pillars": {0: "P"}, "pillar_features": {0: "P"}}, opset_version=17, dynamo=False,
        )
        canvas = torch.zeros(1, args.channels, g.ny, g.nx)
        torch.onnx.export(
            head, (canvas,), out / "head.onnx", input_names=["canvas"],
            output_names=["hm", "reg", "height", "dim", "rot"], opset_version=17, dynamo=False,
        )
    name = out.name
    r = g.range
    toml = f'''# Trained by tools/train_detector.py on simulated vehicle sweeps; see README.md.
# {' '.join(args.command)}
name = "{name}"
family = "split_pillar"
decoder = "center_heatmap"

[models.encoder]
file = "encoder.onnx"
sha256 = "{sha256(out / 'encoder.onnx')}"
input = "pillars"
output = "pillar_features"

[models.head]
file = "head.onnx"
sha256 = "{sha256(out / 'head.onnx')}"
input = "canvas"

# CenterPoint's 5 point features (x, y, z, intensity, Δt); Waymo intensity through tanh as
# OpenPCDet's Waymo pipeline does; a single sweep has Δt = 0.
[points]
features = [{{ source = "x" }}, {{ source = "y" }}, {{ source = "z" }}, {{ source = "intensity", tanh = true }}, {{ source = "zero" }}]

[pillars]
point_cloud_range = [{r[0]}, {r[1]}, {r[2]}, {r[3]}, {r[4]}, {r[5]}]
pillar_size = [{g.pillar[0]}, {g.pillar[1]}, {g.pillar[2]}]
max_points_per_pillar = {g.max_points}
max_pillars = {g.max_pillars}
layout = "point_major"
feature_order = "centerpoint"

[scatter]
channels = {args.channels}
layout = "nchw"

[head.center]
out_size_factor = {g.stride}
peak_kernel = 3

[[head.center.tasks]]
labels = ["vehicle", "pedestrian", "cyclist"]
heatmap = "hm"
reg = "reg"
height = "height"
dim = "dim"
rot = "rot"

[classes]
vehicle = "vehicle"
pedestrian = "pedestrian"
cyclist = "cyclist"

[postprocess]
score_threshold = 0.1
nms = "rotated_iou"
nms_threshold = 0.2
nms_per_class = true
pre_nms_top_k = 1000
post_nms_top_k = 200

[runtime]
threads = 1
'''
    (out / "detector.toml").write_text(toml)
    (out / "training.json").write_text(json.dumps({
        "command": " ".join(args.command), "seed": args.seed, "steps": args.steps, "sweeps_per_step": args.sweeps_per_step, "crops_per_sweep": args.crops_per_sweep, "crop": args.crop,
        "threads": args.threads, "training_sweeps": n_sweeps, "wall_s": round(wall_s), "torch": torch.__version__,
    }, indent=1) + "\n")
    print(f"wrote {out}/encoder.onnx, head.onnx, detector.toml, training.json ({wall_s:.0f} s training)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="folder written by examples/export_training_set.rs")
    ap.add_argument("--out", required=True, help="detector folder to write (detectors/NAME)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--sweeps-per-step", type=int, default=2)
    ap.add_argument("--crops-per-sweep", type=int, default=2, help="training windows per sweep")
    ap.add_argument("--crop", type=int, default=128, help="training window side (pillars, multiple of 4)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--loc-weight", type=float, default=0.25)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--range", type=float, default=51.2, help="half-width of the square BEV range (m)")
    ap.add_argument("--z-min", type=float, default=-3.0)
    ap.add_argument("--z-max", type=float, default=5.0)
    ap.add_argument("--pillar", type=float, default=0.4, help="pillar side (m)")
    ap.add_argument("--max-points", type=int, default=20)
    ap.add_argument("--max-pillars", type=int, default=40000)
    ap.add_argument("--min-points", type=int, default=1, help="objects with fewer returns get no target")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import sys

    args.command = ["python3", "tools/train_detector.py"] + sys.argv[1:]
    enc, head, g, wall_s, n = train(args)
    export(enc, head, g, args, wall_s, n)


if __name__ == "__main__":
    main()
