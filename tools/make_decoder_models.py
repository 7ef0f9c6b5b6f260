"""Writes the tiny ONNX graphs and manifests the detector tests run (tests/fixtures/detect/).

    python3 tools/make_decoder_models.py

Decoder round trips: known boxes (BOXES below, also written to boxes.json) are encoded by hand into
anchor-head (OpenPCDet residual coder + direction bins) and CenterPoint-head tensors; the head graphs
return those tensors as constants (plus 0 · sum(canvas), so the canvas input is really consumed).
The Rust tests load the manifests, run the whole detector and must get the boxes back.

  tiny_pfn.onnx               pillars f32 [P, 8, 10] (P dynamic) -> features [P, 4]: max over points, then x W
  anchor_head_{nchw,nhwc}.onnx canvas [1, 4, 16, 16] / [1, 16, 16, 4] -> cls_preds, box_preds, dir_cls_preds
  center_head_{nchw,nhwc}.onnx canvas -> two tasks: hm/reg/height/dim/rot/vel_0 and hm/reg/height/dim/rot_1
  single_center_nchw.onnx     single-graph family: pillars [P, 8, 10], coords int64 [P, 4], num_points int32 [P]
                              -> the CenterPoint maps above (plus 0 · sums of all three inputs)
  pooled_center_head_s{1,4}.onnx canvas [1, 64, H, W] -> CenterPoint maps computed from the canvas
                              (heatmap = 4·maxpool_s(max over channels) − 2): a head for the real encoders
  pooled_center_head_s{1,4}_nhwc.onnx the same with an NHWC canvas [1, H, W, 64] (tools/head_to_nhwc.py)

Anchor NCHW uses OpenPCDet conventions (anchors spread min..max, DIR_OFFSET 0.78539); anchor NHWC uses
zhulf0804's (cell-centred anchors, θ = limit_period(θ, 1, π) + (1 − bin)·π).
"""
import hashlib
import json
import math
import pathlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from head_to_nhwc import to_nhwc  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "detect"

# Grid shared by the decoder fixtures: 16 × 16 pillars of 0.4 m; z from −3 to 1.
RANGE = [0.0, -3.2, -3.0, 6.4, 3.2, 1.0]
PILLAR = [0.4, 0.4, 4.0]
NX = NY = 16
CANVAS_C = 4
STRIDE = 2  # anchor head and CenterPoint head both downsample by 2: 8 × 8 maps
H = W = NX // STRIDE

LABELS = ["Car", "Pedestrian", "Cyclist"]
ANCHORS = [  # label, [l, w, h], bottom height; rotations {0, π/2}
    ("Car", [3.9, 1.6, 1.56], -1.78),
    ("Pedestrian", [0.8, 0.6, 1.73], -0.6),
    ("Cyclist", [1.76, 0.6, 1.73], -0.6),
]
ROTATIONS = [0.0, math.pi / 2]

# The boxes every head must give back: [x, y, z, l, w, h, yaw], label index, logit.
BOXES = [
    ([1.234, -1.87, -0.95, 4.12, 1.71, 1.49, 0.4321], 0, 3.0),
    ([5.01, 2.2, -0.2, 0.74, 0.63, 1.81, -2.9], 1, 2.0),
    ([3.3, 0.45, -0.31, 1.9, 0.55, 1.62, 1.9], 2, 1.0),
]


def limit_period(v, offset, period):
    return v - math.floor(v / period + offset) * period


def wrap(a):
    return (a + math.pi) % (2 * math.pi) - math.pi


def anchor_centres(lo, hi, n, align_center):
    if align_center:
        step = (hi - lo) / n
        return [lo + (i + 0.5) * step for i in range(n)]
    step = (hi - lo) / (n - 1)
    return [lo + i * step for i in range(n)]


