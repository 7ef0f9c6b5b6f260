//! The Arrow schemas of the shard files and the key-value metadata every file carries. Column
//! names carry frame and unit; `docs/schema.md` documents each, and a test keeps the two equal.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema};

/// Order of a box's nine values.
pub const BOX_ELEMENT_ORDER: &str = "x,y,z,l,w,h,yaw,pitch,roll";

fn fixed_f64(name: &str, width: i32, nullable: bool) -> Field {
    Field::new(
        name,
        DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float64, false)), width),
        nullable,
    )
}

fn list_utf8(name: &str) -> Field {
    Field::new(
        name,
        DataType::List(Arc::new(Field::new("item", DataType::Utf8, false))),
        false,
    )
}

/// The element type of the `cameras` column.
pub(crate) fn camera_footprint_fields() -> Fields {
    Fields::from(vec![
        Field::new("camera", DataType::Utf8, false),
        Field::new("in_fov", DataType::Boolean, false),
        fixed_f64("box_2d_px", 4, true),
        Field::new("in_image_fraction", DataType::Float64, false),
        Field::new("occlusion", DataType::Float64, true),
    ])
}

/// `frames.parquet`.
pub fn frame_schema() -> Schema {
    Schema::new(vec![
        Field::new("sequence", DataType::Utf8, false),
        Field::new("frame_index", DataType::Int64, false),
        Field::new("timestamp_us", DataType::Int64, false),
        fixed_f64("world_from_sensor", 16, false),
        fixed_f64("normalized_from_sensor", 16, true),
        Field::new("gravity_method", DataType::Utf8, true),
        list_utf8("gravity_inputs"),
        Field::new("gravity_confidence", DataType::Float64, true),
        Field::new("sensor_height_m", DataType::Float64, true),
        list_utf8("normalization_notes"),
        list_utf8("source_notes"),
        Field::new("num_points", DataType::Int64, false),
        Field::new("num_points_kept", DataType::Int64, false),
        Field::new("points_file", DataType::Utf8, true),
        Field::new("num_detections", DataType::Int64, false),
        Field::new("num_fused", DataType::Int64, false),
        Field::new("num_boxes", DataType::Int64, false),
        list_utf8("cameras"),
    ])
}

/// `points/part-*.parquet`.
pub fn points_schema() -> Schema {
    Schema::new(vec![
        Field::new("frame_index", DataType::Int64, false),
        Field::new("x_sensor_m", DataType::Float32, false),
        Field::new("y_sensor_m", DataType::Float32, false),
        Field::new("z_sensor_m", DataType::Float32, false),
        Field::new("intensity", DataType::Float32, false),
    ])
}

/// `detections.parquet`.
pub fn detection_schema() -> Schema {
    Schema::new(vec![
        Field::new("sequence", DataType::Utf8, false),
        Field::new("frame_index", DataType::Int64, false),
        Field::new("timestamp_us", DataType::Int64, false),
        Field::new("detector", DataType::Utf8, false),
        Field::new("detection_index", DataType::Int64, false),
        Field::new("class", DataType::Utf8, false),
        Field::new("score", DataType::Float32, false),
        fixed_f64("box_sensor", 9, false),
    ])
}

/// `boxes.parquet` (and `review.parquet`, which holds its flagged rows).
pub fn box_schema() -> Schema {
    Schema::new(vec![
        Field::new("sequence", DataType::Utf8, false),
        Field::new("frame_index", DataType::Int64, false),
        Field::new("timestamp_us", DataType::Int64, false),
        Field::new("box_id", DataType::Int64, false),
        Field::new("track_id", DataType::Int64, false),
        Field::new("source_track_id", DataType::Utf8, true),
        Field::new("class", DataType::Utf8, false),
        Field::new("score", DataType::Float64, false),
        fixed_f64("box_sensor", 9, false),
        fixed_f64("box_world", 9, false),
        fixed_f64("box_normalized", 9, true),
        fixed_f64("aabb_normalized", 6, true),
        Field::new("num_votes", DataType::Int32, false),
        list_utf8("detectors"),
        Field::new("origin", DataType::Utf8, false),
        Field::new("num_points_inside", DataType::Int64, false),
        Field::new("source_num_points", DataType::Int64, true),
        Field::new("bev_range_m", DataType::Float64, false),
        Field::new("relative_pitch_rad", DataType::Float64, false),
        fixed_f64("velocity_world_mps", 3, true),
        Field::new("moving", DataType::Boolean, true),
        Field::new(
            "cameras",
            DataType::List(Arc::new(Field::new(
                "item",
                DataType::Struct(camera_footprint_fields()),
                false,
            ))),
            false,
        ),
        Field::new("best_camera", DataType::Utf8, true),
        Field::new("rgb_class", DataType::Utf8, true),
        Field::new("rgb_score", DataType::Float64, true),
        Field::new("rgb_agrees", DataType::Boolean, true),
        Field::new("rgb_note", DataType::Utf8, true),
        list_utf8("flags"),
        Field::new("review_status", DataType::Utf8, false),
    ])
}

