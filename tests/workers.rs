//! Many workers, crash safety and `merge` (issue 22), through the `boxlayer` binary on a
//! six-sequence simulated manifest (two sequences per platform, a few sweeps each):
//! three workers with one killed by SIGKILL and resumed give the single worker's shards byte for
//! byte; SIGKILL at ten seeded moments never leaves `_SUCCESS` beside an incomplete folder and
//! resuming converges to the same shards; SIGTERM stops cleanly with 143; two workers given the
//! same index share the work through the sequence locks; `merge` reports what is missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use boxlayer::Platform;
use boxlayer::demo::simulate_log;
use boxlayer::pipeline::SequenceLock;
use boxlayer::shards::{SUCCESS_FILE, is_temporary_name, sequence_dirs};
use rand::{RngExt, SeedableRng};

const FRAMES: usize = 3;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Six short simulated logs, their data manifest and a config naming it.
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    config: PathBuf,
    /// (platform, sequence) in manifest order.
    sequences: Vec<(String, String)>,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let logs = root.join("logs");
    let mut csv = String::from("name,dataset_name,source_kind,path,platform,split\n");
    let mut sequences = Vec::new();
    for (platform, seed) in [
        (Platform::Vehicle, 61),
        (Platform::Drone, 62),
        (Platform::Quadruped, 63),
        (Platform::Vehicle, 64),
        (Platform::Drone, 65),
        (Platform::Quadruped, 66),
    ] {
        let log = simulate_log(platform, FRAMES, seed, &logs.join(platform.as_str())).unwrap();
        let name = match platform {
            Platform::Vehicle => format!("sim_seed{seed}"),
            Platform::Drone => format!("falcon_sim_seed{seed}"),
            _ => format!("spot_sim_seed{seed}"),
        };
        let kind = if platform == Platform::Vehicle {
            "waymo-v1"
        } else {
            "m3ed"
        };
        let rel = log.path.strip_prefix(&logs).unwrap().display().to_string();
        csv.push_str(&format!("{name},{name},{kind},{rel},{},val\n", platform.as_str()));
        sequences.push((platform.as_str().to_string(), name));
    }
    std::fs::write(root.join("manifest.csv"), csv).unwrap();
    let config = root.join("run.toml");
    std::fs::write(
        &config,
        format!(
            "extends = \"{}\"\n[source]\ndata_manifest = \"manifest.csv\"\n",
            repo("pipelines/demo.toml").display()
        ),
    )
    .unwrap();
    Fixture {
        _tmp: tmp,
        root,
        config,
        sequences,
    }
}

