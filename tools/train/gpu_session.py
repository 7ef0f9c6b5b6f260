"""Trains the second-generation bundled detectors on one GPU machine within a fixed time: builds
the training set with the simulator, measures each detector's training speed on that machine,
gives each a step count that fits the time left, trains them side by side and packs the detector
folders (ONNX files, detector.toml, training.json and the training log) into one tar file.

    python3 tools/train/gpu_session.py --exporter target/release/examples/export_training_set \\
        --out /tmp/session --budget-s 470

A device session has one GPU for a few minutes, so everything happens in one call: the set
(`export_training_set --frame normalized --vary --hard-clutter --ground-z`, all three platforms,
seeds as --seeds, every 10th sweep; one ground level on every platform, which each model then
declares as `ground_z_m`) is simulated on the machine's cores; then each config in
tools/train/configs/ trains for --calibrate-steps steps, all at once (as they will run), and the
steps per second from the second third of that run on set its step count: (seconds left) × rate ×
--fill, rounded down to 10. The real runs carry `--deadline-s` as well, so they stop and export in
time even if the machine slows down (training.json then says steps_done < steps). Each model's
exact command is in its training.json and log; the same command on any machine repeats it (up to
floating-point differences between GPUs).

--smoke runs the same path at toy size on the CPU (two seeds, a few steps) to check it before a
device session is spent on it.
"""

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
PLATFORMS = ["vehicle", "drone", "quadruped"]
CONFIGS = ["centerpoint_pillar_v2", "centerpoint_pillar032_v2", "pointpillars_anchor_v2"]
STEP_LINE = re.compile(r"^step (\d+) .* lr \S+ ([0-9.]+) s")


def log(message, sink):
    """Prints a timestamped line and appends it to the session log."""
    line = f"[{time.strftime('%H:%M:%S')}] {message}"
    print(line, flush=True)
    sink.write(line + "\n")
    sink.flush()


def environment(sink):
    """What the machine is (GPU, torch, cores), for the session log."""
    try:
        gpu = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        gpu = "no nvidia-smi"
    import torch

    log(f"gpu: {gpu or 'none'}; torch {torch.__version__}, cuda {torch.cuda.is_available()}; {os.cpu_count()} cores", sink)


def build_set(args, sink):
    """Simulates the training set, one platform per process (each parallel over its seeds)."""
    procs = []
    for p in PLATFORMS:
        out = pathlib.Path(args.data) / p
        cmd = [
            args.exporter, "--out", str(out), "--platform", p, "--frame", "normalized", "--vary",
            "--stride", "10", "--seeds", args.seeds, "--hard-clutter", str(args.hard_clutter),
            f"--ground-z={args.ground_z}",
        ]
        log(" ".join(cmd), sink)
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
    for p, proc in zip(PLATFORMS, procs):
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"export_training_set for {p} failed ({proc.returncode})")
        log(out.strip(), sink)


def train_command(args, config, out, steps, extra):
    """The train.py command line of `config` on the session's set, `steps` steps, into `out`."""
    data = [str(pathlib.Path(args.data) / p) for p in PLATFORMS]
    return [
        sys.executable, "tools/train/train.py", "--config", f"tools/train/configs/{config}.toml",
        "--data", *data, "--out", out, "--device", args.device, "--steps", str(steps), *extra,
    ]


def run_all(commands, logs):
    """Runs the commands side by side, each printing into its log file; returns the exit codes."""
    procs = []
    for cmd, path in zip(commands, logs):
        sink = open(path, "w")
        sink.write("$ " + " ".join(cmd[1:] if cmd[0] == sys.executable else cmd) + "\n")
        sink.flush()
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONWARNINGS="ignore::DeprecationWarning")
        procs.append((subprocess.Popen(cmd, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, env=env), sink))
    codes = []
    for proc, sink in procs:
        codes.append(proc.wait())
        sink.close()
    return codes


