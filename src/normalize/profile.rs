//! Platform profiles: what a sensor on a platform needs to be normalized (mounting, gravity
//! method and its parameters, altitude rule, detector input frame), read from TOML and checked
//! with errors that name the key. The shipped ones are `pipelines/platforms/*.toml`.

use std::path::{Path, PathBuf};

use nalgebra::{Rotation3, Unit, Vector3};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::altitude::AltitudeRule;
use super::gravity::GravityMethod;
use super::ground::GroundParams;
use super::imu::ImuParams;
use crate::frame::{DetectorFrame, ObjectClass, Platform};

/// The profiles shipped with boxlayer: `(name, TOML)`.
const BUILTIN: [(&str, &str); 9] = [
    (
        "waymo_vehicle",
        include_str!("../../pipelines/platforms/waymo_vehicle.toml"),
    ),
    ("m3ed_drone", include_str!("../../pipelines/platforms/m3ed_drone.toml")),
    (
        "m3ed_quadruped",
        include_str!("../../pipelines/platforms/m3ed_quadruped.toml"),
    ),
    (
        "kitti_vehicle",
        include_str!("../../pipelines/platforms/kitti_vehicle.toml"),
    ),
    (
        "m3ed_drone_3eed",
        include_str!("../../pipelines/platforms/m3ed_drone_3eed.toml"),
    ),
    (
        "m3ed_quadruped_3eed",
        include_str!("../../pipelines/platforms/m3ed_quadruped_3eed.toml"),
    ),
    (
        "pcd_vehicle",
        include_str!("../../pipelines/platforms/pcd_vehicle.toml"),
    ),
    (
        "npy_vehicle",
        include_str!("../../pipelines/platforms/npy_vehicle.toml"),
    ),
    (
        "ros2_mcap_robot",
        include_str!("../../pipelines/platforms/ros2_mcap_robot.toml"),
    ),
];

/// Errors loading a profile.
#[derive(Debug, Error)]
pub enum ProfileError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not valid TOML, or a key unknown or of the wrong type (the message names it).
    #[error("{path}: {detail}")]
    Parse {
        /// The file (or `builtin:<name>`).
        path: PathBuf,
        /// The parser's message.
        detail: String,
    },
    /// A value out of its range.
    #[error("{path}: `{key}`: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The key, dotted (`gravity.ground.inlier_m`).
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Neither a file nor a shipped profile.
    #[error(
        "no profile `{0}`: not a file, and not one of waymo_vehicle, m3ed_drone, m3ed_quadruped, kitti_vehicle, m3ed_drone_3eed, m3ed_quadruped_3eed, pcd_vehicle, npy_vehicle, ros2_mcap_robot"
    )]
    Unknown(String),
}

/// What the log's world frame is, for the pose estimators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoseFrame {
    /// Gravity-aligned (Waymo's global frame): the pose gives up directly.
    Absolute,
    /// The first pose's frame (M3ED's FasterLIO `L0`): only relative attitude.
    Relative,
    /// The log has no usable pose.
    None,
}

/// Where the sensor sits on the platform, nominally: the fallback up when nothing else is known
/// and the prior for the ground fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Mounting {
    /// Downward pitch of the sensor on a level platform (degrees).
    pub pitch_down_deg: f64,
    /// Roll of the sensor on a level platform, left side up (degrees).
    pub roll_deg: f64,
    /// Height of the sensor above the ground when the platform stands on it (m).
    pub height_m: f64,
}

impl Default for Mounting {
    fn default() -> Self {
        Mounting {
            pitch_down_deg: 0.0,
            roll_deg: 0.0,
            height_m: 1.8,
        }
    }
}

impl Mounting {
    /// Up in the sensor frame of a level platform.
    pub fn nominal_up(&self) -> Unit<Vector3<f64>> {
        let body_from_sensor = Rotation3::from_axis_angle(&Vector3::y_axis(), self.pitch_down_deg.to_radians())
            * Rotation3::from_axis_angle(&Vector3::x_axis(), self.roll_deg.to_radians());
        Unit::new_normalize(body_from_sensor.inverse() * Vector3::z())
    }
}

/// The IMU estimator's settings in a profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImuSettings {
    /// Accelerometer white noise per sample (m/s²).
    pub accel_noise_mps2: f64,
    /// Error floor (degrees).
    pub floor_deg: f64,
}

impl Default for ImuSettings {
    fn default() -> Self {
        let p = ImuParams::default();
        ImuSettings {
            accel_noise_mps2: p.accel_noise_mps2,
            floor_deg: p.floor_rad.to_degrees(),
        }
    }
}