def encode_anchor(layout):
    """cls [A·3, H, W], box [A·7, H, W], dir [A·2, H, W] holding BOXES."""
    openpcdet = layout == "nchw"
    align = not openpcdet
    dir_offset, dir_limit, reversed_bins = (0.78539, 0.0, False) if openpcdet else (0.0, 1.0, True)
    xs = anchor_centres(RANGE[0], RANGE[3], W, align)
    ys = anchor_centres(RANGE[1], RANGE[4], H, align)
    anchors = [(size, bottom + size[2] / 2, rot) for (_, size, bottom) in ANCHORS for rot in ROTATIONS]
    a_count = len(anchors)
    cls = np.full((a_count * 3, H, W), -10.0, np.float32)
    box = np.zeros((a_count * 7, H, W), np.float32)
    dirs = np.zeros((a_count * 2, H, W), np.float32)
    for (b, label, logit) in BOXES:
        x, y, z, l, w, h, yaw = b
        xi = min(range(W), key=lambda i: abs(xs[i] - x))
        yi = min(range(H), key=lambda i: abs(ys[i] - y))
        a = label * len(ROTATIONS)  # the class's first anchor (yaw 0)
        size, za, ra = anchors[a]
        la, wa, ha = size
        d = math.hypot(la, wa)
        # Yaw after the residual: the target itself; the bin is whichever one maps it back.
        period = math.pi
        folded = limit_period(yaw - dir_offset, dir_limit, period) + dir_offset
        k = 0 if abs(wrap(folded - yaw)) < 1e-9 else 1
        bin_ = (1 - k) if reversed_bins else k
        res = [(x - xs[xi]) / d, (y - ys[yi]) / d, (z - za) / ha, math.log(l / la), math.log(w / wa),
               math.log(h / ha), yaw - ra]
        box[a * 7:(a + 1) * 7, yi, xi] = res
        cls[a * 3 + label, yi, xi] = logit
        dirs[a * 2 + bin_, yi, xi] = 1.0
    return {"cls_preds": cls, "box_preds": box, "dir_cls_preds": dirs}


CENTER_TASKS = [
    {"labels": [0], "suffix": "0", "vel": True},
    {"labels": [1, 2], "suffix": "1", "vel": False},
]
VELOCITY = {0: (1.5, -0.25)}


def encode_center():
    """Per task: hm [n, H, W], reg [2], height [1], dim [3] (log), rot [2] (sin, cos), vel [2]."""
    out = {}
    for task in CENTER_TASKS:
        n = len(task["labels"])
        s = task["suffix"]
        hm = np.full((n, H, W), -10.0, np.float32)
        reg = np.zeros((2, H, W), np.float32)
        height = np.zeros((1, H, W), np.float32)
        dim = np.zeros((3, H, W), np.float32)
        rot = np.zeros((2, H, W), np.float32)
        vel = np.zeros((2, H, W), np.float32)
        for i, (b, label, logit) in enumerate(BOXES):
            if label not in task["labels"]:
                continue
            x, y, z, l, w, h, yaw = b
            fx = (x - RANGE[0]) / (STRIDE * PILLAR[0])
            fy = (y - RANGE[1]) / (STRIDE * PILLAR[1])
            xi, yi = int(math.floor(fx)), int(math.floor(fy))
            hm[task["labels"].index(label), yi, xi] = logit
            reg[:, yi, xi] = [fx - xi, fy - yi]
            height[0, yi, xi] = z
            dim[:, yi, xi] = [math.log(l), math.log(w), math.log(h)]
            rot[:, yi, xi] = [math.sin(yaw), math.cos(yaw)]
            vel[:, yi, xi] = VELOCITY.get(i, (0.0, 0.0))
        out[f"hm_{s}"] = hm
        out[f"reg_{s}"] = reg
        out[f"height_{s}"] = height
        out[f"dim_{s}"] = dim
        out[f"rot_{s}"] = rot
        if task["vel"]:
            out[f"vel_{s}"] = vel
    return out


def save(model, name):
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, OUT / name)
    return hashlib.sha256((OUT / name).read_bytes()).hexdigest()


def constant_head(maps, layout, name):
    """canvas -> each map as a constant, plus 0 · sum(canvas)."""
    canvas_shape = [1, CANVAS_C, NY, NX] if layout == "nchw" else [1, NY, NX, CANVAS_C]
    nodes = [
        helper.make_node("ReduceSum", ["canvas"], ["canvas_sum"], keepdims=0),
        helper.make_node("Mul", ["canvas_sum", "zero"], ["nothing"]),
    ]
    inits = [numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    outputs = []
    for out_name, chw in maps.items():
        arr = chw[None] if layout == "nchw" else np.transpose(chw, (1, 2, 0))[None]
        arr = np.ascontiguousarray(arr, np.float32)
        inits.append(numpy_helper.from_array(arr, out_name + "_value"))
        nodes.append(helper.make_node("Add", [out_name + "_value", "nothing"], [out_name]))
        outputs.append(helper.make_tensor_value_info(out_name, TensorProto.FLOAT, list(arr.shape)))
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("canvas", TensorProto.FLOAT, canvas_shape)], outputs, initializer=inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="boxlayer-tools")


