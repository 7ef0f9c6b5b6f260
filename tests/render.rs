//! `boxlayer render` (issue 24) on layers built from simulated logs, checked by pixel probes
//! against geometry computed here: every box's outline colour sits at its corners projected
//! through the camera model (or mapped onto the bird's-eye grid), heading ticks at the front
//! edge's middle, truth dashes along truth edges; a box out of view leaves the image untouched
//! and nothing is drawn away from the boxes and their labels.

#[path = "support/sim_layer.rs"]
mod sim_layer;

use boxlayer::Platform;
use boxlayer::camera::{project_box, project_point};
use boxlayer::export::{LogLocation, SequenceLog, ShardSequence};
use boxlayer::geometry::pose::isometry_from_row_major;
use boxlayer::geometry::{Box3, bev_corners, box_corners};
use boxlayer::render::{
    BevOptions, FLAG_COLOR, SceneBox, TRUTH_COLOR, TileOptions, class_color, draw_camera, load_truth, render_bev,
    render_camera, render_track,
};
use image::{Rgb, RgbImage};
use sim_layer::sim_layer;

/// Whether any pixel within `r` of `(u, v)` has `color`.
fn near(image: &RgbImage, u: f64, v: f64, r: i64, color: Rgb<u8>) -> bool {
    let (w, h) = (i64::from(image.width()), i64::from(image.height()));
    let (u, v) = (u.floor() as i64, v.floor() as i64);
    (v - r..=v + r).any(|y| {
        (u - r..=u + r).any(|x| x >= 0 && y >= 0 && x < w && y < h && *image.get_pixel(x as u32, y as u32) == color)
    })
}

#[test]
fn camera_outlines_sit_on_projected_corners_and_nothing_else_is_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let layer = sim_layer(Platform::Vehicle, 21, 3, dir.path());
    let sequence = ShardSequence::load(&layer.sequence).unwrap();
    let log = SequenceLog::open(&sequence, &LogLocation::DataRoot(layer.data_root.clone()))
        .unwrap()
        .unwrap();
    let frame = log.frame(1).unwrap();
    let view = frame.cameras.iter().find(|v| v.name == "FRONT").unwrap();
    let original = view.image().unwrap();
    let calibration = &view.calibration;
    let rendered = render_camera(&sequence, &log, 1, Some("FRONT"), &[]).unwrap();
    assert_eq!(rendered.dimensions(), original.dimensions());
    let (w, h) = (f64::from(calibration.width), f64::from(calibration.height));

    let rows: Vec<_> = sequence.boxes.iter().filter(|b| b.frame_index == 1).collect();
    let mut probed = 0;
    for b in &rows {
        let corners: Vec<_> = box_corners(&Box3::from_array(b.box_sensor))
            .iter()
            .map(|c| project_point(calibration, c))
            .collect();
        if corners
            .iter()
            .any(|c| c.is_none_or(|p| p.x < 3.0 || p.y < 3.0 || p.x > w - 3.0 || p.y > h - 3.0))
        {
            continue;
        }
        for c in corners.iter().flatten() {
            assert!(
                near(&rendered, c.x, c.y, 1, class_color(&b.class)),
                "box {} ({}): no outline at corner ({:.1}, {:.1})",
                b.box_id,
                b.class,
                c.x,
                c.y
            );
        }
        probed += 1;
    }
    assert!(probed >= 2, "only {probed} boxes wholly in the FRONT image");

    // Every changed pixel lies on a visible box (its projected hull, 3 px out) or its label (a
    // band up to 24 px above the hull's top-left corner).
    let hulls: Vec<[f64; 4]> = rows
        .iter()
        .filter_map(|b| project_box(calibration, &Box3::from_array(b.box_sensor)))
        .map(|p| [p.x_min, p.y_min, p.x_max, p.y_max])
        .collect();
    let allowed = |x: f64, y: f64| {
        hulls.iter().any(|r| {
            (x >= r[0] - 3.0 && x <= r[2] + 3.0 && y >= r[1] - 3.0 && y <= r[3] + 3.0)
                || (x >= r[0] - 1.0 && x <= r[0] + 640.0 && y >= r[1] - 24.0 && y <= r[1] + 1.0)
                // A label pushed inside the image at the top or the right edge.
                || (r[1] < 24.0 && y <= 24.0 && x >= (r[0] - 640.0).max(0.0))
                || (x >= w - 640.0 && x >= r[0] - 640.0 && y >= r[1] - 24.0 && y <= r[1] + 1.0)
        })
    };
    let mut changed = 0;
    for (x, y, p) in rendered.enumerate_pixels() {
        if p != original.get_pixel(x, y) {
            changed += 1;
            assert!(
                allowed(f64::from(x) + 0.5, f64::from(y) + 0.5),
                "pixel ({x}, {y}) changed, far from every box"
            );
        }
    }
    assert!(changed > 100, "{changed} pixels changed");

    // Boxes behind the camera or beside it leave the image exactly as it was.
    let away = [
        Box3::new(-12.0, 0.0, 1.0, 4.5, 1.9, 1.6, 0.3),
        Box3::new(0.5, 30.0, 1.0, 4.5, 1.9, 1.6, 0.0),
        Box3::new(2.0, -30.0, 1.0, 4.5, 1.9, 1.6, 1.0),
    ];
    let boxes: Vec<SceneBox> = away
        .iter()
        .map(|b| SceneBox {
            bbox: *b,
            class: "vehicle".into(),
            track_id: Some(1),
            flags: vec!["few_points".into()],
        })
        .collect();
    for b in &away {
        assert!(project_box(calibration, b).is_none(), "{b:?} is in view");
    }
    let untouched = draw_camera(&original, calibration, &boxes, &boxes).unwrap();
    assert!(untouched == *original, "a box out of view changed the image");
}