/// The ground estimator's settings in a profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroundSettings {
    /// Grid cell of the lowest-return selection (m).
    pub cell_m: f64,
    /// Horizontal reach around the sensor (m).
    pub max_range_m: f64,
    /// Returns less than this far below the sensor are not ground candidates (m; negative when
    /// the frame's origin is on the ground, as Waymo's vehicle frame).
    pub min_depth_m: f64,
    /// Inlier distance (m).
    pub inlier_m: f64,
    /// Largest angle from the prior up (degrees).
    pub max_tilt_deg: f64,
    /// RANSAC hypotheses.
    pub iterations: usize,
    /// Fewest inliers for a fit.
    pub min_inliers: usize,
    /// How far the local ground may lean from level (degrees): the sigma floor.
    pub slope_sigma_deg: f64,
}

impl Default for GroundSettings {
    fn default() -> Self {
        let p = GroundParams::default();
        GroundSettings {
            cell_m: p.cell_m,
            max_range_m: p.max_range_m,
            min_depth_m: p.min_depth_m,
            inlier_m: p.inlier_m,
            max_tilt_deg: p.max_tilt_from_prior_rad.to_degrees(),
            iterations: p.iterations,
            min_inliers: p.min_inliers,
            slope_sigma_deg: p.slope_sigma_rad.to_degrees(),
        }
    }
}

/// How up is found.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GravityConfig {
    /// The estimator whose answer is used (`pose`, `pose_3eed`, `imu`, `ground`, `fused`).
    pub method: GravityMethod,
    /// What the log's world frame is.
    pub pose: PoseFrame,
    /// Sigma of a pose in a gravity-aligned world (degrees).
    pub pose_sigma_deg: f64,
    /// Half-width of the fused estimator's smoothing window (s).
    pub smoothing_s: f64,
    /// A pose turning faster than this between frames is a jump (degrees/s).
    pub max_turn_rate_dps: f64,
    /// A pose moving faster than this between frames is a jump (m/s).
    pub max_speed_mps: f64,
    /// The IMU estimator.
    pub imu: ImuSettings,
    /// The ground estimator.
    pub ground: GroundSettings,
}

impl Default for GravityConfig {
    fn default() -> Self {
        GravityConfig {
            method: GravityMethod::Fused,
            pose: PoseFrame::Relative,
            pose_sigma_deg: 0.05,
            smoothing_s: 10.0,
            max_turn_rate_dps: 180.0,
            max_speed_mps: 60.0,
            imu: ImuSettings::default(),
            ground: GroundSettings::default(),
        }
    }
}

impl GravityConfig {
    /// The IMU estimator's parameters.
    pub fn imu_params(&self) -> ImuParams {
        ImuParams {
            accel_noise_mps2: self.imu.accel_noise_mps2,
            floor_rad: self.imu.floor_deg.to_radians(),
        }
    }

    /// The ground estimator's parameters.
    pub fn ground_params(&self) -> GroundParams {
        let g = &self.ground;
        GroundParams {
            cell_m: g.cell_m,
            max_range_m: g.max_range_m,
            min_depth_m: g.min_depth_m,
            inlier_m: g.inlier_m,
            max_tilt_from_prior_rad: g.max_tilt_deg.to_radians(),
            iterations: g.iterations,
            min_inliers: g.min_inliers,
            slope_sigma_rad: g.slope_sigma_deg.to_radians(),
        }
    }
}

/// The detectors' side of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DetectorSettings {
    /// `normalized`: every detector sees gravity-aligned points, whatever its manifest declares;
    /// `sensor` (default): each detector sees the frame its manifest declares.
    pub input_frame: DetectorFrame,
}

/// Typical `(l, w, h)` per class (m): the reference of the `size_outlier` review flag.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassSizes {
    /// A vehicle's.
    pub vehicle: [f64; 3],
    /// A pedestrian's.
    pub pedestrian: [f64; 3],
    /// A cyclist's.
    pub cyclist: [f64; 3],
}

impl Default for ClassSizes {
    fn default() -> Self {
        ClassSizes {
            vehicle: [4.5, 1.9, 1.6],
            pedestrian: [0.8, 0.8, 1.75],
            cyclist: [1.8, 0.7, 1.7],
        }
    }
}

