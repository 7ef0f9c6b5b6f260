//! Sharing a data manifest's sequences between workers: worker `i` of `n` takes the sequences at
//! positions `k` with `k mod n = i` (positions in data-manifest order, after `--sequences`), so
//! the split is the same on every machine and needs no coordinator. The index and count come from
//! `--worker/--workers`, or from the environment a cluster's job array gives each task
//! (`docs/cluster.md`).

use std::fmt;

use super::PipelineError;

/// One worker's share of the sequences: index `index` of `count` workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerShare {
    /// This worker's index, `0..count`.
    pub index: usize,
    /// How many workers share the manifest.
    pub count: usize,
}

impl fmt::Display for WorkerShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "worker {} of {}", self.index, self.count)
    }
}

impl WorkerShare {
    /// Checks `index < count` and `count ≥ 1`; `what` names where the numbers came from.
    pub fn new(index: usize, count: usize, what: &str) -> Result<Self, PipelineError> {
        if count == 0 {
            return Err(PipelineError::Config(format!("{what}: the worker count is 0")));
        }
        if index >= count {
            return Err(PipelineError::Config(format!(
                "{what}: worker index {index} is not below the worker count {count} (indices start at 0)"
            )));
        }
        Ok(Self { index, count })
    }

    /// Whether the sequence at `position` of the manifest is this worker's.
    pub fn owns(&self, position: usize) -> bool {
        position % self.count == self.index
    }

