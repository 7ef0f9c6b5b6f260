//! The real CenterPoint-pillar encoders in tests/fixtures/shared/onnx-pfn/ (copies of ../shared/fixtures/onnx-pfn/) (point-major [N,20,10] and
//! channel-major [1,10,N,20]) load through manifests and run on pillars built by boxlayer, and
//! scatter into NCHW and NHWC canvases alike.

use std::path::{Path, PathBuf};

use boxlayer::PointCloud;
use boxlayer::detect::{Detector, PillarRows};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/detect")
        .join(rel)
}

/// A deterministic sweep: scattered ground points plus a few dense object-sized blobs.
fn sweep(extent_m: f32) -> PointCloud {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    let (mut x, mut y, mut z, mut i) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3000 {
        x.push((next() * 2.0 - 1.0) * extent_m);
        y.push((next() * 2.0 - 1.0) * extent_m);
        z.push(-1.7 + next() * 0.1);
        i.push(next());
    }
    for (cx, cy) in [(10.0, 3.0), (-12.0, -8.0), (25.0, -20.0), (-30.0, 30.0)] {
        for _ in 0..400 {
            x.push(cx + (next() - 0.5) * 4.0);
            y.push(cy + (next() - 0.5) * 1.8);
            z.push(-1.6 + next() * 1.5);
            i.push(next() * 0.5);
        }
    }
    PointCloud::from_columns(x, y, z, i).unwrap()
}

#[test]
fn real_encoders_load_run_and_scatter_onto_their_cells() {
    for (name, rows) in [
        ("carkusl_pfe", 5268),
        ("carkusl_pfe_sim", 5268),
        ("haohaonju_pfe", 32000),
    ] {
        let detector = Detector::load(&fixture(name)).unwrap();
        assert_eq!(detector.pillar_rows(), PillarRows::Fixed(rows), "{name}");
        let pillars = detector.pillarize(&sweep(45.0)).unwrap();
        assert!(pillars.count() > 1000, "{name}: {} pillars", pillars.count());
        assert_eq!(pillars.rows, rows);
        let encoded = detector.encode(&pillars).unwrap().unwrap();
        assert_eq!((encoded.rows, encoded.channels), (rows, 64));
        assert!(encoded.data.iter().all(|v| v.is_finite()));
        // Real pillars differ from each other: the encoder saw their features.
        let first: Vec<f32> = (0..64).map(|c| encoded.get(0, c)).collect();
        assert!((1..pillars.count()).any(|p| (0..64).any(|c| (encoded.get(p, c) - first[c]).abs() > 1e-3)));

        let canvas = detector.scatter(&pillars, &encoded);
        let (nx, ny) = detector.manifest().grid_size();
        assert_eq!(canvas.shape, [1, 64, ny, nx]);
        for (p, &(ix, iy)) in pillars.cells.iter().enumerate() {
            for c in [0, 17, 63] {
                let at = (c * ny + iy as usize) * nx + ix as usize;
                assert_eq!(canvas.data[at], encoded.get(p, c), "{name}: pillar {p} channel {c}");
            }
        }
        let occupied = canvas.data.iter().filter(|v| **v != 0.0).count();
        assert!(occupied <= pillars.count() * 64);
    }
}

#[test]
fn an_nhwc_head_gives_the_detections_of_its_nchw_original() {
    // The same stand-in heads with their canvas input turned NHWC by tools/head_to_nhwc.py, behind
    // a channel-major (CarkusL) and a point-major (HaohaoNJU) real encoder.
    let cloud = sweep(45.0);
    for name in ["carkusl_pfe_sim", "haohaonju_pfe"] {
        let nchw = Detector::load(&fixture(name)).unwrap();
        let nhwc = Detector::load(&fixture(&format!("{name}_nhwc"))).unwrap();
        let pillars = nhwc.pillarize(&cloud).unwrap();
        let encoded = nhwc.encode(&pillars).unwrap().unwrap();
        let canvas = nhwc.scatter(&pillars, &encoded);
        let (nx, ny) = nhwc.manifest().grid_size();
        assert_eq!(canvas.shape, [1, ny, nx, 64], "{name}");
        for (p, &(ix, iy)) in pillars.cells.iter().enumerate() {
            for c in [0, 17, 63] {
                let at = (iy as usize * nx + ix as usize) * 64 + c;
                assert_eq!(canvas.data[at], encoded.get(p, c), "{name}: pillar {p} channel {c}");
            }
        }
        let a = nchw.detect(&cloud).unwrap();
        let b = nhwc.detect(&cloud).unwrap();
        assert!(!a.is_empty(), "{name}");
        assert_eq!(a.len(), b.len(), "{name}");
        for (a, b) in a.iter().zip(&b) {
            assert_eq!((a.box3, a.class, a.score), (b.box3, b.class, b.score), "{name}");
        }
    }
}

