"""Trains a small pillar detector on simulated sweeps and exports it as a boxlayer split-pillar
detector folder: encoder.onnx (pillars [P, max_points, 10] -> per-pillar features [P, C], P dynamic),
head.onnx (BEV canvas [1, ny, nx, C] -> head maps: the network takes NCHW and a leading Transpose,
tools/head_to_nhwc.py, lets boxlayer scatter into NHWC) and detector.toml (with the files' sha256), in the
I/O conventions of the public exports so that real models drop in the same way:

  --head center  CenterPoint-pillar (det3d / CarkusL / HaohaoNJU): outputs hm [1, 3, H, W], reg (2),
                 height (1), dim (3, log sizes), rot (sin, cos); Gaussian heatmap targets, focal
                 loss, L1 regression at object centres (weight --loc-weight).
  --head anchor  OpenPCDet AnchorHeadSingle + ResidualCoder: cls_preds [1, 6·3, H, W], box_preds
                 [1, 6·7, H, W], dir_cls_preds [1, 6·2, H, W], 6 anchors per cell (class -> rotation
                 0, π/2), axis-aligned BEV-IoU assignment, sigmoid focal + smooth-L1 (sin-difference
                 yaw) + direction cross-entropy, as OpenPCDet trains it.

    python3 tools/train/train.py --config tools/train/configs/NAME.toml
    python3 tools/train/train.py --data /work/trainset --out detectors/NAME --seed 7 --steps 900

One tool for every bundled detector: `--config` reads a TOML file of these options (keys as the
long options with `_` for `-`; the command line overrides it), one per detector in
tools/train/configs/ (the model cards in detectors/*/README.md give each detector's exact
command). The training sets come from `cargo run --release --example export_training_set`
(little-endian f32 x, y, z, intensity[, ring] per point, the fields named by the folder's
meta.json, + labels.jsonl with 9-value boxes); `--data` takes several folders (one per platform).

--checkpoint FILE saves the model, optimiser, schedule, step and every random state each
--checkpoint-every steps and resumes from it when it exists, so a run killed at any point and
started again with the same command ends with the weights of an uninterrupted run.

Nothing here runs at inference: boxlayer pillarises in Rust; `pillarize` below reproduces its rule (first come first
kept, OpenPCDet cell centres, f32 sums for the mean) for `--feature-order centerpoint` (x, y, z,
tanh(i), Δt=0, cluster offsets, x/y centre offsets) and `openpcdet` (x, y, z, tanh(i), cluster
offsets, x/y/z centre offsets); the exported encoder matched boxlayer's pillars bit for bit on a
training sweep.

Model, shrunk for CPU training: a one-layer PFN (Linear(10, C) + BatchNorm + ReLU, max over the
pillar's points; BatchNorm folded into the linear layer at export), a 2D backbone at 1/2 and 1/4
of the pillar grid (the 1/4 branch upsampled and concatenated), and the head at 1/2
(out_size_factor / feature_stride 2). The network is fully convolutional: each step trains on
random crop × crop pillar windows (--crops-per-sweep per sweep, --sweeps-per-step sweeps) and the
export runs on the whole grid. Augmentation: random flip about x, rotation about z (±π/4),
scaling (0.95–1.05); optionally (for sensors the simulator does not model exactly) beam dropout
(every other ring: a 32-beam sensor from a 64-beam one), point dropout, intensity scaled by
10^U(a, b) (Waymo's 0–1 intensity and Ouster's 0–100 reflectivity both), a small tilt (the
normalization's residual) and a z shift (other mounting heights). Classes: vehicle, pedestrian,
cyclist; objects with at least --min-points returns get targets.

Headings (center head): `--rot sincos` learns (sin θ, cos θ) as CenterPoint does; `double_angle`
learns (sin 2θ, cos 2θ), the heading modulo π; `double_angle_dir` adds a direction classifier (two
logits: the half angle θ₀ ∈ (−π/2, π/2] or θ₀ + π, as PointPillars' and SECOND's direction bins)
and head.onnx applies it, so `rot` carries the full heading.

Everything random is seeded by --seed (numpy + torch) and the step count is fixed (one-cycle
learning rate), so one command reproduces the weights up to floating-point differences between
CPUs and thread counts (--threads, default 2).

--device cuda trains on a GPU (the data loading and pillarisation stay in numpy on the CPU; the
export always runs on the CPU, so the ONNX files are the same kind either way). --workers N
prepares the batches in N processes; each step's sweeps and augmentation then come from streams
seeded by (seed, step), so the weights do not depend on N and a resumed run continues exactly
(--workers 0, the default, keeps the single-stream order the bundled models were trained with).
--deadline-s S stops after S seconds, saves the checkpoint and exports what is trained
(training.json: steps_done < steps); tools/train/gpu_session.py uses it to fit a device session. Bundled models must
stay under 8 MB per ONNX file: the head holds about 89·C² weights (C = --channels), 0.36 MB at
C = 32, 5.8 MB at C = 128; C ≥ 150 exceeds the budget (refused before training starts).
"""

import argparse
import collections
import functools
import hashlib
import json
import math
import multiprocessing
import pathlib
import sys
import time
import tomllib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import onnx  # noqa: E402
from head_to_nhwc import to_nhwc  # noqa: E402

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
        self.feature_order = args.feature_order
        self.stride = 2  # out_size_factor / feature_stride
        self.h = self.ny // self.stride
        self.w = self.nx // self.stride
        # z of the ground in the training points (`ground_level`); anchors stand on it.
        self.ground = 0.0