impl ClassSizes {
    /// The typical size of `class`; `None` for `unknown`.
    pub fn of(&self, class: ObjectClass) -> Option<[f64; 3]> {
        match class {
            ObjectClass::Vehicle => Some(self.vehicle),
            ObjectClass::Pedestrian => Some(self.pedestrian),
            ObjectClass::Cyclist => Some(self.cyclist),
            ObjectClass::Unknown => None,
        }
    }
}

/// A platform profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The profile's name.
    pub name: String,
    /// The platform it describes.
    pub platform: Platform,
    /// The sensor (free text, for people: `waymo_top`, `ouster_os1_64`).
    #[serde(default)]
    pub sensor: String,
    /// Nominal mounting.
    #[serde(default)]
    pub mounting: Mounting,
    /// How up is found.
    #[serde(default)]
    pub gravity: GravityConfig,
    /// The z offset rule.
    pub altitude: AltitudeRule,
    /// Detector input frame.
    #[serde(default)]
    pub detector: DetectorSettings,
    /// Class size priors (the review's `size_outlier` reference on this platform).
    #[serde(default)]
    pub class_sizes: ClassSizes,
    /// Reader options for this platform's logs, keyed as `[source.options]` is (`[source.mcap]
    /// pointcloud_topic = "/os_cloud_node/points"`); laid over the run's reader options when the
    /// run names this profile.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub source: toml::Table,
}

/// A loaded profile with where it came from and the hash of its text.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedProfile {
    /// The profile.
    pub profile: Profile,
    /// The file, or `builtin:<name>`.
    pub origin: String,
    /// sha256 of the TOML text, hex.
    pub sha256: String,
}

impl Profile {
    /// A profile from a file path, or a shipped profile by name (`m3ed_drone`).
    pub fn load(path_or_name: &str) -> Result<LoadedProfile, ProfileError> {
        let path = Path::new(path_or_name);
        if path.is_file() {
            let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            return Self::parse(&text, path);
        }
        match BUILTIN.iter().find(|(n, _)| *n == path_or_name) {
            Some((name, text)) => Self::parse(text, Path::new(&format!("builtin:{name}"))),
            None => Err(ProfileError::Unknown(path_or_name.to_string())),
        }
    }

    /// Where the ground lies in the points a detector gets in `frame` (z, m), as far as the
    /// profile fixes it: a ground platform's level sensor frame has it `mounting.height_m` below
    /// the origin, the normalized frame that much moved by the altitude rule's offset, or
    /// `sensor_height_m` below the origin under the `ground` rule. `None` where it moves with
    /// the platform (a drone's sensor frame, a tilted mount, the `pose` rule).
    pub fn ground_z_m(&self, frame: DetectorFrame) -> Option<f64> {
        let grounded = self.platform != Platform::Drone;
        let below = -self.mounting.height_m;
        match frame {
            DetectorFrame::Sensor => {
                (grounded && self.mounting.pitch_down_deg == 0.0 && self.mounting.roll_deg == 0.0).then_some(below)
            }
            DetectorFrame::Normalized => match self.altitude {
                AltitudeRule::None => grounded.then_some(below),
                AltitudeRule::Fixed { offset_m } => grounded.then_some(below + offset_m),
                AltitudeRule::Pose { .. } => None,
                AltitudeRule::Ground { sensor_height_m } => Some(-sensor_height_m),
            },
        }
    }

