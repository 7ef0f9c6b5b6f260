//! Builders for synthetic Waymo segments used by the round-trip tests: range images made from
//! the real calibration of `frame_with_cameras.tfrecord`, with expected points computed here from
//! the reference formulas (`waymo-format.md` §2), and the same segment laid out as v2 Parquet.
#![allow(dead_code)]

use std::f64::consts::PI;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, FixedSizeListBuilder, Float32Builder, Float64Builder, Int8Builder, Int32Builder,
    Int64Array, ListBuilder, RecordBatch, StringArray,
};
use boxlayer::geometry::Box3;
use boxlayer::geometry::pose::{
    euler_from_isometry, isometry_from_euler, rotation_from_euler, row_major_from_isometry,
};
use boxlayer::sources::waymo::proto;
use boxlayer::sources::waymo::range_image::RangeImageData;
use boxlayer::sources::waymo::{WaymoConfig, WaymoV1Source};
use nalgebra::{Isometry3, Point3, Vector3};
use parquet::arrow::ArrowWriter;

#[path = "../support/waymo_fixture.rs"]
mod waymo_fixture;

/// A Waymo fixture, or `None` when they are absent outside CI (`support/waymo_fixture.rs`).
pub fn fixture(name: &str) -> Option<PathBuf> {
    waymo_fixture::waymo_fixture(name)
}

/// The real context (calibrations) and one real JPEG per camera; `None` without the fixtures.
pub fn real_context() -> Option<(proto::Context, Vec<proto::CameraImage>)> {
    let source = WaymoV1Source::open(&fixture("frame_with_cameras.tfrecord")?, WaymoConfig::default()).unwrap();
    let frame = source.frame_proto(0).unwrap();
    Some((frame.context.unwrap(), frame.images))
}

/// Deterministic pseudo-random numbers (SplitMix64), so tests need no extra crate.
pub struct Rng(pub u64);
impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// One synthetic return the test expects back.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedPoint {
    pub laser: u8,
    pub return_index: u8,
    /// Unique tag, written as the intensity.
    pub intensity: f32,
    pub range: f32,
    pub elongation: f32,
    pub in_nlz: bool,
    /// Vehicle frame of the frame pose.
    pub point: Point3<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedBox {
    pub id: String,
    pub label_type: i32,
    pub box_in_vehicle: Box3,
    pub num_points: i32,
    pub speed: (f64, f64),
}

pub struct SyntheticFrame {
    pub proto: proto::Frame,
    pub world_from_vehicle: Isometry3<f64>,
    pub points: Vec<ExpectedPoint>,
    pub boxes: Vec<ExpectedBox>,
    /// Decompressed images as written, for the v2 layout: (laser, return, image).
    pub images: Vec<(u8, u8, RangeImageData)>,
    pub top_pose: RangeImageData,
}

/// Row inclinations per the reference: listed ones reversed, else uniform bin centres reversed.
fn row_inclination(c: &proto::LaserCalibration, h: usize, height: usize) -> f64 {
    let i = height - 1 - h;
    if c.beam_inclinations.is_empty() {
        let (min, max) = (c.beam_inclination_min.unwrap(), c.beam_inclination_max.unwrap());
        min + (i as f64 + 0.5) / height as f64 * (max - min)
    } else {
        c.beam_inclinations[i]
    }
}

fn iso(t: &proto::Transform) -> Isometry3<f64> {
    boxlayer::sources::waymo::convert::isometry_from_values(&t.transform, "t").unwrap()
}