#[test]
fn bev_outlines_ticks_flags_and_truth_sit_where_the_geometry_says() {
    let dir = tempfile::tempdir().unwrap();
    let layer = sim_layer(Platform::Vehicle, 23, 3, dir.path());
    let sequence = ShardSequence::load(&layer.sequence).unwrap();
    let log = SequenceLog::open(&sequence, &LogLocation::DataRoot(layer.data_root.clone()))
        .unwrap()
        .unwrap();
    // The layer's boxes are the truth itself; a copy moved 0.9 m sideways (sensor y) keeps the
    // dashes clear of the layer's outlines.
    let mut truth = load_truth(&layer.truth).unwrap();
    for t in &mut truth {
        t.bbox.y += 0.9;
    }
    let options = BevOptions::default();
    let image = render_bev(&sequence, Some(&log), 2, &truth, &options).unwrap();
    assert_eq!(image.dimensions(), (1000, 1000));
    // The documented view: x up, y left, the sensor in the middle, 2 × 60 m over 1000 px.
    let m_per_px = 120.0 / 1000.0;
    let to_px = |x: f64, y: f64| (500.0 - y / m_per_px, 500.0 - x / m_per_px);
    let inside = |x: f64, y: f64| x.abs() < 55.0 && y.abs() < 55.0;

    let mut probed = 0;
    let mut flagged = 0;
    let mut ticks = 0;
    for b in sequence.boxes.iter().filter(|b| b.frame_index == 2) {
        let bx = Box3::from_array(b.box_normalized.unwrap());
        if !inside(bx.x, bx.y) {
            continue;
        }
        let color = class_color(&b.class);
        for c in bev_corners(&bx) {
            let (u, v) = to_px(c.x, c.y);
            assert!(
                near(&image, u, v, 1, color),
                "box {}: no outline at ({u:.1}, {v:.1})",
                b.box_id
            );
        }
        // The heading tick runs from the centre to the front edge's middle: probe it halfway,
        // clear of the outline and the flag dot, on boxes long enough for that.
        if bx.l >= 3.0 {
            let half = (bx.x + 0.25 * bx.l * bx.yaw.cos(), bx.y + 0.25 * bx.l * bx.yaw.sin());
            let (u, v) = to_px(half.0, half.1);
            assert!(near(&image, u, v, 1, color), "box {}: no heading tick", b.box_id);
            // The same distance behind the centre holds no tick.
            let back = (bx.x - 0.25 * bx.l * bx.yaw.cos(), bx.y - 0.25 * bx.l * bx.yaw.sin());
            let (u, v) = to_px(back.0, back.1);
            assert!(
                !near(&image, u, v, 0, color),
                "box {}: a tick behind the centre",
                b.box_id
            );
            ticks += 1;
        }
        if !b.flags.is_empty() && bx.l.min(bx.w) > 1.5 {
            let (u, v) = to_px(bx.x, bx.y);
            assert!(
                near(&image, u, v, 1, FLAG_COLOR),
                "flagged box {}: no flag mark",
                b.box_id
            );
            flagged += 1;
        }
        probed += 1;
    }
    assert!(
        probed >= 3 && flagged >= 1 && ticks >= 3,
        "{probed} boxes probed, {flagged} flag marks, {ticks} heading ticks"
    );

    // Truth (sensor frame) moved into the normalized frame by the frame's own transform: white
    // dashes along its edges.
    let row = sequence.frames.iter().find(|r| r.frame_index == 2).unwrap();
    let normalized_from_sensor = isometry_from_row_major(&row.normalized_from_sensor.unwrap(), 1e-6).unwrap();
    let mut dashed = 0;
    let mut truth_boxes = 0;
    for t in truth.iter().filter(|t| t.frame.frame == 2) {
        let bx = t.bbox.transformed(&normalized_from_sensor);
        if !inside(bx.x, bx.y) {
            continue;
        }
        truth_boxes += 1;
        let c = bev_corners(&bx);
        let mut hits = 0;
        for k in 0..4 {
            let (a, b) = (c[k], c[(k + 1) % 4]);
            for s in 0..10 {
                let f = (f64::from(s) + 0.5) / 10.0;
                let (u, v) = to_px(a.x + f * (b.x - a.x), a.y + f * (b.y - a.y));
                hits += usize::from(near(&image, u, v, 1, TRUTH_COLOR));
            }
        }
        // Dashes of 4 px with 3 px gaps, partly under the layer's own outlines.
        dashed += usize::from(hits >= 8);
    }
    if let Ok(path) = std::env::var("BOXLAYER_RENDER_DEBUG") {
        image.save(path).unwrap();
    }
    assert!(
        truth_boxes >= 3 && dashed * 10 >= truth_boxes * 8,
        "{dashed} of {truth_boxes} truth boxes dashed"
    );
}

