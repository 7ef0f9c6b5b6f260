//! One self-contained HTML page about a run's output: `boxlayer report`.
