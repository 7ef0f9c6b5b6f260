//! Pose tracks (odometry, dynamic `/tf` edges) interpolated in time, and the transform tree of
//! `/tf_static` + `/tf` walked from one frame to another.

use std::collections::HashMap;

use nalgebra::{Isometry3, Translation3};

/// Timed pose samples `(µs, pose)`.
pub(crate) type Samples = Vec<(i64, Isometry3<f64>)>;

/// Timed edges by child frame: `child → (parent, samples)`.
pub(crate) type DynamicEdges = HashMap<String, (String, Samples)>;

/// Poses sorted by time (µs), interpolated between neighbours (translation linear, rotation slerp).
#[derive(Debug, Clone, Default)]
pub(crate) struct Track {
    times: Vec<i64>,
    poses: Vec<Isometry3<f64>>,
}

impl Track {
    /// A track from `(time, pose)` samples in any order; of two samples at one time the later one is kept.
    pub(crate) fn new(mut samples: Samples) -> Self {
        samples.sort_by_key(|s| s.0);
        let mut track = Track::default();
        for (t, pose) in samples {
            if track.times.last() == Some(&t) {
                track.poses.pop();
                track.times.pop();
            }
            track.times.push(t);
            track.poses.push(pose);
        }
        track
    }

    /// The pose at `t`: exact at a sample, interpolated between two samples at most `2 × tolerance`
    /// apart, the end sample within `tolerance` of `t` outside the track; otherwise `None`.
    pub(crate) fn at(&self, t: i64, tolerance: i64) -> Option<Isometry3<f64>> {
        let i = self.times.partition_point(|&x| x < t);
        let (ta, tb) = (i.checked_sub(1).and_then(|a| self.times.get(a)), self.times.get(i));
        match (ta, tb) {
            (_, Some(&tb)) if tb == t => self.poses.get(i).copied(),
            (Some(&ta), Some(&tb)) if tb - ta <= 2 * tolerance => {
                let (a, b) = (self.poses.get(i - 1)?, self.poses.get(i)?);
                let f = (t - ta) as f64 / (tb - ta) as f64;
                let translation = a.translation.vector.lerp(&b.translation.vector, f);
                let rotation = a.rotation.try_slerp(&b.rotation, f, 1e-12).unwrap_or(if f < 0.5 {
                    a.rotation
                } else {
                    b.rotation
                });
                Some(Isometry3::from_parts(Translation3::from(translation), rotation))
            }
            (Some(&ta), None) if t - ta <= tolerance => self.poses.get(i - 1).copied(),
            (None, Some(&tb)) if tb - t <= tolerance => self.poses.get(i).copied(),
            _ => None,
        }
    }
}

/// One parent → child edge: fixed (`/tf_static`) or a track in time (`/tf`).
#[derive(Debug, Clone)]
enum Edge {
    Static(Isometry3<f64>),
    Dynamic(Track),
}

/// The transform tree: for each child frame, its parent and `parent_from_child`.
#[derive(Debug, Clone, Default)]
pub(crate) struct TfTree {
    edges: HashMap<String, (String, Edge)>,
}

/// Longest parent chain walked (a guard against cycles).
const MAX_DEPTH: usize = 64;

impl TfTree {
    /// Adds fixed `parent_from_child` edges; a later one for the same child replaces it.
    pub(crate) fn add_static(&mut self, parent: &str, child: &str, parent_from_child: Isometry3<f64>) {
        self.edges
            .insert(child.to_string(), (parent.to_string(), Edge::Static(parent_from_child)));
    }

    /// Adds timed edges (`child → (parent, samples)`); a child with a fixed edge keeps it.
    pub(crate) fn add_dynamic(&mut self, edges: DynamicEdges) {
        for (child, (parent, samples)) in edges {
            self.edges
                .entry(child)
                .or_insert_with(|| (parent, Edge::Dynamic(Track::new(samples))));
        }
    }