def rate(log_path):
    """Steps per second over the last two thirds of a run's logged steps."""
    points = []
    for line in pathlib.Path(log_path).read_text().splitlines():
        m = STEP_LINE.match(line)
        if m:
            points.append((int(m.group(1)), float(m.group(2))))
    if len(points) < 3:
        raise SystemExit(f"{log_path}: too few step lines to measure a rate")
    (s0, t0), (s1, t1) = points[len(points) // 3], points[-1]
    return (s1 - s0) / max(t1 - t0, 1e-3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exporter", default="target/release/examples/export_training_set")
    ap.add_argument("--data", default="/tmp/trainset3", help="folder for the simulated training set")
    ap.add_argument("--seeds", default="1000..1120", help="training seeds per platform (half-open)")
    ap.add_argument("--hard-clutter", type=float, default=0.25, help="share of sequences with hard clutter")
    ap.add_argument("--ground-z", type=float, default=-1.8,
                    help="z of the ground in every platform's training sweeps (m): the drone's and quadruped's level")
    ap.add_argument("--configs", nargs="+", default=CONFIGS)
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpu_session"))
    ap.add_argument("--budget-s", type=float, default=470, help="seconds from the start to the end of training")
    ap.add_argument("--calibrate-steps", type=int, default=61)
    ap.add_argument("--fill", type=float, default=0.9, help="share of the measured capacity to plan for")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true", help="toy size on the CPU: checks the path end to end")
    args = ap.parse_args()
    started = time.time()
    if args.smoke:
        args.seeds, args.device, args.calibrate_steps = "1000..1001", "cpu", 7
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(args.data).parent / "gpu_session_work"
    work.mkdir(parents=True, exist_ok=True)
    for c in args.configs:
        (work / f"{c}.pt").unlink(missing_ok=True)  # a checkpoint of another plan would resume it
    sink = open(out / "session_log.txt", "w")
    environment(sink)
    build_set(args, sink)
    log(f"training set ready after {time.time() - started:.0f} s", sink)

    every = max(1, args.calibrate_steps // 6)
    cal = [
        train_command(args, c, str(work / f"cal_{c}"), args.calibrate_steps, ["--checkpoint", "", "--log-every", str(every)])
        for c in args.configs
    ]
    cal_logs = [work / f"cal_{c}.log" for c in args.configs]
    codes = run_all(cal, cal_logs)
    for c, code, path in zip(args.configs, codes, cal_logs):
        if code != 0:
            sys.stdout.write(path.read_text()[-3000:])
            raise SystemExit(f"calibration of {c} failed ({code})")
    rates = {c: rate(path) for c, path in zip(args.configs, cal_logs)}
    left = args.budget_s - (time.time() - started) - 30  # start-up of the real runs
    plan = {c: max(10, int(r * left * args.fill) // 10 * 10) for c, r in rates.items()}
    log(f"rates (steps/s) {json.dumps({c: round(r, 2) for c, r in rates.items()})}; {left:.0f} s left; steps {plan}", sink)
    if args.smoke:
        plan = {c: 12 for c in plan}

    deadline = args.budget_s - (time.time() - started)
    # A device run trains into the repository's detectors/ (on the machine's copy of the tree),
    # so each training.json names the folder the model ships in; a smoke run on a checkout must
    # not overwrite the bundled models, so it trains into the work folder.
    dest = {c: (work / "detectors" / c) if args.smoke else (ROOT / "detectors" / c) for c in args.configs}
    runs = [
        train_command(
            args, c, str(dest[c]) if args.smoke else f"detectors/{c}", plan[c],
            ["--checkpoint", str(work / f"{c}.pt"), "--checkpoint-every", "500", "--deadline-s", f"{deadline:.0f}"],
        )
        for c in args.configs
    ]
    logs = [dest[c] / "training_log.txt" for c in args.configs]
    for path in logs:
        path.parent.mkdir(parents=True, exist_ok=True)
    codes = run_all(runs, logs)
    log(f"training done after {time.time() - started:.0f} s, exit codes {dict(zip(args.configs, codes))}", sink)
    with tarfile.open(out / "detectors.tar", "w") as tar:
        for c, code in zip(args.configs, codes):
            tar.add(dest[c], arcname=f"detectors/{c}")
        for path in cal_logs:
            tar.add(path, arcname=f"calibration/{path.name}")
    summary = {"rates": rates, "steps": plan, "codes": dict(zip(args.configs, codes)), "wall_s": time.time() - started}
    (out / "session.json").write_text(json.dumps(summary, indent=1) + "\n")
    log(f"wrote {out}/detectors.tar after {time.time() - started:.0f} s", sink)
    sink.close()


if __name__ == "__main__":
    main()
