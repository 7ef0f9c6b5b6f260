#!/usr/bin/env python3
"""Export UNTRAINED detectors of the published reference sizes (seeded random weights) for timing.

These are **not** detectors: their weights are random (seeded, variance-preserving He init, the
classification bias at OpenPCDet's / CenterPoint's prior of 0.01 so that hardly any cell passes the
score threshold). They exist only to measure what boxlayer's runtime costs next to ONNX models of
the size real detectors have (issue #7: pre + post-processing against ONNX time). Each folder gets
`encoder.onnx`, `head.onnx` and a `detector.toml` in boxlayer's split-pillar conventions:

- `pointpillars_kitti_untrained`: OpenPCDet `pointpillar.yaml` (KITTI): range [0, −39.68, −3,
  69.12, 39.68, 1], 0.16 m pillars (432 × 496), 32 points, 40000 pillars (the dynamic axis is
  kept), PillarVFE with one 64-channel PFN layer (10 `openpcdet` channels), BaseBEVBackbone
  LAYER_NUMS [3, 5, 5], LAYER_STRIDES [2, 2, 2], NUM_FILTERS [64, 128, 256], UPSAMPLE_STRIDES
  [1, 2, 4] to 128 channels each (384 at stride 2), AnchorHeadSingle (3 classes × 2 rotations:
  cls 18, box 42, dir 12 channels), 4.8 M parameters.
- `centerpoint_pillar_nuscenes_untrained`: det3d `nusc_centerpoint_pp_02voxel_two_pfn_10sweep`:
  range ±51.2 m, z −5..3, 0.2 m pillars (512 × 512), 20 points, 30000 pillars, two PFN layers
  (10 → 32 + max = 64 → 64; `centerpoint` channels, x, y, z, i, Δt = 0), RPN layer_nums [3, 5, 5],
  strides [2, 2, 2], filters [64, 128, 256], upsample strides [0.5, 1, 2] to 128 each (384 at
  stride 4), CenterHead: shared 3 × 3 conv to 64, six tasks (1, 2, 2, 1, 2, 2 classes) each with
  3 × 3 + 3 × 3 SepHead convs for hm, reg, height, dim, rot, vel; out_size_factor 4.

The files are 18–25 MB: write them to a temporary folder, never into the repository (bundled
models stay under 8 MB each). Usage:

    python3 tools/make_reference_size_models.py --out /tmp/refmodels [--seed 0]
    cargo run --release --example detector_quality -- --detector /tmp/refmodels/NAME \
        --platforms vehicle --frames 60 --stride 10

Only the per-stage time of that run means anything; its AP is that of random weights.
"""

import argparse
import hashlib
import math
import pathlib

import torch
import torch.nn as nn


def conv_bn(cin, cout, kernel=3, stride=1):
    return [
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False),
        nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01),
        nn.ReLU(),
    ]


def deconv_bn(cin, cout, stride):
    return [
        nn.ConvTranspose2d(cin, cout, stride, stride, bias=False),
        nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01),
        nn.ReLU(),
    ]


class Backbone(nn.Module):
    """OpenPCDet BaseBEVBackbone / det3d RPN: blocks of 3 × 3 convs, each block's output brought
    to one resolution (transposed conv for up-sampling, strided conv for `up` < 1) and concatenated."""

    def __init__(self, cin, layer_nums, strides, filters, ups, up_filters):
        super().__init__()
        self.blocks, self.deblocks = nn.ModuleList(), nn.ModuleList()
        c = cin
        for n, s, f, u, uf in zip(layer_nums, strides, filters, ups, up_filters):
            layers = conv_bn(c, f, 3, s)
            for _ in range(n):
                layers += conv_bn(f, f)
            self.blocks.append(nn.Sequential(*layers))
            if u >= 1:
                self.deblocks.append(nn.Sequential(*deconv_bn(f, uf, int(u))))
            else:
                down = int(round(1 / u))
                self.deblocks.append(nn.Sequential(
                    nn.Conv2d(f, uf, down, down, bias=False), nn.BatchNorm2d(uf, eps=1e-3, momentum=0.01), nn.ReLU()
                ))
            c = f

    def forward(self, x):
        ups = []
        for block, deblock in zip(self.blocks, self.deblocks):
            x = block(x)
            ups.append(deblock(x))
        return torch.cat(ups, 1)


