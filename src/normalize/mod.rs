//! Platform normalization: per frame, the up direction in the sensor frame (from the pose, the
//! IMU, the ground, or all of them fused over the sequence), the altitude offset, and the rigid
//! transform into the gravity-aligned frame (gravity −z, heading kept) with its inverse for points
//! and 9-dof boxes. Each estimator is a plain function over a frame's data; [`normalize_sequence`]
//! combines them as a [`Profile`] says. Definitions and measurements: `docs/normalization.md`.

mod altitude;
mod fused;
mod gravity;
mod ground;
mod imu;
mod pose;
mod profile;
mod transform;

pub use altitude::{AltitudeRule, altitude_offset};
pub use fused::{EXTRAPOLATED_HEIGHT, FrameInputs, FrameNormalization, normalize_frame, normalize_sequence};
pub use gravity::{GravityMethod, UpEstimate, angle_between};
pub use ground::{GroundFit, GroundParams, fit_ground};
pub use imu::{ImuParams, SpecificForce, platform_acceleration, sweep_specific_force, up_from_specific_force};
pub use pose::{box_from_virtual_3eed, up_from_pose, virtual_pose_3eed};
pub use profile::{
    ClassSizes, DetectorSettings, GravityConfig, GroundSettings, ImuSettings, LoadedProfile, Mounting, PoseFrame,
    Profile, ProfileError,
};
pub use transform::{Normalization, normalized_from_sensor};
