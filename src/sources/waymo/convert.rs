//! Waymo messages → boxlayer types: poses, camera calibrations, labels and point clouds. Shared
//! by the v1 (TFRecord) and v2 (Parquet) readers; errors are plain details that the reader
//! wraps with the file and record.

use std::sync::Arc;

use nalgebra::{Isometry3, Vector3};

use super::WaymoConfig;
use super::proto::{self, LaserName, camera_name_str, label_type_str};
use super::range_image::{
    ExtractedPoints, LidarGeometry, PixelPoses, RangeImageData, decompress_matrix, extract_points,
};
use crate::cloud::{ChannelData, PointCloud};
use crate::frame::{CameraAxes, CameraCalibration, CameraView, Distortion, GroundTruthBox, ImageData, ObjectClass};
use crate::geometry::Box3;
use crate::geometry::pose::{isometry_from_row_major, row_major_from_isometry};

/// How far a stored rotation may be from orthonormal before it is rejected (1e-4): Waymo stores
/// doubles that are orthonormal to ~1e-9, float32 copies (v2) to ~1e-6.
pub const TRANSFORM_EPS: f64 = 1e-4;

/// Names of the point-cloud channels the Waymo readers add, in order.
pub const POINT_CHANNELS: [&str; 5] = ["range", "elongation", "laser_id", "return_index", "in_no_label_zone"];

/// A pose from 16 row-major values; `field` names the value in errors.
pub fn isometry_from_values(values: &[f64], field: &str) -> Result<Isometry3<f64>, String> {
    let m: [f64; 16] = values
        .try_into()
        .map_err(|_| format!("field `{field}`: expected 16 values, got {}", values.len()))?;
    if !m.iter().all(|v| v.is_finite()) {
        return Err(format!("field `{field}`: non-finite value"));
    }
    isometry_from_row_major(&m, TRANSFORM_EPS).ok_or_else(|| format!("field `{field}`: not a rigid transform"))
}

/// A pose from an optional `Transform`; `field` names it in errors.
pub fn isometry_from_transform(t: Option<&proto::Transform>, field: &str) -> Result<Isometry3<f64>, String> {
    let t = t.ok_or_else(|| format!("field `{field}` missing"))?;
    isometry_from_values(&t.transform, field)
}

/// boxlayer's calibration of a Waymo camera: intrinsics `[f_u, f_v, c_u, c_v, k1, k2, p1, p2, k3]`,
/// camera → vehicle extrinsic (the vehicle frame is boxlayer's sensor frame), Waymo axes.
pub fn camera_calibration(c: &proto::CameraCalibration) -> Result<CameraCalibration, String> {
    let name = camera_name_str(c.name.unwrap_or(0));
    let i = &c.intrinsic;
    if i.len() < 4 {
        return Err(format!(
            "camera {name}: field `intrinsic`: expected 9 values, got {}",
            i.len()
        ));
    }
    let at = |k: usize| i.get(k).copied().unwrap_or(0.0);
    let size = |v: Option<i32>, field: &str| {
        v.and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| format!("camera {name}: field `{field}` missing or negative"))
    };
    Ok(CameraCalibration {
        width: size(c.width, "width")?,
        height: size(c.height, "height")?,
        fx: i[0],
        fy: i[1],
        cx: i[2],
        cy: i[3],
        distortion: Distortion::RadTan {
            k1: at(4),
            k2: at(5),
            p1: at(6),
            p2: at(7),
            k3: at(8),
        },
        axes: CameraAxes::Waymo,
        sensor_from_camera: isometry_from_transform(c.extrinsic.as_ref(), "extrinsic")
            .map_err(|e| format!("camera {name}: {e}"))?,
    })
}

/// The canonical class of a Waymo `Label.Type` (signs and unknowns are `unknown`).
pub fn object_class(label_type: i32) -> ObjectClass {
    match label_type {
        1 => ObjectClass::Vehicle,
        2 => ObjectClass::Pedestrian,
        4 => ObjectClass::Cyclist,
        _ => ObjectClass::Unknown,
    }
}

/// The Waymo `Label.Type` of a canonical class, the inverse of [`object_class`] (unknown → 0).
pub fn label_type(class: ObjectClass) -> i32 {
    match class {
        ObjectClass::Vehicle => 1,
        ObjectClass::Pedestrian => 2,
        ObjectClass::Cyclist => 4,
        ObjectClass::Unknown => 0,
    }
}

/// A pose as a Waymo `Transform` (16 row-major values), the inverse of [`isometry_from_transform`].
pub fn transform_from_isometry(pose: &Isometry3<f64>) -> proto::Transform {
    proto::Transform {
        transform: row_major_from_isometry(pose).to_vec(),
    }
}