/// `review.parquet`: the flagged rows of `boxes.parquet`, same columns.
pub fn review_schema() -> Schema {
    box_schema()
}

/// `tracks.parquet`.
pub fn track_schema() -> Schema {
    Schema::new(vec![
        Field::new("sequence", DataType::Utf8, false),
        Field::new("track_id", DataType::Int64, false),
        Field::new("source_track_id", DataType::Utf8, true),
        Field::new("class", DataType::Utf8, false),
        Field::new("motion", DataType::Utf8, true),
        Field::new("first_frame", DataType::Int64, false),
        Field::new("last_frame", DataType::Int64, false),
        Field::new("num_boxes", DataType::Int64, false),
        Field::new("num_detected", DataType::Int64, false),
        Field::new("score", DataType::Float64, false),
        fixed_f64("size_lwh_m", 3, true),
    ])
}

/// `edits.parquet`: the history of human corrections (`boxlayer import`).
pub fn edit_schema() -> Schema {
    Schema::new(vec![
        Field::new("sequence", DataType::Utf8, false),
        Field::new("frame_index", DataType::Int64, false),
        Field::new("box_id", DataType::Int64, false),
        Field::new("track_id", DataType::Int64, false),
        Field::new("field", DataType::Utf8, false),
        Field::new("before", DataType::Utf8, true),
        Field::new("after", DataType::Utf8, true),
        Field::new("source", DataType::Utf8, false),
        Field::new("import_sha256", DataType::Utf8, false),
        Field::new("time_unix_s", DataType::Int64, false),
    ])
}

/// Key-value metadata of every shard file, in a fixed order.
pub(crate) fn file_metadata(schema_version: &str) -> Vec<(&'static str, String)> {
    vec![
        ("boxlayer.schema_version", schema_version.to_string()),
        ("boxlayer.box_element_order", BOX_ELEMENT_ORDER.to_string()),
        (
            "boxlayer.box_convention",
            "geometric centre; l along the box's local x (heading), w along y, h along z; R = Rz(yaw)·Ry(pitch)·Rx(roll); yaw counter-clockwise from +x".to_string(),
        ),
        ("boxlayer.length_unit", "m".to_string()),
        ("boxlayer.angle_unit", "rad".to_string()),
        ("boxlayer.time_unit", "us (the source's clock; timestamp_us of a frame is its sweep time)".to_string()),
        (
            "boxlayer.frame.sensor",
            "x forward, y left, z up, origin on the LiDAR (Waymo: the vehicle frame)".to_string(),
        ),
        (
            "boxlayer.frame.world",
            "Waymo: the global frame; M3ED: the first-pose (L0) frame of *_pose_gt.h5; others: the source's".to_string(),
        ),
        (
            "boxlayer.frame.normalized",
            "the sensor frame rotated to cancel roll and pitch (yaw kept), plus the platform's z offset".to_string(),
        ),
        ("boxlayer.matrix_order", "row-major 4x4, target_from_source".to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The column names of `docs/schema.md`'s table for `file` (rows `| `name` | type | … |`).
    fn documented_columns(doc: &str, file: &str) -> Vec<String> {
        let heading = format!("## `{file}`");
        let start = doc
            .find(&heading)
            .unwrap_or_else(|| panic!("docs/schema.md has no section {heading}"));
        let section = &doc[start + heading.len()..];
        let end = section.find("\n## ").unwrap_or(section.len());
        section[..end]
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn every_column_is_documented_and_nothing_else() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/schema.md")).unwrap();
        for (file, schema) in [
            ("frames.parquet", frame_schema()),
            ("points/part-NNNNN.parquet", points_schema()),
            ("detections.parquet", detection_schema()),
            ("boxes.parquet", box_schema()),
            ("tracks.parquet", track_schema()),
            ("edits.parquet", edit_schema()),
        ] {
            let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
            assert_eq!(documented_columns(&doc, file), names, "{file}");
        }
    }
}
