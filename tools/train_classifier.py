#!/usr/bin/env python3
"""Trains the bundled crop classifier `classifiers/crop_sim/` on simulated crops and exports it.

Data: the folder written by `cargo run --release --example classifier_crops -- --out DIR ...`
(`crops.npy` uint8 [N, 64, 64, 3], `labels.npy` int64 0 background / 1 vehicle / 2 pedestrian /
3 cyclist, `groups.npy` scene index). A held-out share of the scenes (`--val-share`, split by
scene, never trained on) gives the sim held-out accuracy.

Augmentation, for real camera images although the data are flat-shaded renders: crop jitter
(translate ±12 %, scale ±13 %, padding 114 as the crop cutter pads), horizontal flip, colour jitter
(brightness, contrast, saturation, hue), random grayscale, channel shuffle, gaussian blur,
low-frequency texture noise (multiplicative) and pixel noise, random erasing / occluding
patches, and a JPEG re-encode at quality 30–95 (PIL). Every batch's randomness is seeded by
(seed, epoch, batch), so a run is reproducible and `--resume` continues it exactly.

Model: 6 conv blocks (3×3 conv, BN, ReLU; stride-2 / max-pool downsampling), global average
pool, dropout, linear → 4 logits. Exported as ONNX opset 17, input `image` [N, 3, 64, 64]
((v/255 − 0.5)/0.5, RGB), output `logits` [N, 4], dynamic batch; the manifest's sha256 updated.

    python3 tools/train_classifier.py --data DIR --out classifiers/crop_sim \
        --seed 7 --epochs 6 [--resume]
"""

import argparse
import hashlib
import io
import json
import math
import os
import re
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

LABELS = ["background", "vehicle", "pedestrian", "cyclist"]
PAD = 114.0 / 255.0


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class CropNet(nn.Module):
    """64×64 RGB → 4 logits."""

    def __init__(self, width=24):
        super().__init__()
        w = width
        self.features = nn.Sequential(
            conv_bn(3, w, stride=2),  # 32
            nn.MaxPool2d(2),  # 16
            conv_bn(w, 2 * w),
            conv_bn(2 * w, 2 * w),
            nn.MaxPool2d(2),  # 8
            conv_bn(2 * w, 4 * w),
            conv_bn(4 * w, 4 * w),
            nn.MaxPool2d(2),  # 4
            conv_bn(4 * w, 6 * w),
        )
        self.dropout = nn.Dropout(0.2)
        self.head = nn.Linear(6 * w, len(LABELS))

    def forward(self, x):
        x = self.features(x)
        x = x.mean(dim=(2, 3))
        return self.head(self.dropout(x))


def normalise(x):
    """[0, 1] RGB → the manifest's (v − 0.5) / 0.5."""
    return (x - 0.5) / 0.5


def gaussian_blur(x, sigma):
    radius = max(1, int(math.ceil(2.5 * sigma)))
    t = torch.arange(-radius, radius + 1, dtype=torch.float32)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    k = k / k.sum()
    c = x.shape[1]
    kx = k.view(1, 1, 1, -1).repeat(c, 1, 1, 1)
    ky = k.view(1, 1, -1, 1).repeat(c, 1, 1, 1)
    x = F.pad(x, (radius, radius, 0, 0), mode="replicate")
    x = F.conv2d(x, kx, groups=c)
    x = F.pad(x, (0, 0, radius, radius), mode="replicate")
    return F.conv2d(x, ky, groups=c)


def rgb_to_gray(x):
    return (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3])


def hue_rotate(x, angle):
    """Rotates hue by `angle` (radians, per sample) in YIQ space."""
    m = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
    minv = torch.linalg.inv(m)
    yiq = torch.einsum("ij,bjhw->bihw", m, x)
    c, s = torch.cos(angle).view(-1, 1, 1), torch.sin(angle).view(-1, 1, 1)
    i, q = yiq[:, 1], yiq[:, 2]
    yiq = torch.stack([yiq[:, 0], c * i - s * q, s * i + c * q], dim=1)
    return torch.einsum("ij,bjhw->bihw", minv, yiq)