class PFN(nn.Module):
    """PillarVFE / det3d PillarFeatureNet: Linear + BN + ReLU layers; every layer but the last
    concatenates its output with the max over the pillar's points; the last returns the max."""

    def __init__(self, cin, filters):
        super().__init__()
        self.layers = nn.ModuleList()
        for k, f in enumerate(filters):
            last = k == len(filters) - 1
            out = f if last else f // 2
            self.layers.append(nn.ModuleDict({
                "linear": nn.Linear(cin, out, bias=False), "norm": nn.BatchNorm1d(out, eps=1e-3, momentum=0.01)
            }))
            cin = f

    def forward(self, pillars):
        x = pillars
        for k, layer in enumerate(self.layers):
            p, n, _ = x.shape
            y = torch.relu(layer["norm"](layer["linear"](x.reshape(p * n, -1))).reshape(p, n, -1))
            y_max = y.max(dim=1, keepdim=True).values
            if k == len(self.layers) - 1:
                return y_max.squeeze(1)
            x = torch.cat([y, y_max.expand(-1, n, -1)], 2)
        return x


class AnchorHeadSingle(nn.Module):
    def __init__(self, cin, anchors, classes):
        super().__init__()
        self.backbone = Backbone(cin, [3, 5, 5], [2, 2, 2], [64, 128, 256], [1, 2, 4], [128, 128, 128])
        self.cls = nn.Conv2d(384, anchors * classes, 1)
        self.box = nn.Conv2d(384, anchors * 7, 1)
        self.dir = nn.Conv2d(384, anchors * 2, 1)

    def forward(self, canvas):
        x = self.backbone(canvas)
        return self.cls(x), self.box(x), self.dir(x)


NUSCENES_TASKS = [["car"], ["truck", "construction_vehicle"], ["bus", "trailer"], ["barrier"],
                  ["motorcycle", "bicycle"], ["pedestrian", "traffic_cone"]]
CENTER_OUTPUTS = [("reg", 2), ("height", 1), ("dim", 3), ("rot", 2), ("vel", 2)]


class CenterHead(nn.Module):
    def __init__(self, cin):
        super().__init__()
        self.backbone = Backbone(cin, [3, 5, 5], [2, 2, 2], [64, 128, 256], [0.5, 1, 2], [128, 128, 128])
        self.shared = nn.Sequential(*conv_bn(384, 64))
        self.tasks = nn.ModuleList()
        for labels in NUSCENES_TASKS:
            heads = nn.ModuleDict()
            for name, channels in [("hm", len(labels))] + CENTER_OUTPUTS:
                heads[name] = nn.Sequential(*conv_bn(64, 64), nn.Conv2d(64, channels, 3, 1, 1))
            self.tasks.append(heads)

    def forward(self, canvas):
        x = self.shared(self.backbone(canvas))
        outputs = []
        for heads in self.tasks:
            outputs += [heads["hm"](x)] + [heads[name](x) for name, _ in CENTER_OUTPUTS]
        return tuple(outputs)


def init_weights(model, cls_convs):
    """He (fan-in, ReLU) init so activations keep their scale through the deep backbone (no
    vanishing to denormals, which would distort CPU timing); BatchNorm as identity; the score
    convolutions near zero with the 0.01 prior bias, so few cells pass a 0.1 threshold."""
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)
    for m in cls_convs:
        nn.init.normal_(m.weight, std=1e-3)
        nn.init.constant_(m.bias, -math.log((1 - 0.01) / 0.01))


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export(out, name, encoder, head, pillar_shape, canvas_shape, head_outputs, manifest):
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    encoder.eval()
    head.eval()
    with torch.no_grad():
        torch.onnx.export(
            encoder, (torch.randn(*pillar_shape),), folder / "encoder.onnx", input_names=["pillars"],
            output_names=["pillar_features"], dynamic_axes={"pillars": {0: "P"}, "pillar_features": {0: "P"}},
            opset_version=17, dynamo=False,
        )
        torch.onnx.export(
            head, (torch.zeros(*canvas_shape),), folder / "head.onnx", input_names=["canvas"],
            output_names=head_outputs, opset_version=17, dynamo=False,
        )
    text = manifest.format(
        name=name, encoder_sha=sha256(folder / "encoder.onnx"), head_sha=sha256(folder / "head.onnx")
    )
    (folder / "detector.toml").write_text(text)
    params = sum(p.numel() for p in encoder.parameters()) + sum(p.numel() for p in head.parameters())
    sizes = ", ".join(f"{f} {(folder / f).stat().st_size / 1e6:.1f} MB" for f in ["encoder.onnx", "head.onnx"])
    print(f"wrote {folder}: {params / 1e6:.2f} M parameters; {sizes}")


