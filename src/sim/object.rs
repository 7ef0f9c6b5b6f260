//! Object shapes made of parts (a car is a body, a cabin and four wheels; a person legs, torso,
//! arms and head), their surfaces, and the tight box around the parts in the object's own frame.
//! The object frame has x forward, z up and its origin on the ground under the object's centre.

use nalgebra::{Isometry3, Matrix3, Point3, Translation3, UnitQuaternion, Vector3};
use rand::RngExt;
use serde::{Deserialize, Serialize};

use super::shape::{Ray, Shape, SurfaceHit};
use crate::frame::ObjectClass;
use crate::geometry::Box3;

/// The fine label of a ground-truth object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FineLabel {
    /// Passenger car.
    Car,
    /// Van or minibus.
    Van,
    /// Bus.
    Bus,
    /// Box truck.
    Truck,
    /// Person on foot.
    Pedestrian,
    /// Person riding a bicycle.
    Cyclist,
}

impl FineLabel {
    /// The canonical class this label maps onto.
    pub fn class(self) -> ObjectClass {
        match self {
            FineLabel::Car | FineLabel::Van | FineLabel::Bus | FineLabel::Truck => ObjectClass::Vehicle,
            FineLabel::Pedestrian => ObjectClass::Pedestrian,
            FineLabel::Cyclist => ObjectClass::Cyclist,
        }
    }

    /// The lower-case name (`car`, `van`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            FineLabel::Car => "car",
            FineLabel::Van => "van",
            FineLabel::Bus => "bus",
            FineLabel::Truck => "truck",
            FineLabel::Pedestrian => "pedestrian",
            FineLabel::Cyclist => "cyclist",
        }
    }
}

/// How a surface returns laser light.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Surface {
    /// Diffuse reflectivity at 865 nm (0–1; above 1 for retro-reflectors).
    pub reflectivity: f32,
    /// Extra probability that a return is lost (glass, dark foliage gaps).
    pub dropout: f32,
    /// Pulse elongation added by this surface (Waymo elongation units).
    pub elongation: f32,
}

impl Surface {
    /// Asphalt road surface.
    pub const ASPHALT: Surface = Surface::diffuse(0.15);
    /// White road paint.
    pub const PAINT: Surface = Surface::diffuse(0.6);
    /// Concrete pavement.
    pub const CONCRETE: Surface = Surface::diffuse(0.3);
    /// Grass.
    pub const GRASS: Surface = Surface::diffuse(0.4);
    /// Window glass: dark and often lost.
    pub const GLASS: Surface = Surface {
        reflectivity: 0.06,
        dropout: 0.35,
        elongation: 0.3,
    };
    /// Tyre rubber.
    pub const RUBBER: Surface = Surface::diffuse(0.04);
    /// Painted metal pole.
    pub const METAL: Surface = Surface::diffuse(0.35);
    /// Tree bark.
    pub const BARK: Surface = Surface::diffuse(0.2);
    /// Foliage: bright in near-IR, ragged.
    pub const FOLIAGE: Surface = Surface {
        reflectivity: 0.45,
        dropout: 0.25,
        elongation: 0.6,
    };
    /// Skin.
    pub const SKIN: Surface = Surface::diffuse(0.35);

    /// A plain diffuse surface of this reflectivity.
    pub const fn diffuse(reflectivity: f32) -> Surface {
        Surface {
            reflectivity,
            dropout: 0.0,
            elongation: 0.0,
        }
    }
}

/// One solid of an object, placed in the object's frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Part {
    /// The solid.
    pub shape: Shape,
    /// The solid's pose in the object frame.
    pub object_from_part: Isometry3<f64>,
    /// Its surface.
    pub surface: Surface,
}

impl Part {
    fn new(shape: Shape, at: Vector3<f64>, surface: Surface) -> Part {
        Part {
            shape,
            object_from_part: Isometry3::from_parts(Translation3::from(at), UnitQuaternion::identity()),
            surface,
        }
    }

