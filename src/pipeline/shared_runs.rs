//! A frame's detector runs, shared with idle workers. Each worker of the per-frame pass runs its
//! own frame's detectors one after the other; at the end of the pass fewer frames are left than
//! workers, and a worker with no frame to take runs detectors of a frame another worker is on,
//! so that the last frames finish on every thread instead of one. The boxes are those of the
//! owner alone: each detector runs once on the same points, and the owner puts the results in
//! detector order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::sequence::{DetectorRun, SequenceDetector, detect_one};
use crate::cloud::PointCloud;
use crate::normalize::Normalization;

/// The frames whose detector runs may be shared, and how many frames are being worked on.
#[derive(Default)]
pub(super) struct Board<'j> {
    frames: Mutex<Vec<Arc<FrameRuns<'j>>>>,
    in_flight: AtomicUsize,
}

/// One frame's detector runs: its points, which detector is next, and the results so far.
pub(super) struct FrameRuns<'j> {
    detectors: &'j [SequenceDetector<'j>],
    cloud: PointCloud,
    moved: Option<(Normalization, PointCloud)>,
    next: AtomicUsize,
    results: Mutex<Vec<Option<DetectorRun>>>,
    finished: Mutex<usize>,
    all_finished: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts a claimed run as finished however it ends, so that the owner never waits for a run a
/// panic cut short (its result stays empty, and the owner runs that detector itself).
struct Claim<'a, 'j> {
    runs: &'a FrameRuns<'j>,
}

impl Drop for Claim<'_, '_> {
    fn drop(&mut self) {
        *lock(&self.runs.finished) += 1;
        self.runs.all_finished.notify_all();
    }
}

/// A frame a worker is on (see [`Board::take_frame`]).
pub(super) struct TakenFrame<'b, 'j> {
    board: &'b Board<'j>,
}

impl Drop for TakenFrame<'_, '_> {
    fn drop(&mut self) {
        self.board.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<'j> Board<'j> {
    /// A worker took a frame: it counts as in flight until the guard is dropped, however the
    /// frame ends (a panic included), so that helpers never wait for a frame nobody is on.
    pub(super) fn take_frame(&self) -> TakenFrame<'_, 'j> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        TakenFrame { board: self }
    }

    /// Whether some worker is still on a frame.
    pub(super) fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    /// Runs unclaimed detectors of some frame in flight; false when there was none.
    pub(super) fn help(&self) -> bool {
        let runs = lock(&self.frames).iter().find(|r| r.has_unclaimed()).cloned();
        match runs {
            Some(runs) => {
                runs.work();
                true
            }
            None => false,
        }
    }

    /// Runs `detectors` on a frame's points, sharing the runs with idle workers; gives the
    /// points back with every detector's result, in detector order.
    pub(super) fn run(
        &self,
        detectors: &'j [SequenceDetector<'j>],
        cloud: PointCloud,
        moved: Option<(Normalization, PointCloud)>,
    ) -> (PointCloud, Vec<DetectorRun>) {
        let runs = self.share(detectors, cloud, moved);
        self.finish(runs)
    }