def point_features(points, order):
    """Point features in manifest order: x, y, z, tanh(intensity), and for `centerpoint` also
    Δt = 0 (one sweep)."""
    n = len(points)
    feats = np.zeros((n, 5 if order == "centerpoint" else 4), np.float32)
    feats[:, :3] = points[:, :3]
    feats[:, 3] = np.tanh(points[:, 3])
    return feats


def pillarize_sparse(points, g):
    """boxlayer's pillariser in numpy, as the points that land in pillars: per kept point its 10
    channels, pillar and slot, plus the pillar count and the pillars' cells (iy, ix). Channels:
    `centerpoint` = x, y, z, i, Δt, x−x̄, y−ȳ, z−z̄, x−x_c, y−y_c;
    `openpcdet` = x, y, z, i, x−x̄, y−ȳ, z−z̄, x−x_c, y−y_c, z−z_c."""
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
    feats = point_features(points[point], g.feature_order)
    k = feats.shape[1]
    chans[:, :k] = feats
    chans[:, k : k + 3] = xyz - mean[pillar]
    chans[:, k + 3] = xyz[:, 0] - centre_x[pillar]
    chans[:, k + 4] = xyz[:, 1] - centre_y[pillar]
    if g.feature_order == "openpcdet":
        chans[:, k + 5] = xyz[:, 2] - (size[2] / 2 + mn[2])
    return chans, pillar, slot, p_count, np.stack([cy, cx], 1)


def pillarize(points, g):
    """boxlayer's pillariser in numpy: pillars [P, max_points, 10] (channels as
    `pillarize_sparse`) and cells (iy, ix)."""
    chans, pillar, slot, p_count, cells = pillarize_sparse(points, g)
    out = np.zeros((max(p_count, 1), g.max_points, 10), np.float32)
    out[pillar, slot] = chans
    return out, cells