/// A frame with `n_top` TOP returns (split over both returns), `n_front` FRONT first returns,
/// a per-pixel TOP pose that drifts across the sweep, and `n_boxes` labels.
pub fn synthetic_frame(
    context: &proto::Context,
    index: usize,
    n_top: usize,
    n_front: usize,
    n_boxes: usize,
    rng: &mut Rng,
) -> SyntheticFrame {
    let world_from_vehicle = isometry_from_euler(
        Vector3::new(120.0 + 1.5 * index as f64, -40.0 + 0.2 * index as f64, 3.0),
        0.4 + 0.01 * index as f64,
        0.02,
        -0.01,
    );
    let timestamp_micros = 1_600_000_000_000_000 + 100_000 * index as i64;
    let calib = |name: i32| {
        context
            .laser_calibrations
            .iter()
            .find(|c| c.name == Some(name))
            .unwrap()
    };

    // TOP 64 × 2650 and FRONT 200 × 600, range −1 (no return) everywhere else.
    let (top_h, top_w, front_h, front_w) = (64usize, 2650usize, 200usize, 600usize);
    let empty = |h: usize, w: usize| RangeImageData {
        height: h,
        width: w,
        channels: 4,
        data: (0..h * w * 4).map(|i| if i % 4 == 0 { -1.0 } else { 0.0 }).collect(),
    };
    let mut top = [empty(top_h, top_w), empty(top_h, top_w)];
    let mut front = empty(front_h, front_w);

    // Vehicle → world at each TOP column: the vehicle moves 2 m and yaws 0.02 rad over the sweep.
    let pixel_pose = |w: usize| {
        let s = (w as f64 - top_w as f64 / 2.0) / top_w as f64;
        world_from_vehicle * isometry_from_euler(Vector3::new(2.0 * s, 0.1 * s, 0.0), 0.02 * s, 0.0, 0.0)
    };
    let mut top_pose = RangeImageData {
        height: top_h,
        width: top_w,
        channels: 6,
        data: Vec::with_capacity(top_h * top_w * 6),
    };
    for _h in 0..top_h {
        for w in 0..top_w {
            let p = pixel_pose(w);
            let (yaw, pitch, roll) = euler_from_isometry(&p);
            let t = p.translation.vector;
            top_pose
                .data
                .extend([roll, pitch, yaw, t.x, t.y, t.z].map(|v| v as f32));
        }
    }
    // The pose as stored (float32), which is what the reader sees.
    let stored_pose = |h: usize, w: usize| {
        let v = |c: usize| f64::from(top_pose.data[(h * top_w + w) * 6 + c]);
        Isometry3::from_parts(
            nalgebra::Translation3::new(v(3), v(4), v(5)),
            nalgebra::UnitQuaternion::from_rotation_matrix(&rotation_from_euler(v(2), v(1), v(0))),
        )
    };

    let mut points = Vec::new();
    let mut used = std::collections::HashSet::new();
    let mut tag = 0f32;
    for k in 0..n_top + n_front {
        let is_top = k < n_top;
        let (laser, h_count, w_count) = if is_top {
            (1u8, top_h, top_w)
        } else {
            (2u8, front_h, front_w)
        };
        let return_index = if is_top && k % 3 == 2 { 2u8 } else { 1u8 };
        let (h, w) = loop {
            let hw = (rng.below(h_count), rng.below(w_count));
            if used.insert((laser, return_index, hw)) {
                break hw;
            }
        };
        let range = rng.uniform(if is_top { 3.0 } else { 0.5 }, if is_top { 75.0 } else { 20.0 }) as f32;
        let elongation = rng.uniform(0.0, 1.5) as f32;
        let in_nlz = rng.below(5) == 0;
        tag += 1.0;
        let image = if is_top {
            &mut top[usize::from(return_index - 1)]
        } else {
            &mut front
        };
        let base = (h * w_count + w) * 4;
        image.data[base..base + 4].copy_from_slice(&[range, tag, elongation, if in_nlz { 1.0 } else { 0.0 }]);

        // Expected point from the reference formulas, in f64 from the stored float32 range.
        let c = calib(i32::from(laser));
        let e = iso(c.extrinsic.as_ref().unwrap());
        let em = e.to_homogeneous();
        let yaw_e = em[(1, 0)].atan2(em[(0, 0)]);
        let vehicle_azimuth = PI * (1.0 - (2.0 * w as f64 + 1.0) / w_count as f64);
        let az = vehicle_azimuth - yaw_e;
        let incl = row_inclination(c, h, h_count);
        let r = f64::from(range);
        let p_lidar = Point3::new(r * az.cos() * incl.cos(), r * az.sin() * incl.cos(), r * incl.sin());
        let mut p = e * p_lidar;
        if is_top {
            p = world_from_vehicle.inverse() * (stored_pose(h, w) * p);
        }
        points.push(ExpectedPoint {
            laser,
            return_index,
            intensity: tag,
            range,
            elongation,
            in_nlz,
            point: p,
        });
    }

    let mut boxes = Vec::new();
    let mut labels = Vec::new();
    for b in 0..n_boxes {
        let label_type = [1, 2, 3, 4, 0][b % 5];
        let bx = Box3::new(
            rng.uniform(-40.0, 40.0),
            rng.uniform(-40.0, 40.0),
            rng.uniform(-1.0, 2.0),
            rng.uniform(0.5, 6.0),
            rng.uniform(0.5, 2.5),
            rng.uniform(0.5, 3.0),
            rng.uniform(-PI, PI),
        );
        let id = format!("obj-{b:03}");
        let num_points = rng.below(500) as i32;
        let speed = (rng.uniform(-10.0, 10.0), rng.uniform(-10.0, 10.0));
        labels.push(proto::Label {
            bbox: Some(proto::LabelBox {
                center_x: Some(bx.x),
                center_y: Some(bx.y),
                center_z: Some(bx.z),
                width: Some(bx.w),
                length: Some(bx.l),
                height: Some(bx.h),
                heading: Some(bx.yaw),
            }),
            metadata: Some(proto::LabelMetadata {
                speed_x: Some(speed.0),
                speed_y: Some(speed.1),
                ..Default::default()
            }),
            r#type: Some(label_type),
            id: Some(id.clone()),
            num_lidar_points_in_box: Some(num_points),
            ..Default::default()
        });
        boxes.push(ExpectedBox {
            id,
            label_type,
            box_in_vehicle: bx,
            num_points,
            speed,
        });
    }

    let range_image = |img: &RangeImageData, pose: Option<&RangeImageData>| proto::RangeImage {
        range_image_compressed: Some(img.compress()),
        range_image_pose_compressed: pose.map(RangeImageData::compress),
        ..Default::default()
    };
    let lasers = vec![
        proto::Laser {
            name: Some(1),
            ri_return1: Some(range_image(&top[0], Some(&top_pose))),
            ri_return2: Some(range_image(&top[1], None)),
        },
        proto::Laser {
            name: Some(2),
            ri_return1: Some(range_image(&front, None)),
            ri_return2: None,
        },
    ];
    let proto = proto::Frame {
        context: Some(context.clone()),
        timestamp_micros: Some(timestamp_micros),
        pose: Some(proto::Transform {
            transform: row_major_from_isometry(&world_from_vehicle).to_vec(),
        }),
        lasers,
        laser_labels: labels,
        ..Default::default()
    };
    let [top1, top2] = top;
    SyntheticFrame {
        proto,
        world_from_vehicle,
        points,
        boxes,
        images: vec![(1, 1, top1), (1, 2, top2), (2, 1, front)],
        top_pose,
    }
}

