//! A request to stop a run early (SIGINT, SIGTERM): the binary's signal handler raises it, the
//! passes look at it between windows of frames and between passes, and the run ends the current
//! sequence without output, keeping what finished before.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A shared stop request; raised once with the number of the signal that asked for it.
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Arc<AtomicUsize>);

impl StopSignal {
    /// A request nobody has raised yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The flag itself, for a signal handler to store the signal number in
    /// (`signal_hook::flag::register_usize`).
    pub fn flag(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.0)
    }

    /// Asks the run to stop, naming the signal (any non-zero number).
    pub fn raise(&self, signal: i32) {
        self.0.store(signal.max(1) as usize, Ordering::SeqCst);
    }

    /// The signal that asked the run to stop, if one did.
    pub fn raised(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n as i32),
        }
    }

    /// `Err(Interrupted)` once the run was asked to stop.
    pub(crate) fn check(&self) -> Result<(), super::PipelineError> {
        match self.raised() {
            Some(signal) => Err(super::PipelineError::Interrupted { signal }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_signal_is_seen_by_every_clone_and_stops_the_check() {
        let stop = StopSignal::new();
        let seen_by_pass = stop.clone();
        assert!(seen_by_pass.check().is_ok());
        stop.raise(15);
        assert_eq!(seen_by_pass.raised(), Some(15));
        let e = seen_by_pass.check().unwrap_err();
        assert!(
            matches!(e, super::super::PipelineError::Interrupted { signal: 15 }),
            "{e}"
        );
        // What a signal handler stores through the flag reads the same.
        let other = StopSignal::new();
        other.flag().store(2, Ordering::SeqCst);
        assert_eq!(other.raised(), Some(2));
    }
}