/// A 3D laser label as a ground-truth box: `length` (field 5) along the heading, `width`
/// (field 4) across it, centre z as stored (the box centre).
pub fn ground_truth_box(label: &proto::Label) -> Result<GroundTruthBox, String> {
    let id = label.id.clone().unwrap_or_default();
    let b = label
        .bbox
        .as_ref()
        .ok_or_else(|| format!("label `{id}`: field `box` missing"))?;
    let v = |x: Option<f64>, field: &str| x.ok_or_else(|| format!("label `{id}`: field `box.{field}` missing"));
    let box_in_sensor = Box3::new(
        v(b.center_x, "center_x")?,
        v(b.center_y, "center_y")?,
        v(b.center_z, "center_z")?,
        v(b.length, "length")?,
        v(b.width, "width")?,
        v(b.height, "height")?,
        b.heading.unwrap_or(0.0),
    );
    if !box_in_sensor.is_valid() {
        return Err(format!("label `{id}`: box is not finite with non-negative sizes"));
    }
    let label_type = label.r#type.unwrap_or(0);
    let velocity_mps = label.metadata.as_ref().and_then(|m| match (m.speed_x, m.speed_y) {
        (Some(x), Some(y)) => Some(Vector3::new(x, y, m.speed_z.unwrap_or(0.0))),
        _ => None,
    });
    Ok(GroundTruthBox {
        box_in_sensor,
        class: object_class(label_type),
        source_label: label_type_str(label_type).to_string(),
        track_id: id,
        num_points: label.num_lidar_points_in_box.and_then(|n| u32::try_from(n).ok()),
        velocity_mps,
    })
}

/// Camera views of a frame, sorted by `CameraName`; an image without calibration is an error.
pub fn camera_views(
    images: Vec<proto::CameraImage>,
    calibrations: &[proto::CameraCalibration],
    frame_timestamp_micros: i64,
) -> Result<Vec<CameraView>, String> {
    let mut images = images;
    images.sort_by_key(|i| i.name);
    let mut views = Vec::with_capacity(images.len());
    for image in images {
        let name_value = image.name.unwrap_or(0);
        let name = camera_name_str(name_value);
        let Some(bytes) = image.image.filter(|b| !b.is_empty()) else {
            continue;
        };
        let calibration = calibrations
            .iter()
            .find(|c| c.name == Some(name_value))
            .ok_or_else(|| format!("camera {name}: no calibration in the context"))?;
        let timestamp_micros = image
            .pose_timestamp
            .filter(|t| t.is_finite())
            .map_or(frame_timestamp_micros, |s| (s * 1e6).round() as i64);
        views.push(CameraView::new(
            name,
            camera_calibration(calibration)?,
            timestamp_micros,
            ImageData::Encoded(Arc::<[u8]>::from(bytes)),
        ));
    }
    Ok(views)
}

/// Range images of one lidar return, decoded: the `[H,W,4]` image and, for TOP's first return,
/// its `[H,W,6]` per-pixel pose.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedReturn {
    /// Which lidar.
    pub laser: LaserName,
    /// 1 or 2.
    pub return_index: u8,
    /// Range, intensity, elongation, no-label-zone flag.
    pub image: RangeImageData,
}

/// One lidar's calibration turned into geometry for a `height`-row image.
pub fn lidar_geometry(c: &proto::LaserCalibration, height: usize) -> Result<LidarGeometry, String> {
    let laser = c
        .name
        .and_then(LaserName::from_i32)
        .map_or("UNKNOWN", LaserName::as_str);
    let extrinsic =
        isometry_from_transform(c.extrinsic.as_ref(), "extrinsic").map_err(|e| format!("lidar {laser}: {e}"))?;
    LidarGeometry::new(
        extrinsic,
        &c.beam_inclinations,
        c.beam_inclination_min.unwrap_or(0.0),
        c.beam_inclination_max.unwrap_or(0.0),
        height,
    )
    .map_err(|e| format!("lidar {laser}: {e}"))
}

/// Points of the chosen lidars and returns in the vehicle frame of `world_from_vehicle`.
/// `returns` are decoded range images; `top_pose` is TOP's per-pixel pose (both returns use it).
pub fn point_cloud(
    returns: &[DecodedReturn],
    top_pose: Option<&RangeImageData>,
    laser_calibrations: &[proto::LaserCalibration],
    world_from_vehicle: &Isometry3<f64>,
) -> Result<PointCloud, String> {
    let vehicle_from_world = world_from_vehicle.inverse();
    let mut points = ExtractedPoints::default();
    for r in returns {
        let name = r.laser.as_str();
        let calibration = laser_calibrations
            .iter()
            .find(|c| c.name == Some(r.laser as i32))
            .ok_or_else(|| format!("lidar {name}: no calibration in the context"))?;
        let geometry = lidar_geometry(calibration, r.image.height)?;
        let poses = match (r.laser, top_pose) {
            (LaserName::Top, Some(pose)) => Some(PixelPoses {
                world_from_vehicle_at_pixel: pose,
                vehicle_from_world: &vehicle_from_world,
            }),
            _ => None,
        };
        extract_points(&r.image, &geometry, poses, r.laser as u8, r.return_index, &mut points)
            .map_err(|e| format!("lidar {name} return {}: {e}", r.return_index))?;
    }
    cloud_from_points(points)
}

