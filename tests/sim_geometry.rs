//! Ray–primitive and ray–terrain intersections against hand-computed hits.

use approx::assert_abs_diff_eq;
use boxlayer::sim::shape::{Ray, ray_cuboid, ray_cylinder, ray_ellipsoid, ray_plane};
use boxlayer::sim::terrain::{Terrain, Wave};
use nalgebra::{Point3, Vector3};

fn ray(o: [f64; 3], d: [f64; 3]) -> Ray {
    Ray::new(Point3::new(o[0], o[1], o[2]), Vector3::new(d[0], d[1], d[2]))
}

#[test]
fn cuboid_slab_hits_the_entry_face() {
    let half = Vector3::new(1.0, 2.0, 3.0);
    let hit = ray_cuboid(&ray([-5.0, 0.5, 0.2], [1.0, 0.0, 0.0]), &half, 100.0).unwrap();
    assert_abs_diff_eq!(hit.t, 4.0, epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, -Vector3::x(), epsilon = 1e-12);
    // From above, straight down onto the top face z = 3.
    let hit = ray_cuboid(&ray([0.3, -1.0, 10.0], [0.0, 0.0, -1.0]), &half, 100.0).unwrap();
    assert_abs_diff_eq!(hit.t, 7.0, epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, Vector3::z(), epsilon = 1e-12);
    // Oblique: from (−4, −6, 0) along (1, 1, 0)/√2 enters the y = −2 face at t = 4√2, x = 0.
    let hit = ray_cuboid(&ray([-4.0, -6.0, 0.0], [1.0, 1.0, 0.0]), &half, 100.0).unwrap();
    assert_abs_diff_eq!(hit.t, 4.0 * 2f64.sqrt(), epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, -Vector3::y(), epsilon = 1e-12);
    // Misses: parallel outside, pointing away, beyond t_max, starting inside.
    assert!(ray_cuboid(&ray([-5.0, 2.5, 0.0], [1.0, 0.0, 0.0]), &half, 100.0).is_none());
    assert!(ray_cuboid(&ray([-5.0, 0.0, 0.0], [-1.0, 0.0, 0.0]), &half, 100.0).is_none());
    assert!(ray_cuboid(&ray([-5.0, 0.0, 0.0], [1.0, 0.0, 0.0]), &half, 3.9).is_none());
    assert!(ray_cuboid(&ray([0.0, 0.0, 0.0], [1.0, 0.0, 0.0]), &half, 100.0).is_none());
}

#[test]
fn cylinder_hits_side_and_caps() {
    let (r, hh) = (1.0, 2.0);
    let hit = ray_cylinder(&ray([-5.0, 0.0, 0.0], [1.0, 0.0, 0.0]), r, hh, 100.0).unwrap();
    assert_abs_diff_eq!(hit.t, 4.0, epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, -Vector3::x(), epsilon = 1e-12);
    // Off-centre by 0.6: enters at x = −0.8, t = 4.2, normal (−0.8, 0.6, 0).
    let hit = ray_cylinder(&ray([-5.0, 0.6, 0.0], [1.0, 0.0, 0.0]), r, hh, 100.0).unwrap();
    assert_abs_diff_eq!(hit.t, 4.2, epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, Vector3::new(-0.8, 0.6, 0.0), epsilon = 1e-12);
    // Down onto the top cap.
    let hit = ray_cylinder(&ray([0.5, 0.0, 10.0], [0.0, 0.0, -1.0]), r, hh, 100.0).unwrap();
    assert_abs_diff_eq!(hit.t, 8.0, epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, Vector3::z(), epsilon = 1e-12);
    // Through the rim from above at 45°: from (−4, 0, 5) along (1, 0, −1)/√2 the ray meets the
    // side x = −1 at z = 2 exactly on the rim; slightly higher start enters through the cap.
    let hit = ray_cylinder(&ray([-4.0, 0.0, 5.5], [1.0, 0.0, -1.0]), r, hh, 100.0).unwrap();
    // Reaches z = 2 at x = −0.5 (inside the radius): a cap hit at t = 3.5√2.
    assert_abs_diff_eq!(hit.t, 3.5 * 2f64.sqrt(), epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, Vector3::z(), epsilon = 1e-12);
    // Passes above, or misses sideways.
    assert!(ray_cylinder(&ray([-5.0, 0.0, 2.5], [1.0, 0.0, 0.0]), r, hh, 100.0).is_none());
    assert!(ray_cylinder(&ray([-5.0, 1.5, 0.0], [1.0, 0.0, 0.0]), r, hh, 100.0).is_none());
}