    fn rotated(mut self, rotation: UnitQuaternion<f64>) -> Part {
        self.object_from_part.rotation = rotation;
        self
    }

    pub(crate) fn cuboid(size: Vector3<f64>, at: Vector3<f64>, surface: Surface) -> Part {
        Part::new(Shape::Cuboid { half: size * 0.5 }, at, surface)
    }

    fn cylinder_z(radius: f64, height: f64, at: Vector3<f64>, surface: Surface) -> Part {
        Part::new(
            Shape::Cylinder {
                radius,
                half_height: height * 0.5,
            },
            at,
            surface,
        )
    }

    /// A cylinder whose axis is the object's y axis (wheels).
    fn cylinder_y(radius: f64, width: f64, at: Vector3<f64>, surface: Surface) -> Part {
        Part::cylinder_z(radius, width, at, surface).rotated(UnitQuaternion::from_axis_angle(
            &Vector3::x_axis(),
            std::f64::consts::FRAC_PI_2,
        ))
    }

    fn ellipsoid(radii: Vector3<f64>, at: Vector3<f64>, surface: Surface) -> Part {
        Part::new(Shape::Ellipsoid { radii }, at, surface)
    }
}

/// A rigid object: its parts in its own frame, the tight box around them, the box an annotator
/// would draw, and a bounding sphere.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectShape {
    /// The solids.
    pub parts: Vec<Part>,
    /// Tight box around every part, axis-aligned in the object frame (yaw = pitch = roll = 0).
    pub local_box: Box3,
    /// The labelled box in the object frame: `local_box`, except where the datasets' annotators
    /// draw something else (pedestrians: `pedestrian_shape`).
    pub label_box: Box3,
    /// Radius of the sphere around `local_box`'s centre that holds every part (m).
    pub bounding_radius: f64,
    /// Each part's origin in the object frame and, unless it is axis-aligned, its
    /// `part_from_object` rotation matrix: precomputed so tracing skips quaternion algebra.
    part_frames: Vec<(Vector3<f64>, Option<Matrix3<f64>>)>,
}

impl ObjectShape {
    /// An object from its parts; computes the tight box and bounding sphere.
    pub fn new(parts: Vec<Part>) -> ObjectShape {
        let mut lo = Vector3::repeat(f64::INFINITY);
        let mut hi = Vector3::repeat(f64::NEG_INFINITY);
        for p in &parts {
            let half = p.shape.rotated_half_extents(&p.object_from_part.rotation);
            let c = p.object_from_part.translation.vector;
            lo = lo.inf(&(c - half));
            hi = hi.sup(&(c + half));
        }
        let centre = (lo + hi) * 0.5;
        let size = hi - lo;
        ObjectShape {
            part_frames: parts
                .iter()
                .map(|p| {
                    let rotation = (p.object_from_part.rotation.angle() > 0.0)
                        .then(|| p.object_from_part.rotation.inverse().to_rotation_matrix().into_inner());
                    (p.object_from_part.translation.vector, rotation)
                })
                .collect(),
            parts,
            local_box: Box3::new(centre.x, centre.y, centre.z, size.x, size.y, size.z, 0.0),
            label_box: Box3::new(centre.x, centre.y, centre.z, size.x, size.y, size.z, 0.0),
            bounding_radius: 0.5 * size.norm(),
        }
    }

    /// The same object labelled with a footprint of `length` × `width` (m) about the tight box's
    /// centre; never smaller than the tight box.
    fn labelled_footprint(mut self, length: f64, width: f64) -> ObjectShape {
        self.label_box.l = length.max(self.local_box.l);
        self.label_box.w = width.max(self.local_box.w);
        self
    }

