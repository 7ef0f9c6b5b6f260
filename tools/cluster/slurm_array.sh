#!/usr/bin/env bash
# boxlayer as a Slurm job array: array task k runs worker k's share of the config's sequences.
#SBATCH --job-name=boxlayer
#SBATCH --array=0-11%12
#SBATCH --cpus-per-task=8
#SBATCH --mem=16G
#SBATCH --time=24:00:00
#SBATCH --signal=B:TERM@300
#SBATCH --output=boxlayer-%A_%a.out
#
# boxlayer takes the worker index (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) and count
# (SLURM_ARRAY_TASK_COUNT) from Slurm, so the array must be one range with step 1 (`--array=0-11`,
# with any `%K` limit on tasks at once); this script refuses steps and gaps. Each task runs
#   $BOXLAYER run "$CONFIG" --data-root "$DATA_ROOT" --out "$OUT" --resume --threads "$SLURM_CPUS_PER_TASK" [ARGS...]
# with the script's arguments appended. Set BOXLAYER (default: `boxlayer` on PATH), CONFIG,
# DATA_ROOT and OUT in the environment; sbatch passes the submitting shell's environment on.
# THREADS overrides --threads (without it and without SLURM_CPUS_PER_TASK, boxlayer uses every
# core it may).
#
#   export CONFIG=pipelines/3eed_waymo.toml DATA_ROOT=/data OUT=/scratch/boxlayer
#   jobid=$(sbatch --parsable tools/cluster/slurm_array.sh)
#
# The tasks only write; `boxlayer merge` checks the whole output and writes OUT/dataset.json.
# Queue it to run once every task has ended, whatever their exit codes (docs/cluster.md):
#
#   sbatch --dependency=afterany:"$jobid" --cpus-per-task=1 --mem=2G --time=1:00:00 \
#     --wrap='boxlayer merge "$OUT" --config "$CONFIG" --data-root "$DATA_ROOT"'
#
# Rerunning the same array with --resume (this script always passes it) redoes only what did not
# finish. The script runs without Slurm too, as one worker:
#
#   SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=2 CONFIG=... DATA_ROOT=... OUT=... bash tools/cluster/slurm_array.sh
set -euo pipefail

say() { printf 'slurm_array: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

BOXLAYER=${BOXLAYER:-boxlayer}
CONFIG=${CONFIG:-}
DATA_ROOT=${DATA_ROOT:-}
OUT=${OUT:-}
THREADS=${THREADS:-${SLURM_CPUS_PER_TASK:-}}

[ -n "$CONFIG" ] || die "set CONFIG to a pipeline TOML (e.g. pipelines/3eed_waymo.toml)"
[ -n "$DATA_ROOT" ] || die "set DATA_ROOT to the folder the data manifest's paths are relative to"
[ -n "$OUT" ] || die "set OUT to the output folder shared by every task"
[ -n "${SLURM_ARRAY_TASK_ID:-}" ] || die "SLURM_ARRAY_TASK_ID is not set: submit with sbatch --array=0-N, or set it (and SLURM_ARRAY_TASK_COUNT) to run one worker by hand"
[ -n "${SLURM_ARRAY_TASK_COUNT:-}${SLURM_ARRAY_TASK_MAX:-}" ] || die "SLURM_ARRAY_TASK_COUNT is not set: boxlayer needs the worker count too"
command -v "$BOXLAYER" >/dev/null 2>&1 || die "no boxlayer binary '$BOXLAYER': put it on PATH or set BOXLAYER"

# A step or gaps (`--array=0-22:2`, `--array=0,3,5`) would give some task an index at or above
# the count and leave some sequences to no task.
if [ -n "${SLURM_ARRAY_TASK_STEP:-}" ] && [ "$SLURM_ARRAY_TASK_STEP" != 1 ]; then
  die "the array steps by $SLURM_ARRAY_TASK_STEP; use one range with step 1, --array=0-N"
fi
if [ -n "${SLURM_ARRAY_TASK_COUNT:-}" ] && [ -n "${SLURM_ARRAY_TASK_MAX:-}" ] \
  && [ "$SLURM_ARRAY_TASK_COUNT" != $((SLURM_ARRAY_TASK_MAX - ${SLURM_ARRAY_TASK_MIN:-0} + 1)) ]; then
  die "the array has $SLURM_ARRAY_TASK_COUNT tasks from ${SLURM_ARRAY_TASK_MIN:-0} to $SLURM_ARRAY_TASK_MAX (gaps); use one range, --array=0-N"
fi

args=(run "$CONFIG" --data-root "$DATA_ROOT" --out "$OUT" --resume)
if [ -n "$THREADS" ]; then
  args+=(--threads "$THREADS")
fi
args+=("$@")

say "array task ${SLURM_ARRAY_TASK_ID} (${SLURM_ARRAY_TASK_COUNT:-?} tasks) on $(hostname): $BOXLAYER ${args[*]}"
# exec: Slurm's SIGTERM (scancel, --signal before the time limit) reaches boxlayer itself, which
# stops cleanly (exit 143) and leaves nothing that looks finished; its exit code is the task's.
exec "$BOXLAYER" "${args[@]}"
