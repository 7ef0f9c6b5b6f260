//! The cluster templates in `tools/cluster/` (the Slurm array script, the Kubernetes Indexed Job
//! and merge Job, the Dockerfile) pass `tools/cluster/check.sh`: shellcheck, strict
//! kubernetes-validate, the Indexed Job's own invariants (`BOXLAYER_WORKERS` equals
//! `completions`, `--threads` equals the CPUs) and hadolint, each with no finding. Fails, not
//! skips, when bash or a linter is missing: `make setup` installs the linters from
//! `tools/requirements-test.txt`.

use std::path::Path;
use std::process::Command;

#[test]
fn cluster_templates_pass_their_linters() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("bash")
        .arg(repo.join("tools/cluster/check.sh"))
        .current_dir(repo)
        .output()
        .unwrap_or_else(|e| panic!("cannot run bash ({e})"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "tools/cluster/check.sh failed (are the linters installed? `make setup`):\n{text}"
    );
    for check in ["shellcheck", "kubernetes-validate", "Job invariants", "hadolint"] {
        assert!(
            text.contains(&format!("check: ok   {check}")),
            "no passing {check} check:\n{text}"
        );
    }
    assert!(text.lines().any(|l| l.ends_with(" passed, 0 failed")), "{text}");
}
