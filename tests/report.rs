//! `boxlayer report` (issue 24): the page of a two-platform layer opens in headless Chromium
//! (tools/check_report.py drives it over the DevTools protocol) with no console errors, every
//! image decoded, the seven statistics plots and the gallery of flagged boxes; a page with a
//! broken image and a console error fails the same check, so the check can fail.

#[path = "support/sim_layer.rs"]
mod sim_layer;

use std::path::Path;
use std::process::Command;

use boxlayer::Platform;
use sim_layer::sim_layer;

fn check_report(page: &Path, extra: &[&str]) -> std::process::Output {
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/check_report.py");
    Command::new("python3")
        .arg(tool)
        .arg(page)
        .args(extra)
        .output()
        .expect("python3")
}

#[test]
fn report_opens_in_chromium_with_every_image_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let vehicle = sim_layer(Platform::Vehicle, 31, 4, dir.path());
    let drone = sim_layer(Platform::Drone, 32, 6, dir.path());
    assert_eq!(vehicle.out, drone.out);
    let page = dir.path().join("report.html");
    let out = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["report"])
        .arg(&vehicle.out)
        .arg(&page)
        .arg("--data-root")
        .arg(&vehicle.data_root)
        .args(["--gallery", "6"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("2 sequences, 7 plots, 6 of"), "{stdout}");

    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing loaded from elsewhere.
    assert!(
        !html.contains("src=\"http") && !html.contains("src=\"file"),
        "external resource"
    );
    for name in [&vehicle.sequence, &drone.sequence] {
        let seq = name.file_name().unwrap().to_string_lossy();
        assert!(html.contains(&*seq), "{seq} missing from the page");
    }

    let shot = dir.path().join("report.png");
    let check = check_report(
        &page,
        &[
            "--plots",
            "7",
            "--min-tiles",
            "6",
            "--screenshot",
            shot.to_str().unwrap(),
        ],
    );
    assert!(
        check.status.success(),
        "check_report: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let screenshot = image::open(&shot).unwrap();
    assert_eq!(screenshot.width(), 1280);
    assert!(screenshot.height() > 2000, "{} px high", screenshot.height());

    // The same check on a spoiled copy: one image's bytes cut short and a console error.
    let spoiled = html
        .replacen(
            "src=\"data:image/png;base64,iVBOR",
            "src=\"data:image/png;base64,AAAA",
            1,
        )
        .replacen("</body>", "<script>console.error('spoiled')</script></body>", 1);
    let bad = dir.path().join("spoiled.html");
    std::fs::write(&bad, spoiled).unwrap();
    let check = check_report(&bad, &["--plots", "7"]);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("did not load") && stderr.contains("console error"),
        "{stderr}"
    );
}