class PillarEncoder(nn.Module):
    """CenterPoint PFNLayer (last layer): Linear + BN + ReLU, max over points."""

    def __init__(self, channels):
        super().__init__()
        self.linear = nn.Linear(10, channels, bias=False)
        self.norm = nn.BatchNorm1d(channels, eps=1e-3, momentum=0.01)

    def forward(self, pillars):
        p, n, _ = pillars.shape
        if p == 0:
            # Every training window of the step fell on empty ground (sparse drone sweeps with
            # point dropout): no pillar features, an empty canvas.
            return pillars.new_zeros(0, self.linear.out_features)
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

    def __init__(self, c, double_angle=False, direction=False):
        super().__init__()
        self.double_angle = double_angle
        self.direction = direction
        self.exporting = False
        self.block1 = conv(c, c, 2)
        self.block2 = nn.Sequential(conv(c, 2 * c, 2), conv(2 * c, 2 * c))
        self.up2 = nn.Sequential(
            nn.ConvTranspose2d(2 * c, c, 2, 2, bias=False), nn.BatchNorm2d(c, eps=1e-3, momentum=0.01), nn.ReLU()
        )
        self.hm = nn.Sequential(conv(2 * c, c // 2), nn.Conv2d(c // 2, len(CLASSES), 1))
        self.box = nn.Sequential(conv(2 * c, c // 2), nn.Conv2d(c // 2, 10 if direction else 8, 1))
        self.hm[-1].bias.data.fill_(-2.19)

    def forward(self, canvas):
        x1 = self.block1(canvas)
        x = torch.cat([x1, self.up2(self.block2(x1))], 1)
        box = self.box(x)
        rot = box[:, 6:8]
        if self.exporting:
            if self.double_angle:
                rot = half_angle(rot)
            if self.direction:
                # The second direction logit says the heading is θ₀ + π: turn (sin, cos) round.
                rot = torch.where(box[:, 9:10] > box[:, 8:9], -rot, rot)
            return self.hm(x), box[:, 0:2], box[:, 2:3], box[:, 3:6], rot
        if self.direction:
            return self.hm(x), box[:, 0:2], box[:, 2:3], box[:, 3:6], rot, box[:, 8:10]
        return self.hm(x), box[:, 0:2], box[:, 2:3], box[:, 3:6], rot


def half_angle(rot):
    """(sin 2θ, cos 2θ) -> (sin θ, cos θ) with θ in (−π/2, π/2], in standard ONNX ops (no atan2):
    the `rot` output keeps CenterPoint's meaning while the network learns the heading modulo π."""
    s2, c2 = rot[:, 0:1], rot[:, 1:2]
    c = c2 / torch.sqrt(s2 * s2 + c2 * c2 + 1e-12)
    cos_h = torch.sqrt(torch.clamp((1 + c) / 2, min=0))
    sin_h = torch.where(s2 >= 0, 1.0, -1.0) * torch.sqrt(torch.clamp((1 - c) / 2, min=0))
    return torch.cat([sin_h, cos_h], 1)


# OpenPCDet Waymo-style anchors per class: size [l, w, h] (m), bottom height above the ground (m;
# the grid adds the training points' ground level, `Grid.ground`: 0 in Waymo's vehicle frame),
# matched / unmatched BEV IoU thresholds; rotations 0 and π/2.
ANCHORS = [
    ([4.7, 2.1, 1.7], 0.0, 0.55, 0.4),
    ([0.91, 0.86, 1.73], 0.0, 0.5, 0.35),
    ([1.78, 0.84, 1.78], 0.0, 0.5, 0.35),
]
ROTATIONS = [0.0, math.pi / 2]
DIR_OFFSET = 0.78539
NUM_ANCHORS = len(ANCHORS) * len(ROTATIONS)


class AnchorHead(nn.Module):
    """The same backbone + neck with an OpenPCDet AnchorHeadSingle: cls [A·K], box [A·7] and
    dir_cls [A·2] maps, A = 6 anchors per cell (class → rotation)."""

    def __init__(self, c):
        super().__init__()
        self.block1 = conv(c, c, 2)
        self.block2 = nn.Sequential(conv(c, 2 * c, 2), conv(2 * c, 2 * c))
        self.up2 = nn.Sequential(
            nn.ConvTranspose2d(2 * c, c, 2, 2, bias=False), nn.BatchNorm2d(c, eps=1e-3, momentum=0.01), nn.ReLU()
        )
        self.shared = conv(2 * c, c)
        self.cls = nn.Conv2d(c, NUM_ANCHORS * len(CLASSES), 1)
        self.box = nn.Conv2d(c, NUM_ANCHORS * 7, 1)
        self.dir = nn.Conv2d(c, NUM_ANCHORS * 2, 1)
        self.cls.bias.data.fill_(-math.log((1 - 0.01) / 0.01))
        nn.init.normal_(self.box.weight, mean=0, std=0.001)

    def forward(self, canvas):
        x1 = self.block1(canvas)
        x = self.shared(torch.cat([x1, self.up2(self.block2(x1))], 1))
        return self.cls(x), self.box(x), self.dir(x)


def limit_period(v, offset, period):
    return v - np.floor(v / period + offset) * period


def nearest_bev(boxes):
    """OpenPCDet's boxes3d_nearest_bev: rotated boxes as axis-aligned [x1, y1, x2, y2] (l and w
    swapped when the yaw is nearer ±π/2)."""
    rot = np.abs(limit_period(boxes[:, 6], 0.5, np.pi))
    swap = rot > np.pi / 4
    l = np.where(swap, boxes[:, 4], boxes[:, 3])
    w = np.where(swap, boxes[:, 3], boxes[:, 4])
    return np.stack([boxes[:, 0] - l / 2, boxes[:, 1] - w / 2, boxes[:, 0] + l / 2, boxes[:, 1] + w / 2], 1)


def iou_2d(a, b):
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def anchor_grid(g):
    """Anchors [H, W, A, 7] at map-cell centres (`align_center = true`), A in class → rotation order."""
    cell = g.pillar[0] * g.stride
    xs = g.range[0] + (np.arange(g.w) + 0.5) * cell
    ys = g.range[1] + (np.arange(g.h) + 0.5) * cell
    out = np.zeros((g.h, g.w, NUM_ANCHORS, 7))
    out[..., 0] = xs[None, :, None]
    out[..., 1] = ys[:, None, None]
    for ci, (size, bottom, _, _) in enumerate(ANCHORS):
        for ri, rot in enumerate(ROTATIONS):
            a = ci * len(ROTATIONS) + ri
            out[:, :, a, 2] = g.ground + bottom + size[2] / 2
            out[:, :, a, 3:6] = size
            out[:, :, a, 6] = rot
    return out


def anchor_targets(boxes, labels, g, anchors):
    """OpenPCDet AxisAlignedTargetAssigner + ResidualCoder per anchor: label (−1 ignored, 0
    background, k + 1 class k), residual [7] and direction bin. IoUs are computed only for the
    anchors whose cells lie within reach of a box (every other anchor's IoU is exactly 0), which
    gives the targets of the all-pairs assignment at a fraction of its cost."""
    h, w = g.h, g.w
    cls_t = np.zeros((h, w, NUM_ANCHORS), np.int64)
    box_t = np.zeros((h, w, NUM_ANCHORS, 7), np.float32)
    dir_t = np.zeros((h, w, NUM_ANCHORS), np.int64)
    cell = g.pillar[0] * g.stride
    for ci, (size, _, pos_thr, neg_thr) in enumerate(ANCHORS):
        gt = boxes[labels == ci]
        if not len(gt):
            continue
        sl = slice(ci * len(ROTATIONS), (ci + 1) * len(ROTATIONS))
        # Cells whose anchors (either rotation) can overlap a box's axis-aligned footprint.
        reach = max(size[0], size[1]) / 2
        near = np.zeros((h, w), bool)
        for x1, y1, x2, y2 in nearest_bev(gt):
            c0 = max(int(math.floor((x1 - reach - g.range[0]) / cell - 0.5)), 0)
            c1 = min(int(math.ceil((x2 + reach - g.range[0]) / cell - 0.5)) + 1, w)
            r0 = max(int(math.floor((y1 - reach - g.range[1]) / cell - 0.5)), 0)
            r1 = min(int(math.ceil((y2 + reach - g.range[1]) / cell - 0.5)) + 1, h)
            near[r0:r1, c0:c1] = True
        an = anchors[near][:, sl].reshape(-1, 7)
        lab = np.zeros(len(an), np.int64)
        res = np.zeros((len(an), 7), np.float32)
        dirs = np.zeros(len(an), np.int64)
        if len(an):
            iou = iou_2d(nearest_bev(an), nearest_bev(gt))
            best_gt = iou.argmax(1)
            best_iou = iou[np.arange(len(an)), best_gt]
            lab[(best_iou >= neg_thr) & (best_iou < pos_thr)] = -1
            pos = best_iou >= pos_thr
            # Each GT also keeps its best anchors (OpenPCDet: every anchor at the GT's max IoU > 0).
            gt_best = iou.max(0)
            force = (iou == gt_best[None, :]) & (gt_best[None, :] > 0)
            fa, fg = np.nonzero(force)
            best_gt[fa] = fg
            pos[fa] = True
            lab[pos] = ci + 1
            g_ = gt[best_gt[pos]]
            a_ = an[pos]
            d = np.sqrt(a_[:, 3] ** 2 + a_[:, 4] ** 2)
            res[pos] = np.stack([
                (g_[:, 0] - a_[:, 0]) / d, (g_[:, 1] - a_[:, 1]) / d, (g_[:, 2] - a_[:, 2]) / a_[:, 5],
                np.log(g_[:, 3] / a_[:, 3]), np.log(g_[:, 4] / a_[:, 4]), np.log(g_[:, 5] / a_[:, 5]),
                g_[:, 6] - a_[:, 6],
            ], 1)
            offset = limit_period(g_[:, 6] - DIR_OFFSET, 0, 2 * np.pi)
            dirs[pos] = np.clip(np.floor(offset / np.pi), 0, 1).astype(np.int64)
        n_rot = len(ROTATIONS)
        cls_t[near, sl] = lab.reshape(-1, n_rot)
        box_t[near, sl] = res.reshape(-1, n_rot, 7)
        dir_t[near, sl] = dirs.reshape(-1, n_rot)
    return cls_t, box_t, dir_t


def anchor_loss(cls, box, dirs, cls_t, box_t, dir_t):
    """OpenPCDet AnchorHeadSingle losses: sigmoid focal (α 0.25, γ 2) over non-ignored anchors,
    smooth-L1 (β 1/9) on residuals with the sin-difference yaw, ×2, and direction CE ×0.2, each
    normalised by the positive count."""
    b, _, h, w = cls.shape
    k = len(CLASSES)
    cls = cls.permute(0, 2, 3, 1).reshape(b, h, w, NUM_ANCHORS, k)
    box = box.permute(0, 2, 3, 1).reshape(b, h, w, NUM_ANCHORS, 7)
    dirs = dirs.permute(0, 2, 3, 1).reshape(b, h, w, NUM_ANCHORS, 2)
    pos = cls_t > 0
    n_pos = torch.clamp(pos.sum().float(), min=1)
    onehot = F.one_hot(torch.clamp(cls_t, min=0), k + 1)[..., 1:].float()
    care = (cls_t >= 0).float()[..., None]
    p = torch.sigmoid(cls)
    pt = p * onehot + (1 - p) * (1 - onehot)
    alpha = 0.25 * onehot + 0.75 * (1 - onehot)
    ce = F.binary_cross_entropy_with_logits(cls, onehot, reduction="none")
    cls_loss = (alpha * (1 - pt) ** 2 * ce * care).sum() / n_pos
    bp, bt = box[pos], box_t[pos]
    sin_p = torch.sin(bp[:, 6:7]) * torch.cos(bt[:, 6:7])
    sin_t = torch.cos(bp[:, 6:7]) * torch.sin(bt[:, 6:7])
    bp = torch.cat([bp[:, :6], sin_p], 1)
    bt = torch.cat([bt[:, :6], sin_t], 1)
    loc_loss = F.smooth_l1_loss(bp, bt, beta=1 / 9, reduction="sum") / n_pos
    dir_loss = F.cross_entropy(dirs[pos], dir_t[pos], reduction="sum") / n_pos
    return cls_loss, 2.0 * loc_loss, 0.2 * dir_loss


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


def direction_bin(yaw):
    """1 when the heading is the half angle θ₀ ∈ (−π/2, π/2] plus π, else 0."""
    return 1.0 if math.cos(yaw) < 0 else 0.0


def targets(boxes, labels, g, max_objs=256, double_angle=False):
    """Heatmap [K, H, W] and per-object (index, reg/height/dim/rot target, direction bin) as
    CenterPoint builds them; with `double_angle` the rot target is (sin 2θ, cos 2θ)."""
    heat = np.zeros((len(CLASSES), g.h, g.w), np.float32)
    ind = np.zeros(max_objs, np.int64)
    mask = np.zeros(max_objs, np.float32)
    tgt = np.zeros((max_objs, 9), np.float32)
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
            angle = 2 * yaw if double_angle else yaw
            tgt[k] = [
                fx - ix, fy - iy, z, math.log(l), math.log(w), math.log(h), math.sin(angle), math.cos(angle),
                direction_bin(yaw),
            ]
            k += 1
    return heat, ind, mask, tgt


def sensor_augment(points, boxes, rng, args):
    """What other sensors and mounts change (see the module doc): beam and point dropout,
    intensity scale, a small tilt about x and y, a z shift. Points carry a ring column when
    `points.shape[1] == 5`."""
    if getattr(args, "beam_dropout", 0) and points.shape[1] == 5 and rng.random() < args.beam_dropout:
        points = points[points[:, 4].astype(np.int64) % 2 == int(rng.integers(0, 2))]
    if getattr(args, "point_dropout", 0):
        points = points[rng.random(len(points)) >= rng.uniform(0, args.point_dropout)]
    lo, hi = getattr(args, "intensity_log10", None) or (0.0, 0.0)
    if hi > lo:
        points = points.copy()
        points[:, 3] *= 10 ** rng.uniform(lo, hi)
    tilt = math.radians(getattr(args, "tilt_deg", 0) or 0)
    if tilt > 0:
        ax, ay = rng.uniform(-tilt, tilt, 2)
        cx, sx, cy, sy = math.cos(ax), math.sin(ax), math.cos(ay), math.sin(ay)
        r = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]]) @ np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
        points = points.copy()
        points[:, :3] = points[:, :3] @ r.T.astype(np.float32)
        boxes = boxes.copy()
        boxes[:, :3] = boxes[:, :3] @ r.T
    shift = getattr(args, "z_shift", 0) or 0
    if shift > 0:
        dz = rng.uniform(-shift, shift)
        points = points.copy()
        points[:, 2] += dz
        boxes = boxes.copy()
        boxes[:, 2] += dz
    return points, boxes


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


def point_columns(data):
    """Floats per point of a training folder: 4 (x, y, z, intensity) or as its meta.json says."""
    meta = data / "meta.json"
    return len(json.loads(meta.read_text())["point_fields"]) if meta.exists() else 4


def input_frame(folders):
    """The frame of the training points ("sensor" or "normalized", from each folder's meta.json);
    folders of different frames are refused."""
    frames = set()
    for data in folders:
        meta = pathlib.Path(data) / "meta.json"
        frames.add(json.loads(meta.read_text()).get("frame", "sensor") if meta.exists() else "sensor")
    if len(frames) > 1:
        raise SystemExit(f"--data folders hold points in different frames: {sorted(frames)}")
    return frames.pop() if frames else "sensor"


def ground_level(folders):
    """Where the folders' meta.json say the ground lies (`export_training_set --ground-z`), or
    None when none says so; folders that disagree (or some with and some without) are refused,
    since one model learns one level."""
    levels = set()
    for data in folders:
        meta = pathlib.Path(data) / "meta.json"
        levels.add(json.loads(meta.read_text()).get("ground_z_m") if meta.exists() else None)
    if len(levels) > 1:
        raise SystemExit(f"--data folders put the ground at different heights: {sorted(levels, key=str)}")
    level = levels.pop() if levels else None
    return None if level is None else float(level)


def ground_line(folders):
    """The exported manifest's `ground_z_m` line (empty when the data declare no level)."""
    level = ground_level(folders)
    return "" if level is None else f"ground_z_m = {level!r}\n"


def load_set(data, min_points):
    """Reads labels.jsonl: per sweep (file, boxes [n, 7], class indices, floats per point) for
    objects with ≥ min_points returns."""
    items = []
    columns = point_columns(data)
    for line in (data / "labels.jsonl").read_text().splitlines():
        rec = json.loads(line)
        boxes, labels = [], []
        for o in rec["objects"]:
            if o["class"] in CLASSES and o["num_points"] >= min_points:
                b = o["box"]
                boxes.append([b[0], b[1], b[2], b[3], b[4], b[5], b[6]])
                labels.append(CLASSES.index(o["class"]))
        items.append(
            (data / rec["file"], np.array(boxes, np.float64).reshape(-1, 7), np.array(labels, np.int64), columns)
        )
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


def make_batch(items, rng, g, crop, crops_per_sweep, anchors=None, double_angle=False, args=None):
    """Pillars, coordinates and targets of `crops_per_sweep` random crop × crop pillar windows of
    each (augmented) sweep, as numpy arrays (`to_device` makes the tensors). The network is fully
    convolutional, so it trains on windows and runs on the whole grid; windows start on multiples
    of 4 cells so the strides line up. The pillars travel sparse: each kept point's channels,
    pillar and slot. CenterPoint targets (anchors None): heatmap, centre index, mask, regression;
    anchor targets: label, residual and direction per anchor."""
    chans, pillar_of, slots, coords, heats, inds, masks, tgts = [], [], [], [], [], [], [], []
    n_pillars = 0
    s = g.stride
    for path, boxes, labels, columns in items:
        pts = np.fromfile(path, "<f4").reshape(-1, columns)
        if args is not None:
            pts, boxes = sensor_augment(pts, boxes, rng, args)
        pts, boxes = augment(pts[:, :4], boxes, rng)
        ch, pil, slot, _, c = pillarize_sparse(pts, g)
        if anchors is None:
            heat, ind, mask, tgt = targets(boxes, labels, g, double_angle=double_angle)
        else:
            cls_t, box_t, dir_t = anchor_targets(boxes, labels, g, anchors)
        for _ in range(crops_per_sweep):
            b = len(heats)
            ox = 4 * int(rng.integers(0, (g.nx - crop) // 4 + 1))
            oy = 4 * int(rng.integers(0, (g.ny - crop) // 4 + 1))
            inside = (c[:, 0] >= oy) & (c[:, 0] < oy + crop) & (c[:, 1] >= ox) & (c[:, 1] < ox + crop)
            renumber = np.cumsum(inside) - 1
            keep = inside[pil]
            chans.append(ch[keep])
            pillar_of.append(renumber[pil[keep]] + n_pillars)
            slots.append(slot[keep])
            n_pillars += int(inside.sum())
            cc = c[inside] - [oy, ox]
            coords.append(np.concatenate([np.full((len(cc), 1), b), cc], 1))
            m = crop // s
            if anchors is not None:
                window = (slice(oy // s, oy // s + m), slice(ox // s, ox // s + m))
                heats.append(cls_t[window])
                inds.append(box_t[window])
                masks.append(dir_t[window])
                tgts.append(np.zeros(1, np.float32))
                continue
            heats.append(heat[:, oy // s : oy // s + m, ox // s : ox // s + m])
            iy, ix = ind // g.w - oy // s, ind % g.w - ox // s
            ok = (mask > 0) & (iy >= 0) & (iy < m) & (ix >= 0) & (ix < m)
            inds.append(np.where(ok, iy * m + ix, 0))
            masks.append(ok.astype(np.float32))
            tgts.append(tgt)
    return (
        np.concatenate(chans),
        np.concatenate(pillar_of),
        np.concatenate(slots),
        n_pillars,
        np.concatenate(coords),
        np.stack(heats),
        np.stack(inds),
        np.stack(masks),
        np.stack(tgts),
    )


def to_device(batch, max_points, device):
    """The tensors of a `make_batch` batch on `device`: pillars [P, max_points, 10] (built there
    from the sparse points), coordinates and targets."""
    chans, pillar_of, slots, n_pillars, *rest = batch
    pillars = torch.zeros(n_pillars, max_points, 10, device=device)
    pillars[torch.from_numpy(pillar_of).to(device), torch.from_numpy(slots).to(device)] = torch.from_numpy(
        chans
    ).to(device)
    return (pillars, *(torch.from_numpy(t).to(device, non_blocking=True) for t in rest))


def step_items(n_items, seed, step, per_step):
    """The sweeps (indices) of training step `step` with --workers: step after step through one
    seeded permutation of the set per epoch, a function of (seed, step) alone, so a resumed run
    and any worker count draw the same sweeps."""
    out = []
    for k in range(step * per_step, (step + 1) * per_step):
        epoch, i = divmod(k, n_items)
        out.append(int(epoch_order(n_items, seed, epoch)[i]))
    return out


@functools.lru_cache(maxsize=4)
def epoch_order(n_items, seed, epoch):
    """The order of the training set in epoch `epoch` with --workers (seeded by seed and epoch)."""
    return np.random.default_rng([seed, 1, epoch]).permutation(n_items)


WORKER = {}


def worker_init(items, g, args, anchors, double_angle):
    """Per data worker: the training set and options, one torch thread."""
    torch.set_num_threads(1)
    WORKER.update(items=items, g=g, args=args, anchors=anchors, double_angle=double_angle)


def worker_batch(step):
    """Step `step`'s batch with --workers, augmented from its own stream seeded by (seed, step)."""
    w, a = WORKER, WORKER["args"]
    batch = [w["items"][i] for i in step_items(len(w["items"]), a.seed, step, a.sweeps_per_step)]
    rng = np.random.default_rng([a.seed, 2, step])
    return make_batch(batch, rng, w["g"], a.crop, a.crops_per_sweep, w["anchors"], w["double_angle"], a)


def scatter(features, coords, batch, ny, nx):
    c = features.shape[1]
    canvas = features.new_zeros(batch, c, ny * nx)
    flat = coords[:, 1] * nx + coords[:, 2]
    canvas[coords[:, 0], :, flat] = features
    return canvas.view(batch, c, ny, nx)


def train_device(name):
    """The torch device to train on; `cuda` must really be there (no silent CPU fallback)."""
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device (torch.cuda.is_available() is False)")
    return torch.device(name)


def save_checkpoint(path, step, enc, head, opt, sched, rng, order, pos, wall_s):
    """Everything a resumed run needs to continue as if never stopped (written atomically)."""
    tmp = path.with_suffix(".tmp")
    torch.save({
        "step": step, "enc": enc.state_dict(), "head": head.state_dict(), "opt": opt.state_dict(),
        "sched": sched.state_dict(), "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
        "order": order, "pos": pos, "wall_s": wall_s,
    }, tmp)
    tmp.replace(path)


def train(args):
    launched = time.time()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    torch.set_num_threads(args.threads)
    device = train_device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # the training windows keep one shape
    g = Grid(args)
    g.ground = ground_level(args.data) or 0.0
    items = [item for data in args.data for item in load_set(pathlib.Path(data), args.min_points)]
    print(f"{len(items)} sweeps from {len(args.data)} folder(s); grid {g.nx}x{g.ny}, maps {g.w}x{g.h}", flush=True)
    enc = PillarEncoder(args.channels)
    double_angle = args.rot in ("double_angle", "double_angle_dir")
    direction = args.rot == "double_angle_dir"
    head = Head(args.channels, double_angle, direction) if args.head == "center" else AnchorHead(args.channels)
    anchors = anchor_grid(g) if args.head == "anchor" else None
    enc.to(device)
    head.to(device)
    params = list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps, pct_start=0.3)
    order = rng.permutation(len(items))
    pos = 0
    first_step, elapsed = 0, 0.0
    checkpoint = pathlib.Path(args.checkpoint) if args.checkpoint else None
    if checkpoint is not None and checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False, map_location="cpu")
        enc.load_state_dict(state["enc"])
        head.load_state_dict(state["head"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        order, pos, first_step, elapsed = state["order"], state["pos"], state["step"], state["wall_s"]
        print(f"resumed from {checkpoint} at step {first_step}", flush=True)
    start = time.time() - elapsed
    steps_done = first_step
    enc.train()
    head.train()
    pool, pending, next_step, wait_s = None, collections.deque(), first_step, 0.0
    if args.workers > 0:
        pool = multiprocessing.get_context("spawn").Pool(
            args.workers, worker_init, (items, g, args, anchors, double_angle)
        )
    try:
        for step in range(first_step, args.steps):
            if pool is None:
                batch = []
                for _ in range(args.sweeps_per_step):
                    if pos == len(order):
                        order, pos = rng.permutation(len(items)), 0
                    batch.append(items[order[pos]])
                    pos += 1
                arrays = make_batch(batch, rng, g, args.crop, args.crops_per_sweep, anchors, double_angle, args)
            else:
                while next_step < args.steps and len(pending) < 2 * args.workers:
                    pending.append(pool.apply_async(worker_batch, (next_step,)))
                    next_step += 1
                waited = time.time()
                arrays = pending.popleft().get()
                wait_s += time.time() - waited
            loss, parts, clip_norm = train_step(arrays, enc, head, g, anchors, args, device)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, clip_norm)
            opt.step()
            sched.step()
            if step % args.log_every == 0 or step == args.steps - 1:
                detail = " ".join(f"{name} {value.item():.3f}" for name, value in parts.items())
                waiting = f" (data wait {wait_s:.0f} s)" if pool is not None else ""
                print(
                    f"step {step} loss {loss.item():.3f} {detail} "
                    f"lr {sched.get_last_lr()[0]:.5f} {time.time() - start:.1f} s{waiting}",
                    flush=True,
                )
            steps_done = step + 1
            late = args.deadline_s is not None and time.time() - launched > args.deadline_s
            if checkpoint is not None and (
                steps_done % args.checkpoint_every == 0 or steps_done == args.steps or late
            ):
                save_checkpoint(checkpoint, steps_done, enc, head, opt, sched, rng, order, pos, time.time() - start)
            if late and steps_done < args.steps:
                print(
                    f"--deadline-s {args.deadline_s}: stopping at step {steps_done} of {args.steps} "
                    "(the export is of an unfinished schedule; the same command resumes from the checkpoint)",
                    flush=True,
                )
                break
    finally:
        if pool is not None:
            pool.terminate()
    return enc.cpu(), head.cpu(), g, time.time() - start, len(items), steps_done


def train_step(arrays, enc, head, g, anchors, args, device):
    """Forward pass and losses of one batch: (total loss, named parts, gradient clip norm)."""
    pillars, coords, heat, ind, mask, tgt = to_device(arrays, g.max_points, device)
    canvas = scatter(enc(pillars), coords, len(heat), args.crop, args.crop)
    if args.head == "anchor":
        cls_loss, loc_loss, dir_loss = anchor_loss(*head(canvas), heat, ind, mask)
        return cls_loss + loc_loss + dir_loss, {"cls": cls_loss, "loc": loc_loss, "dir": dir_loss}, 10
    hm, reg, height, dim, rot, *dirs = head(canvas)
    hm_loss = focal_loss(hm, heat)
    box = torch.cat([reg, height, dim, rot], 1).flatten(2)  # [B, 8, H·W]
    pred = torch.gather(box, 2, ind[:, None, :].expand(-1, 8, -1)).permute(0, 2, 1)  # [B, n, 8]
    m = mask[..., None]
    loc_loss = (torch.abs(pred - tgt[..., :8]) * m).sum() / torch.clamp(m.sum(), min=1)
    loss = hm_loss + args.loc_weight * loc_loss
    parts = {"hm": hm_loss, "loc": loc_loss}
    if dirs:
        logits = torch.gather(dirs[0].flatten(2), 2, ind[:, None, :].expand(-1, 2, -1)).permute(0, 2, 1)
        ce = F.cross_entropy(logits.reshape(-1, 2), tgt[..., 8].reshape(-1).long(), reduction="none")
        dir_loss = (ce * mask.reshape(-1)).sum() / torch.clamp(mask.sum(), min=1)
        loss = loss + args.dir_weight * dir_loss
        parts["dir"] = dir_loss
    return loss, parts, 35


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest(g, args, out):
    """detector.toml for the exported graphs (names, shapes, grid and decoding as trained)."""
    r = g.range
    if g.feature_order == "centerpoint":
        features = """# CenterPoint's 5 point features (x, y, z, intensity, Δt); Waymo intensity through tanh as
# OpenPCDet's Waymo pipeline does; a single sweep has Δt = 0.
[points]
features = [{ source = "x" }, { source = "y" }, { source = "z" }, { source = "intensity", tanh = true }, { source = "zero" }]"""
    else:
        features = """# OpenPCDet's 4 point features (x, y, z, intensity); Waymo intensity through tanh as
# OpenPCDet's Waymo pipeline does.
[points]
features = [{ source = "x" }, { source = "y" }, { source = "z" }, { source = "intensity", tanh = true }]"""
    if args.head == "center":
        head = f"""decoder = "center_heatmap"
"""
        decoding = f"""[head.center]
out_size_factor = {g.stride}
peak_kernel = 3

[[head.center.tasks]]
labels = ["vehicle", "pedestrian", "cyclist"]
heatmap = "hm"
reg = "reg"
height = "height"
dim = "dim"
rot = "rot"
"""
    else:
        head = f"""decoder = "anchor"
"""
        entries = "\n".join(
            f"""[[head.anchor.anchors]]
label = "{c}"
sizes = [{size}]
rotations = [{ROTATIONS[0]}, {ROTATIONS[1]}]
bottom_height = {bottom + (ground_level(args.data) or 0.0)!r}
"""
            for c, (size, bottom, _, _) in zip(CLASSES, ANCHORS)
        )
        decoding = f"""[head.anchor]
cls = "cls_preds"
box = "box_preds"
dir_cls = "dir_cls_preds"
labels = ["vehicle", "pedestrian", "cyclist"]
feature_stride = {g.stride}
align_center = true
box_code_size = 7
num_dir_bins = 2
dir_offset = {DIR_OFFSET}
dir_limit_offset = 0.0

{entries}"""
    return f"""# Trained by tools/train/train.py on simulated sweeps ({", ".join(args.data)}); see README.md.
# {' '.join(args.command)}
name = "{out.name}"
family = "split_pillar"
input_frame = "{input_frame(args.data)}"
{ground_line(args.data)}{head}
[models.encoder]
file = "encoder.onnx"
sha256 = "{sha256(out / 'encoder.onnx')}"
input = "pillars"
output = "pillar_features"

[models.head]
file = "head.onnx"
sha256 = "{sha256(out / 'head.onnx')}"
input = "canvas"

{features}

[pillars]
point_cloud_range = [{r[0]}, {r[1]}, {r[2]}, {r[3]}, {r[4]}, {r[5]}]
pillar_size = [{g.pillar[0]}, {g.pillar[1]}, {g.pillar[2]}]
max_points_per_pillar = {g.max_points}
max_pillars = {g.max_pillars}
layout = "point_major"
feature_order = "{g.feature_order}"

[scatter]
channels = {args.channels}
layout = "nhwc"

{decoding}
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
"""


def export(enc, head, g, args, wall_s, n_sweeps, steps_done):
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    enc.eval()
    head.eval()
    folded = FoldedEncoder(enc).eval()
    head.exporting = True
    outputs = ["hm", "reg", "height", "dim", "rot"] if args.head == "center" else ["cls_preds", "box_preds", "dir_cls_preds"]
    with torch.no_grad():
        probe = torch.randn(64, g.max_points, 10)
        assert torch.allclose(folded(probe), enc(probe), atol=1e-4), "BatchNorm folding changed the encoder"
        torch.onnx.export(
            folded, (probe,), out / "encoder.onnx", input_names=["pillars"], output_names=["pillar_features"],
            dynamic_axes={"pillars": {0: "P"}, "pillar_features": {0: "P"}}, opset_version=17, dynamo=False,
        )
        canvas = torch.zeros(1, args.channels, g.ny, g.nx)
        torch.onnx.export(
            head, (canvas,), out / "head.onnx", input_names=["canvas"], output_names=outputs, opset_version=17,
            dynamo=False,
        )
    # The canvas goes in as NHWC (each pillar's features contiguous, so the scatter touches only
    # occupied cells); the Transpose costs the head less than the scatter saves (docs/benchmarks.md).
    onnx.save(to_nhwc(onnx.load(out / "head.onnx")), out / "head.onnx")
    (out / "detector.toml").write_text(manifest(g, args, out))
    (out / "training.json").write_text(json.dumps({
        "command": " ".join(args.command), "seed": args.seed, "steps": args.steps, "steps_done": steps_done,
        "sweeps_per_step": args.sweeps_per_step, "crops_per_sweep": args.crops_per_sweep, "crop": args.crop,
        "threads": args.threads, "device": args.device, "training_sweeps": n_sweeps, "wall_s": round(wall_s), "torch": torch.__version__,
        "options": {k: v for k, v in sorted(vars(args).items()) if k != "command"},
    }, indent=1) + "\n")
    print(f"wrote {out}/encoder.onnx, head.onnx, detector.toml, training.json ({wall_s:.0f} s training)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="TOML file of these options (the command line overrides it)")
    ap.add_argument("--data", nargs="+", help="folders written by examples/export_training_set.rs")
    ap.add_argument("--out", help="detector folder to write (detectors/NAME)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--head", choices=["center", "anchor"], default="center", help="CenterPoint or OpenPCDet anchor head")
    ap.add_argument("--feature-order", choices=["centerpoint", "openpcdet"], default="centerpoint")
    ap.add_argument(
        "--rot", choices=["sincos", "double_angle", "double_angle_dir"], default="sincos",
        help="center head: learn (sin θ, cos θ) as CenterPoint does, or (sin 2θ, cos 2θ) (heading modulo π, "
        "converted back to (sin θ, cos θ) inside head.onnx), or that plus a direction classifier (full heading)",
    )
    ap.add_argument("--dir-weight", type=float, default=0.2, help="weight of the direction classifier's loss")
    ap.add_argument("--beam-dropout", type=float, default=0.0, help="probability of keeping every other ring only")
    ap.add_argument("--point-dropout", type=float, default=0.0, help="drop up to this share of the points")
    ap.add_argument("--intensity-log10", type=float, nargs=2, help="scale intensity by 10^U(a, b)")
    ap.add_argument("--tilt-deg", type=float, default=0.0, help="tilt points and boxes by up to this about x and y")
    ap.add_argument("--z-shift", type=float, default=0.0, help="shift points and boxes by up to this along z (m)")
    ap.add_argument("--checkpoint", help="checkpoint file: saved every --checkpoint-every steps, resumed from")
    ap.add_argument("--checkpoint-every", type=int, default=100)
    ap.add_argument("--log-every", type=int, default=50, help="print the losses every this many steps")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument(
        "--deadline-s", type=float,
        help="stop after this many seconds of this process (checkpoint saved, model exported, "
        "training.json's steps_done < steps) so a fixed-length session ends with something to measure",
    )
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
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="train on the CPU or a CUDA GPU")
    ap.add_argument(
        "--workers", type=int, default=0,
        help="data worker processes (0: prepare each batch in the training process); with workers each "
        "step's sweeps and augmentation come from streams seeded by (seed, step)",
    )
    pre, _ = ap.parse_known_args()
    if pre.config:
        with open(pre.config, "rb") as f:
            config = tomllib.load(f)
        known = {a.dest for a in ap._actions}
        unknown = sorted(set(config) - known)
        if unknown:
            raise SystemExit(f"{pre.config}: unknown keys {unknown}")
        ap.set_defaults(**config)
    args = ap.parse_args()
    if not args.data or not args.out:
        raise SystemExit("--data and --out are needed (on the command line or in --config)")
    head_mb = 89 * args.channels**2 * 4 / 1e6
    if head_mb > 8:
        raise SystemExit(f"--channels {args.channels}: head.onnx would be about {head_mb:.1f} MB, over the 8 MB budget")
    args.command = ["python3", "tools/train/train.py"] + sys.argv[1:]
    enc, head, g, wall_s, n, steps_done = train(args)
    export(enc, head, g, args, wall_s, n, steps_done)


if __name__ == "__main__":
    main()
