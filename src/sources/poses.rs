//! Pose files that come beside folders of sweeps: KITTI odometry `poses.txt` (one 3×4 row-major
//! `[R | t]` per line, one line per sweep) and timestamped trajectories (the TUM form
//! `timestamp tx ty tz qx qy qz qw`, space- or comma-separated, timestamp in seconds, with an
//! optional header line and `#` comments), and [`PoseTrack`], which interpolates a trajectory at a
//! sweep's time (linear in translation, slerp in rotation).

use std::path::Path;

use nalgebra::{Isometry3, Matrix3, Quaternion, Rotation3, Translation3, UnitQuaternion, Vector3};

use super::SourceError;

/// Largest pose file read (bytes).
const MAX_POSE_FILE_BYTES: u64 = 256 << 20;

/// How far a 3×4 pose's rotation may be from orthonormal (max |RᵀR − I| entry) and still be
/// read (KITTI's are printed with 6–9 significant digits).
const ORTHONORMAL_TOLERANCE: f64 = 1e-3;

/// A trajectory: poses at increasing times.
#[derive(Debug, Clone, PartialEq)]
pub struct PoseTrack {
    times_micros: Vec<i64>,
    poses: Vec<Isometry3<f64>>,
}

impl PoseTrack {
    /// The poses, at the times, in time order.
    pub fn samples(&self) -> impl Iterator<Item = (i64, &Isometry3<f64>)> {
        self.times_micros.iter().copied().zip(&self.poses)
    }

    /// Number of poses.
    pub fn len(&self) -> usize {
        self.poses.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.poses.is_empty()
    }

    /// The pose at `time_micros`, interpolated between its neighbours; `None` outside the track
    /// (never extrapolated).
    pub fn at(&self, time_micros: i64) -> Option<Isometry3<f64>> {
        let first = *self.times_micros.first()?;
        let last = *self.times_micros.last()?;
        if time_micros < first || time_micros > last {
            return None;
        }
        let k = self.times_micros.partition_point(|&t| t <= time_micros);
        if k == 0 {
            return None;
        }
        let (t0, p0) = (self.times_micros[k - 1], &self.poses[k - 1]);
        if t0 == time_micros || k == self.times_micros.len() {
            return Some(*p0);
        }
        let (t1, p1) = (self.times_micros[k], &self.poses[k]);
        let s = (time_micros - t0) as f64 / (t1 - t0) as f64;
        let translation = p0.translation.vector.lerp(&p1.translation.vector, s);
        let rotation = p0.rotation.slerp(&p1.rotation, s);
        Some(Isometry3::from_parts(Translation3::from(translation), rotation))
    }
}

/// The numbers of each data line of `path` (comments and blank lines skipped; a first line that
/// is not numbers is a header), with its 1-based line number.
fn numeric_lines(path: &Path) -> Result<Vec<(usize, Vec<f64>)>, SourceError> {
    let meta = std::fs::metadata(path).map_err(|e| SourceError::io(path, e))?;
    if !meta.is_file() || meta.len() > MAX_POSE_FILE_BYTES {
        return Err(SourceError::corrupt(
            path,
            "file",
            format!("not a regular file of at most {MAX_POSE_FILE_BYTES} bytes"),
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| SourceError::io(path, e))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let values: Result<Vec<f64>, _> = line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|v| !v.is_empty())
            .map(str::parse::<f64>)
            .collect();
        match values {
            Ok(v) => {
                if let Some(bad) = v.iter().find(|x| !x.is_finite()) {
                    return Err(SourceError::corrupt(
                        path,
                        format!("line {}", i + 1),
                        format!("value {bad} is not finite"),
                    ));
                }
                rows.push((i + 1, v));
            }
            Err(_) if rows.is_empty() && i == first_content_line(&text) => continue,
            Err(e) => {
                return Err(SourceError::corrupt(
                    path,
                    format!("line {}", i + 1),
                    format!("not a number: {e}"),
                ));
            }
        }
    }
    Ok(rows)
}

fn first_content_line(text: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.trim();
            !l.is_empty() && !l.starts_with('#')
        })
        .unwrap_or(0)
}

