//! The bundled data manifests list exactly 3EED's split sequences, with no train/val leakage.

use std::collections::HashSet;
use std::path::Path;

use boxlayer::Platform;
use boxlayer::pipeline::{DataManifest, Split};

fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn split_names(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo("tests/fixtures/shared/3eed-splits").join(file)).unwrap();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn waymo_manifest_matches_3eed_splits() {
    let m = DataManifest::load(&repo("data-manifests/3eed_waymo.csv")).unwrap();
    for (split, file, count) in [
        (Split::Train, "waymo_train.txt", 100),
        (Split::Val, "waymo_val.txt", 97),
    ] {
        let expected = split_names(file);
        assert_eq!(expected.len(), count, "{file}");
        let got: Vec<&str> = m
            .sequences
            .iter()
            .filter(|e| e.split == split)
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(got, expected.iter().map(String::as_str).collect::<Vec<_>>());
    }
    for e in &m.sequences {
        assert_eq!(e.platform, Platform::Vehicle);
        assert_eq!(
            e.path,
            Path::new(&format!("waymo/segment-{}_with_camera_labels.tfrecord", e.name))
        );
    }
}

#[test]
fn m3ed_manifest_maps_3eed_names_to_m3ed_sequences() {
    let m = DataManifest::load(&repo("data-manifests/3eed_m3ed.csv")).unwrap();
    for (prefix, robot, platform) in [
        ("drone", "falcon_", Platform::Drone),
        ("quad", "spot_", Platform::Quadruped),
    ] {
        for (split, suffix) in [(Split::Train, "train"), (Split::Val, "val")] {
            let expected = split_names(&format!("{prefix}_{suffix}.txt"));
            let got: Vec<_> = m
                .sequences
                .iter()
                .filter(|e| e.platform == platform && e.split == split)
                .collect();
            assert_eq!(got.len(), expected.len(), "{prefix}_{suffix}");
            for (e, name) in got.iter().zip(&expected) {
                assert_eq!(&e.dataset_name, name);
                assert_eq!(e.name, format!("{robot}{}", name.to_lowercase()));
            }
        }
    }
}

#[test]
fn no_sequence_is_in_two_splits() {
    for file in ["data-manifests/3eed_waymo.csv", "data-manifests/3eed_m3ed.csv"] {
        let m = DataManifest::load(&repo(file)).unwrap();
        let train: HashSet<_> = m
            .sequences
            .iter()
            .filter(|e| e.split == Split::Train)
            .map(|e| &e.name)
            .collect();
        assert!(
            m.sequences
                .iter()
                .filter(|e| e.split != Split::Train)
                .all(|e| !train.contains(&e.name)),
            "{file}"
        );
    }
}