def augment(batch_u8, rng, gen):
    """uint8 [B, 64, 64, 3] → augmented float [B, 3, 64, 64] in [0, 1]."""
    x = torch.from_numpy(batch_u8).permute(0, 3, 1, 2).float() / 255.0
    b = x.shape[0]
    u = lambda lo, hi, n=b: torch.from_numpy(rng.uniform(lo, hi, n).astype(np.float32))
    p = lambda prob, n=b: torch.from_numpy(rng.random(n) < prob)

    # Crop jitter: translate ±12 %, scale 0.87–1.15 (padding 114 outside), horizontal flip.
    scale = u(0.87, 1.15)
    flip = torch.where(p(0.5), -1.0, 1.0)
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0] = scale * flip
    theta[:, 1, 1] = scale * u(0.93, 1.07)
    theta[:, 0, 2] = u(-0.24, 0.24)
    theta[:, 1, 2] = u(-0.24, 0.24)
    grid = F.affine_grid(theta, x.shape, align_corners=False)
    x = F.grid_sample(x - PAD, grid, mode="bilinear", padding_mode="zeros", align_corners=False) + PAD

    # Colour: brightness, contrast, saturation, hue; grayscale; channel shuffle.
    x = x * u(0.55, 1.45).view(-1, 1, 1, 1)
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = (x - mean) * u(0.55, 1.5).view(-1, 1, 1, 1) + mean
    gray = rgb_to_gray(x)
    x = (x - gray) * u(0.3, 1.6).view(-1, 1, 1, 1) + gray
    x = hue_rotate(x.clamp(0, 1), u(-0.35, 0.35))
    # Per-channel gains (white balance).
    x = x * u(0.85, 1.15, 3 * b).view(b, 3, 1, 1)
    g = p(0.15)
    if g.any():
        x[g] = rgb_to_gray(x[g]).repeat(1, 3, 1, 1)
    s = p(0.2)
    if s.any():
        idx = np.nonzero(s.numpy())[0]
        for i in idx:
            x[i] = x[i, torch.from_numpy(rng.permutation(3))]

    # Texture: low-frequency multiplicative noise and pixel noise (renders are flat-shaded).
    res = int(rng.choice([4, 8, 16, 32]))
    low = torch.randn(b, 1, res, res, generator=gen) * u(0.0, 0.18).view(-1, 1, 1, 1)
    x = x * (1.0 + F.interpolate(low, size=64, mode="bilinear", align_corners=False))
    x = x + torch.randn(x.shape, generator=gen) * u(0.0, 0.05).view(-1, 1, 1, 1)

    # Random erasing / occluding patches (random colour or noise).
    for i in np.nonzero(rng.random(b) < 0.35)[0]:
        area = rng.uniform(0.03, 0.2) * 64 * 64
        aspect = math.exp(rng.uniform(-1.0, 1.0))
        h = int(min(63, max(4, math.sqrt(area * aspect))))
        w = int(min(63, max(4, math.sqrt(area / aspect))))
        y0, x0 = rng.integers(0, 64 - h), rng.integers(0, 64 - w)
        if rng.random() < 0.5:
            x[i, :, y0 : y0 + h, x0 : x0 + w] = torch.from_numpy(rng.random(3).astype(np.float32)).view(3, 1, 1)
        else:
            x[i, :, y0 : y0 + h, x0 : x0 + w] = torch.rand(3, h, w, generator=gen)

    # Blur (a random half of the batch, one sigma per batch).
    blur = p(0.35)
    if blur.any():
        x[blur] = gaussian_blur(x[blur], float(rng.uniform(0.4, 1.6)))
    x = x.clamp(0, 1)

    # JPEG re-encode at quality 30–95.
    out = x
    jpeg = np.nonzero(rng.random(b) < 0.6)[0]
    if len(jpeg):
        arr = (x[jpeg].permute(0, 2, 3, 1).numpy() * 255.0 + 0.5).astype(np.uint8)
        back = []
        for a in arr:
            buf = io.BytesIO()
            Image.fromarray(a).save(buf, format="JPEG", quality=int(rng.integers(30, 96)))
            buf.seek(0)
            back.append(np.asarray(Image.open(buf).convert("RGB")))
        out = x.clone()
        out[torch.from_numpy(jpeg)] = torch.from_numpy(np.stack(back)).permute(0, 3, 1, 2).float() / 255.0
    return out