/// A rigid transform from a 3×4 row-major `[R | t]`; a rotation further than
/// [`ORTHONORMAL_TOLERANCE`] from orthonormal, or a reflection, is an error.
pub fn isometry_from_3x4(values: &[f64]) -> Result<Isometry3<f64>, String> {
    if values.len() != 12 {
        return Err(format!("expected 12 values of a 3×4 [R | t], got {}", values.len()));
    }
    let r = Matrix3::new(
        values[0], values[1], values[2], values[4], values[5], values[6], values[8], values[9], values[10],
    );
    let rotation = UnitQuaternion::from_rotation_matrix(&nearest_rotation(&r)?);
    Ok(Isometry3::from_parts(
        Translation3::new(values[3], values[7], values[11]),
        rotation,
    ))
}

/// The rotation nearest a printed rotation matrix (`U Vᵀ` of its SVD); one further than
/// [`ORTHONORMAL_TOLERANCE`] from orthonormal, or a reflection, is an error.
pub fn nearest_rotation(r: &Matrix3<f64>) -> Result<Rotation3<f64>, String> {
    let off = (r.transpose() * r - Matrix3::identity()).abs().max();
    if off.is_nan() || off > ORTHONORMAL_TOLERANCE || r.determinant() < 0.0 {
        return Err(format!(
            "rotation part is not a rotation (|RᵀR − I| up to {off:.2e}, det {:.4})",
            r.determinant()
        ));
    }
    if off <= f64::EPSILON * 8.0 {
        return Ok(Rotation3::from_matrix_unchecked(*r));
    }
    let svd = r.svd(true, true);
    match (svd.u, svd.v_t) {
        (Some(u), Some(v_t)) => Ok(Rotation3::from_matrix_unchecked(u * v_t)),
        _ => Err("rotation part has no SVD".to_string()),
    }
}

/// Reads a KITTI odometry `poses.txt`: one 3×4 row-major pose per line, in file order.
pub fn read_kitti_poses(path: &Path) -> Result<Vec<Isometry3<f64>>, SourceError> {
    numeric_lines(path)?
        .into_iter()
        .map(|(line, v)| isometry_from_3x4(&v).map_err(|e| SourceError::corrupt(path, format!("line {line}"), e)))
        .collect()
}

/// Reads a timestamped trajectory (`timestamp tx ty tz qx qy qz qw`, seconds); times must
/// increase.
pub fn read_timed_poses(path: &Path) -> Result<PoseTrack, SourceError> {
    let mut track = PoseTrack {
        times_micros: Vec::new(),
        poses: Vec::new(),
    };
    for (line, v) in numeric_lines(path)? {
        let at = || format!("line {line}");
        let [t, x, y, z, qx, qy, qz, qw] = v[..] else {
            return Err(SourceError::corrupt(
                path,
                at(),
                format!("expected 8 values `timestamp tx ty tz qx qy qz qw`, got {}", v.len()),
            ));
        };
        let q = Quaternion::new(qw, qx, qy, qz);
        if (q.norm() - 1.0).abs() > 1e-3 {
            return Err(SourceError::corrupt(
                path,
                at(),
                format!("quaternion norm {:.6} is not 1", q.norm()),
            ));
        }
        let micros = (t * 1e6).round();
        if micros.abs() > 9.0e18 {
            return Err(SourceError::corrupt(
                path,
                at(),
                format!("timestamp {t} s is out of range"),
            ));
        }
        let micros = micros as i64;
        if track.times_micros.last().is_some_and(|&last| micros <= last) {
            return Err(SourceError::corrupt(
                path,
                at(),
                format!("timestamp {t} s does not increase"),
            ));
        }
        track.times_micros.push(micros);
        track.poses.push(Isometry3::from_parts(
            Translation3::from(Vector3::new(x, y, z)),
            UnitQuaternion::from_quaternion(q),
        ));
    }
    if track.is_empty() {
        return Err(SourceError::Missing {
            path: path.to_path_buf(),
            what: "poses (no data lines)".to_string(),
        });
    }
    Ok(track)
}