def single_graph(maps):
    """pillars, coords (int64), num_points (int32) -> each map as a constant, plus 0 · sums of the inputs."""
    nodes = [
        helper.make_node("ReduceSum", ["pillars"], ["pillar_sum"], keepdims=0),
        helper.make_node("ReduceSum", ["coords"], ["coord_sum_i"], keepdims=0),
        helper.make_node("Cast", ["coord_sum_i"], ["coord_sum"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["num_points"], ["count_sum_i"], keepdims=0),
        helper.make_node("Cast", ["count_sum_i"], ["count_sum"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["pillar_sum", "coord_sum"], ["sum2"]),
        helper.make_node("Add", ["sum2", "count_sum"], ["sum3"]),
        helper.make_node("Mul", ["sum3", "zero"], ["nothing"]),
    ]
    inits = [numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    outputs = []
    for out_name, chw in maps.items():
        arr = np.ascontiguousarray(chw[None], np.float32)
        inits.append(numpy_helper.from_array(arr, out_name + "_value"))
        nodes.append(helper.make_node("Add", [out_name + "_value", "nothing"], [out_name]))
        outputs.append(helper.make_tensor_value_info(out_name, TensorProto.FLOAT, list(arr.shape)))
    inputs = [
        helper.make_tensor_value_info("pillars", TensorProto.FLOAT, ["P", 8, 10]),
        helper.make_tensor_value_info("coords", TensorProto.INT64, ["P", 4]),
        helper.make_tensor_value_info("num_points", TensorProto.INT32, ["P"]),
    ]
    graph = helper.make_graph(nodes, "single_center_nchw", inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="boxlayer-tools")


def tiny_pfn():
    w = np.arange(40, dtype=np.float32).reshape(10, 4) / 40.0
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMax", ["pillars"], ["pooled"], axes=[1], keepdims=0),
            helper.make_node("MatMul", ["pooled", "W"], ["features"]),
        ],
        "tiny_pfn",
        [helper.make_tensor_value_info("pillars", TensorProto.FLOAT, ["P", 8, 10])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["P", CANVAS_C])],
        initializer=[numpy_helper.from_array(w, "W")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="boxlayer-tools")


def pooled_center_head(stride):
    """canvas [1, 64, H, W] -> CenterPoint maps at 1/stride: heatmap = 4·maxpool(max_c canvas) − 2,
    reg 0.5, height −1, dims (4, 2, 1.5) as logs, yaw 0."""
    consts = {
        "four": np.array(4.0, np.float32),
        "two": np.array(2.0, np.float32),
        "zero": np.array(0.0, np.float32),
        "reg_v": np.array([0.5, 0.5], np.float32).reshape(1, 2, 1, 1),
        "height_v": np.array([-1.0], np.float32).reshape(1, 1, 1, 1),
        "dim_v": np.log(np.array([4.0, 2.0, 1.5], np.float32)).reshape(1, 3, 1, 1),
        "rot_v": np.array([0.0, 1.0], np.float32).reshape(1, 2, 1, 1),
    }
    nodes = [
        helper.make_node("ReduceMax", ["canvas"], ["occupancy"], axes=[1], keepdims=1),
        helper.make_node("MaxPool", ["occupancy"], ["pooled"], kernel_shape=[stride, stride], strides=[stride, stride]),
        helper.make_node("Mul", ["pooled", "four"], ["scaled"]),
        helper.make_node("Sub", ["scaled", "two"], ["hm"]),
        helper.make_node("Mul", ["pooled", "zero"], ["base"]),
    ]
    for name in ["reg", "height", "dim", "rot"]:
        nodes.append(helper.make_node("Add", ["base", name + "_v"], [name]))
    outs = [("hm", 1), ("reg", 2), ("height", 1), ("dim", 3), ("rot", 2)]
    graph = helper.make_graph(
        nodes,
        f"pooled_center_head_s{stride}",
        [helper.make_tensor_value_info("canvas", TensorProto.FLOAT, [1, 64, "H", "W"])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, c, "h", "w"]) for n, c in outs],
        initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="boxlayer-tools")


def toml_list(values):
    return "[" + ", ".join(repr(v) if isinstance(v, str) else f"{v}" for v in values) + "]"


def common_sections(pfn_sha):
    return f"""family = "split_pillar"

[models]
# The fixtures share ONNX files outside their folders (docs/detectors.md "Model paths").
allow_outside_folder = true

[models.encoder]
file = "../tiny_pfn.onnx"
sha256 = "{pfn_sha}"
input = "pillars"
output = "features"

[pillars]
point_cloud_range = {toml_list(RANGE)}
pillar_size = {toml_list(PILLAR)}
max_points_per_pillar = 8
max_pillars = 64
layout = "point_major"
feature_order = "openpcdet"

[scatter]
channels = {CANVAS_C}
"""


