//! Cross-check of the fusion KDE (`boxlayer::fuse::GaussianKde`) against scipy's
//! `gaussian_kde` through `tools/kde_crosscheck.py` (issue 8): random weighted and unweighted
//! 1-, 2- and 3-D data with Scott, Silverman and scalar bandwidths; neff, factor, kernel
//! covariance and densities must agree to 1e-10 relative, the member with the highest density
//! must be the same, and a 1-D estimate's peak must match scipy's dense-grid-then-bounded-search
//! maximum. Singular data must fail on both sides. Fails, not skips, when python3 or scipy is
//! missing.

use std::path::Path;
use std::process::Command;

use boxlayer::fuse::{Bandwidth, GaussianKde};
use serde_json::{Value, json};

#[path = "support/split_mix.rs"]
mod split_mix;
use split_mix::Rng;

struct Case {
    dims: usize,
    data: Vec<Vec<f64>>,
    weights: Option<Vec<f64>>,
    bandwidth: Bandwidth,
    points: Vec<Vec<f64>>,
}

fn bandwidth_json(b: Bandwidth) -> Value {
    match b {
        Bandwidth::Scott => json!("scott"),
        Bandwidth::Silverman => json!("silverman"),
        Bandwidth::Factor(f) => json!(f),
        Bandwidth::Absolute(_) => unreachable!("not a scipy mode"),
    }
}

fn cases(seed: u64) -> Vec<Case> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for k in 0..60 {
        let dims = 1 + k % 3;
        let n = dims + 2 + (rng.next_u64() % 9) as usize;
        // Box-centre-like clusters: a few metres apart, a couple of tight groups.
        let groups: Vec<Vec<f64>> = (0..2)
            .map(|_| (0..dims).map(|_| rng.uniform(-20.0, 20.0)).collect())
            .collect();
        let spread = rng.uniform(0.05, 2.0);
        let data: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                let g = &groups[usize::from(i % 3 == 0)];
                g.iter().map(|c| c + rng.uniform(-spread, spread)).collect()
            })
            .collect();
        let weights = (k % 2 == 0).then(|| (0..n).map(|_| rng.uniform(0.1, 1.0)).collect());
        let bandwidth = match k % 4 {
            0 => Bandwidth::Scott,
            1 => Bandwidth::Silverman,
            2 => Bandwidth::Factor(rng.uniform(0.1, 2.0)),
            _ => Bandwidth::Factor(1.0),
        };
        let points = (0..5)
            .map(|j| {
                (0..dims)
                    .map(|d| data[j % n][d] + rng.uniform(-0.3, 0.3) * spread)
                    .collect()
            })
            .collect();
        out.push(Case {
            dims,
            data,
            weights,
            bandwidth,
            points,
        });
    }
    out
}

