//! Damaged M3ED files end in a clear `SourceError` (or a noted degrade), never a crash, a hang or
//! a runaway allocation (issue 18, "HDF5", "Non-finite and degenerate data", "One bad item sinks
//! everything", "Partial output"). Each case writes a small simulated sequence with the simulator
//! writer and then damages a copy: a dataspace declaring billions of rows, int16 packet bytes, a
//! damaged global heap under `/ouster/metadata`, an all-zero `lidar_to_sensor_transform`, NaN
//! pose rows, and damaged optional streams (pose file, RGB times, RGB calibration).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use boxlayer::frame::Platform;
use boxlayer::sim::{SimConfig, simulate_m3ed};
use boxlayer::sources::m3ed::{M3edConfig, M3edSource};
use boxlayer::sources::{OnCorrupt, Source, SourceError};
use hdf5::types::VarLenUnicode;

const SWEEPS: usize = 2;

/// One simulated drone sequence, written once per test binary under Cargo's test scratch
/// folder; each test damages a copy.
fn pristine() -> (&'static Path, &'static Path) {
    static FILES: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    let (data, pose) = FILES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("m3ed_hardening-{}", std::process::id()));
        let config = SimConfig {
            frames: SWEEPS,
            ..SimConfig::default()
        };
        let summary = simulate_m3ed(config, Platform::Drone, SWEEPS, 7, &dir).unwrap();
        (summary.data_path, summary.pose_path)
    });
    (data, pose)
}

/// Serialises the tests of this file: libhdf5 1.10 `flock`s every file it opens, and a child
/// process spawned by the mutant loop while another test holds a file open inherits that lock
/// and makes the test's next open fail with `EAGAIN`.
static HDF5_FILES: Mutex<()> = Mutex::new(());

fn serialised() -> MutexGuard<'static, ()> {
    HDF5_FILES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A copy of the sequence (data and pose file) in a fresh folder; returns (folder, data, pose).
fn copy() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (data, pose) = pristine();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join(data.file_name().unwrap());
    let p = dir.path().join(pose.file_name().unwrap());
    std::fs::copy(data, &d).unwrap();
    std::fs::copy(pose, &p).unwrap();
    (dir, d, p)
}

fn open(path: &Path) -> Result<M3edSource, SourceError> {
    M3edSource::open(path, M3edConfig::default())
}

fn open_fail(path: &Path) -> Result<M3edSource, SourceError> {
    M3edSource::open(
        path,
        M3edConfig {
            on_corrupt: OnCorrupt::Fail,
            ..M3edConfig::default()
        },
    )
}

fn corrupt_naming(result: Result<M3edSource, SourceError>, path: &Path, needles: &[&str]) {
    let e = match result {
        Ok(_) => panic!("{} opened but should not", path.display()),
        Err(e) => e,
    };
    let text = e.to_string();
    assert!(matches!(e, SourceError::Corrupt { .. }), "{text}");
    assert!(text.starts_with(&path.display().to_string()), "{text}");
    for needle in needles {
        assert!(text.contains(needle), "`{needle}` not in: {text}");
    }
}

/// Replaces dataset `name` by an empty chunked one of `rows` rows (declared, never written).
fn replace_with_huge<T: hdf5::H5Type>(path: &Path, name: &str, shape: &[usize]) {
    let file = hdf5::File::open_rw(path).unwrap();
    file.unlink(name).unwrap();
    let mut chunk = vec![1usize; shape.len()];
    chunk[0] = 1024;
    file.new_dataset::<T>().chunk(chunk).shape(shape).create(name).unwrap();
}

fn replace_string(path: &Path, name: &str, text: &str) {
    let file = hdf5::File::open_rw(path).unwrap();
    file.unlink(name).unwrap();
    file.new_dataset::<VarLenUnicode>()
        .shape(())
        .create(name)
        .unwrap()
        .write_scalar(&VarLenUnicode::from_str(text).unwrap())
        .unwrap();
}