    /// The share from `--worker/--workers` when given, else from the environment (`env` looks a
    /// variable up): Slurm job arrays (`SLURM_ARRAY_TASK_ID` with `SLURM_ARRAY_TASK_COUNT`, or
    /// with `SLURM_ARRAY_TASK_MIN`/`MAX`), then Kubernetes Indexed Jobs (`JOB_COMPLETION_INDEX`
    /// with `BOXLAYER_WORKERS` or `--workers`). `None`: one worker takes every sequence.
    pub fn resolve(
        worker: Option<usize>,
        workers: Option<usize>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, PipelineError> {
        let number = |name: &str| -> Result<Option<usize>, PipelineError> {
            match env(name) {
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => v.trim().parse::<usize>().map(Some).map_err(|_| {
                    PipelineError::Config(format!("environment variable {name}: `{v}` is not a whole number ≥ 0"))
                }),
            }
        };
        if let Some(index) = worker {
            let Some(count) = workers else {
                return Err(PipelineError::Config("--worker needs --workers".into()));
            };
            return Self::new(index, count, "--worker/--workers").map(Some);
        }
        if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            if let Some(count) = workers {
                return Self::new(id, count, "SLURM_ARRAY_TASK_ID with --workers").map(Some);
            }
            if let Some(count) = number("SLURM_ARRAY_TASK_COUNT")? {
                // Slurm's count is the number of tasks; their ids may start above 0.
                let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
                let index = id.checked_sub(min).ok_or_else(|| {
                    PipelineError::Config(format!("SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}"))
                })?;
                return Self::new(index, count, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT").map(Some);
            }
            if let (Some(min), Some(max)) = (number("SLURM_ARRAY_TASK_MIN")?, number("SLURM_ARRAY_TASK_MAX")?) {
                if id < min || id > max || max < min {
                    return Err(PipelineError::Config(format!(
                        "SLURM_ARRAY_TASK_ID {id} is outside SLURM_ARRAY_TASK_MIN..=MAX {min}..={max}"
                    )));
                }
                return Self::new(id - min, max - min + 1, "SLURM_ARRAY_TASK_ID/MIN/MAX").map(Some);
            }
            return Err(PipelineError::Config(format!(
                "SLURM_ARRAY_TASK_ID is {id} but neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MIN/MAX is set; pass --workers"
            )));
        }
        if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            let count = match workers {
                Some(count) => count,
                None => number("BOXLAYER_WORKERS")?.ok_or_else(|| {
                    PipelineError::Config(format!(
                        "JOB_COMPLETION_INDEX is {index} but the worker count is unknown: set BOXLAYER_WORKERS to the Job's completions, or pass --workers"
                    ))
                })?,
            };
            return Self::new(index, count, "JOB_COMPLETION_INDEX/BOXLAYER_WORKERS").map(Some);
        }
        match workers {
            Some(_) => Err(PipelineError::Config(
                "--workers needs --worker (or a job array's index in the environment)".into(),
            )),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn every_position_belongs_to_exactly_one_worker_round_robin() {
        let shares: Vec<WorkerShare> = (0..3).map(|i| WorkerShare::new(i, 3, "t").unwrap()).collect();
        for position in 0..10 {
            let owners: Vec<usize> = shares.iter().filter(|s| s.owns(position)).map(|s| s.index).collect();
            assert_eq!(owners, vec![position % 3]);
        }
        // 6 sequences over 4 workers: 2, 2, 1, 1.
        let counts: Vec<usize> = (0..4)
            .map(|i| (0..6).filter(|&p| WorkerShare::new(i, 4, "t").unwrap().owns(p)).count())
            .collect();
        assert_eq!(counts, [2, 2, 1, 1]);
    }

    #[test]
    fn flags_win_over_the_environment() {
        let vars = [("SLURM_ARRAY_TASK_ID", "5"), ("SLURM_ARRAY_TASK_COUNT", "8")];
        let s = WorkerShare::resolve(Some(1), Some(2), env(&vars)).unwrap().unwrap();
        assert_eq!((s.index, s.count), (1, 2));
    }

    #[test]
    fn slurm_arrays_give_index_and_count_also_when_ids_start_above_zero() {
        let s = WorkerShare::resolve(
            None,
            None,
            env(&[("SLURM_ARRAY_TASK_ID", "2"), ("SLURM_ARRAY_TASK_COUNT", "4")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!((s.index, s.count), (2, 4));
        // --array=10-13: ids 10..=13, count 4.
        let vars = [
            ("SLURM_ARRAY_TASK_ID", "12"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
            ("SLURM_ARRAY_TASK_MIN", "10"),
            ("SLURM_ARRAY_TASK_MAX", "13"),
        ];
        let s = WorkerShare::resolve(None, None, env(&vars)).unwrap().unwrap();
        assert_eq!((s.index, s.count), (2, 4));
        let vars = [
            ("SLURM_ARRAY_TASK_ID", "13"),
            ("SLURM_ARRAY_TASK_MIN", "10"),
            ("SLURM_ARRAY_TASK_MAX", "13"),
        ];
        let s = WorkerShare::resolve(None, None, env(&vars)).unwrap().unwrap();
        assert_eq!((s.index, s.count), (3, 4));
    }

    #[test]
    fn kubernetes_indexed_jobs_need_the_count_from_boxlayer_workers_or_the_flag() {
        let s = WorkerShare::resolve(
            None,
            None,
            env(&[("JOB_COMPLETION_INDEX", "3"), ("BOXLAYER_WORKERS", "12")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!((s.index, s.count), (3, 12));
        let s = WorkerShare::resolve(None, Some(5), env(&[("JOB_COMPLETION_INDEX", "4")]))
            .unwrap()
            .unwrap();
        assert_eq!((s.index, s.count), (4, 5));
        let e = WorkerShare::resolve(None, None, env(&[("JOB_COMPLETION_INDEX", "3")])).unwrap_err();
        assert!(e.to_string().contains("BOXLAYER_WORKERS"), "{e}");
    }

    #[test]
    fn no_flags_and_no_environment_is_one_worker_and_bad_numbers_are_named() {
        assert_eq!(WorkerShare::resolve(None, None, env(&[])).unwrap(), None);
        let e = WorkerShare::resolve(Some(3), Some(3), env(&[])).unwrap_err();
        assert!(e.to_string().contains("index 3"), "{e}");
        let e = WorkerShare::resolve(Some(0), None, env(&[])).unwrap_err();
        assert!(e.to_string().contains("--workers"), "{e}");
        let e = WorkerShare::resolve(None, Some(2), env(&[])).unwrap_err();
        assert!(e.to_string().contains("--worker"), "{e}");
        let e = WorkerShare::resolve(None, None, env(&[("SLURM_ARRAY_TASK_ID", "x1")])).unwrap_err();
        assert!(
            e.to_string().contains("SLURM_ARRAY_TASK_ID") && e.to_string().contains("x1"),
            "{e}"
        );
        let e = WorkerShare::resolve(None, None, env(&[("SLURM_ARRAY_TASK_ID", "1")])).unwrap_err();
        assert!(e.to_string().contains("--workers"), "{e}");
    }
}