    /// Puts a frame's detector runs on the board.
    fn share(
        &self,
        detectors: &'j [SequenceDetector<'j>],
        cloud: PointCloud,
        moved: Option<(Normalization, PointCloud)>,
    ) -> Arc<FrameRuns<'j>> {
        let runs = Arc::new(FrameRuns {
            detectors,
            cloud,
            moved,
            next: AtomicUsize::new(0),
            results: Mutex::new((0..detectors.len()).map(|_| None).collect()),
            finished: Mutex::new(0),
            all_finished: Condvar::new(),
        });
        lock(&self.frames).push(runs.clone());
        runs
    }

    /// Runs the frame's unclaimed detectors, waits for the others' runs, and takes the frame
    /// off the board.
    fn finish(&self, runs: Arc<FrameRuns<'j>>) -> (PointCloud, Vec<DetectorRun>) {
        runs.work();
        runs.wait();
        lock(&self.frames).retain(|r| !Arc::ptr_eq(r, &runs));
        // A helper lets go of the frame just after counting its run finished.
        let mut runs = runs;
        let runs = loop {
            match Arc::try_unwrap(runs) {
                Ok(runs) => break runs,
                Err(shared) => {
                    runs = shared;
                    std::thread::yield_now();
                }
            }
        };
        let FrameRuns {
            detectors,
            cloud,
            moved,
            results,
            ..
        } = runs;
        let results = results
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .into_iter()
            .zip(detectors)
            .map(|(result, d)| result.unwrap_or_else(|| detect_one(d, &cloud, moved.as_ref().map(|(n, c)| (n, c)))))
            .collect();
        (cloud, results)
    }
}

impl FrameRuns<'_> {
    fn has_unclaimed(&self) -> bool {
        self.next.load(Ordering::Acquire) < self.detectors.len()
    }

    /// Runs detectors nobody has claimed yet, until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            let Some(d) = self.detectors.get(i) else {
                return;
            };
            let _claim = Claim { runs: self };
            let result = detect_one(d, &self.cloud, self.moved.as_ref().map(|(n, c)| (n, c)));
            if let Some(slot) = lock(&self.results).get_mut(i) {
                *slot = Some(result);
            }
        }
    }

    /// Waits until every detector's run has finished.
    fn wait(&self) {
        let mut finished = lock(&self.finished);
        while *finished < self.detectors.len() {
            finished = self
                .all_finished
                .wait_timeout(finished, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::detect::Detector;
    use crate::frame::{DetectorFrame, Platform};
    use crate::sim::{SimConfig, Simulator};

    /// A simulated vehicle sweep (intensity 0.5).
    fn sweep() -> PointCloud {
        let sim = Simulator::new(SimConfig::default(), Platform::Vehicle, 11).unwrap();
        let points = sim.sweep_points(&sim.sweep(0).unwrap());
        let column = |k: usize| points.iter().map(|p| p.position[k] as f32).collect::<Vec<f32>>();
        PointCloud::from_columns(column(0), column(1), column(2), vec![0.5; points.len()]).unwrap()
    }

    #[test]
    fn runs_a_helper_took_over_come_back_to_the_owner_in_detector_order() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let loaded: Vec<Detector> = ["centerpoint_pillar_sim", "pointpillars_anchor_sim"]
            .iter()
            .map(|name| Detector::load(&repo.join("detectors").join(name)).unwrap())
            .collect();
        let detectors: Vec<SequenceDetector> = [0, 1, 0]
            .iter()
            .map(|&k| SequenceDetector {
                detector: &loaded[k],
                frame: DetectorFrame::Sensor,
                ground_z_m: None,
            })
            .collect();
        let cloud = sweep();
        let alone: Vec<(Vec<_>, _, _)> = detectors.iter().map(|d| detect_one(d, &cloud, None).unwrap()).collect();
        assert!(alone.iter().all(|(boxes, _, _)| !boxes.is_empty()));

        let board = Board::default();
        let taken = board.take_frame();
        let runs = board.share(&detectors, cloud.clone(), None);
        // An idle worker takes every run before the owner gets to its frame.
        std::thread::scope(|s| {
            s.spawn(|| assert!(board.help())).join().unwrap();
        });
        assert!(!board.help(), "nothing is left to take");
        let (back, results) = board.finish(runs);
        assert!(board.busy());
        drop(taken);
        assert!(!board.busy());
        assert_eq!(back, cloud, "the owner gets its points back");
        assert_eq!(results.len(), 3);
        for ((boxes, _, _), result) in alone.iter().zip(results) {
            assert_eq!(&result.unwrap().0, boxes);
        }
        assert!(lock(&board.frames).is_empty(), "the frame leaves the board");
    }
}
