//! A criterion `Measurement` of the benchmark thread's own CPU time (Linux
//! `CLOCK_THREAD_CPUTIME_ID`), so one-core throughput is measured honestly even on a shared,
//! oversubscribed machine where wall-clock time also counts the time other processes ran.
//! Single-threaded benchmarks only: work done on other threads is not counted.

use criterion::Throughput;
use criterion::measurement::{Measurement, ValueFormatter};

/// CPU time consumed by the calling thread, in nanoseconds.
pub struct ThreadCpuTime;

fn thread_cpu_nanos() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a constant Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_nanos()
    }

    fn end(&self, start: u64) -> u64 {
        thread_cpu_nanos().saturating_sub(start)
    }

    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }

    fn zero(&self) -> u64 {
        0
    }

    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuNanosFormatter
    }
}

/// Formats CPU nanoseconds as times and throughputs (per CPU second).
struct CpuNanosFormatter;

impl ValueFormatter for CpuNanosFormatter {
    fn scale_values(&self, typical_ns: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = if typical_ns < 1e3 {
            (1.0, "ns")
        } else if typical_ns < 1e6 {
            (1e-3, "µs")
        } else if typical_ns < 1e9 {
            (1e-6, "ms")
        } else {
            (1e-9, "s")
        };
        for v in values {
            *v *= factor;
        }
        unit
    }

    fn scale_throughputs(&self, typical_ns: f64, throughput: &Throughput, values: &mut [f64]) -> &'static str {
        let count = match *throughput {
            Throughput::Bits(n) | Throughput::Bytes(n) | Throughput::BytesDecimal(n) | Throughput::Elements(n) => n,
            Throughput::ElementsAndBytes { elements, .. } => elements,
        } as f64;
        let per_second = count * 1e9 / typical_ns;
        let (factor, unit) = if per_second < 1e3 {
            (1.0, "elem/s")
        } else if per_second < 1e6 {
            (1e-3, "Kelem/s")
        } else if per_second < 1e9 {
            (1e-6, "Melem/s")
        } else {
            (1e-9, "Gelem/s")
        };
        for v in values {
            *v = count * 1e9 / *v * factor;
        }
        unit
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}
