//! The PCD and `.npy` readers on simulated sweeps and on damaged files: a simulated M3ED sweep's
//! cloud written as PCD ascii, binary and binary_compressed (by pcd-rs's writer) and as `.npy`
//! reads back to the same points, intensities and channels, stamped from the file names; a
//! truncated file between two good ones fails alone, naming itself and `frame 1`; NumPy's own
//! files read as NumPy means them and NumPy reads what `write_npy` writes
//! (`tools/npy_crosscheck.py`).

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use boxlayer::cloud::{ChannelData, PointCloud};
use boxlayer::frame::Platform;
use boxlayer::sim::{SimConfig, Simulator, default_sequence_name, write_m3ed_sequence};
use boxlayer::sources::m3ed::{M3edConfig, M3edSource};
use boxlayer::sources::npy::{NpyConfig, NpySource, write_npy};
use boxlayer::sources::pcd::{PcdConfig, PcdEncoding, PcdSource, write_pcd};
use boxlayer::sources::{Source, SourceKind, SourceOptions, open};

const SWEEPS: usize = 2;

/// Simulated drone sweeps as M3ED reads them, with `time` made relative to the sweep start
/// (PCD exports store per-point offsets; absolute µs do not fit the writer's `I 4`). Simulated
/// once, before any test spawns python3: a child forked while libhdf5 has the file open inherits
/// its lock and the reader's open then fails.
fn simulated_sweeps() -> &'static [(i64, PointCloud)] {
    static SWEEPS_READ: OnceLock<Vec<(i64, PointCloud)>> = OnceLock::new();
    SWEEPS_READ.get_or_init(simulate)
}