    /// The nearest entry of `ray` (object frame) into any part within `t_max`: hit and surface.
    pub fn intersect(&self, ray: &Ray, t_max: f64) -> Option<(SurfaceHit, Surface)> {
        let c = self.local_box.center();
        // Bounding-sphere reject before the parts.
        let oc = ray.origin - c;
        let b = oc.dot(&ray.dir);
        let cc = oc.norm_squared() - self.bounding_radius * self.bounding_radius;
        if cc > 0.0 && (b > 0.0 || b * b < cc) {
            return None;
        }
        let mut best: Option<(SurfaceHit, Surface)> = None;
        let mut limit = t_max;
        for (part, (offset, rotation)) in self.parts.iter().zip(&self.part_frames) {
            let shifted = ray.origin - offset;
            let local = match rotation {
                None => Ray {
                    origin: shifted,
                    dir: ray.dir,
                },
                Some(m) => Ray {
                    origin: Point3::from(m * shifted.coords),
                    dir: m * ray.dir,
                },
            };
            if let Some(hit) = part.shape.intersect(&local, limit) {
                limit = hit.t;
                best = Some((
                    SurfaceHit {
                        t: hit.t,
                        normal: part.object_from_part.rotation * hit.normal,
                    },
                    part.surface,
                ));
            }
        }
        best
    }
}

fn paint(rng: &mut impl rand::Rng) -> Surface {
    // Car paints range from black (~0.05) to white (~0.7) at 865 nm.
    Surface::diffuse(rng.random_range(0.05..0.7))
}

fn clothing(rng: &mut impl rand::Rng) -> Surface {
    Surface::diffuse(rng.random_range(0.08..0.6))
}

