//! Fuses one frame's boxes from several detectors into one box per object: MS3D-style KDE box
//! fusion (KBF) with a scipy-compatible weighted Gaussian KDE, and, measured against it, rotated
//! 3D Weighted Boxes Fusion, the best single detector and union + NMS. It works on one frame's
//! `boxes::Detection`s in whatever frame they share and never looks at points, other frames,
//! tracks or files. Definitions and the study behind the defaults are in `docs/fusion.md`.

mod cluster;
mod config;
mod fuser;
mod kbf;
mod kde;
mod wbf;

use thiserror::Error;

use crate::frame::{ObjectClass, Platform};

pub use cluster::radius_clusters;
pub use config::{CentreEstimate, ClassFusionConfig, FusionConfig, FusionMethod, PlatformOverrides, YawEstimate};
pub use fuser::{Fuser, Roster, fuse_boxes};
pub use kbf::{KbfMember, fuse_cluster};
pub use kde::{
    Bandwidth, GaussianKde, KDE_SINGULAR_RELATIVE_TOL, circular_reference, yaw_axis_peak, yaw_mode_member,
    yaw_nearest_circular_mean,
};
pub use wbf::{WbfCluster, weighted_boxes_fusion};

pub use crate::boxes::FusedBox;

/// Errors of the fusion module: bad configuration, bad input boxes, and KDE failures.
#[derive(Debug, Error)]
pub enum FuseError {
    /// A configuration value is out of range.
    #[error("fusion config: {}class `{class}`: field `{field}`: {reason}", platform_prefix(.platform))]
    Config {
        /// The class table holding the field.
        class: ObjectClass,
        /// The offending field.
        field: &'static str,
        /// What is wrong.
        reason: String,
        /// The platform whose resolved configuration holds the value, if known.
        platform: Option<Platform>,
    },
    /// An input detection cannot be fused (non-finite values, negative size, score outside [0, 1]).
    #[error("detection {index} (detector `{detector}`): {reason}")]
    Detection {
        /// Position in the input slice.
        index: usize,
        /// Its detector's name.
        detector: String,
        /// What is wrong.
        reason: String,
    },
    /// A platform's override table does not fit the fusion config (unknown key, wrong type).
    #[error("fusion config: platform `{platform}`: {reason}")]
    Override {
        /// The platform whose table is wrong.
        platform: Platform,
        /// The parser's message.
        reason: String,
    },
    /// The spatial index over box centres could not be built.
    #[error("cluster index: {reason}")]
    Index {
        /// What went wrong.
        reason: String,
    },
    /// The KDE's data covariance is singular (scipy's Cholesky would fail).
    #[error("kde: singular data covariance ({dims} dimensions, rank {rank})")]
    KdeSingular {
        /// Dimensions of the data.
        dims: usize,
        /// Numerical rank of its covariance.
        rank: usize,
    },
    /// The KDE's inputs are unusable.
    #[error("kde: {reason}")]
    KdeInput {
        /// What is wrong.
        reason: String,
    },
}

fn platform_prefix(platform: &Option<Platform>) -> String {
    platform.map(|p| format!("platform `{p}`: ")).unwrap_or_default()
}

impl FuseError {
    /// Marks a configuration error as found on `platform`'s resolved configuration.
    pub(crate) fn on_platform(self, platform: Platform) -> Self {
        match self {
            FuseError::Config {
                class, field, reason, ..
            } => FuseError::Config {
                class,
                field,
                reason,
                platform: Some(platform),
            },
            other => other,
        }
    }
}
