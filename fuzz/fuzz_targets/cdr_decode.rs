//! Fuzzes the ROS 2 CDR message decoders of the MCAP reader: every input is fed to every message
//! type; a decoded `PointCloud2` goes on through its point layout and `decode_rows`, an `Image`
//! through its RGB conversion, a `CameraInfo` through its intrinsics and distortion, transforms
//! through their isometry. What this finds is a panic, a hang (`-timeout`) or a runaway
//! allocation (`-rss_limit_mb`, `-malloc_limit_mb`): a huge length or count must be an error.
//!   cargo +nightly fuzz run cdr_decode -- -max_total_time=600
#![no_main]

use boxlayer::sources::layout::NonFinite;
use boxlayer::sources::mcap::msgs::{
    CameraInfo, CompressedImage, Header, Image, Imu, Odometry, PointCloud2, RosMessage, TfMessage,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Header::decode_prefix(data);
    if let Ok(cloud) = PointCloud2::decode(data) {
        if let Ok(layout) = cloud.point_layout() {
            for policy in [NonFinite::Drop, NonFinite::Fail] {
                let _ = layout.decode_rows(
                    &cloud.data,
                    cloud.width as usize,
                    cloud.height as usize,
                    cloud.row_step as usize,
                    policy,
                );
            }
        }
        let _ = cloud.encode();
    }
    let _ = Imu::decode(data);
    let _ = CompressedImage::decode(data);
    if let Ok(image) = Image::decode(data) {
        let _ = image.to_rgb();
    }
    if let Ok(info) = CameraInfo::decode(data) {
        let _ = info.intrinsics();
        let _ = info.distortion();
    }
    if let Ok(odom) = Odometry::decode(data) {
        let _ = odom.pose.isometry();
    }
    if let Ok(tf) = TfMessage::decode(data) {
        for t in &tf.transforms {
            let _ = t.transform.isometry();
        }
    }
});