/// A road vehicle of the given label with randomised dimensions.
pub fn vehicle_shape(label: FineLabel, rng: &mut impl rand::Rng) -> ObjectShape {
    let body = paint(rng);
    let (l, w, h) = match label {
        FineLabel::Van => (
            rng.random_range(4.9..5.6),
            rng.random_range(1.95..2.1),
            rng.random_range(1.95..2.4),
        ),
        FineLabel::Bus => (rng.random_range(10.5..12.5), 2.55, rng.random_range(3.0..3.3)),
        FineLabel::Truck => (rng.random_range(6.5..9.0), 2.45, rng.random_range(3.0..3.6)),
        _ => (
            rng.random_range(4.2..4.9),
            rng.random_range(1.75..1.9),
            rng.random_range(1.42..1.62),
        ),
    };
    let wheel_r = match label {
        FineLabel::Bus | FineLabel::Truck => 0.5,
        FineLabel::Van => 0.36,
        _ => 0.32,
    };
    let clearance = wheel_r * 0.9;
    let wheel_w = 0.22;
    let wheel_y = w / 2.0 - wheel_w / 2.0;
    let axle_x = l / 2.0 - wheel_r - 0.45;
    let mut parts = Vec::new();
    for sx in [-1.0, 1.0] {
        for sy in [-1.0, 1.0] {
            parts.push(Part::cylinder_y(
                wheel_r,
                wheel_w,
                Vector3::new(sx * axle_x, sy * wheel_y, wheel_r),
                Surface::RUBBER,
            ));
        }
    }
    // The body sits inside the wheels' width, so wheels show in the arches.
    let body_w = w - 0.06;
    // Side mirrors at the front of the side windows, `reach` out from the body on each side:
    // they are in the tight box, as in the datasets' vehicle labels (the real Waymo fixture frame's
    // cars are 1.97–2.26 m wide, their bodies 1.75–1.9 m).
    let mirrors = |x: f64, z: f64, reach: f64| {
        [-1.0, 1.0].map(|sy| {
            Part::cuboid(
                Vector3::new(0.1, reach, 0.12),
                Vector3::new(x, sy * (body_w + reach) / 2.0, z),
                body,
            )
        })
    };
    match label {
        FineLabel::Car => {
            let body_h = 0.45 * (h - clearance) + 0.12;
            parts.push(Part::cuboid(
                Vector3::new(l, body_w, body_h),
                Vector3::new(0.0, 0.0, clearance + body_h / 2.0),
                body,
            ));
            let cabin_h = h - clearance - body_h;
            let cabin_l = l * rng.random_range(0.48..0.58);
            parts.push(Part::cuboid(
                Vector3::new(cabin_l, body_w * 0.88, cabin_h),
                Vector3::new(-0.08 * l, 0.0, clearance + body_h + cabin_h / 2.0),
                Surface::GLASS,
            ));
            parts.push(Part::cuboid(
                Vector3::new(cabin_l * 0.8, body_w * 0.86, 0.06),
                Vector3::new(-0.08 * l, 0.0, h - 0.03),
                body,
            ));
            parts.extend(mirrors(
                -0.08 * l + cabin_l / 2.0 - 0.1,
                clearance + body_h + 0.08,
                0.13,
            ));
        }
        FineLabel::Van => {
            parts.push(Part::cuboid(
                Vector3::new(l - 0.8, body_w, h - clearance),
                Vector3::new(-0.4, 0.0, clearance + (h - clearance) / 2.0),
                body,
            ));
            let nose_h = 0.45 * (h - clearance);
            parts.push(Part::cuboid(
                Vector3::new(0.8, body_w, nose_h),
                Vector3::new(l / 2.0 - 0.4, 0.0, clearance + nose_h / 2.0),
                body,
            ));
            parts.extend(mirrors(l / 2.0 - 0.9, clearance + nose_h + 0.15, 0.15));
        }
        FineLabel::Bus => {
            parts.push(Part::cuboid(
                Vector3::new(l, body_w, (h - clearance) * 0.45),
                Vector3::new(0.0, 0.0, clearance + (h - clearance) * 0.225),
                body,
            ));
            parts.push(Part::cuboid(
                Vector3::new(l, body_w, (h - clearance) * 0.4),
                Vector3::new(0.0, 0.0, clearance + (h - clearance) * 0.65),
                Surface::GLASS,
            ));
            parts.push(Part::cuboid(
                Vector3::new(l, body_w, (h - clearance) * 0.15),
                Vector3::new(0.0, 0.0, h - (h - clearance) * 0.075),
                body,
            ));
            parts.extend(mirrors(l / 2.0 - 0.3, clearance + (h - clearance) * 0.6, 0.25));
        }
        FineLabel::Truck => {
            let cab_l = 2.0;
            let cab_h = h * 0.78 - clearance;
            parts.push(Part::cuboid(
                Vector3::new(cab_l, body_w, cab_h),
                Vector3::new(l / 2.0 - cab_l / 2.0, 0.0, clearance + cab_h / 2.0),
                body,
            ));
            parts.extend(mirrors(l / 2.0 - 0.5, clearance + cab_h * 0.7, 0.22));
            let box_l = l - cab_l - 0.2;
            parts.push(Part::cuboid(
                Vector3::new(box_l, w, h - clearance - 0.1),
                Vector3::new(
                    -l / 2.0 + box_l / 2.0,
                    0.0,
                    clearance + 0.1 + (h - clearance - 0.1) / 2.0,
                ),
                Surface::diffuse(rng.random_range(0.3..0.8)),
            ));
        }
        FineLabel::Pedestrian | FineLabel::Cyclist => {}
    }
    ObjectShape::new(parts)
}