#[test]
fn ellipsoid_and_sphere_hits() {
    let radii = Vector3::new(2.0, 1.0, 0.5);
    let hit = ray_ellipsoid(&ray([-10.0, 0.0, 0.0], [1.0, 0.0, 0.0]), &radii, 100.0).unwrap();
    assert_abs_diff_eq!(hit.t, 8.0, epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, -Vector3::x(), epsilon = 1e-12);
    let hit = ray_ellipsoid(&ray([0.0, 0.0, 5.0], [0.0, 0.0, -1.0]), &radii, 100.0).unwrap();
    assert_abs_diff_eq!(hit.t, 4.5, epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, Vector3::z(), epsilon = 1e-12);
    let sphere = Vector3::repeat(1.0);
    let hit = ray_ellipsoid(&ray([-5.0, 0.6, 0.0], [1.0, 0.0, 0.0]), &sphere, 100.0).unwrap();
    assert_abs_diff_eq!(hit.t, 4.2, epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, Vector3::new(-0.8, 0.6, 0.0), epsilon = 1e-12);
    assert!(ray_ellipsoid(&ray([-5.0, 1.01, 0.0], [1.0, 0.0, 0.0]), &sphere, 100.0).is_none());
}

#[test]
fn plane_hit_faces_the_ray() {
    let hit = ray_plane(
        &ray([0.0, 0.0, 2.0], [1.0, 0.0, -1.0]),
        &Point3::origin(),
        &Vector3::z(),
        100.0,
    )
    .unwrap();
    assert_abs_diff_eq!(hit.t, 2.0 * 2f64.sqrt(), epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, Vector3::z(), epsilon = 1e-12);
    let from_below = ray_plane(
        &ray([0.0, 0.0, -1.0], [0.0, 0.0, 1.0]),
        &Point3::origin(),
        &Vector3::z(),
        100.0,
    );
    assert_abs_diff_eq!(from_below.unwrap().normal, -Vector3::z(), epsilon = 1e-12);
    assert!(
        ray_plane(
            &ray([0.0, 0.0, 1.0], [1.0, 0.0, 0.0]),
            &Point3::origin(),
            &Vector3::z(),
            100.0
        )
        .is_none()
    );
}

#[test]
fn flat_and_sloped_terrain_are_planes() {
    let hit = Terrain::Flat
        .intersect(&ray([3.0, 4.0, 2.0], [0.0, 0.6, -0.8]), 100.0)
        .unwrap();
    assert_abs_diff_eq!(hit.t, 2.5, epsilon = 1e-12);
    // Rays going up or from below never meet the ground.
    assert!(
        Terrain::Flat
            .intersect(&ray([0.0, 0.0, 2.0], [1.0, 0.0, 0.1]), 100.0)
            .is_none()
    );
    assert!(
        Terrain::Flat
            .intersect(&ray([0.0, 0.0, -2.0], [0.0, 0.0, 1.0]), 100.0)
            .is_none()
    );
    // z = 0.1·x: straight down from (10, 0, 5) meets z = 1 at t = 4.
    let slope = Terrain::Sloped { gx: 0.1, gy: 0.0 };
    let hit = slope
        .intersect(&ray([10.0, 0.0, 5.0], [0.0, 0.0, -1.0]), 100.0)
        .unwrap();
    assert_abs_diff_eq!(hit.t, 4.0, epsilon = 1e-12);
    assert_abs_diff_eq!(hit.normal, Vector3::new(-0.1, 0.0, 1.0).normalize(), epsilon = 1e-12);
}

#[test]
fn heightfield_march_finds_the_first_crossing() {
    // h = sin(2π x / 40): zero at x = 0 and 20, peak 1 at x = 10, trough −1 at x = 30.
    let k = std::f64::consts::TAU / 40.0;
    let terrain = Terrain::Rolling {
        waves: vec![Wave {
            amplitude_m: 1.0,
            kx: k,
            ky: 0.0,
            phase: 0.0,
        }],
    };
    let down = terrain
        .intersect(&ray([10.0, 3.0, 5.0], [0.0, 0.0, -1.0]), 100.0)
        .unwrap();
    assert_abs_diff_eq!(down.t, 4.0, epsilon = 1e-6);
    let down = terrain
        .intersect(&ray([30.0, 0.0, 5.0], [0.0, 0.0, -1.0]), 100.0)
        .unwrap();
    assert_abs_diff_eq!(down.t, 6.0, epsilon = 1e-6);
    // A level ray at z = 0.5 heading +x from x = 0 meets the rising flank where sin(kx) = 0.5:
    // x = 40/12, i.e. t = 10/3, and must not tunnel through to the far side of the hill.
    let level = terrain
        .intersect(&ray([0.0, 0.0, 0.5], [1.0, 0.0, 0.0]), 100.0)
        .unwrap();
    assert_abs_diff_eq!(level.t, 40.0 / 12.0, epsilon = 1e-5);
    // A grazing ray from afar: the hit lies on the surface and nothing before it is below ground.
    let r = ray([-50.0, 2.0, 3.0], [1.0, 0.1, -0.05]);
    let hit = terrain.intersect(&r, 200.0).unwrap();
    let p = r.at(hit.t);
    assert_abs_diff_eq!(p.z, terrain.height(p.x, p.y), epsilon = 1e-5);
    for i in 0..1000 {
        let q = r.at(hit.t * i as f64 / 1000.0);
        assert!(
            q.z > terrain.height(q.x, q.y) - 1e-9,
            "ray goes underground before the reported hit"
        );
    }
    // Upward rays above the highest crest miss.
    assert!(
        terrain
            .intersect(&ray([0.0, 0.0, 2.0], [1.0, 0.0, 0.01]), 500.0)
            .is_none()
    );
}