#[test]
fn the_pristine_sequence_opens() {
    let _lock = serialised();
    let (_dir, data, _) = copy();
    let source = open(&data).unwrap();
    assert_eq!(source.len(), SWEEPS);
    assert!(source.has_poses());
    let frame = source.frame(0).unwrap();
    assert!(!frame.cloud.is_empty());
    assert_eq!(frame.cameras.len(), 1);
}

/// Issue 18: a dataspace of 2.85 G rows grew the process by 11 GB; 10¹⁰-byte reads aborted.
#[test]
fn a_dataspace_of_billions_of_rows_is_refused_before_reading() {
    let _lock = serialised();
    for name in ["ouster/ts_start", "ouster/ts_end", "ovc/imu/ts"] {
        let (_dir, data, _) = copy();
        replace_with_huge::<i64>(&data, name, &[2_850_000_000]);
        corrupt_naming(open_fail(&data), &data, &[&format!("dataset /{name}"), "declares"]);
    }
    // `/ouster/data` with a row count and a row size no file holds.
    let (_dir, data, _) = copy();
    replace_with_huge::<u8>(&data, "ouster/data", &[1 << 40, 64, 12_609]);
    corrupt_naming(open(&data), &data, &["dataset /ouster/data"]);
    // The pose file: its loss is noted and the LiDAR still reads (optional stream), or fails
    // under `fail`.
    let (_dir, data, pose) = copy();
    replace_with_huge::<f64>(&pose, "Ln_T_L0", &[1 << 33, 4, 4]);
    let source = open(&data).unwrap();
    assert!(!source.has_poses());
    corrupt_naming(open_fail(&data), &pose, &["dataset /Ln_T_L0"]);
}

/// Issue 18: int16 packet bytes were converted into empty sweeps without a word.
#[test]
fn int16_packet_data_is_refused() {
    let _lock = serialised();
    let (_dir, data, _) = copy();
    let shape = {
        let file = hdf5::File::open(&data).unwrap();
        file.dataset("ouster/data").unwrap().shape()
    };
    {
        let file = hdf5::File::open_rw(&data).unwrap();
        file.unlink("ouster/data").unwrap();
        file.new_dataset::<i16>().shape(shape).create("ouster/data").unwrap();
    }
    corrupt_naming(open(&data), &data, &["dataset /ouster/data", "uint8"]);
}

/// The metadata JSON as written, and where its heap object's bytes start in the file.
fn metadata_in_file(data: &Path) -> (Vec<u8>, usize, usize) {
    let bytes = std::fs::read(data).unwrap();
    let json = {
        let file = hdf5::File::open(data).unwrap();
        file.dataset("ouster/metadata")
            .unwrap()
            .read_scalar::<VarLenUnicode>()
            .unwrap()
            .as_str()
            .to_string()
    };
    let at = bytes
        .windows(json.len())
        .position(|w| w == json.as_bytes())
        .expect("metadata text in the file");
    (bytes, at, json.len())
}

/// Found by the M3ED fuzz target (`fuzz/campaign.sh`, 2026-12-02): one byte of the superblock
/// area (offset 135 ^ 0x59) makes libhdf5 ask malloc for 0x5900…0100 bytes. glibc refuses at once
/// and the open ends in a clear error naming the file, with nothing allocated.
#[test]
fn a_superblock_declaring_an_impossible_size_is_a_clear_error() {
    let _lock = serialised();
    let (dir, data, _pose) = copy();
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[135] ^= 0x59;
    std::fs::write(&data, &bytes).unwrap();
    let e = open(&data).err().expect("a damaged superblock opens");
    let text = e.to_string();
    assert!(
        text.contains(&data.display().to_string()) && text.contains("memory allocation failed"),
        "{text}"
    );
    drop(dir);
}