    /// Whether the tree has any edge.
    pub(crate) fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }

    /// Whether the chain from `frame` to its root has a timed edge.
    pub(crate) fn has_dynamic_above(&self, frame: &str) -> bool {
        let mut f = frame;
        for _ in 0..MAX_DEPTH {
            match self.edges.get(f) {
                Some((_, Edge::Dynamic(_))) => return true,
                Some((parent, Edge::Static(_))) => f = parent,
                None => return false,
            }
        }
        false
    }

    /// The root of `frame`'s chain (itself when it has no parent).
    pub(crate) fn root_of(&self, frame: &str) -> String {
        let mut f = frame;
        for _ in 0..MAX_DEPTH {
            match self.edges.get(f) {
                Some((parent, _)) => f = parent,
                None => break,
            }
        }
        f.to_string()
    }

    /// `frame`'s ancestors with `ancestor_from_frame`, `frame` itself first; `time` `None` walks
    /// fixed edges only.
    fn ancestors(&self, frame: &str, time: Option<(i64, i64)>) -> Vec<(String, Isometry3<f64>)> {
        let mut out = vec![(frame.to_string(), Isometry3::identity())];
        let mut current = frame.to_string();
        let mut acc = Isometry3::identity();
        for _ in 0..MAX_DEPTH {
            let Some((parent, edge)) = self.edges.get(&current) else {
                break;
            };
            let step = match (edge, time) {
                (Edge::Static(p), _) => Some(*p),
                (Edge::Dynamic(track), Some((t, tol))) => track.at(t, tol),
                (Edge::Dynamic(_), None) => None,
            };
            let Some(parent_from_current) = step else {
                break;
            };
            acc = parent_from_current * acc;
            if out.iter().any(|(f, _)| f == parent) {
                break;
            }
            out.push((parent.clone(), acc));
            current = parent.clone();
        }
        out
    }

    /// `target_from_source`, through their nearest common ancestor; `time` `(t, tolerance)`
    /// allows timed edges, `None` fixed edges only.
    pub(crate) fn lookup(&self, target: &str, source: &str, time: Option<(i64, i64)>) -> Option<Isometry3<f64>> {
        if target == source {
            return Some(Isometry3::identity());
        }
        let from_source = self.ancestors(source, time);
        let from_target = self.ancestors(target, time);
        for (frame, ancestor_from_target) in &from_target {
            if let Some((_, ancestor_from_source)) = from_source.iter().find(|(f, _)| f == frame) {
                return Some(ancestor_from_target.inverse() * ancestor_from_source);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{UnitQuaternion, Vector3};

    fn pose(x: f64, yaw: f64) -> Isometry3<f64> {
        Isometry3::from_parts(
            Translation3::new(x, 0.0, 0.0),
            UnitQuaternion::from_axis_angle(&Vector3::z_axis(), yaw),
        )
    }

    #[test]
    fn tracks_interpolate_between_samples_and_refuse_far_times() {
        let track = Track::new(vec![(200, pose(2.0, 0.2)), (100, pose(1.0, 0.0))]);
        let mid = track.at(150, 100).unwrap();
        assert!((mid.translation.x - 1.5).abs() < 1e-12);
        assert!((mid.rotation.angle() - 0.1).abs() < 1e-12);
        assert_eq!(track.at(200, 0), Some(pose(2.0, 0.2)));
        assert!(track.at(260, 50).is_none());
        assert_eq!(track.at(240, 50), Some(pose(2.0, 0.2)));
        assert!(
            track.at(150, 10).is_none(),
            "samples 100 µs apart with a 10 µs tolerance"
        );
    }

    #[test]
    fn lookups_walk_to_the_common_ancestor() {
        let mut tree = TfTree::default();
        tree.add_static("base_link", "lidar", pose(1.0, 0.5));
        tree.add_static("base_link", "imu", pose(-1.0, 0.0));
        let mut dynamic = HashMap::new();
        dynamic.insert(
            "base_link".to_string(),
            ("odom".to_string(), vec![(0, pose(10.0, 0.0))]),
        );
        tree.add_dynamic(dynamic);
        let lidar_from_imu = tree.lookup("lidar", "imu", None).unwrap();
        let want = pose(1.0, 0.5).inverse() * pose(-1.0, 0.0);
        assert!((lidar_from_imu.to_homogeneous() - want.to_homogeneous()).abs().max() < 1e-12);
        assert!(
            tree.lookup("odom", "lidar", None).is_none(),
            "timed edge without a time"
        );
        let odom_from_lidar = tree.lookup("odom", "lidar", Some((0, 0))).unwrap();
        let want = pose(10.0, 0.0) * pose(1.0, 0.5);
        assert!((odom_from_lidar.to_homogeneous() - want.to_homogeneous()).abs().max() < 1e-12);
        assert!(tree.has_dynamic_above("lidar") && !tree.has_dynamic_above("odom"));
        assert_eq!(tree.root_of("lidar"), "odom");
        assert!(tree.lookup("lidar", "camera", None).is_none());
    }
}