/// A `PointCloud` with the Waymo channels from extracted points.
pub fn cloud_from_points(p: ExtractedPoints) -> Result<PointCloud, String> {
    let mut cloud = PointCloud::from_columns(p.x, p.y, p.z, p.intensity).map_err(|e| e.to_string())?;
    let channels = [
        ChannelData::F32(p.range),
        ChannelData::F32(p.elongation),
        ChannelData::U8(p.laser_id),
        ChannelData::U8(p.return_index),
        ChannelData::U8(p.in_no_label_zone),
    ];
    for (name, data) in POINT_CHANNELS.into_iter().zip(channels) {
        cloud.add_channel(name, data).map_err(|e| e.to_string())?;
    }
    Ok(cloud)
}

/// Decodes the chosen returns of v1 `Laser` messages (empty range images are skipped) and TOP's
/// per-pixel pose when TOP is chosen.
pub fn decode_lasers(
    lasers: &[proto::Laser],
    config: &WaymoConfig,
) -> Result<(Vec<DecodedReturn>, Option<RangeImageData>), String> {
    let mut returns = Vec::new();
    let mut top_pose = None;
    let mut sorted: Vec<&proto::Laser> = lasers.iter().collect();
    sorted.sort_by_key(|l| l.name.unwrap_or(0));
    for laser in sorted {
        let Some(name) = laser.name.and_then(LaserName::from_i32) else {
            continue;
        };
        if !config.lidars.contains(&name) {
            continue;
        }
        for (which, ri) in [(1u8, &laser.ri_return1), (2u8, &laser.ri_return2)] {
            if !config.returns.iter().any(|r| r.index() == which) {
                continue;
            }
            let Some(ri) = ri else { continue };
            let context = |e: String| format!("lidar {} return {which}: {e}", name.as_str());
            let image = match (&ri.range_image_compressed, &ri.range_image) {
                (Some(bytes), _) if !bytes.is_empty() => decompress_matrix(bytes, 4).map_err(context)?,
                (_, Some(m)) if !m.data.is_empty() => RangeImageData::from_matrix(m.clone(), 4).map_err(context)?,
                _ => continue,
            };
            returns.push(DecodedReturn {
                laser: name,
                return_index: which,
                image,
            });
        }
        if name == LaserName::Top {
            // Only return 1 carries the pose; both returns use it.
            if let Some(bytes) = laser
                .ri_return1
                .as_ref()
                .and_then(|r| r.range_image_pose_compressed.as_ref())
                .filter(|b| !b.is_empty())
            {
                top_pose = Some(decompress_matrix(bytes, 6).map_err(|e| format!("lidar TOP pixel pose: {e}"))?);
            }
        }
    }
    Ok((returns, top_pose))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::pose::isometry_from_euler;

    #[test]
    fn label_type_inverts_object_class() {
        for class in [
            ObjectClass::Vehicle,
            ObjectClass::Pedestrian,
            ObjectClass::Cyclist,
            ObjectClass::Unknown,
        ] {
            assert_eq!(object_class(label_type(class)), class);
        }
        // Reference §1.2: TYPE_VEHICLE 1, TYPE_PEDESTRIAN 2, TYPE_CYCLIST 4.
        assert_eq!(
            [ObjectClass::Vehicle, ObjectClass::Pedestrian, ObjectClass::Cyclist].map(label_type),
            [1, 2, 4]
        );
    }

    #[test]
    fn transform_round_trips_a_pose_row_major() {
        let pose = isometry_from_euler(Vector3::new(1.5, -2.0, 3.25), 0.7, -0.1, 0.05);
        let t = transform_from_isometry(&pose);
        assert_eq!(t.transform.len(), 16);
        // Row-major: the translation is the last column, the bottom row 0 0 0 1.
        assert_eq!((t.transform[3], t.transform[7], t.transform[11]), (1.5, -2.0, 3.25));
        assert_eq!(&t.transform[12..], &[0.0, 0.0, 0.0, 1.0]);
        let back = isometry_from_transform(Some(&t), "t").unwrap();
        assert!((back.to_homogeneous() - pose.to_homogeneous()).abs().max() < 1e-12);
    }
}