/// Issue 18: single-byte damage to the global heap under `/ouster/metadata` made libhdf5 1.10
/// segfault or loop forever in `H5HG_read`. The string is now read and bounds-checked here.
#[test]
fn a_damaged_metadata_heap_is_a_clear_error() {
    let _lock = serialised();
    let (_dir, data, _) = copy();
    let (pristine, at, len) = metadata_in_file(&data);
    // The heap object header sits 16 bytes before the text: index, refcount, reserved, size.
    let size_field = at - 8;
    let gcol = pristine[..at]
        .windows(4)
        .rposition(|w| w == b"GCOL")
        .expect("a global heap collection before the text");
    type Damage = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Damage)> = vec![
        ("past its collection", Box::new(move |b| b[size_field + 7] = 0x7f)),
        (
            "holds 1 bytes",
            Box::new(move |b| b[size_field..size_field + 8].copy_from_slice(&1u64.to_le_bytes())),
        ),
        ("no global heap collection", Box::new(move |b| b[gcol] ^= 0x20)),
        ("declares", Box::new(move |b| b[gcol + 15] = 0x40)),
        ("not found", Box::new(move |b| b[at - 16] ^= 0x03)),
        (
            "string length",
            Box::new(move |b| {
                // The dataset's 16-byte element: length, collection address, object index.
                let mut element = (len as u32).to_le_bytes().to_vec();
                element.extend_from_slice(&(gcol as u64).to_le_bytes());
                let k = b
                    .windows(12)
                    .position(|w| w == &element[..])
                    .expect("the string's heap id");
                b[k + 3] = 0x7f;
            }),
        ),
    ];
    for (expected, damage) in cases {
        let mut bytes = pristine.clone();
        damage(&mut bytes);
        std::fs::write(&data, &bytes).unwrap();
        corrupt_naming(open(&data), &data, &["dataset /ouster/metadata", expected]);
    }
}

/// Issue 18: an all-zero `lidar_to_sensor_transform` put every point at the origin.
#[test]
fn degenerate_metadata_transforms_are_refused_naming_the_field() {
    let _lock = serialised();
    let (_dir, data, _) = copy();
    let (bytes, at, len) = metadata_in_file(&data);
    let json = std::str::from_utf8(&bytes[at..at + len]).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(json).unwrap();
    value["lidar_to_sensor_transform"] = serde_json::json!(vec![0.0; 16]);
    replace_string(&data, "ouster/metadata", &value.to_string());
    corrupt_naming(
        open(&data),
        &data,
        &["dataset /ouster/metadata", "lidar_to_sensor_transform"],
    );
}

/// Issue 18: NaN or infinite pose rows became NaN world poses. The row is dropped with a note,
/// its sweep finds no pose and is reported; under `fail` the open fails naming the row.
#[test]
fn non_finite_pose_rows_never_become_world_poses() {
    let _lock = serialised();
    let (_dir, data, pose) = copy();
    {
        let file = hdf5::File::open_rw(&pose).unwrap();
        let ds = file.dataset("Ln_T_L0").unwrap();
        let mut values = ds.read_raw::<f64>().unwrap();
        values[3] = f64::NAN;
        values[16 + 7] = f64::INFINITY;
        let n = values.len() / 16;
        ds.write(&ndarray::Array3::from_shape_vec((n, 4, 4), values).unwrap())
            .unwrap();
    }
    let source = open(&data).unwrap();
    for entry in source.sweeps() {
        let m = entry.world_from_sensor.to_homogeneous();
        assert!(m.iter().all(|v| v.is_finite()), "sweep {}: {m}", entry.row);
    }
    assert_eq!(source.len() + source.meta().skipped.len(), SWEEPS);
    assert!(!source.meta().skipped.is_empty());
    corrupt_naming(open_fail(&data), &pose, &["dataset /Ln_T_L0 row 0", "not a rigid"]);
}

