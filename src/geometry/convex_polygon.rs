//! Small convex polygons in the plane on the stack: half-plane clipping (Sutherland–Hodgman),
//! convex–convex intersection area, shoelace area and the convex hull of a few points. Used by
//! the BEV IoU/GIoU queries and by the polyhedron faces; never allocates.

use nalgebra::Point2;

/// Most vertices a polygon holds. Clipping a convex polygon by one half-plane adds at most one
/// vertex, so a quadrilateral clipped by 4 (BEV) or 6 (3D faces) half-planes needs 8 or 10, and a
/// hull of 16 points needs 16; pushes beyond the capacity are dropped rather than panicking.
pub(crate) const POLYGON_CAPACITY: usize = 16;

/// A convex polygon, vertices counter-clockwise, stored inline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConvexPolygon {
    vertices: [Point2<f64>; POLYGON_CAPACITY],
    len: usize,
}

impl ConvexPolygon {
    /// An empty polygon.
    pub(crate) fn empty() -> Self {
        Self {
            vertices: [Point2::origin(); POLYGON_CAPACITY],
            len: 0,
        }
    }

    /// A polygon from counter-clockwise vertices (at most `POLYGON_CAPACITY` are kept).
    pub(crate) fn from_vertices(vertices: &[Point2<f64>]) -> Self {
        let mut p = Self::empty();
        for v in vertices {
            p.push(*v);
        }
        p
    }

    fn push(&mut self, v: Point2<f64>) {
        if self.len < POLYGON_CAPACITY {
            self.vertices[self.len] = v;
            self.len += 1;
        }
    }

    /// The vertices, counter-clockwise.
    pub(crate) fn vertices(&self) -> &[Point2<f64>] {
        &self.vertices[..self.len]
    }

    /// The area (shoelace), 0 for fewer than 3 vertices; positive for counter-clockwise order.
    pub(crate) fn area(&self) -> f64 {
        signed_area(self.vertices())
    }

    /// The part of this polygon on the left of the directed line `from → to` (boundary kept).
    ///
    /// Vertices are classified by the sign of the cross product alone, with no tolerance: a new
    /// vertex is made only where an edge's end points lie strictly on opposite sides, so the
    /// division is never by zero, and vertices on or near the line yield new vertices on or near
    /// the line. The clipped area is therefore continuous in the input, which is what makes
    /// coincident and parallel edges harmless.
    pub(crate) fn clip_left_of(&self, from: Point2<f64>, to: Point2<f64>) -> Self {
        let mut out = Self::empty();
        let n = self.len;
        if n == 0 {
            return out;
        }
        let dir = to - from;
        let side = |p: Point2<f64>| dir.x * (p.y - from.y) - dir.y * (p.x - from.x);
        let mut prev = self.vertices[n - 1];
        let mut d_prev = side(prev);
        for &cur in self.vertices() {
            let d_cur = side(cur);
            if d_cur >= 0.0 {
                if d_prev < 0.0 {
                    out.push(crossing(prev, cur, d_prev, d_cur));
                }
                out.push(cur);
            } else if d_prev >= 0.0 {
                out.push(crossing(prev, cur, d_prev, d_cur));
            }
            prev = cur;
            d_prev = d_cur;
        }
        out
    }
}

/// The point where segment `p → q` crosses the line, given signed distances of opposite signs.
fn crossing(p: Point2<f64>, q: Point2<f64>, d_p: f64, d_q: f64) -> Point2<f64> {
    let t = d_p / (d_p - d_q);
    p + (q - p) * t
}

/// The signed area of a polygon (positive when counter-clockwise), 0 for fewer than 3 vertices.
pub(crate) fn signed_area(vertices: &[Point2<f64>]) -> f64 {
    let n = vertices.len();
    if n < 3 {
        return 0.0;
    }
    // Relative to the first vertex, so large absolute coordinates do not cancel.
    let o = vertices[0];
    let mut twice = 0.0;
    for i in 1..n - 1 {
        let a = vertices[i] - o;
        let b = vertices[i + 1] - o;
        twice += a.x * b.y - a.y * b.x;
    }
    0.5 * twice
}

/// The area of the intersection of two convex counter-clockwise polygons.
pub(crate) fn intersection_area(subject: &[Point2<f64>], clip: &[Point2<f64>]) -> f64 {
    let mut poly = ConvexPolygon::from_vertices(subject);
    let n = clip.len();
    for i in 0..n {
        poly = poly.clip_left_of(clip[i], clip[(i + 1) % n]);
        if poly.len < 3 {
            return 0.0;
        }
    }
    poly.area().max(0.0)
}

