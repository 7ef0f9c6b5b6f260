//! Convex polyhedra for the 9-dof queries: the exact intersection volume of two oriented boxes
//! (each box's faces clipped by the other box's half-spaces, volume by the divergence theorem)
//! and the exact volume of the convex hull of a few points (for 3D GIoU). Never samples.

use nalgebra::{Point2, Point3, Vector3};

use super::Box3;
use super::convex_polygon::convex_hull;
use super::corners::{CORNER_SIGNS, FACE_CORNERS};

/// Most vertices of a clipped face: a quadrilateral clipped by 6 planes has at most 10.
const FACE_CAPACITY: usize = 16;

/// A planar convex polygon in 3D, counter-clockwise seen from the side its normal points to.
#[derive(Debug, Clone, Copy)]
struct Face {
    vertices: [Vector3<f64>; FACE_CAPACITY],
    len: usize,
}

impl Face {
    fn empty() -> Self {
        Self {
            vertices: [Vector3::zeros(); FACE_CAPACITY],
            len: 0,
        }
    }

    fn push(&mut self, v: Vector3<f64>) {
        if self.len < FACE_CAPACITY {
            self.vertices[self.len] = v;
            self.len += 1;
        }
    }

    fn vertices(&self) -> &[Vector3<f64>] {
        &self.vertices[..self.len]
    }

    /// Whether every vertex lies within `eps` of the plane.
    fn lies_in(&self, plane: &HalfSpace, eps: f64) -> bool {
        self.vertices().iter().all(|v| plane.signed_distance(v).abs() <= eps)
    }

    /// The part on the inner side of `plane` (signed distance ≤ 0). As in the 2D clipper, new
    /// vertices are made only between vertices strictly on opposite sides, so the result is
    /// continuous in the input; faces lying in the plane are handled by the caller.
    fn clip(&self, plane: &HalfSpace) -> Face {
        let mut out = Face::empty();
        if self.len == 0 {
            return out;
        }
        let mut prev = self.vertices[self.len - 1];
        let mut d_prev = plane.signed_distance(&prev);
        for &cur in self.vertices() {
            let d_cur = plane.signed_distance(&cur);
            if d_cur <= 0.0 {
                if d_prev > 0.0 {
                    out.push(prev + (cur - prev) * (d_prev / (d_prev - d_cur)));
                }
                out.push(cur);
            } else if d_prev <= 0.0 {
                out.push(prev + (cur - prev) * (d_prev / (d_prev - d_cur)));
            }
            prev = cur;
            d_prev = d_cur;
        }
        out
    }

    /// This face's contribution to the enclosed volume by the divergence theorem: the signed
    /// volumes of the tetrahedra from the origin to a triangle fan of the face.
    fn volume_contribution(&self) -> f64 {
        let v = self.vertices();
        if v.len() < 3 {
            return 0.0;
        }
        let mut six = 0.0;
        for i in 1..v.len() - 1 {
            six += v[0].dot(&v[i].cross(&v[i + 1]));
        }
        six / 6.0
    }
}

/// The half-space `normal · p ≤ offset`, `normal` of unit length.
#[derive(Debug, Clone, Copy)]
struct HalfSpace {
    normal: Vector3<f64>,
    offset: f64,
}

impl HalfSpace {
    fn signed_distance(&self, p: &Vector3<f64>) -> f64 {
        self.normal.dot(p) - self.offset
    }
}

/// A box's 6 faces and the 6 half-spaces bounding it, in `FACE_CORNERS` order, with
/// coordinates relative to `origin` (so large absolute coordinates do not cost precision).
struct BoxPolyhedron {
    faces: [Face; 6],
    planes: [HalfSpace; 6],
}