impl Fixture {
    fn run(&self, out: &Path, extra: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_boxlayer"));
        c.arg("run")
            .arg(&self.config)
            .arg("--data-root")
            .arg(self.root.join("logs"))
            .arg("--out")
            .arg(out)
            .args(extra)
            .env("BOXLAYER_LOG", "warn")
            .env_remove("SLURM_ARRAY_TASK_ID")
            .env_remove("JOB_COMPLETION_INDEX")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn merge(&self, out: &Path) -> Output {
        self.merge_with(out, &self.config)
    }

    fn merge_with(&self, out: &Path, config: &Path) -> Output {
        Command::new(env!("CARGO_BIN_EXE_boxlayer"))
            .arg("merge")
            .arg(out)
            .arg("--config")
            .arg(config)
            .arg("--data-root")
            .arg(self.root.join("logs"))
            .output()
            .unwrap()
    }
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn finish(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

/// Every file under `dir` by relative path; `manifest.json` without its clock and stage times.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                stack.push(path);
            } else if rel.ends_with("manifest.json") {
                let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                m["stage_times"] = serde_json::Value::Null;
                m["finished_unix_s"] = serde_json::Value::Null;
                out.insert(rel, serde_json::to_vec(&m).unwrap());
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The sequence folders of a run's output, as (platform/sequence → files).
fn shards(out: &Path) -> BTreeMap<String, BTreeMap<String, Vec<u8>>> {
    sequence_dirs(out)
        .into_iter()
        .map(|d| (d.strip_prefix(out).unwrap().display().to_string(), files(&d)))
        .collect()
}

/// No folder under a sequence's own name is incomplete: each holds `_SUCCESS` and exactly the
/// reference's files.
fn nothing_incomplete_looks_complete(out: &Path, reference: &BTreeMap<String, BTreeMap<String, Vec<u8>>>, when: &str) {
    let Ok(platforms) = std::fs::read_dir(out) else { return };
    for p in platforms {
        let p = p.unwrap().path();
        if !p.is_dir() || p.file_name().unwrap().to_string_lossy().starts_with('.') {
            continue;
        }
        for s in std::fs::read_dir(&p).unwrap() {
            let s = s.unwrap().path();
            let name = s.file_name().unwrap().to_string_lossy().into_owned();
            if !s.is_dir() || is_temporary_name(&name) {
                continue;
            }
            let rel = s.strip_prefix(out).unwrap().display().to_string();
            assert!(s.join(SUCCESS_FILE).is_file(), "{when}: {rel} has no _SUCCESS");
            assert!(
                files(&s) == reference[&rel],
                "{when}: {rel} has _SUCCESS but differs from the finished sequence"
            );
        }
    }
}

fn all_finished(f: &Fixture, out: &Path) -> Vec<String> {
    f.sequences
        .iter()
        .map(|(p, s)| format!("{p}/{s}"))
        .filter(|rel| out.join(rel).join(SUCCESS_FILE).is_file())
        .collect()
}

fn reference(f: &Fixture) -> (BTreeMap<String, BTreeMap<String, Vec<u8>>>, Duration) {
    let out = f.root.join("reference");
    let started = Instant::now();
    let o = f.run(&out, &["--threads", "2"]).output().unwrap();
    let took = started.elapsed();
    assert!(o.status.success(), "{}", text(&o));
    let shards = shards(&out);
    assert_eq!(shards.len(), 6, "{}", text(&o));
    let m = f.merge(&out);
    assert!(m.status.success(), "{}", text(&m));
    (shards, took)
}

#[test]
fn three_workers_one_killed_and_resumed_equal_one_worker_byte_for_byte() {
    let f = fixture();
    let (reference, _) = reference(&f);
    let out = f.root.join("three");
    let spawn = |i: usize| {
        f.run(
            &out,
            &[
                "--worker",
                &i.to_string(),
                "--workers",
                "3",
                "--resume",
                "--threads",
                "1",
            ],
        )
        .spawn()
        .unwrap()
    };
    let mut workers: Vec<Child> = (0..3).map(spawn).collect();
    // Worker 1 (sequences 1 and 4) is killed once its first sequence is being written.
    let staging = out
        .join(&f.sequences[1].0)
        .join(format!("{}.partial", f.sequences[1].1));
    let deadline = Instant::now() + Duration::from_secs(120);
    while !staging.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    workers[1].kill().unwrap();
    let killed = finish(workers.remove(1));
    assert!(
        !killed.status.success(),
        "worker 1 finished before the kill: {}",
        text(&killed)
    );
    for w in workers {
        let o = finish(w);
        assert!(o.status.success(), "{}", text(&o));
    }
    // The killed worker's share is missing, and merge says so with the command that redoes it.
    let m = f.merge(&out);
    assert_eq!(m.status.code(), Some(1), "{}", text(&m));
    assert!(
        text(&m).contains(&format!("--resume --sequences {}", f.sequences[1].1)),
        "{}",
        text(&m)
    );
    let o = f
        .run(&out, &["--worker", "1", "--workers", "3", "--resume", "--threads", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let m = f.merge(&out);
    assert!(m.status.success() && text(&m).contains("complete"), "{}", text(&m));
    let dataset: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("dataset.json")).unwrap()).unwrap();
    assert_eq!(dataset["complete"], true);
    assert_eq!(dataset["status_counts"]["complete"], 6);
    assert!(shards(&out) == reference, "three workers differ from one");
    // Resuming a finished run does nothing.
    let o = f.run(&out, &["--resume"]).output().unwrap();
    assert!(
        o.status.success() && text(&o).contains("0 sequences finished, 6 skipped"),
        "{}",
        text(&o)
    );
}

#[test]
fn sigkill_at_ten_seeded_moments_never_leaves_an_incomplete_folder_looking_complete() {
    let f = fixture();
    let (reference, took) = reference(&f);
    let out = f.root.join("killed");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(22);
    let mut kills = 0;
    for attempt in 0..10 {
        let mut child = f.run(&out, &["--resume"]).spawn().unwrap();
        // Within the first sixth of a whole run (about one sequence), so that ten resumed runs
        // are all still working when killed: at start-up, inside a pass, between sequences.
        let at = Duration::from_secs_f64(rng.random_range(0.0..1.0) * took.as_secs_f64() / 6.0);
        std::thread::sleep(at);
        if child.try_wait().unwrap().is_none() {
            kills += 1;
        }
        child.kill().unwrap();
        let _ = finish(child);
        nothing_incomplete_looks_complete(&out, &reference, &format!("kill {attempt} at {at:?}"));
    }
    assert!(kills >= 8, "only {kills} of the 10 kills hit a running process");
    let o = f.run(&out, &["--resume"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(shards(&out) == reference, "the resumed run differs from a clean one");
    assert_eq!(all_finished(&f, &out).len(), 6);
    // No temporary folder is left once a run finished.
    for (p, _) in &f.sequences {
        for e in std::fs::read_dir(out.join(p)).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!is_temporary_name(&name), "{p}/{name} left behind");
        }
    }
}

#[test]
fn sigterm_stops_cleanly_and_two_workers_with_one_index_share_through_the_locks() {
    let f = fixture();
    let (reference, _) = reference(&f);

    // SIGTERM while the second sequence is written: exit 143, its folder removed, the first kept.
    let out = f.root.join("term");
    let child = f.run(&out, &[]).spawn().unwrap();
    let staging = out
        .join(&f.sequences[1].0)
        .join(format!("{}.partial", f.sequences[1].1));
    let deadline = Instant::now() + Duration::from_secs(120);
    while !staging.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: kill(2) on the child's pid with a valid signal number has no memory effects.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let started = Instant::now();
    let o = finish(child);
    assert_eq!(o.status.code(), Some(143), "{}", text(&o));
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(text(&o).contains("STOPPED by signal 15"), "{}", text(&o));
    assert!(!staging.exists(), "the interrupted sequence's folder is removed");
    assert_eq!(
        all_finished(&f, &out),
        [format!("{}/{}", f.sequences[0].0, f.sequences[0].1)]
    );
    nothing_incomplete_looks_complete(&out, &reference, "after SIGTERM");

    // A sequence locked by someone else is skipped and named; the others are written.
    let out = f.root.join("locked");
    let (platform, name) = &f.sequences[2];
    let lock = SequenceLock::try_acquire(&out, platform, name).unwrap().unwrap();
    let o = f.run(&out, &[]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!(
            "skipped {platform}/{name}: locked by pid {}",
            std::process::id()
        )),
        "{}",
        text(&o)
    );
    assert_eq!(all_finished(&f, &out).len(), 5);
    drop(lock);

    // Two workers given the same index: together they finish each sequence once, byte for byte.
    let out = f.root.join("twins");
    let twins: Vec<Child> = (0..2)
        .map(|_| {
            f.run(&out, &["--worker", "0", "--workers", "1", "--resume", "--threads", "1"])
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = twins.into_iter().map(finish).collect();
    for o in &outputs {
        assert!(o.status.success(), "{}", text(o));
    }
    assert!(shards(&out) == reference, "two workers on one index corrupted a folder");
    let m = f.merge(&out);
    assert!(m.status.success(), "{}", text(&m));
}

#[test]
fn resume_refuses_a_folder_of_another_config_before_any_work_unless_forced() {
    let f = fixture();
    let out = f.root.join("out");
    let first = ["--sequences", &f.sequences[0].1];
    let o = f.run(&out, &first).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let dir = out.join(&f.sequences[0].0).join(&f.sequences[0].1);
    let before = files(&dir);
    // Another config: the same with one review setting changed.
    let other = f.root.join("other.toml");
    std::fs::write(
        &other,
        format!("extends = \"{}\"\n[review]\nmin_points = 7\n", f.config.display()),
    )
    .unwrap();
    let run_other = |force: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_boxlayer"));
        c.arg("run")
            .arg(&other)
            .arg("--data-root")
            .arg(f.root.join("logs"))
            .arg("--out")
            .arg(&out)
            .args(["--resume", "--sequences", &f.sequences[0].1]);
        if force {
            c.arg("--force");
        }
        c.env("BOXLAYER_LOG", "warn").output().unwrap()
    };
    let o = run_other(false);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("finished by another config") && text(&o).contains("--force"),
        "{}",
        text(&o)
    );
    assert!(files(&dir) == before, "the refused run touched the folder");
    let o = run_other(true);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        files(&dir) != before,
        "--force redid the sequence with the other config"
    );
    // merge with the first config sees a sequence made by another config, and the rest missing.
    let m = f.merge(&out);
    assert_eq!(m.status.code(), Some(1), "{}", text(&m));
    assert!(
        text(&m).contains("other_config") && text(&m).contains("--resume --force"),
        "{}",
        text(&m)
    );
}

#[test]
fn a_failing_sequence_is_recorded_the_others_finish_and_merge_names_the_redo() {
    let f = fixture();
    // The third sequence's log is damaged in its middle record; the config fails a sequence on
    // a corrupt record.
    let csv = std::fs::read_to_string(f.root.join("manifest.csv")).unwrap();
    let rel = csv.lines().nth(4).unwrap().split(',').nth(3).unwrap().to_string();
    let log = f.root.join("logs").join(&rel);
    assert!(log.is_file(), "{}", log.display());
    let mut bytes = std::fs::read(&log).unwrap();
    let n = bytes.len();
    for b in &mut bytes[n / 2..n / 2 + 4096] {
        *b ^= 0x5a;
    }
    std::fs::write(&log, &bytes).unwrap();
    let strict = f.root.join("strict.toml");
    std::fs::write(
        &strict,
        format!(
            "extends = \"{}\"\n[source]\non_corrupt = \"fail\"\n",
            f.config.display()
        ),
    )
    .unwrap();
    let out = f.root.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .arg("run")
        .arg(&strict)
        .arg("--data-root")
        .arg(f.root.join("logs"))
        .arg("--out")
        .arg(&out)
        .env("BOXLAYER_LOG", "warn")
        .output()
        .unwrap();
    let (platform, name) = &f.sequences[3];
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains(&format!("FAILED  {platform}/{name}")), "{}", text(&o));
    assert!(text(&o).contains("1 of 6 sequences failed"), "{}", text(&o));
    assert_eq!(all_finished(&f, &out).len(), 5, "the other sequences finish");
    let record = out.join(platform).join(format!("{name}.failed.json"));
    let failure: serde_json::Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert!(failure["error"].to_string().contains(&rel), "{failure}");
    assert!(!out.join(platform).join(format!("{name}.partial")).exists());
    let m = f.merge_with(&out, &strict);
    assert_eq!(m.status.code(), Some(1), "{}", text(&m));
    assert!(
        text(&m).contains(&format!("failed       {platform}/{name}"))
            && text(&m).contains(&format!("--resume --sequences {name}")),
        "{}",
        text(&m)
    );
}