fn python(cases_json: &Value, dir: &Path) -> Value {
    let (cases_path, out_path) = (dir.join("cases.json"), dir.join("out.json"));
    std::fs::write(&cases_path, cases_json.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/kde_crosscheck.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg("--cases")
        .arg(&cases_path)
        .arg("--out")
        .arg(&out_path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}); install Python 3 with numpy and scipy (`make setup`)"));
    assert!(
        output.status.success(),
        "tools/kde_crosscheck.py failed (are numpy and scipy installed? `make setup`):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out_path).unwrap()).unwrap()
}

fn close(rust: f64, scipy: f64, rel: f64, what: &str) {
    assert!(
        (rust - scipy).abs() <= rel * scipy.abs().max(1e-300),
        "{what}: rust {rust} vs scipy {scipy}"
    );
}

/// Densities far in the tail (e^-380) carry the rounding of their exponent: compare logs, to
/// 1e-10 of the log's magnitude (at least 1e-10 absolute).
fn close_density(rust: f64, scipy: f64, what: &str) {
    assert!(rust > 0.0 && scipy > 0.0, "{what}: rust {rust} vs scipy {scipy}");
    let (lr, ls) = (rust.ln(), scipy.ln());
    assert!(
        (lr - ls).abs() <= 1e-10 * ls.abs().max(1.0),
        "{what}: rust {rust:e} vs scipy {scipy:e}"
    );
}

fn check<const D: usize>(case: &Case, scipy: &Value, label: &str) {
    let data: Vec<[f64; D]> = case.data.iter().map(|p| std::array::from_fn(|d| p[d])).collect();
    let kde = GaussianKde::<D>::new(&data, case.weights.as_deref(), case.bandwidth).unwrap();
    close(
        kde.neff(),
        scipy["neff"].as_f64().unwrap(),
        1e-12,
        &format!("{label} neff"),
    );
    close(
        kde.factor().unwrap(),
        scipy["factor"].as_f64().unwrap(),
        1e-12,
        &format!("{label} factor"),
    );
    let cov = kde.kernel_covariance();
    for r in 0..D {
        for c in 0..D {
            let s = scipy["covariance"][r][c].as_f64().unwrap();
            let scale = scipy["covariance"][r][r].as_f64().unwrap().abs();
            assert!(
                (cov[r][c] - s).abs() <= 1e-10 * scale,
                "{label} covariance[{r}][{c}]: rust {} vs scipy {s}",
                cov[r][c]
            );
        }
    }
    for (k, p) in case.points.iter().enumerate() {
        let x: [f64; D] = std::array::from_fn(|d| p[d]);
        close_density(
            kde.evaluate(&x),
            scipy["density"][k].as_f64().unwrap(),
            &format!("{label} density at point {k}"),
        );
    }
    let at_data: Vec<f64> = scipy["density_at_data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    for (i, &s) in at_data.iter().enumerate() {
        close_density(kde.evaluate_at_point(i), s, &format!("{label} density at member {i}"));
    }
    // The selected member must agree unless scipy's top two are a numerical tie.
    let mut sorted = at_data.clone();
    sorted.sort_by(|a, b| b.total_cmp(a));
    if sorted.len() < 2 || sorted[0] - sorted[1] > 1e-9 * sorted[0] {
        assert_eq!(
            kde.argmax_point() as u64,
            scipy["argmax"].as_u64().unwrap(),
            "{label} argmax"
        );
    }
    if D == 1 {
        let (lo, hi) = case
            .data
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                (lo.min(p[0]), hi.max(p[0]))
            });
        let data1: Vec<[f64; 1]> = case.data.iter().map(|p| [p[0]]).collect();
        let kde1 = GaussianKde::<1>::new(&data1, case.weights.as_deref(), case.bandwidth).unwrap();
        let ours = kde1.peak();
        let theirs = scipy["peak"].as_f64().unwrap();
        // Both are maxima of the same function: compare the densities tightly, the locations loosely
        // (a flat top moves the argmax more than the maximum).
        let (f_ours, f_theirs) = (kde1.evaluate(&[ours]), kde1.evaluate(&[theirs]));
        assert!(
            f_ours >= f_theirs * (1.0 - 1e-9),
            "{label} peak: rust {ours} (f = {f_ours}) below scipy's {theirs} (f = {f_theirs})"
        );
        assert!(
            (ours - theirs).abs() <= 1e-4 * (hi - lo),
            "{label} peak: rust {ours} vs scipy {theirs}"
        );
    }
}

#[test]
fn kde_matches_scipy_on_random_weighted_data() {
    let cases = cases(8);
    let mut payload: Vec<Value> = cases
        .iter()
        .map(|c| {
            json!({
                "data": c.data,
                "weights": c.weights,
                "bw": bandwidth_json(c.bandwidth),
                "points": c.points,
            })
        })
        .collect();
    // Singular data: 2-D points constant in y, and identical 1-D values.
    payload.push(
        json!({"data": [[0.0, 1.0], [1.0, 1.0], [3.0, 1.0]], "weights": null, "bw": 1.0, "points": [[0.0, 1.0]]}),
    );
    payload.push(json!({"data": [[4.5], [4.5], [4.5]], "weights": [1.0, 2.0, 3.0], "bw": "scott", "points": [[4.5]]}));
    let dir = tempfile::tempdir().unwrap();
    let scipy = python(&Value::Array(payload), dir.path());
    let results = scipy["results"].as_array().unwrap();
    assert_eq!(results.len(), cases.len() + 2);
    for (k, (case, r)) in cases.iter().zip(results).enumerate() {
        assert_eq!(r["singular"], false, "case {k} unexpectedly singular for scipy");
        let label = format!(
            "case {k} ({}-D, n = {}, {:?})",
            case.dims,
            case.data.len(),
            case.bandwidth
        );
        match case.dims {
            1 => check::<1>(case, r, &label),
            2 => check::<2>(case, r, &label),
            _ => check::<3>(case, r, &label),
        }
    }
    assert_eq!(results[cases.len()]["singular"], true);
    assert_eq!(results[cases.len() + 1]["singular"], true);
    let flat_y = [[0.0, 1.0], [1.0, 1.0], [3.0, 1.0]];
    assert!(GaussianKde::new(&flat_y, None, Bandwidth::Factor(1.0)).is_err());
    let same = [[4.5], [4.5], [4.5]];
    assert!(GaussianKde::new(&same, Some(&[1.0, 2.0, 3.0]), Bandwidth::Scott).is_err());
}