impl BoxPolyhedron {
    fn new(b: &Box3, origin: &Point3<f64>) -> Self {
        let rotation = b.rotation();
        let center = b.center() - origin;
        let half = b.half_extents();
        let corners =
            CORNER_SIGNS.map(|[sx, sy, sz]| center + rotation * Vector3::new(sx * half.x, sy * half.y, sz * half.z));
        let faces = FACE_CORNERS.map(|idx| {
            let mut f = Face::empty();
            for i in idx {
                f.push(corners[i]);
            }
            f
        });
        // Outward normals in FACE_CORNERS order: bottom, top, +x, −x, +y, −y.
        let axes = [
            (-Vector3::z(), half.z),
            (Vector3::z(), half.z),
            (Vector3::x(), half.x),
            (-Vector3::x(), half.x),
            (Vector3::y(), half.y),
            (-Vector3::y(), half.y),
        ];
        let planes = axes.map(|(local, reach)| {
            let normal = rotation * local;
            HalfSpace {
                normal,
                offset: normal.dot(&center) + reach,
            }
        });
        Self { faces, planes }
    }
}

/// The volume enclosed by the faces of `own` clipped to the half-spaces of `other`.
///
/// A face lying in one of `other`'s planes (all vertices within `eps`) is kept unclipped when the
/// two outward normals agree and `keep_shared` is set, and dropped otherwise: a face shared by
/// both boxes must be counted once, and opposite coplanar faces mean the boxes only touch.
fn clipped_faces_volume(own: &BoxPolyhedron, other: &BoxPolyhedron, keep_shared: bool, eps: f64) -> f64 {
    let mut volume = 0.0;
    for (face, own_plane) in own.faces.iter().zip(&own.planes) {
        let mut clipped = *face;
        for plane in &other.planes {
            if clipped.lies_in(plane, eps) {
                if keep_shared && own_plane.normal.dot(&plane.normal) > 0.0 {
                    continue;
                }
                clipped.len = 0;
            } else {
                clipped = clipped.clip(plane);
            }
            if clipped.len < 3 {
                break;
            }
        }
        volume += clipped.volume_contribution();
    }
    volume
}

/// The exact volume of the intersection of two oriented boxes (any pitch and roll); `eps` (m)
/// decides when a face lies in the other box's face plane.
pub(crate) fn box_intersection_volume(a: &Box3, b: &Box3, eps: f64) -> f64 {
    let valid = |x: &Box3| x.l > 0.0 && x.w > 0.0 && x.h > 0.0;
    if !valid(a) || !valid(b) {
        return 0.0;
    }
    // Bounding spheres apart: nothing to clip.
    let reach = 0.5 * (a.size().norm() + b.size().norm());
    let distance_squared = (b.center() - a.center()).norm_squared();
    let spheres_meet = distance_squared <= reach * reach;
    if !spheres_meet {
        return 0.0;
    }
    let origin = a.center();
    let pa = BoxPolyhedron::new(a, &origin);
    let pb = BoxPolyhedron::new(b, &origin);
    // The intersection's boundary is A's faces inside B plus B's faces inside A.
    let volume = clipped_faces_volume(&pa, &pb, true, eps) + clipped_faces_volume(&pb, &pa, false, eps);
    volume.max(0.0)
}