COMMON = """# UNTRAINED: seeded random weights of the reference size, for timing only
# (tools/make_reference_size_models.py). Not a detector.
name = "{name}"
family = "split_pillar"
decoder = "%s"

[models.encoder]
file = "encoder.onnx"
sha256 = "{encoder_sha}"
input = "pillars"
output = "pillar_features"

[models.head]
file = "head.onnx"
sha256 = "{head_sha}"
input = "canvas"
"""

POINTPILLARS = COMMON % "anchor" + """
[points]
features = [{{ source = "x" }}, {{ source = "y" }}, {{ source = "z" }}, {{ source = "intensity" }}]

[pillars]
point_cloud_range = [0.0, -39.68, -3.0, 69.12, 39.68, 1.0]
pillar_size = [0.16, 0.16, 4.0]
max_points_per_pillar = 32
max_pillars = 40000
layout = "point_major"
feature_order = "openpcdet"

[scatter]
channels = 64
layout = "nchw"

[head.anchor]
labels = ["Car", "Pedestrian", "Cyclist"]
feature_stride = 2
dir_offset = 0.78539
dir_limit_offset = 0.0

[[head.anchor.anchors]]
label = "Car"
sizes = [[3.9, 1.6, 1.56]]
rotations = [0.0, 1.57]
bottom_height = -1.78

[[head.anchor.anchors]]
label = "Pedestrian"
sizes = [[0.8, 0.6, 1.73]]
rotations = [0.0, 1.57]
bottom_height = -0.6

[[head.anchor.anchors]]
label = "Cyclist"
sizes = [[1.76, 0.6, 1.73]]
rotations = [0.0, 1.57]
bottom_height = -0.6

[classes]
Car = "vehicle"
Pedestrian = "pedestrian"
Cyclist = "cyclist"

[postprocess]
score_threshold = 0.1
nms = "rotated_iou"
nms_threshold = 0.01

[runtime]
threads = 1
"""


def center_manifest():
    tasks = ""
    for k, labels in enumerate(NUSCENES_TASKS):
        names = ", ".join(f'"{label}"' for label in labels)
        tasks += f"""
[[head.center.tasks]]
labels = [{names}]
heatmap = "hm_{k}"
reg = "reg_{k}"
height = "height_{k}"
dim = "dim_{k}"
rot = "rot_{k}"
vel = "vel_{k}"
"""
    return COMMON % "center_heatmap" + """
[points]
features = [{{ source = "x" }}, {{ source = "y" }}, {{ source = "z" }}, {{ source = "intensity" }}, {{ source = "zero" }}]

[pillars]
point_cloud_range = [-51.2, -51.2, -5.0, 51.2, 51.2, 3.0]
pillar_size = [0.2, 0.2, 8.0]
max_points_per_pillar = 20
max_pillars = 30000
layout = "point_major"
feature_order = "centerpoint"

[scatter]
channels = 64
layout = "nchw"

[head.center]
out_size_factor = 4
peak_kernel = 3
""" + tasks.replace("{", "{{").replace("}", "}}") + """
[classes]
car = "vehicle"
truck = "vehicle"
bus = "vehicle"
pedestrian = "pedestrian"
bicycle = "cyclist"
motorcycle = "cyclist"

[postprocess]
score_threshold = 0.1
nms = "rotated_iou"
nms_threshold = 0.2
pre_nms_top_k = 1000
post_nms_top_k = 83

[runtime]
threads = 1
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the detector folders (not the repository)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=["pointpillars", "centerpoint"], help="export one of the two")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    torch.manual_seed(args.seed)

    if args.only in (None, "pointpillars"):
        encoder, head = PFN(10, [64]), AnchorHeadSingle(64, 6, 3)
        init_weights(encoder, [])
        init_weights(head, [head.cls])
        export(out, "pointpillars_kitti_untrained", encoder, head, (64, 32, 10), (1, 64, 496, 432),
               ["cls_preds", "box_preds", "dir_cls_preds"], POINTPILLARS)

    if args.only in (None, "centerpoint"):
        encoder, head = PFN(10, [64, 64]), CenterHead(64)
        init_weights(encoder, [])
        init_weights(head, [task["hm"][-1] for task in head.tasks])
        outputs = [f"{name}_{k}" for k in range(len(NUSCENES_TASKS)) for name in ["hm"] + [n for n, _ in CENTER_OUTPUTS]]
        export(out, "centerpoint_pillar_nuscenes_untrained", encoder, head, (64, 20, 10), (1, 64, 512, 512),
               outputs, center_manifest())


if __name__ == "__main__":
    main()