/// The convex hull of at most `POLYGON_CAPACITY` points (Andrew's monotone chain),
/// counter-clockwise, collinear points dropped; extra points beyond the capacity are ignored.
pub(crate) fn convex_hull(points: &[Point2<f64>]) -> ConvexPolygon {
    let n = points.len().min(POLYGON_CAPACITY);
    let mut sorted = [Point2::origin(); POLYGON_CAPACITY];
    sorted[..n].copy_from_slice(&points[..n]);
    let sorted = &mut sorted[..n];
    sorted.sort_unstable_by(|a, b| a.x.total_cmp(&b.x).then(a.y.total_cmp(&b.y)));
    let turn = |o: Point2<f64>, a: Point2<f64>, b: Point2<f64>| (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
    // Lower then upper chain; the chain buffer holds at most 2n points.
    let mut chain = [Point2::origin(); 2 * POLYGON_CAPACITY];
    let mut k = 0usize;
    for &p in sorted.iter() {
        while k >= 2 && turn(chain[k - 2], chain[k - 1], p) <= 0.0 {
            k -= 1;
        }
        chain[k] = p;
        k += 1;
    }
    let lower_len = k + 1;
    for &p in sorted.iter().rev().skip(1) {
        while k >= lower_len && turn(chain[k - 2], chain[k - 1], p) <= 0.0 {
            k -= 1;
        }
        chain[k] = p;
        k += 1;
    }
    // The last point repeats the first.
    let hull_len = k.saturating_sub(1);
    ConvexPolygon::from_vertices(&chain[..hull_len])
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;

    fn square(x0: f64, y0: f64, side: f64) -> [Point2<f64>; 4] {
        [
            Point2::new(x0, y0),
            Point2::new(x0 + side, y0),
            Point2::new(x0 + side, y0 + side),
            Point2::new(x0, y0 + side),
        ]
    }

    #[test]
    fn overlapping_squares() {
        assert_abs_diff_eq!(intersection_area(&square(0.0, 0.0, 2.0), &square(1.0, 1.5, 2.0)), 0.5);
    }

    #[test]
    fn identical_and_edge_sharing_squares() {
        let a = square(0.0, 0.0, 1.0);
        assert_abs_diff_eq!(intersection_area(&a, &a), 1.0, epsilon = 1e-15);
        // Touching along an edge, and touching at a corner: zero area.
        assert_abs_diff_eq!(intersection_area(&a, &square(1.0, 0.0, 1.0)), 0.0);
        assert_abs_diff_eq!(intersection_area(&a, &square(1.0, 1.0, 1.0)), 0.0);
        // Sharing two edges (a corner square inside).
        assert_abs_diff_eq!(intersection_area(&a, &square(0.0, 0.0, 0.5)), 0.25, epsilon = 1e-15);
    }

    #[test]
    fn disjoint_squares() {
        assert_eq!(intersection_area(&square(0.0, 0.0, 1.0), &square(3.0, 0.0, 1.0)), 0.0);
    }

    #[test]
    fn degenerate_polygons_have_no_area() {
        let line = [
            Point2::new(0.0, 0.0),
            Point2::new(1.0, 0.0),
            Point2::new(1.0, 0.0),
            Point2::new(0.0, 0.0),
        ];
        assert_eq!(intersection_area(&line, &square(0.0, -0.5, 1.0)), 0.0);
        assert_eq!(signed_area(&line[..2]), 0.0);
    }

    #[test]
    fn hull_drops_interior_and_collinear_points() {
        let pts = [
            Point2::new(0.0, 0.0),
            Point2::new(2.0, 0.0),
            Point2::new(1.0, 0.0),
            Point2::new(2.0, 2.0),
            Point2::new(1.0, 1.0),
            Point2::new(0.0, 2.0),
            Point2::new(0.0, 2.0),
        ];
        let hull = convex_hull(&pts);
        assert_eq!(hull.vertices().len(), 4);
        assert_abs_diff_eq!(hull.area(), 4.0);
        assert_eq!(convex_hull(&[]).area(), 0.0);
        assert_eq!(convex_hull(&pts[..2]).area(), 0.0);
    }
}