def anchor_manifest(layout, head_sha, pfn_sha):
    openpcdet = layout == "nchw"
    anchors = "".join(
        f"""
[[head.anchor.anchors]]
label = "{label}"
sizes = [{toml_list(size)}]
rotations = [0.0, {math.pi / 2!r}]
bottom_height = {bottom}
"""
        for label, size, bottom in ANCHORS
    )
    direction = (
        "dir_offset = 0.78539\ndir_limit_offset = 0.0\nalign_center = false\n"
        if openpcdet
        else "dir_offset = 0.0\ndir_limit_offset = 1.0\ndir_reversed = true\nalign_center = true\n"
    )
    return f"""# Generated by tools/make_decoder_models.py: anchor head, {layout.upper()}.
name = "anchor_{layout}"
decoder = "anchor"
{common_sections(pfn_sha)}layout = "{layout}"

[models.head]
file = "../anchor_head_{layout}.onnx"
sha256 = "{head_sha}"
input = "canvas"

[head]
layout = "{layout}"

[head.anchor]
labels = {toml_list(LABELS)}
feature_stride = {STRIDE}
{direction}{anchors}
[classes]
Car = "vehicle"
Pedestrian = "pedestrian"
Cyclist = "cyclist"

[postprocess]
score_threshold = 0.5
nms = "rotated_iou"
nms_threshold = 0.01
"""


def center_manifest(layout, head_sha, pfn_sha):
    tasks = ""
    for task in CENTER_TASKS:
        s = task["suffix"]
        vel = f'vel = "vel_{s}"\n' if task["vel"] else ""
        tasks += f"""
[[head.center.tasks]]
labels = {toml_list([LABELS[i] for i in task["labels"]])}
heatmap = "hm_{s}"
reg = "reg_{s}"
height = "height_{s}"
dim = "dim_{s}"
rot = "rot_{s}"
{vel}"""
    return f"""# Generated by tools/make_decoder_models.py: CenterPoint head, {layout.upper()}.
name = "center_{layout}"
decoder = "center_heatmap"
{common_sections(pfn_sha)}layout = "{layout}"

[models.head]
file = "../center_head_{layout}.onnx"
sha256 = "{head_sha}"
input = "canvas"

[head]
layout = "{layout}"

[head.center]
out_size_factor = {STRIDE}
{tasks}
[classes]
Car = "vehicle"
Pedestrian = "pedestrian"
Cyclist = "cyclist"

[postprocess]
score_threshold = 0.5
nms = "circle"
nms_threshold = 0.5
"""


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    pfn_sha = save(tiny_pfn(), "tiny_pfn.onnx")
    for layout in ["nchw", "nhwc"]:
        sha = save(constant_head(encode_anchor(layout), layout, f"anchor_head_{layout}"), f"anchor_head_{layout}.onnx")
        (OUT / f"anchor_{layout}").mkdir(exist_ok=True)
        (OUT / f"anchor_{layout}" / "detector.toml").write_text(anchor_manifest(layout, sha, pfn_sha))
        sha = save(constant_head(encode_center(), layout, f"center_head_{layout}"), f"center_head_{layout}.onnx")
        (OUT / f"center_{layout}").mkdir(exist_ok=True)
        (OUT / f"center_{layout}" / "detector.toml").write_text(center_manifest(layout, sha, pfn_sha))
    sha = save(single_graph(encode_center()), "single_center_nchw.onnx")
    text = center_manifest("nchw", "unused", pfn_sha)
    head = text[text.index("[models.head]"):text.index("[head]")]
    encoder = text[text.index("[models.encoder]"):text.index("[pillars]")]
    text = text.replace(head, "").replace(encoder, f"""[models.graph]
file = "../single_center_nchw.onnx"
sha256 = "{sha}"
pillars = "pillars"
coords = "coords"
num_points = "num_points"

""")
    text = text.replace('family = "split_pillar"', 'family = "single_graph"').replace('name = "center_nchw"', 'name = "single_center"')
    text = text.replace("CenterPoint head, NCHW.", "single graph with CenterPoint outputs, NCHW.")
    (OUT / "single_center").mkdir(exist_ok=True)
    (OUT / "single_center" / "detector.toml").write_text(text)
    for stride in [1, 4]:
        save(pooled_center_head(stride), f"pooled_center_head_s{stride}.onnx")
        save(to_nhwc(pooled_center_head(stride)), f"pooled_center_head_s{stride}_nhwc.onnx")
    boxes = [
        {
            "box": b,
            "label": LABELS[label],
            "score": 1.0 / (1.0 + math.exp(-logit)),
            "velocity": VELOCITY.get(i),
        }
        for i, (b, label, logit) in enumerate(BOXES)
    ]
    (OUT / "boxes.json").write_text(json.dumps(boxes, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