/// A standing or walking person of random height and build.
pub fn pedestrian_shape(rng: &mut impl rand::Rng) -> ObjectShape {
    let height = rng.random_range(1.55..1.92);
    let s = height / 1.75;
    let trousers = clothing(rng);
    let top = clothing(rng);
    let stride = rng.random_range(0.0..0.35);
    let leg_h = 0.84 * s;
    let mut parts = Vec::new();
    for (sy, sx) in [(-1.0, -1.0), (1.0, 1.0)] {
        // Legs in mid-stride: tilted forward and back about y.
        let tilt = UnitQuaternion::from_axis_angle(&Vector3::y_axis(), sx * stride * 0.5);
        let hip = Vector3::new(0.0, sy * 0.1 * s, leg_h);
        let centre = hip + tilt * Vector3::new(0.0, 0.0, -leg_h / 2.0);
        parts.push(Part::cylinder_z(0.075 * s, leg_h, centre, trousers).rotated(tilt));
    }
    let torso_h = 0.58 * s;
    parts.push(Part::ellipsoid(
        Vector3::new(0.13 * s, 0.21 * s, torso_h / 2.0),
        Vector3::new(0.0, 0.0, leg_h + torso_h / 2.0 - 0.02),
        top,
    ));
    for sy in [-1.0, 1.0] {
        parts.push(Part::cylinder_z(
            0.05 * s,
            0.6 * s,
            Vector3::new(0.0, sy * 0.26 * s, leg_h + torso_h - 0.33 * s),
            top,
        ));
    }
    let head_r = 0.105 * s;
    parts.push(Part::ellipsoid(
        Vector3::new(head_r, head_r * 0.9, head_r * 1.15),
        Vector3::new(0.0, 0.0, height - head_r * 1.15),
        Surface::SKIN,
    ));
    // Annotators do not draw a person's body-tight box (0.25–0.45 m front to back here): Waymo's
    // pedestrian boxes hold the reach of the stride and the arms, 0.82–1.35 m long and 0.72–1.03 m
    // wide on the real fixture frame (12 people, medians 1.05 × 0.85), 0.91 × 0.86 m on average in
    // the dataset (OpenPCDet's Waymo anchor); KITTI's average is 0.8 × 0.6. The label follows
    // that convention with its length growing with the person's stride (0.7–1.1 m) and its width
    // with their size (0.7–1.0 m), drawn from what the person already is, so the scene's random
    // stream is untouched and only the label changes.
    let length = 0.7 + 0.4 * stride / 0.35;
    let width = 0.7 + 0.3 * (height - 1.55) / 0.37;
    ObjectShape::new(parts).labelled_footprint(length, width)
}

/// A person riding a bicycle, heading along +x.
pub fn cyclist_shape(rng: &mut impl rand::Rng) -> ObjectShape {
    let wheel_r = 0.34;
    let base = 1.05;
    let frame = Surface::diffuse(rng.random_range(0.1..0.6));
    let clothes = clothing(rng);
    let mut parts = vec![
        Part::cylinder_y(wheel_r, 0.04, Vector3::new(base / 2.0, 0.0, wheel_r), Surface::RUBBER),
        Part::cylinder_y(wheel_r, 0.04, Vector3::new(-base / 2.0, 0.0, wheel_r), Surface::RUBBER),
        Part::cuboid(
            Vector3::new(base * 0.75, 0.05, 0.05),
            Vector3::new(0.0, 0.0, 0.62),
            frame,
        ),
        Part::cuboid(Vector3::new(0.05, 0.05, 0.45), Vector3::new(-0.1, 0.0, 0.5), frame),
        Part::cuboid(Vector3::new(0.05, 0.55, 0.04), Vector3::new(0.42, 0.0, 1.0), frame),
    ];
    let s = rng.random_range(0.92..1.08);
    // Rider: legs down to the pedals, torso leaning forward, head.
    for sy in [-1.0, 1.0] {
        parts.push(Part::cylinder_z(
            0.07 * s,
            0.75 * s,
            Vector3::new(-0.05, sy * 0.11, 0.62 + 0.0 * s),
            clothes,
        ));
    }
    let lean = UnitQuaternion::from_axis_angle(&Vector3::y_axis(), 0.45);
    parts.push(
        Part::ellipsoid(
            Vector3::new(0.12 * s, 0.2 * s, 0.3 * s),
            Vector3::new(0.05, 0.0, 1.25 * s),
            clothes,
        )
        .rotated(lean),
    );
    parts.push(Part::ellipsoid(
        Vector3::new(0.1, 0.09, 0.12) * s,
        Vector3::new(0.25 * s, 0.0, 1.62 * s),
        Surface::SKIN,
    ));
    ObjectShape::new(parts)
}