/// Reads a KITTI `times.txt`: one timestamp in seconds per line, as µs.
pub fn read_times(path: &Path) -> Result<Vec<i64>, SourceError> {
    numeric_lines(path)?
        .into_iter()
        .map(|(line, v)| match v[..] {
            [t] if (t * 1e6).abs() < 9.0e18 => Ok((t * 1e6).round() as i64),
            _ => Err(SourceError::corrupt(
                path,
                format!("line {line}"),
                format!("expected one timestamp in seconds, got {} values", v.len()),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn kitti_poses_read_row_major_and_refuse_what_is_not_a_rotation() {
        let dir = tempfile::tempdir().unwrap();
        // A 90° turn about y (camera frame: yaw) and 2 m forward, as KITTI prints it.
        let p = write(
            dir.path(),
            "poses.txt",
            "1 0 0 0 0 1 0 0 0 0 1 0\n\
             0.000000e+00 0.000000e+00 1.000000e+00 1.5 0 1 0 -0.25 -1.000000e+00 0 0 2.0\n",
        );
        let poses = read_kitti_poses(&p).unwrap();
        assert_eq!(poses.len(), 2);
        assert_eq!(poses[0], Isometry3::identity());
        let q = nalgebra::Point3::new(1.0, 0.0, 0.0);
        // Row-major: x' = z + 1.5, y' = y - 0.25, z' = -x + 2.
        assert_relative_eq!(poses[1] * q, nalgebra::Point3::new(1.5, -0.25, 1.0), epsilon = 1e-12);
        let bad = write(
            dir.path(),
            "bad.txt",
            "1 0 0 0 0 1 0 0 0 0 1 0\n2 0 0 0 0 1 0 0 0 0 1 0\n",
        );
        let e = read_kitti_poses(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.txt: line 2: rotation part is not a rotation"), "{e}");
        let short = write(dir.path(), "short.txt", "1 0 0 0 0 1 0 0 0 0 1\n");
        let e = read_kitti_poses(&short).unwrap_err().to_string();
        assert!(e.contains("line 1: expected 12 values"), "{e}");
    }

    #[test]
    fn timed_poses_interpolate_between_samples_and_never_extrapolate() {
        let dir = tempfile::tempdir().unwrap();
        let half = std::f64::consts::FRAC_1_SQRT_2;
        let p = write(
            dir.path(),
            "traj.csv",
            &format!("timestamp,tx,ty,tz,qx,qy,qz,qw\n# a comment\n10.0,0,0,0,0,0,0,1\n10.2,2,4,0,0,0,{half},{half}\n"),
        );
        let track = read_timed_poses(&p).unwrap();
        assert_eq!(track.len(), 2);
        let mid = track.at(10_100_000).unwrap();
        assert_relative_eq!(mid.translation.vector, Vector3::new(1.0, 2.0, 0.0), epsilon = 1e-12);
        // Halfway through a 90° yaw is 45°.
        assert_relative_eq!(
            mid.rotation.euler_angles().2,
            std::f64::consts::FRAC_PI_4,
            epsilon = 1e-12
        );
        assert_eq!(track.at(10_000_000), Some(Isometry3::identity()));
        assert!(track.at(10_200_000).is_some());
        assert_eq!(track.at(9_999_999), None);
        assert_eq!(track.at(10_200_001), None);
        let back = write(dir.path(), "back.txt", "1 0 0 0 0 0 0 1\n0.5 0 0 0 0 0 0 1\n");
        let e = read_timed_poses(&back).unwrap_err().to_string();
        assert!(e.contains("back.txt: line 2: timestamp 0.5 s does not increase"), "{e}");
        let q = write(dir.path(), "q.txt", "1 0 0 0 0 0 0 2\n");
        assert!(
            read_timed_poses(&q)
                .unwrap_err()
                .to_string()
                .contains("quaternion norm 2")
        );
    }

    #[test]
    fn times_are_seconds_one_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "times.txt", "0.000000e+00\n1.036594e-01\n");
        assert_eq!(read_times(&p).unwrap(), [0, 103_659]);
        let p = write(dir.path(), "t2.txt", "0.0\nabc\n");
        assert!(
            read_times(&p)
                .unwrap_err()
                .to_string()
                .contains("t2.txt: line 2: not a number")
        );
    }
}