// ---- v2 layout ----

fn write_parquet(path: &Path, columns: Vec<(String, ArrayRef)>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

fn c(name: impl Into<String>, array: ArrayRef) -> (String, ArrayRef) {
    (name.into(), array)
}

fn fixed_f32(rows: &[Vec<f64>], n: i32) -> ArrayRef {
    let mut b = FixedSizeListBuilder::new(Float32Builder::new(), n);
    for r in rows {
        for v in r {
            b.values().append_value(*v as f32);
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

fn fixed_f64(rows: &[Vec<f64>], n: i32) -> ArrayRef {
    let mut b = FixedSizeListBuilder::new(Float64Builder::new(), n);
    for r in rows {
        for v in r {
            b.values().append_value(*v);
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

fn f64_col(v: impl IntoIterator<Item = f64>) -> ArrayRef {
    Arc::new(arrow::array::Float64Array::from_iter_values(v))
}

fn strings(v: impl IntoIterator<Item = String>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

/// Writes `frames` as a v2 split folder under `root`, mixing the type variations real files show:
/// float32 vehicle poses, string laser names in `lidar`, int8 elsewhere.
pub fn write_v2(
    root: &Path,
    context_name: &str,
    context: &proto::Context,
    frames: &[SyntheticFrame],
    images: &[proto::CameraImage],
) {
    let file = |tag: &str| root.join(tag).join(format!("{context_name}.parquet"));
    let seg = |n: usize| strings((0..n).map(|_| context_name.to_string()));
    let ts: Vec<i64> = frames.iter().map(|f| f.proto.timestamp_micros.unwrap()).collect();

    // vehicle_pose: fixed_size_list<float>[16], as in the real test file.
    write_parquet(
        &file("vehicle_pose"),
        vec![
            c("key.segment_context_name", seg(frames.len())),
            c("key.frame_timestamp_micros", Arc::new(Int64Array::from(ts.clone()))),
            c(
                "[VehiclePoseComponent].world_from_vehicle.transform",
                fixed_f32(
                    &frames
                        .iter()
                        .map(|f| f.proto.pose.clone().unwrap().transform)
                        .collect::<Vec<_>>(),
                    16,
                ),
            ),
        ],
    );

    // lidar_calibration: int8 laser names, double transforms, null inclination lists when uniform.
    let cals = &context.laser_calibrations;
    let mut names = Int8Builder::new();
    let mut incl = ListBuilder::new(Float64Builder::new());
    for c in cals {
        names.append_value(c.name.unwrap() as i8);
        if c.beam_inclinations.is_empty() {
            incl.append_null();
        } else {
            incl.values().append_slice(&c.beam_inclinations);
            incl.append(true);
        }
    }
    write_parquet(
        &file("lidar_calibration"),
        vec![
            c("key.segment_context_name", seg(cals.len())),
            c("key.laser_name", Arc::new(names.finish())),
            c(
                "[LiDARCalibrationComponent].extrinsic.transform",
                fixed_f64(
                    &cals
                        .iter()
                        .map(|c| c.extrinsic.clone().unwrap().transform)
                        .collect::<Vec<_>>(),
                    16,
                ),
            ),
            c(
                "[LiDARCalibrationComponent].beam_inclination.min",
                f64_col(cals.iter().map(|c| c.beam_inclination_min.unwrap())),
            ),
            c(
                "[LiDARCalibrationComponent].beam_inclination.max",
                f64_col(cals.iter().map(|c| c.beam_inclination_max.unwrap())),
            ),
            c(
                "[LiDARCalibrationComponent].beam_inclination.values",
                Arc::new(incl.finish()),
            ),
        ],
    );

    // lidar: one row per (frame, laser), laser names as strings.
    let mut row_ts = Vec::new();
    let mut row_laser = Vec::new();
    let mut values = [
        ListBuilder::new(Float32Builder::new()),
        ListBuilder::new(Float32Builder::new()),
    ];
    let mut shapes = [
        FixedSizeListBuilder::new(Int32Builder::new(), 3),
        FixedSizeListBuilder::new(Int32Builder::new(), 3),
    ];
    for f in frames {
        for laser in [1u8, 2] {
            row_ts.push(f.proto.timestamp_micros.unwrap());
            row_laser.push(if laser == 1 { "TOP" } else { "FRONT" }.to_string());
            for r in 0..2usize {
                match f
                    .images
                    .iter()
                    .find(|(l, ri, _)| *l == laser && usize::from(*ri) == r + 1)
                {
                    Some((_, _, img)) => {
                        values[r].values().append_slice(&img.data);
                        values[r].append(true);
                        shapes[r]
                            .values()
                            .append_slice(&[img.height as i32, img.width as i32, 4]);
                        shapes[r].append(true);
                    }
                    None => {
                        values[r].append(true); // empty list: no image
                        shapes[r].values().append_slice(&[0, 0, 4]);
                        shapes[r].append(true);
                    }
                }
            }
        }
    }
    let [mut v1, mut v2] = values;
    let [mut s1, mut s2] = shapes;
    write_parquet(
        &file("lidar"),
        vec![
            c("key.segment_context_name", seg(row_ts.len())),
            c("key.frame_timestamp_micros", Arc::new(Int64Array::from(row_ts))),
            c("key.laser_name", strings(row_laser)),
            c("[LiDARComponent].range_image_return1.values", Arc::new(v1.finish())),
            c("[LiDARComponent].range_image_return1.shape", Arc::new(s1.finish())),
            c("[LiDARComponent].range_image_return2.values", Arc::new(v2.finish())),
            c("[LiDARComponent].range_image_return2.shape", Arc::new(s2.finish())),
        ],
    );

    // lidar_pose: TOP only.
    let mut pv = ListBuilder::new(Float32Builder::new());
    let mut ps = FixedSizeListBuilder::new(Int32Builder::new(), 3);
    let mut pl = Int8Builder::new();
    for f in frames {
        pv.values().append_slice(&f.top_pose.data);
        pv.append(true);
        ps.values()
            .append_slice(&[f.top_pose.height as i32, f.top_pose.width as i32, 6]);
        ps.append(true);
        pl.append_value(1);
    }
    write_parquet(
        &file("lidar_pose"),
        vec![
            c("key.segment_context_name", seg(frames.len())),
            c("key.frame_timestamp_micros", Arc::new(Int64Array::from(ts.clone()))),
            c("key.laser_name", Arc::new(pl.finish())),
            c("[LiDARPoseComponent].range_image_return1.values", Arc::new(pv.finish())),
            c("[LiDARPoseComponent].range_image_return1.shape", Arc::new(ps.finish())),
        ],
    );

    // lidar_box: size.x = length, size.y = width.
    let all: Vec<(i64, &ExpectedBox)> = frames
        .iter()
        .flat_map(|f| f.boxes.iter().map(move |b| (f.proto.timestamp_micros.unwrap(), b)))
        .collect();
    let p = "[LiDARBoxComponent]";
    let col = |get: &dyn Fn(&ExpectedBox) -> f64| f64_col(all.iter().map(|(_, b)| get(b)));
    let mut types = Int8Builder::new();
    for (_, b) in &all {
        types.append_value(b.label_type as i8);
    }
    write_parquet(
        &file("lidar_box"),
        vec![
            c("key.segment_context_name", seg(all.len())),
            c(
                "key.frame_timestamp_micros",
                Arc::new(Int64Array::from_iter_values(all.iter().map(|(t, _)| *t))),
            ),
            c("key.laser_object_id", strings(all.iter().map(|(_, b)| b.id.clone()))),
            c(format!("{p}.box.center.x"), col(&|b| b.box_in_vehicle.x)),
            c(format!("{p}.box.center.y"), col(&|b| b.box_in_vehicle.y)),
            c(format!("{p}.box.center.z"), col(&|b| b.box_in_vehicle.z)),
            c(format!("{p}.box.size.x"), col(&|b| b.box_in_vehicle.l)),
            c(format!("{p}.box.size.y"), col(&|b| b.box_in_vehicle.w)),
            c(format!("{p}.box.size.z"), col(&|b| b.box_in_vehicle.h)),
            c(format!("{p}.box.heading"), col(&|b| b.box_in_vehicle.yaw)),
            c(format!("{p}.type"), Arc::new(types.finish())),
            c(format!("{p}.speed.x"), col(&|b| b.speed.0)),
            c(format!("{p}.speed.y"), col(&|b| b.speed.1)),
            c(
                format!("{p}.num_lidar_points_in_box"),
                Arc::new(Int64Array::from_iter_values(
                    all.iter().map(|(_, b)| i64::from(b.num_points)),
                )),
            ),
        ],
    );

    // camera_calibration and camera_image (the real JPEGs, first frame only).
    let cc = &context.camera_calibrations;
    let mut cn = Int8Builder::new();
    for c in cc {
        cn.append_value(c.name.unwrap() as i8);
    }
    let q = "[CameraCalibrationComponent]";
    let mut cal_cols: Vec<(String, ArrayRef)> = vec![
        ("key.segment_context_name".into(), seg(cc.len())),
        ("key.camera_name".into(), Arc::new(cn.finish())),
    ];
    for (k, key) in ["f_u", "f_v", "c_u", "c_v", "k1", "k2", "p1", "p2", "k3"]
        .iter()
        .enumerate()
    {
        cal_cols.push((
            format!("{q}.intrinsic.{key}"),
            f64_col(cc.iter().map(|c| c.intrinsic[k])),
        ));
    }
    cal_cols.push((
        format!("{q}.extrinsic.transform"),
        fixed_f64(
            &cc.iter()
                .map(|c| c.extrinsic.clone().unwrap().transform)
                .collect::<Vec<_>>(),
            16,
        ),
    ));
    cal_cols.push((
        format!("{q}.width"),
        Arc::new(arrow::array::Int32Array::from_iter_values(
            cc.iter().map(|c| c.width.unwrap()),
        )),
    ));
    cal_cols.push((
        format!("{q}.height"),
        Arc::new(arrow::array::Int32Array::from_iter_values(
            cc.iter().map(|c| c.height.unwrap()),
        )),
    ));
    write_parquet(&file("camera_calibration"), cal_cols);
    let mut bin = BinaryBuilder::new();
    for i in images {
        bin.append_value(i.image.as_ref().unwrap());
    }
    write_parquet(
        &file("camera_image"),
        vec![
            c("key.segment_context_name", seg(images.len())),
            c(
                "key.frame_timestamp_micros",
                Arc::new(Int64Array::from_iter_values(images.iter().map(|_| ts[0]))),
            ),
            c(
                "key.camera_name",
                strings(images.iter().map(|i| proto::camera_name_str(i.name.unwrap()))),
            ),
            c("[CameraImageComponent].image", Arc::new(bin.finish())),
            c(
                "[CameraImageComponent].pose_timestamp",
                f64_col(images.iter().map(|i| i.pose_timestamp.unwrap())),
            ),
        ],
    );
}