/// A box-shaped building of footprint `l × w` and height `h`, with a roof slab.
pub fn building_shape(l: f64, w: f64, h: f64, rng: &mut impl rand::Rng) -> ObjectShape {
    let facade = Surface::diffuse(rng.random_range(0.15..0.45));
    ObjectShape::new(vec![
        Part::cuboid(Vector3::new(l, w, h), Vector3::new(0.0, 0.0, h / 2.0), facade),
        Part::cuboid(
            Vector3::new(l * 0.4, w * 0.4, 1.5),
            Vector3::new(0.0, 0.0, h + 0.75),
            Surface::METAL,
        ),
    ])
}

/// A straight wall `length` long (along x).
pub fn wall_shape(length: f64, height: f64) -> ObjectShape {
    ObjectShape::new(vec![Part::cuboid(
        Vector3::new(length, 0.25, height),
        Vector3::new(0.0, 0.0, height / 2.0),
        Surface::CONCRETE,
    )])
}

/// A lamp post: a pole with an arm reaching along +x.
pub fn pole_shape(height: f64) -> ObjectShape {
    ObjectShape::new(vec![
        Part::cylinder_z(0.09, height, Vector3::new(0.0, 0.0, height / 2.0), Surface::METAL),
        Part::cuboid(
            Vector3::new(1.4, 0.12, 0.12),
            Vector3::new(0.7, 0.0, height - 0.1),
            Surface::METAL,
        ),
    ])
}

/// A clipped hedge `length` long (along x): overlapping foliage blobs of uneven height and width,
/// the size of a row of parked cars seen side-on.
pub fn hedge_shape(length: f64, rng: &mut impl rand::Rng) -> ObjectShape {
    let height = rng.random_range(0.9..2.2);
    let width = rng.random_range(0.8..1.8);
    let blobs = (length / 1.2).ceil().max(1.0) as usize;
    let step = length / blobs as f64;
    let parts = (0..blobs)
        .map(|k| {
            let h = height * rng.random_range(0.8..1.1);
            let r = Vector3::new(0.75 * step, 0.5 * width * rng.random_range(0.8..1.2), 0.5 * h);
            let at = Vector3::new(
                -0.5 * length + (k as f64 + 0.5) * step,
                rng.random_range(-0.1..0.1),
                0.5 * h,
            );
            Part::ellipsoid(r, at, Surface::FOLIAGE)
        })
        .collect();
    ObjectShape::new(parts)
}

/// A free-standing bush: one to three foliage blobs, 1–3.5 m across and 0.8–2 m tall (a
/// car-sized lump of returns).
pub fn bush_shape(rng: &mut impl rand::Rng) -> ObjectShape {
    let blobs = rng.random_range(1..=3);
    let parts = (0..blobs)
        .map(|_| {
            let h = rng.random_range(0.8..2.0);
            let r = Vector3::new(rng.random_range(0.5..1.75), rng.random_range(0.5..1.2), 0.5 * h);
            let at = Vector3::new(rng.random_range(-0.8..0.8), rng.random_range(-0.4..0.4), 0.5 * h);
            Part::ellipsoid(r, at, Surface::FOLIAGE)
        })
        .collect();
    ObjectShape::new(parts)
}

/// A fence `length` long (along x): posts every 2.5 m, top and bottom rails and a chain-link or
/// slatted panel that loses most returns.
pub fn fence_shape(length: f64, rng: &mut impl rand::Rng) -> ObjectShape {
    let height = rng.random_range(1.0..2.2);
    let panel = Surface {
        reflectivity: rng.random_range(0.2..0.5),
        dropout: rng.random_range(0.3..0.8),
        elongation: 0.2,
    };
    let posts = (length / 2.5).ceil().max(1.0) as usize;
    let mut parts: Vec<Part> = (0..=posts)
        .map(|k| {
            let x = -0.5 * length + length * k as f64 / posts as f64;
            Part::cuboid(
                Vector3::new(0.08, 0.08, height),
                Vector3::new(x, 0.0, 0.5 * height),
                Surface::METAL,
            )
        })
        .collect();
    for z in [0.15, height - 0.05] {
        parts.push(Part::cuboid(
            Vector3::new(length, 0.05, 0.06),
            Vector3::new(0.0, 0.0, z),
            Surface::METAL,
        ));
    }
    parts.push(Part::cuboid(
        Vector3::new(length, 0.03, height - 0.25),
        Vector3::new(0.0, 0.0, 0.5 * height),
        panel,
    ));
    ObjectShape::new(parts)
}