/// Issue 18: a damaged optional stream (pose file, RGB times, RGB calibration) refused the whole
/// LiDAR log. It is now dropped with a note under `skip` (the default) and fails under `fail`.
#[test]
fn damaged_optional_streams_degrade_instead_of_blocking_the_lidar() {
    let _lock = serialised();
    // A pose file cut in half.
    let (_dir, data, pose) = copy();
    let bytes = std::fs::read(&pose).unwrap();
    std::fs::write(&pose, &bytes[..bytes.len() / 2]).unwrap();
    let source = open(&data).unwrap();
    assert!(!source.has_poses());
    assert_eq!(source.len(), SWEEPS);
    assert!(!source.frame(0).unwrap().cloud.is_empty());
    assert!(open_fail(&data).is_err());

    // RGB times of the wrong length, then RGB intrinsics of the wrong size.
    for (name, values) in [
        ("ovc/ts", vec![1.0, 2.0]),
        ("ovc/rgb/calib/intrinsics", vec![1.0, 2.0, 3.0]),
    ] {
        let (_dir, data, _) = copy();
        {
            let file = hdf5::File::open_rw(&data).unwrap();
            file.unlink(name).unwrap();
            file.new_dataset_builder()
                .with_data(&ndarray::Array1::from(values))
                .create(name)
                .unwrap();
        }
        let source = open(&data).unwrap();
        assert!(source.has_poses(), "{name}");
        let frame = source.frame(0).unwrap();
        assert!(frame.cameras.is_empty(), "{name}");
        assert!(!frame.cloud.is_empty(), "{name}");
        corrupt_naming(open_fail(&data), &data, &[&format!("/{name}")]);
    }
}

/// Child side of [`single_byte_mutants_never_kill_the_reader`]: opens the file named by
/// `BOXLAYER_MUTANT` and decodes every frame; does nothing when the variable is unset.
#[test]
fn mutant_child() {
    let Some(path) = std::env::var_os("BOXLAYER_MUTANT") else {
        return;
    };
    if let Ok(source) = open(Path::new(&path)) {
        for i in 0..source.len() {
            let _ = source.frame(i);
        }
        let _ = source.summary();
    }
}

/// Issue 18: single-byte mutants of a simulated file crashed (SIGSEGV, aborts) or hung inside
/// libhdf5. Each of a seeded set of mutants (half in the first 64 kB, where the superblock,
/// object headers and the metadata heap live) is read in a child process, which must exit by
/// itself, not by a signal, within its time limit.
#[test]
fn single_byte_mutants_never_kill_the_reader() {
    use std::os::unix::process::ExitStatusExt;
    // `BOXLAYER_MUTANTS=N` runs a longer campaign (the default of 60 takes ≈ 5 s).
    let mutants: usize = std::env::var("BOXLAYER_MUTANTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(60);
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(20);
    let _lock = serialised();
    let (data, pose) = pristine();
    let pristine = std::fs::read(data).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mutant = dir.path().join(data.file_name().unwrap());
    // The pose file beside it, so the pose path is exercised too.
    std::fs::copy(pose, dir.path().join(pose.file_name().unwrap())).unwrap();
    let exe = std::env::current_exe().unwrap();
    // `BOXLAYER_MUTANT_SEED=S` picks another seeded set.
    let mut state = std::env::var("BOXLAYER_MUTANT_SEED")
        .ok()
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0x2545_f491_4f6c_dd1d, |s| s | 1);
    let mut next = move || {
        // xorshift64*: seeded, so every run tries the same mutants.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut failures = Vec::new();
    for k in 0..mutants {
        let span = if k % 2 == 0 {
            pristine.len().min(64 << 10)
        } else {
            pristine.len()
        };
        let at = (next() % span as u64) as usize;
        let byte = (next() % 255 + 1) as u8;
        let mut bytes = pristine.clone();
        bytes[at] ^= byte;
        std::fs::write(&mutant, &bytes).unwrap();
        let mut child = std::process::Command::new(&exe)
            .args(["--exact", "mutant_child", "--test-threads=1", "-q"])
            .env("BOXLAYER_MUTANT", &mutant)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() > LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        match status {
            None => failures.push(format!("byte {at} ^ {byte:#04x}: hung (> {LIMIT:?})")),
            Some(s) if s.signal().is_some() => {
                failures.push(format!("byte {at} ^ {byte:#04x}: killed by signal {:?}", s.signal()))
            }
            Some(s) if !s.success() => failures.push(format!("byte {at} ^ {byte:#04x}: child test failed ({s})")),
            Some(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {mutants} mutants:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