fn simulate() -> Vec<(i64, PointCloud)> {
    let sim = Simulator::new(
        SimConfig {
            frames: SWEEPS,
            ..SimConfig::default()
        },
        Platform::Drone,
        11,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let name = default_sequence_name(Platform::Drone, 11).unwrap();
    let summary = write_m3ed_sequence(&sim, SWEEPS, dir.path(), &name).unwrap();
    let source = M3edSource::open(&summary.data_path, M3edConfig::default()).unwrap();
    (0..SWEEPS)
        .map(|i| {
            let frame = source.frame(i).unwrap();
            let c = &frame.cloud;
            let mut cloud =
                PointCloud::from_columns(c.x().to_vec(), c.y().to_vec(), c.z().to_vec(), c.intensity().to_vec())
                    .unwrap();
            for (name, data) in c.channels() {
                let data = match data {
                    ChannelData::I64(v) => ChannelData::I64(v.iter().map(|t| t - frame.timestamp_micros).collect()),
                    other => other.clone(),
                };
                cloud.add_channel(name, data).unwrap();
            }
            (frame.timestamp_micros, cloud)
        })
        .collect()
}

fn stem(micros: i64) -> String {
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

fn assert_same_points(a: &PointCloud, b: &PointCloud, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: point count");
    assert!(a.len() > 1000, "{what}: a real sweep");
    for (name, u, v) in [
        ("x", a.x(), b.x()),
        ("y", a.y(), b.y()),
        ("z", a.z(), b.z()),
        ("intensity", a.intensity(), b.intensity()),
    ] {
        let gap = u.iter().zip(v).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max);
        assert!(gap <= 1e-6, "{what}: {name} off by {gap}");
    }
}

#[test]
fn simulated_sweeps_read_back_from_every_pcd_encoding_and_from_npy() {
    let sweeps = simulated_sweeps();
    let root = tempfile::tempdir().unwrap();
    for encoding in [PcdEncoding::Ascii, PcdEncoding::Binary, PcdEncoding::BinaryCompressed] {
        let dir = root.path().join(encoding.as_str());
        std::fs::create_dir(&dir).unwrap();
        for (t, cloud) in sweeps {
            write_pcd(&dir.join(format!("{}.pcd", stem(*t))), cloud, encoding).unwrap();
        }
        let source = open(&dir, None, &SourceOptions::default()).unwrap();
        assert_eq!((source.meta().source_kind, source.len()), ("pcd", SWEEPS));
        for (i, (t, cloud)) in sweeps.iter().enumerate() {
            let frame = source.frame(i).unwrap();
            let what = format!("{} frame {i}", encoding.as_str());
            assert_eq!((frame.index, frame.timestamp_micros), (i, *t), "{what}");
            assert!(frame.notes.is_empty(), "{what}: {:?}", frame.notes);
            assert_same_points(&frame.cloud, cloud, &what);
            // Every channel comes back under its name and type (i64 through `I 4`).
            let read: Vec<(&str, &ChannelData)> = frame.cloud.channels().collect();
            let written: Vec<(&str, &ChannelData)> = cloud.channels().collect();
            assert_eq!(read, written, "{what}: channels");
        }
    }
    // .npy: N×6 float32 with its columns named in the config.
    let dir = root.path().join("npy");
    std::fs::create_dir(&dir).unwrap();
    let fields = ["x", "y", "z", "intensity", "ring", "range"];
    for (t, cloud) in sweeps {
        write_npy(&dir.join(format!("{}.npy", stem(*t))), cloud, &fields).unwrap();
    }
    let options = SourceOptions {
        npy: NpyConfig {
            fields: fields.map(String::from).to_vec(),
            ..NpyConfig::default()
        },
        ..SourceOptions::default()
    };
    let source = open(&dir, Some(SourceKind::Npy), &options).unwrap();
    for (i, (t, cloud)) in sweeps.iter().enumerate() {
        let frame = source.frame(i).unwrap();
        assert_eq!(frame.timestamp_micros, *t);
        assert_same_points(&frame.cloud, cloud, &format!("npy frame {i}"));
        let ChannelData::U16(ring) = cloud.channel("ring").unwrap() else {
            panic!("ring")
        };
        let ring: Vec<f32> = ring.iter().map(|&r| r as f32).collect();
        assert_eq!(frame.cloud.channel("ring"), Some(&ChannelData::F32(ring)));
        assert_eq!(frame.cloud.channel("range"), cloud.channel("range"));
    }
}

/// Cuts `path` to `keep` of its bytes.
fn truncate(path: &Path, keep: usize) {
    let bytes = std::fs::read(path).unwrap();
    std::fs::write(path, &bytes[..keep]).unwrap();
}

#[test]
fn a_truncated_file_between_two_good_ones_fails_alone() {
    let sweeps = simulated_sweeps();
    let cloud = &sweeps[0].1;
    for (encoding, want) in [
        (PcdEncoding::Binary, "file ends after"),
        (PcdEncoding::BinaryCompressed, "into a"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        for k in 0..3 {
            write_pcd(&dir.path().join(format!("{k:06}.pcd")), cloud, encoding).unwrap();
        }
        let bad = dir.path().join("000001.pcd");
        let len = std::fs::metadata(&bad).unwrap().len() as usize;
        truncate(&bad, len - 1000);
        let source = PcdSource::open(dir.path(), PcdConfig::default()).unwrap();
        assert_eq!(source.len(), 3);
        assert!(!source.stamped_by_names());
        for k in [0, 2] {
            let frame = source.frame(k).unwrap();
            assert_eq!((frame.index, frame.timestamp_micros), (k, k as i64 * 100_000));
            assert_same_points(&frame.cloud, cloud, "good frame");
        }
        let e = source.frame(1).unwrap_err().to_string();
        assert!(
            e.contains("000001.pcd: frame 1 at byte ") && e.contains(want) && e.contains("truncated"),
            "{}: {e}",
            encoding.as_str()
        );
    }
    // The same for .npy: the offset is where the data stops.
    let dir = tempfile::tempdir().unwrap();
    for k in 0..3 {
        write_npy(&dir.path().join(format!("{k:06}.npy")), cloud, &["x", "y", "z"]).unwrap();
    }
    let bad = dir.path().join("000001.npy");
    let len = std::fs::metadata(&bad).unwrap().len() as usize;
    truncate(&bad, len - 6);
    let source = NpySource::open(dir.path(), NpyConfig::default()).unwrap();
    assert_eq!(source.frame(2).unwrap().cloud.len(), cloud.len());
    let e = source.frame(1).unwrap_err().to_string();
    assert!(
        e.contains(&format!("000001.npy: frame 1 at byte {}: file ends after", len - 6)),
        "{e}"
    );
}

fn python(args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/npy_crosscheck.py");
    let output = Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}); install Python 3 and numpy with `make setup`"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "npy_crosscheck.py {args:?} failed (numpy is required):\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn numpy_files_read_as_numpy_means_them_and_numpy_reads_ours() {
    const N: usize = 300;
    simulated_sweeps();
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().to_str().unwrap();
    python(&["write", folder, &N.to_string()]);
    let expect = |cloud: &PointCloud, what: &str, intensity: bool| {
        assert_eq!(cloud.len(), N, "{what}");
        for i in 0..N {
            let f = i as f32;
            assert_eq!(
                (cloud.x()[i], cloud.y()[i], cloud.z()[i]),
                (0.5 * f, -f, 0.25 * f),
                "{what} point {i}"
            );
            let want = if intensity { (i % 7) as f32 } else { 0.0 };
            assert_eq!(cloud.intensity()[i], want, "{what} point {i}");
        }
    };
    let read = |name: &str, config: NpyConfig| NpySource::open(&dir.path().join(name), config).unwrap().frame(0);
    expect(
        &read("plain.npy", NpyConfig::default()).unwrap().cloud,
        "plain <f4",
        true,
    );
    expect(
        &read("fortran.npy", NpyConfig::default()).unwrap().cloud,
        "fortran <f8",
        false,
    );
    expect(
        &read("big.npy", NpyConfig::default()).unwrap().cloud,
        "big-endian >f4",
        false,
    );
    let frame = read("structured.npy", NpyConfig::default()).unwrap();
    expect(&frame.cloud, "structured", true);
    let ring: Vec<u8> = (0..N).map(|i| (i % 64) as u8).collect();
    assert_eq!(frame.cloud.channel("ring"), Some(&ChannelData::U8(ring)));
    assert_eq!(frame.cloud.channels().count(), 1);
    assert_eq!(frame.notes, ["field `t` (<i8) skipped: type not read"]);
    let e = read("wide.npy", NpyConfig::default()).unwrap_err().to_string();
    assert!(
        e.contains("wide.npy: frame 0: 7 columns: set `npy.fields` to name them"),
        "{e}"
    );
    let named = NpyConfig {
        fields: ["x", "y", "z", "_", "_", "intensity", "ring"]
            .map(String::from)
            .to_vec(),
        ..NpyConfig::default()
    };
    assert_eq!(read("wide.npy", named).unwrap().cloud.len(), N);

    // And NumPy reads what write_npy writes.
    let (x, y, z, intensity): (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) = (
        (0..N).map(|i| 0.5 * i as f32).collect(),
        (0..N).map(|i| -(i as f32)).collect(),
        (0..N).map(|i| 0.25 * i as f32).collect(),
        (0..N).map(|i| (i % 7) as f32).collect(),
    );
    let mut cloud = PointCloud::from_columns(x, y, z, intensity).unwrap();
    cloud
        .add_channel("ring", ChannelData::U16((0..N).map(|i| (i % 64) as u16).collect()))
        .unwrap();
    let ours = dir.path().join("ours.npy");
    write_npy(&ours, &cloud, &["x", "y", "z", "intensity", "ring"]).unwrap();
    let out = python(&["check", ours.to_str().unwrap(), &N.to_string()]);
    assert!(out.starts_with("ok "), "{out}");
}