/// A parked trailer, unhitched (not a labelled vehicle): a flatbed or a box body on one axle
/// with a drawbar and a jockey wheel at the front (+x).
pub fn trailer_shape(rng: &mut impl rand::Rng) -> ObjectShape {
    let l = rng.random_range(2.5..6.5);
    let w = rng.random_range(1.4..2.5);
    let deck = rng.random_range(0.45..0.8);
    let wheel_r = rng.random_range(0.25..0.38);
    let body = Surface::diffuse(rng.random_range(0.1..0.6));
    let mut parts = vec![Part::cuboid(
        Vector3::new(l, w, 0.12),
        Vector3::new(0.0, 0.0, deck),
        body,
    )];
    if rng.random_bool(0.5) {
        let h = rng.random_range(1.2..2.6);
        parts.push(Part::cuboid(
            Vector3::new(l, w, h),
            Vector3::new(0.0, 0.0, deck + 0.06 + h / 2.0),
            body,
        ));
    } else {
        for side in [-1.0, 1.0] {
            parts.push(Part::cuboid(
                Vector3::new(l, 0.05, 0.35),
                Vector3::new(0.0, side * 0.5 * w, deck + 0.2),
                Surface::METAL,
            ));
        }
    }
    for side in [-1.0, 1.0] {
        parts.push(Part::cylinder_y(
            wheel_r,
            0.2,
            Vector3::new(rng.random_range(-0.2..0.2) * l, side * (0.5 * w + 0.12), wheel_r),
            Surface::RUBBER,
        ));
    }
    let bar = rng.random_range(1.0..1.6);
    parts.push(Part::cuboid(
        Vector3::new(bar, 0.1, 0.1),
        Vector3::new(0.5 * (l + bar), 0.0, deck - 0.1),
        Surface::METAL,
    ));
    parts.push(Part::cylinder_z(
        0.05,
        deck,
        Vector3::new(0.5 * l + 0.6 * bar, 0.0, 0.5 * deck),
        Surface::METAL,
    ));
    ObjectShape::new(parts)
}

/// An irregular street front `length` long (along x, the street on −y): a shop front of glass and
/// piers, then bays, balconies and awnings standing out from it at random.
pub fn facade_shape(length: f64, rng: &mut impl rand::Rng) -> ObjectShape {
    let wall = Surface::diffuse(rng.random_range(0.15..0.45));
    let h = rng.random_range(3.0..7.0);
    let mut parts = vec![
        Part::cuboid(Vector3::new(length, 1.0, h), Vector3::new(0.0, 0.5, h / 2.0), wall),
        Part::cuboid(
            Vector3::new(length, 0.05, 2.4),
            Vector3::new(0.0, -0.03, 1.4),
            Surface::GLASS,
        ),
    ];
    let mut x = -0.5 * length + rng.random_range(0.5..3.0);
    while x < 0.5 * length - 1.0 {
        let width = rng.random_range(0.6..4.0_f64).min(0.5 * length - x);
        match rng.random_range(0..4) {
            // A pier between windows.
            0 => parts.push(Part::cuboid(
                Vector3::new(0.4, 0.3, 2.6),
                Vector3::new(x + 0.2, -0.15, 1.3),
                wall,
            )),
            // A bay window or porch standing out at street level.
            1 => {
                let depth = rng.random_range(0.5..1.8);
                let bay_h = rng.random_range(1.0..3.0);
                parts.push(Part::cuboid(
                    Vector3::new(width, depth, bay_h),
                    Vector3::new(x + width / 2.0, -depth / 2.0, bay_h / 2.0),
                    wall,
                ));
            }
            // A balcony or awning overhead.
            2 => {
                let depth = rng.random_range(0.8..2.0);
                parts.push(Part::cuboid(
                    Vector3::new(width, depth, 0.15),
                    Vector3::new(x + width / 2.0, -depth / 2.0, rng.random_range(2.4..3.5)),
                    Surface::diffuse(rng.random_range(0.1..0.7)),
                ));
            }
            // Steps or a planter at the door.
            _ => {
                let depth = rng.random_range(0.4..1.2);
                parts.push(Part::cuboid(
                    Vector3::new(width.min(2.0), depth, 0.5),
                    Vector3::new(x + width.min(2.0) / 2.0, -depth / 2.0, 0.25),
                    Surface::CONCRETE,
                ));
            }
        }
        x += width + rng.random_range(0.5..3.0);
    }
    ObjectShape::new(parts)
}