/// `tools/cluster/slurm_array.sh` run by hand as the two tasks of a two-task array finishes the
/// manifest, and its shards are the single worker's.
#[test]
fn the_slurm_array_script_runs_locally_as_each_task_of_the_array() {
    let f = fixture();
    let (reference, _) = reference(&f);
    let out = f.root.join("slurm");
    for task in ["0", "1"] {
        let o = Command::new("bash")
            .arg(repo("tools/cluster/slurm_array.sh"))
            .env("BOXLAYER", env!("CARGO_BIN_EXE_boxlayer"))
            .env("CONFIG", &f.config)
            .env("DATA_ROOT", f.root.join("logs"))
            .env("OUT", &out)
            .env("SLURM_ARRAY_TASK_ID", task)
            .env("SLURM_ARRAY_TASK_COUNT", "2")
            .env("SLURM_CPUS_PER_TASK", "1")
            .env("BOXLAYER_LOG", "warn")
            .env_remove("JOB_COMPLETION_INDEX")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            text(&o).contains(&format!("worker {task} of 2: 3 sequences finished")),
            "{}",
            text(&o)
        );
    }
    let m = f.merge(&out);
    assert!(m.status.success(), "{}", text(&m));
    assert!(shards(&out) == reference, "the array's shards differ from one worker's");
}