#[test]
fn point_major_and_channel_major_exports_agree_on_boxlayer_pillars() {
    let point_major = Detector::load(&fixture("carkusl_pfe")).unwrap();
    let channel_major = Detector::load(&fixture("carkusl_pfe_sim")).unwrap();
    let cloud = sweep(45.0);
    let a_pillars = point_major.pillarize(&cloud).unwrap();
    let b_pillars = channel_major.pillarize(&cloud).unwrap();
    assert_eq!(a_pillars.shape, vec![5268, 20, 10]);
    assert_eq!(b_pillars.shape, vec![1, 10, 5268, 20]);
    assert_eq!(a_pillars.cells, b_pillars.cells);
    let a = point_major.encode(&a_pillars).unwrap().unwrap();
    let b = channel_major.encode(&b_pillars).unwrap().unwrap();
    assert!(!a.channel_major && b.channel_major);
    let mut worst = 0.0f32;
    for p in 0..a_pillars.count() {
        for c in 0..64 {
            worst = worst.max((a.get(p, c) - b.get(p, c)).abs());
        }
    }
    assert!(worst < 5e-5, "largest difference {worst}");
}

#[test]
fn full_detection_with_a_real_encoder_fires_only_where_pillars_are() {
    let detector = Detector::load(&fixture("carkusl_pfe")).unwrap();
    let cloud = sweep(45.0);
    let pillars = detector.pillarize(&cloud).unwrap();
    let (detections, timings) = detector.detect_timed(&cloud).unwrap();
    assert!(!detections.is_empty());
    assert!(detections.len() <= 83, "post-NMS top-k");
    assert!(timings.encoder > std::time::Duration::ZERO && timings.head > std::time::Duration::ZERO);
    // The stand-in head scores a 4 × 4-pillar window by its strongest feature and puts the box at
    // the window centre (reg 0.5); empty windows score σ(−2) < 0.3. So every box sits on pillars.
    for d in &detections {
        assert_eq!(d.class, boxlayer::ObjectClass::Vehicle);
        assert_eq!(d.detector, "carkusl_pfe");
        assert!(d.score >= 0.3);
        let wx = ((d.box3.x + 51.2) / 0.8 - 0.5).round() as u32;
        let wy = ((d.box3.y + 51.2) / 0.8 - 0.5).round() as u32;
        assert!(
            pillars.cells.iter().any(|&(ix, iy)| ix / 4 == wx && iy / 4 == wy),
            "box at ({}, {}) has no pillar under it",
            d.box3.x,
            d.box3.y
        );
        assert!((d.box3.l - 4.0).abs() < 1e-4 && (d.box3.z + 1.0).abs() < 1e-6);
    }
    // Circle NMS at 0.5 m: no two kept centres closer than that.
    for (i, a) in detections.iter().enumerate() {
        for b in &detections[i + 1..] {
            assert!((a.box3.x - b.box3.x).hypot(a.box3.y - b.box3.y) > 0.5);
        }
    }
}

#[test]
fn detector_runs_from_several_threads() {
    let detector = Detector::load(&fixture("haohaonju_pfe")).unwrap();
    let cloud = sweep(60.0);
    let one = detector.detect(&cloud).unwrap();
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3).map(|_| s.spawn(|| detector.detect(&cloud).unwrap())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in results {
        assert_eq!(r, one);
    }
}