/// A sign post: a pole with one or two retro-reflective sign plates (bright in any LiDAR).
pub fn sign_pole_shape(rng: &mut impl rand::Rng) -> ObjectShape {
    let h = rng.random_range(2.2..3.6);
    let mut parts = vec![Part::cylinder_z(
        0.04,
        h,
        Vector3::new(0.0, 0.0, h / 2.0),
        Surface::METAL,
    )];
    let signs = rng.random_range(1..=2);
    for k in 0..signs {
        let (sw, sh) = (rng.random_range(0.5..1.2), rng.random_range(0.5..0.9));
        parts.push(Part::cuboid(
            Vector3::new(0.04, sw, sh),
            Vector3::new(0.06, 0.0, h - 0.5 * sh - k as f64 * (sh + 0.1)),
            Surface::diffuse(rng.random_range(1.5..3.0)),
        ));
    }
    ObjectShape::new(parts)
}

/// A tree: trunk plus an ellipsoidal canopy.
pub fn tree_shape(rng: &mut impl rand::Rng) -> ObjectShape {
    let trunk_h = rng.random_range(1.8..3.5);
    let trunk_r = rng.random_range(0.12..0.3);
    let canopy_r = rng.random_range(1.5..3.5);
    let canopy_h = canopy_r * rng.random_range(0.9..1.5);
    ObjectShape::new(vec![
        Part::cylinder_z(
            trunk_r,
            trunk_h + 0.5,
            Vector3::new(0.0, 0.0, (trunk_h + 0.5) / 2.0),
            Surface::BARK,
        ),
        Part::ellipsoid(
            Vector3::new(canopy_r, canopy_r, canopy_h),
            Vector3::new(0.0, 0.0, trunk_h + canopy_h * 0.9),
            Surface::FOLIAGE,
        ),
    ])
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn a_persons_label_holds_the_body_and_follows_the_annotation_convention() {
        let (mut lengths, mut widths) = (Vec::new(), Vec::new());
        for seed in 0..300 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let shape = pedestrian_shape(&mut rng);
            let (body, label) = (shape.local_box, shape.label_box);
            // Same centre and height as the body; a footprint that holds it.
            assert_eq!((label.x, label.y, label.z, label.h), (body.x, body.y, body.z, body.h));
            assert!(label.l > body.l + 0.2 && label.w > body.w, "{body:?} in {label:?}");
            assert!(
                (0.7..=1.1).contains(&label.l) && (0.7..=1.0).contains(&label.w),
                "{label:?}"
            );
            lengths.push(label.l);
            widths.push(label.w);
        }
        // Means near Waymo's average pedestrian box (0.91 × 0.86 m).
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean(&lengths) - 0.9).abs() < 0.03, "mean length {}", mean(&lengths));
        assert!((mean(&widths) - 0.85).abs() < 0.03, "mean width {}", mean(&widths));
    }

    #[test]
    fn other_objects_are_labelled_with_their_tight_box() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for shape in [
            vehicle_shape(FineLabel::Car, &mut rng),
            vehicle_shape(FineLabel::Truck, &mut rng),
            cyclist_shape(&mut rng),
        ] {
            assert_eq!(shape.label_box, shape.local_box);
        }
    }
}