/// The exact volume of the convex hull of `points` (a few dozen at most: the search is over all
/// point triples). Each supporting plane is found once (planes within `eps` are merged), its
/// face is the 2D convex hull of the points on it, and the volume is the sum of the pyramids
/// from the centroid to each face. Flat or degenerate point sets give 0.
pub(crate) fn convex_hull_volume(points: &[Vector3<f64>], eps: f64) -> f64 {
    let n = points.len();
    if n < 4 {
        return 0.0;
    }
    let centroid = points.iter().sum::<Vector3<f64>>() / n as f64;
    let mut planes: Vec<HalfSpace> = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            for k in j + 1..n {
                let e1 = points[j] - points[i];
                let e2 = points[k] - points[i];
                let cross = e1.cross(&e2);
                // Skip (nearly) collinear triples: sin² of their angle below 1e-16.
                let scale = e1.norm_squared() * e2.norm_squared();
                let spans_a_plane = cross.norm_squared() > 1e-16 * scale;
                if !spans_a_plane {
                    continue;
                }
                let normal = cross.normalize();
                let offset = normal.dot(&points[i]);
                let (mut below, mut above) = (true, true);
                for p in points {
                    let d = normal.dot(p) - offset;
                    below &= d <= eps;
                    above &= d >= -eps;
                }
                let plane = match (below, above) {
                    (true, _) => HalfSpace { normal, offset },
                    (false, true) => HalfSpace {
                        normal: -normal,
                        offset: -offset,
                    },
                    (false, false) => continue,
                };
                let known = planes
                    .iter()
                    .any(|q| q.normal.dot(&plane.normal) > 1.0 - 1e-12 && (q.offset - plane.offset).abs() <= eps);
                if !known {
                    planes.push(plane);
                }
            }
        }
    }
    let mut volume = 0.0;
    for plane in &planes {
        // An orthonormal basis (u, v) of the plane.
        let helper = if plane.normal.x.abs() < 0.9 {
            Vector3::x()
        } else {
            Vector3::y()
        };
        let u = plane.normal.cross(&helper).normalize();
        let v = plane.normal.cross(&u);
        let on_plane: Vec<Point2<f64>> = points
            .iter()
            .filter(|p| plane.signed_distance(p).abs() <= eps)
            .map(|p| Point2::new(u.dot(p), v.dot(p)))
            .collect();
        let area = convex_hull(&on_plane).area();
        let height = -plane.signed_distance(&centroid);
        volume += area * height / 3.0;
    }
    volume.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::box_corners;
    use approx::assert_abs_diff_eq;

    #[test]
    fn a_box_intersected_with_itself_is_its_volume() {
        let b = Box3::from_array([100.0, -50.0, 2.0, 4.0, 2.0, 1.5, 0.7, 0.3, -0.4]);
        assert_abs_diff_eq!(box_intersection_volume(&b, &b, 1e-9), 12.0, epsilon = 1e-9);
    }

    #[test]
    fn face_touching_boxes_have_no_common_volume() {
        let a = Box3::from_array([0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.3, 0.2, 0.1]);
        // Shift by exactly one length along the box's own x axis.
        let axis = a.rotation() * Vector3::new(2.0, 0.0, 0.0);
        let b = Box3 {
            x: axis.x,
            y: axis.y,
            z: axis.z,
            ..a
        };
        assert_abs_diff_eq!(box_intersection_volume(&a, &b, 1e-9), 0.0, epsilon = 1e-9);
    }

    #[test]
    fn hull_of_a_box_is_the_box() {
        let b = Box3::from_array([1.0, 2.0, 3.0, 4.0, 2.0, 1.5, 0.7, 0.3, -0.4]);
        let pts = box_corners(&b).map(|p| p.coords);
        assert_abs_diff_eq!(convex_hull_volume(&pts, 1e-9), 12.0, epsilon = 1e-9);
        // Adding interior points and duplicates changes nothing.
        let mut more = pts.to_vec();
        more.push(b.center().coords);
        more.push(pts[3]);
        assert_abs_diff_eq!(convex_hull_volume(&more, 1e-9), 12.0, epsilon = 1e-9);
    }

    #[test]
    fn hull_of_a_tetrahedron_and_of_a_flat_set() {
        let tet = [Vector3::zeros(), Vector3::x(), Vector3::y(), Vector3::z()];
        assert_abs_diff_eq!(convex_hull_volume(&tet, 1e-9), 1.0 / 6.0, epsilon = 1e-12);
        let flat = [
            Vector3::zeros(),
            Vector3::x(),
            Vector3::y(),
            Vector3::new(1.0, 1.0, 0.0),
        ];
        assert_eq!(convex_hull_volume(&flat, 1e-9), 0.0);
    }
}