def plain(batch_u8):
    return torch.from_numpy(batch_u8).permute(0, 3, 1, 2).float() / 255.0


def evaluate(model, x_u8, y, batch=512):
    model.eval()
    preds = []
    with torch.no_grad():
        for i in range(0, len(y), batch):
            preds.append(model(normalise(plain(x_u8[i : i + batch]))).argmax(1).numpy())
    pred = np.concatenate(preds) if preds else np.zeros(0, dtype=np.int64)
    conf = np.zeros((4, 4), dtype=np.int64)
    for t, q in zip(y, pred):
        conf[t, q] += 1
    return float((pred == y).mean()) if len(y) else float("nan"), conf, pred


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", default="classifiers/crop_sim")
    ap.add_argument("--checkpoint", default=None, help="checkpoint file (default DATA/train_ckpt.pt)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--width", type=int, default=24)
    ap.add_argument("--val-share", type=float, default=0.1)
    ap.add_argument("--bg-per-epoch", type=int, default=12000, help="background crops drawn per epoch")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--checkpoint-minutes", type=float, default=3.0)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    ckpt_path = args.checkpoint or os.path.join(args.data, "train_ckpt.pt")

    x = np.load(os.path.join(args.data, "crops.npy"))
    y = np.load(os.path.join(args.data, "labels.npy"))
    groups = np.load(os.path.join(args.data, "groups.npy"))
    summary = json.load(open(os.path.join(args.data, "summary.json")))
    scenes = np.unique(groups)
    split_rng = np.random.default_rng(args.seed)
    val_scenes = set(split_rng.choice(scenes, max(1, int(round(len(scenes) * args.val_share))), replace=False).tolist())
    is_val = np.array([g in val_scenes for g in groups])
    xt, yt = x[~is_val], y[~is_val]
    xv, yv = x[is_val], y[is_val]
    counts = np.bincount(yt, minlength=4)
    print(f"train {len(yt)} {counts.tolist()}  val {len(yv)} {np.bincount(yv, minlength=4).tolist()}", flush=True)
    # Class weights ∝ 1/sqrt(frequency) of an epoch's draw (background capped), mean 1.
    draw = counts.copy()
    draw[0] = min(draw[0], args.bg_per_epoch)
    wts = 1.0 / np.sqrt(np.maximum(draw, 1))
    wts = wts / (wts * draw).sum() * draw.sum()
    class_weight = torch.tensor(wts, dtype=torch.float32)

    model = CropNet(args.width)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=5e-4)
    bg_idx, obj_idx = np.nonzero(yt == 0)[0], np.nonzero(yt != 0)[0]
    per_epoch = len(obj_idx) + min(len(bg_idx), args.bg_per_epoch)
    steps_per_epoch = per_epoch // args.batch
    total = steps_per_epoch * args.epochs

    def lr_at(step):
        warm = min(300, total // 10)
        if step < warm:
            return args.lr * (step + 1) / warm
        return args.lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))

    state = {"epoch": 0, "batch": 0, "history": [], "elapsed_s": 0.0}
    if args.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        state = ck["state"]
        print(f"resumed at epoch {state['epoch']} batch {state['batch']}", flush=True)

    def save():
        tmp = ckpt_path + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state, "args": vars(args)}, tmp)
        os.replace(tmp, ckpt_path)

    last_save = time.time()
    t_start = time.time() - state["elapsed_s"]
    while state["epoch"] < args.epochs:
        epoch = state["epoch"]
        erng = np.random.default_rng([args.seed, epoch])
        bg = erng.choice(bg_idx, min(len(bg_idx), args.bg_per_epoch), replace=False)
        order = erng.permutation(np.concatenate([obj_idx, bg]))
        model.train()
        losses = state.setdefault("epoch_losses", [])
        for bi in range(state["batch"], steps_per_epoch):
            idx = np.sort(order[bi * args.batch : (bi + 1) * args.batch])
            rng = np.random.default_rng([args.seed, epoch, bi])
            gen = torch.Generator().manual_seed(args.seed * 1_000_003 + epoch * 10_007 + bi)
            xb = normalise(augment(xt[idx], rng, gen))
            yb = torch.from_numpy(yt[idx])
            for g in opt.param_groups:
                g["lr"] = lr_at(epoch * steps_per_epoch + bi)
            loss = F.cross_entropy(model(xb), yb, weight=class_weight, label_smoothing=0.05)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            state["batch"] = bi + 1
            if bi % 50 == 0:
                print(f"epoch {epoch} batch {bi}/{steps_per_epoch} loss {np.mean(losses[-50:]):.4f} "
                      f"{time.time() - t_start:.0f}s", flush=True)
            if time.time() - last_save > args.checkpoint_minutes * 60:
                state["elapsed_s"] = time.time() - t_start
                save()
                last_save = time.time()
        acc, conf, _ = evaluate(model, xv, yv)
        state["history"].append({"epoch": epoch, "train_loss": float(np.mean(losses)), "val_accuracy": acc})
        print(f"epoch {epoch} done: loss {np.mean(losses):.4f} sim held-out acc {acc:.4f}", flush=True)
        state["epoch"] = epoch + 1
        state["batch"] = 0
        state["epoch_losses"] = []
        state["elapsed_s"] = time.time() - t_start
        save()
        last_save = time.time()

    acc, conf, _ = evaluate(model, xv, yv)
    present = [c for c in range(4) if conf[c].sum() > 0]
    per_class = {LABELS[c]: float(conf[c, c] / conf[c].sum()) for c in present}
    print(f"sim held-out accuracy {acc:.4f} per class {per_class}\n{conf}", flush=True)

    # Export.
    os.makedirs(args.out, exist_ok=True)
    onnx_path = os.path.join(args.out, "model.onnx")
    model.eval()
    torch.onnx.export(
        model, torch.zeros(1, 3, 64, 64), onnx_path, input_names=["image"], output_names=["logits"],
        dynamic_axes={"image": {0: "N"}, "logits": {0: "N"}}, opset_version=17, dynamo=False,
    )
    import onnxruntime as ort

    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    probe = normalise(plain(xv[:64])).numpy()
    with torch.no_grad():
        ref = model(torch.from_numpy(probe)).numpy()
    got = sess.run(["logits"], {"image": probe})[0]
    max_diff = float(np.abs(ref - got).max())
    print(f"onnx vs torch max |diff| {max_diff:.2e}", flush=True)
    assert max_diff < 1e-3

    digest = sha256(onnx_path)
    toml_path = os.path.join(args.out, "classifier.toml")
    text = open(toml_path).read()
    text = re.sub(r'sha256 = "[0-9a-f]*"', f'sha256 = "{digest}"', text, count=1)
    open(toml_path, "w").write(text)

    training = {
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "seed": args.seed,
        "args": vars(args),
        "data": {
            "generator": summary.get("command"),
            "crops": int(len(y)),
            "per_label_all": {LABELS[c]: int(n) for c, n in enumerate(np.bincount(y, minlength=4))},
            "train_crops": int(len(yt)),
            "per_label_train": {LABELS[c]: int(n) for c, n in enumerate(counts)},
            "held_out_scenes": sorted(int(s) for s in val_scenes),
            "held_out_crops": int(len(yv)),
            "per_label_held_out": {LABELS[c]: int(n) for c, n in enumerate(np.bincount(yv, minlength=4))},
        },
        "model": {"parameters": int(params), "onnx_bytes": os.path.getsize(onnx_path), "sha256": digest},
        "class_weight": [float(v) for v in wts],
        "history": state["history"],
        "train_seconds": state["elapsed_s"],
        "sim_held_out": {"accuracy": acc, "per_class": per_class, "confusion_rows_true_cols_pred": conf.tolist()},
        "onnx_max_abs_diff": max_diff,
    }
    json.dump(training, open(os.path.join(args.out, "training.json"), "w"), indent=2)
    print(json.dumps({k: training[k] for k in ("model", "sim_held_out")}, indent=2))


if __name__ == "__main__":
    main()
