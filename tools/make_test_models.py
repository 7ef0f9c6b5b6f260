"""Writes the tiny ONNX models the Rust tests run (tests/fixtures/*.onnx).

    python3 tools/make_test_models.py

affine.onnx: y = x · W + b with x f32 [N, 3] (N dynamic), W = [[1,2],[3,4],[5,6]], b = [0.5, -1];
the test computes the same product by hand, so a wrong load or a wrong layout fails it.

classify/yolo_v5, classify/yolo_v8: tiny 2D detectors in the two YOLO export layouts, with their
classifier.toml. Input `images` f32 [1, 3, 32, 32]; labels person, car, dog. Every score column is
its fixed base value × (1 + m), m = the mean of the input tensor, so a wrong normalisation changes
the scores; box columns are fixed (input pixels). Candidates (cx, cy, w, h; v5 objectness; person,
car, dog base scores):
  0: (10, 16, 8, 12; 0.6; 0.6, 0.1, 0.1)   person
  1: (11, 16, 8, 12; 0.5; 0.5, 0.1, 0.1)   person, overlaps 0 by IoU 0.778: NMS drops it
  2: (24, 16, 6, 6;  0.6; 0.1, 0.4, 0.1)   car
  3: (24, 28, 4, 4;  0.6; 0.1, 0.1, 0.6)   dog: not mapped, and its mapped scores are too low
tests/classify_models.rs decodes them through the manifests and checks the boxes it computes by hand.

classify/crop_rgb: a crop classifier whose logits are the crop's mean red, green and blue (after
normalisation), batch axis dynamic; labels red → vehicle, green → pedestrian, blue → background.
"""
import hashlib
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def affine() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32), "W")
    b = numpy_helper.from_array(np.array([0.5, -1.0], dtype=np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
        initializer=[w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="boxlayer-tools")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


# (cx, cy, w, h, objectness, person, car, dog) per candidate.
YOLO_CANDIDATES = np.array(
    [
        [10, 16, 8, 12, 0.6, 0.6, 0.1, 0.1],
        [11, 16, 8, 12, 0.5, 0.5, 0.1, 0.1],
        [24, 16, 6, 6, 0.6, 0.1, 0.4, 0.1],
        [24, 28, 4, 4, 0.6, 0.1, 0.1, 0.6],
    ],
    dtype=np.float32,
)


def yolo(layout: str) -> onnx.ModelProto:
    """out = B + K · mean(images): K = B on score columns, 0 on box columns."""
    rows = YOLO_CANDIDATES if layout == "v5" else np.delete(YOLO_CANDIDATES, 4, axis=1)
    base = rows.copy()
    gain = rows.copy()
    gain[:, :4] = 0.0
    if layout == "v8":
        base, gain = base.T, gain.T
    base = numpy_helper.from_array(base[None].astype(np.float32), "B")
    gain = numpy_helper.from_array(gain[None].astype(np.float32), "K")
    out_shape = [1, 4, 8] if layout == "v5" else [1, 7, 4]
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["images"], ["m"], keepdims=0),
            helper.make_node("Mul", ["K", "m"], ["km"]),
            helper.make_node("Add", ["B", "km"], ["output0"]),
        ],
        f"tiny_yolo_{layout}",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, out_shape)],
        initializer=[base, gain],
    )
    return finish(graph)


def crop_rgb() -> onnx.ModelProto:
    graph = helper.make_graph(
        [
            helper.make_node("GlobalAveragePool", ["image"], ["pooled"]),
            helper.make_node("Flatten", ["pooled"], ["logits"], axis=1),
        ],
        "crop_rgb",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3])],
    )
    return finish(graph)


def finish(graph) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="boxlayer-tools")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


YOLO_MANIFEST = """# Written by tools/make_test_models.py: a tiny 2D detector in the YOLO{layout} export layout.
kind = "yolo"
[model]
file = "model.onnx"
sha256 = "{sha}"
[input]
width = 32
height = 32
resize = "letterbox"
[output]
labels = ["person", "car", "dog"]
[yolo]
layout = "{layout}"
score_threshold = 0.25
nms_iou = 0.45
match_iou = 0.3
[classes]
person = "pedestrian"
car = "vehicle"
"""

CROP_MANIFEST = """# Written by tools/make_test_models.py: logits = the crop's mean red, green, blue.
kind = "crop"
[model]
file = "model.onnx"
sha256 = "{sha}"
[input]
width = 16
height = 16
[crop]
context = 0.0
square = false
min_side_px = 4
[output]
labels = ["red", "green", "blue"]
activation = "softmax"
[classes]
red = "vehicle"
green = "pedestrian"
blue = "background"
"""


def save_with_manifest(model: onnx.ModelProto, folder: pathlib.Path, manifest: str, **fields) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, folder / "model.onnx")
    sha = hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest()
    (folder / "classifier.toml").write_text(manifest.format(sha=sha, **fields))
    print(f"wrote {folder}")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    onnx.save(affine(), OUT / "affine.onnx")
    print(f"wrote {OUT / 'affine.onnx'}")
    for layout in ("v5", "v8"):
        save_with_manifest(yolo(layout), OUT / "classify" / f"yolo_{layout}", YOLO_MANIFEST, layout=layout)
    save_with_manifest(crop_rgb(), OUT / "classify" / "crop_rgb", CROP_MANIFEST)