#[test]
fn track_strip_has_one_tile_per_chosen_box_with_the_box_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let layer = sim_layer(Platform::Drone, 25, 6, dir.path());
    let sequence = ShardSequence::load(&layer.sequence).unwrap();
    let log = SequenceLog::open(&sequence, &LogLocation::DataRoot(layer.data_root.clone()))
        .unwrap()
        .unwrap();
    // The longest track.
    let track = sequence
        .tracks
        .iter()
        .max_by_key(|t| (t.num_boxes, -t.track_id))
        .unwrap();
    let options = TileOptions::default();
    let strip = render_track(&sequence, Some(&log), track.track_id, 4, &options).unwrap();
    let shown = track.num_boxes.min(4) as u32;
    let s = options.size_px;
    assert_eq!(strip.dimensions(), (shown * s + 2 * (shown - 1), 2 * s + 40 + 28));
    // In each tile's bird's-eye panel the track's box is centred: its heading tick starts at the
    // panel's centre, in the class colour.
    let color = class_color(&track.class);
    for k in 0..shown {
        let (u, v) = (f64::from(k * (s + 2) + s / 2), f64::from(28 + s + s / 2));
        assert!(
            near(&strip, u, v, 2, color),
            "tile {k}: no box at the centre of its bird's-eye panel"
        );
    }
    // Asking for a track that is not there names it.
    let err = render_track(&sequence, Some(&log), 999_999, 4, &options).unwrap_err();
    assert!(err.to_string().contains("no track 999999"), "{err}");
}