    /// The names of the shipped profiles.
    pub fn builtin_names() -> impl Iterator<Item = &'static str> {
        BUILTIN.iter().map(|(n, _)| *n)
    }

    /// A profile from TOML text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<LoadedProfile, ProfileError> {
        let profile: Profile = toml::from_str(text).map_err(|e| ProfileError::Parse {
            path: path.to_path_buf(),
            detail: e.to_string().trim_end().to_string(),
        })?;
        profile.validate(path)?;
        Ok(LoadedProfile {
            profile,
            origin: path.display().to_string(),
            sha256: hex(&Sha256::digest(text.as_bytes())),
        })
    }

    /// `base` with this profile's `[source]` table laid over it; a key no reader has is an error.
    pub fn reader_options(
        &self,
        base: &crate::sources::SourceOptions,
    ) -> Result<crate::sources::SourceOptions, String> {
        crate::config_overlay::overlaid(base, toml::Value::Table(self.source.clone()))
    }

    /// Checks every number against its range, naming the first key out of it.
    pub fn validate(&self, path: &Path) -> Result<(), ProfileError> {
        let bad = |key: &str, reason: String| {
            Err(ProfileError::Invalid {
                path: path.to_path_buf(),
                key: key.to_string(),
                reason,
            })
        };
        let within = |key: &str, v: f64, lo: f64, hi: f64| {
            if v.is_finite() && (lo..=hi).contains(&v) {
                Ok(())
            } else {
                bad(key, format!("{v} is outside {lo} ..= {hi}"))
            }
        };
        if self.name.trim().is_empty() {
            return bad("name", "must not be empty".into());
        }
        if let Err(reason) = self.reader_options(&crate::sources::SourceOptions::default()) {
            return bad("source", reason);
        }
        let g = &self.gravity;
        within("mounting.pitch_down_deg", self.mounting.pitch_down_deg, -90.0, 90.0)?;
        within("mounting.roll_deg", self.mounting.roll_deg, -90.0, 90.0)?;
        within("mounting.height_m", self.mounting.height_m, 0.0, 500.0)?;
        within("gravity.pose_sigma_deg", g.pose_sigma_deg, 1e-4, 30.0)?;
        within("gravity.smoothing_s", g.smoothing_s, 0.0, 3600.0)?;
        within("gravity.max_turn_rate_dps", g.max_turn_rate_dps, 1.0, 1e5)?;
        within("gravity.max_speed_mps", g.max_speed_mps, 0.1, 1e4)?;
        within("gravity.imu.accel_noise_mps2", g.imu.accel_noise_mps2, 1e-6, 10.0)?;
        within("gravity.imu.floor_deg", g.imu.floor_deg, 0.0, 30.0)?;
        within("gravity.ground.cell_m", g.ground.cell_m, 0.05, 20.0)?;
        within("gravity.ground.max_range_m", g.ground.max_range_m, 1.0, 500.0)?;
        within("gravity.ground.min_depth_m", g.ground.min_depth_m, -10.0, 100.0)?;
        within("gravity.ground.inlier_m", g.ground.inlier_m, 0.005, 5.0)?;
        within("gravity.ground.max_tilt_deg", g.ground.max_tilt_deg, 0.1, 60.0)?;
        within("gravity.ground.iterations", g.ground.iterations as f64, 1.0, 10_000.0)?;
        within("gravity.ground.min_inliers", g.ground.min_inliers as f64, 3.0, 1e6)?;
        within("gravity.ground.slope_sigma_deg", g.ground.slope_sigma_deg, 0.0, 30.0)?;
        if g.ground.max_range_m / g.ground.cell_m > 4096.0 {
            return bad(
                "gravity.ground.cell_m",
                format!(
                    "{} m cells over {} m make too large a grid",
                    g.ground.cell_m, g.ground.max_range_m
                ),
            );
        }
        match self.altitude {
            AltitudeRule::None => {}
            AltitudeRule::Fixed { offset_m } | AltitudeRule::Pose { offset_m } => {
                within("altitude.offset_m", offset_m, -1000.0, 1000.0)?
            }
            AltitudeRule::Ground { sensor_height_m } => {
                within("altitude.sensor_height_m", sensor_height_m, 0.0, 100.0)?
            }
        }
        for (class, size) in [
            ("vehicle", self.class_sizes.vehicle),
            ("pedestrian", self.class_sizes.pedestrian),
            ("cyclist", self.class_sizes.cyclist),
        ] {
            if !size.iter().all(|v| v.is_finite() && (0.05..=50.0).contains(v)) {
                return bad(
                    &format!("class_sizes.{class}"),
                    format!("{size:?}: each of l, w, h must be within 0.05 ..= 50 m"),
                );
            }
        }
        let needs_pose = matches!(g.method, GravityMethod::Pose | GravityMethod::Pose3eed);
        if needs_pose && g.pose == PoseFrame::None {
            return bad(
                "gravity.method",
                format!("`{}` needs a pose, but `gravity.pose` is `none`", g.method),
            );
        }
        if g.method == GravityMethod::Pose && g.pose == PoseFrame::Relative {
            return bad(
                "gravity.method",
                "`pose` needs a gravity-aligned world (`gravity.pose = \"absolute\"`); `pose_3eed` is the relative one"
                    .into(),
            );
        }
        if g.method == GravityMethod::Mounting {
            return bad(
                "gravity.method",
                "`mounting` is the fallback, not a method to choose".into(),
            );
        }
        if matches!(self.altitude, AltitudeRule::Pose { .. }) && g.pose == PoseFrame::None {
            return bad(
                "altitude.rule",
                "`pose` needs a pose, but `gravity.pose` is `none`".into(),
            );
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_profile_loads_and_names_itself() {
        for name in Profile::builtin_names() {
            let p = Profile::load(name).unwrap();
            assert_eq!(p.profile.name, name);
            assert_eq!(p.origin, format!("builtin:{name}"));
            assert_eq!(p.sha256.len(), 64);
            // What the manifest records reads back as the same profile.
            let text = toml::to_string(&p.profile).unwrap();
            assert_eq!(toml::from_str::<Profile>(&text).unwrap(), p.profile, "{text}");
        }
        assert!(matches!(Profile::load("boat"), Err(ProfileError::Unknown(_))));
        // Every file under pipelines/platforms/ loads by path too, and is a shipped one.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/platforms");
        let mut files = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let p = Profile::load(&path.to_string_lossy()).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                Profile::builtin_names().any(|n| n == p.profile.name),
                "{}",
                path.display()
            );
            files += 1;
        }
        assert_eq!(files, BUILTIN.len());
    }

    #[test]
    fn ground_level_per_frame_follows_the_mounting_and_the_altitude_rule() {
        let ground = |name: &str, frame| Profile::load(name).unwrap().profile.ground_z_m(frame);
        // Waymo's vehicle frame has its origin on the ground; KITTI's Velodyne sits 1.73 m up.
        assert_eq!(ground("waymo_vehicle", DetectorFrame::Sensor), Some(0.0));
        assert_eq!(ground("waymo_vehicle", DetectorFrame::Normalized), Some(0.0));
        assert_eq!(ground("kitti_vehicle", DetectorFrame::Sensor), Some(-1.73));
        // The `ground` rule puts the fitted ground 1.8 m below the origin, whatever the mount.
        assert_eq!(ground("m3ed_quadruped", DetectorFrame::Normalized), Some(-1.8));
        assert_eq!(ground("m3ed_drone", DetectorFrame::Normalized), Some(-1.8));
        // 3EED's quadruped frame: the sensor 0.6 m up, moved by −1.3 m.
        let q = ground("m3ed_quadruped_3eed", DetectorFrame::Normalized).unwrap();
        assert!((q - (-0.6 - 1.3)).abs() < 1e-12, "{q}");
        // A drone's own frame and the pose rule follow the flight: no fixed ground.
        assert_eq!(ground("m3ed_drone", DetectorFrame::Sensor), None);
        assert_eq!(ground("m3ed_drone_3eed", DetectorFrame::Normalized), None);
    }

    #[test]
    fn errors_name_the_key() {
        let base = BUILTIN[1].1;
        let path = Path::new("p.toml");
        let e = Profile::parse(&base.replace("inlier_m = 0.12", "inlier_m = -1.0"), path).unwrap_err();
        assert!(e.to_string().contains("`gravity.ground.inlier_m`"), "{e}");
        let e = Profile::parse(&format!("{base}\n[extra]\nx = 1\n"), path).unwrap_err();
        assert!(e.to_string().contains("extra"), "{e}");
        let e = Profile::parse(&base.replace("method = \"fused\"", "method = \"magic\""), path).unwrap_err();
        assert!(e.to_string().contains("magic"), "{e}");
        let e = Profile::parse(&base.replace("method = \"fused\"", "method = \"pose\""), path).unwrap_err();
        assert!(e.to_string().contains("`gravity.method`"), "{e}");
        let e = Profile::parse(&format!("{base}\n[class_sizes]\nvehicle = [4.5, -1.0, 1.6]\n"), path).unwrap_err();
        assert!(e.to_string().contains("`class_sizes.vehicle`"), "{e}");
        let p = Profile::parse(&format!("{base}\n[class_sizes]\npedestrian = [0.6, 0.6, 1.2]\n"), path).unwrap();
        assert_eq!(p.profile.class_sizes.of(ObjectClass::Pedestrian), Some([0.6, 0.6, 1.2]));
        assert_eq!(p.profile.class_sizes.of(ObjectClass::Vehicle), Some([4.5, 1.9, 1.6]));
        assert_eq!(p.profile.class_sizes.of(ObjectClass::Unknown), None);
    }

    #[test]
    fn nominal_up_of_a_downward_pitched_sensor_leans_back() {
        let m = Mounting {
            pitch_down_deg: 40.0,
            ..Mounting::default()
        };
        let up = m.nominal_up();
        // Pitched 40° nose down, the sensor's x points forward and down, so up leans 40° from
        // the sensor's +z towards its −x.
        let a = 40f64.to_radians();
        assert!((up.into_inner() - Vector3::new(-a.sin(), 0.0, a.cos())).norm() < 1e-12);
    }
}
