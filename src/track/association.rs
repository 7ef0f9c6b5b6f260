//! Optimal one-to-one assignment of tracks to detections over a sparse set of allowed pairs.
//!
//! Allowed pairs come from the per-class gate; the pair graph is split into connected
//! components and each component is solved on its own with Kuhn–Munkres (`pathfinding`), which is
//! exact because forbidden pairs cannot cross components, and keeps the cost near linear when
//! objects are spread out (most components are a single pair).

use pathfinding::kuhn_munkres::kuhn_munkres;
use pathfinding::matrix::Matrix;

/// One allowed (track, detection) pair and its affinity margin over the threshold (> 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Track index.
    pub track: usize,
    /// Detection index.
    pub detection: usize,
    /// Affinity minus its threshold (positive; larger is better).
    pub margin: f64,
}

/// Margins are compared at this resolution (unitless: GIoU or metres).
const MARGIN_RESOLUTION: f64 = 1e-6;

/// The (track, detection) pairs of the assignment maximising the summed margin over the
/// allowed pairs, sorted by track. `candidates` may come in any order; a pair listed twice
/// keeps its larger margin.
pub fn assign(num_tracks: usize, num_detections: usize, candidates: &[Candidate]) -> Vec<(usize, usize)> {
    if candidates.is_empty() {
        return Vec::new();
    }
    // Union-find over tracks (0..T) and detections (T..T+D).
    let mut parent: Vec<usize> = (0..num_tracks + num_detections).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for c in candidates {
        let (a, b) = (root(&mut parent, c.track), root(&mut parent, num_tracks + c.detection));
        if a != b {
            parent[a.max(b)] = a.min(b);
        }
    }
    let mut by_component: Vec<(usize, usize)> = candidates
        .iter()
        .enumerate()
        .map(|(k, c)| (root(&mut parent, c.track), k))
        .collect();
    by_component.sort_unstable();
    let mut pairs = Vec::new();
    let mut start = 0;
    while start < by_component.len() {
        let comp = by_component[start].0;
        let mut end = start;
        while end < by_component.len() && by_component[end].0 == comp {
            end += 1;
        }
        let members: Vec<Candidate> = by_component[start..end].iter().map(|&(_, k)| candidates[k]).collect();
        if let [only] = members.as_slice() {
            pairs.push((only.track, only.detection));
        } else {
            solve_component(&members, &mut pairs);
        }
        start = end;
    }
    pairs.sort_unstable();
    pairs
}

/// Kuhn–Munkres on one connected component; forbidden pairs weigh 0 and every allowed pair at
/// least 1, so the maximum-weight assignment never prefers a forbidden pair.
fn solve_component(members: &[Candidate], pairs: &mut Vec<(usize, usize)>) {
    let mut tracks: Vec<usize> = members.iter().map(|c| c.track).collect();
    let mut detections: Vec<usize> = members.iter().map(|c| c.detection).collect();
    tracks.sort_unstable();
    tracks.dedup();
    detections.sort_unstable();
    detections.dedup();
    // kuhn_munkres needs rows ≤ columns.
    let transpose = tracks.len() > detections.len();
    let (nr, nc) = if transpose {
        (detections.len(), tracks.len())
    } else {
        (tracks.len(), detections.len())
    };
    let mut weights = vec![0i64; nr * nc];
    for c in members {
        let (Ok(t), Ok(d)) = (tracks.binary_search(&c.track), detections.binary_search(&c.detection)) else {
            continue;
        };
        let (r, col) = if transpose { (d, t) } else { (t, d) };
        let w = 1 + (c.margin.max(0.0) / MARGIN_RESOLUTION).round().min(1e12) as i64;
        let cell = &mut weights[r * nc + col];
        *cell = (*cell).max(w);
    }
    let Ok(matrix) = Matrix::from_vec(nr, nc, weights.clone()) else {
        return;
    };
    let (_, assignment) = kuhn_munkres(&matrix);
    for (r, col) in assignment.into_iter().enumerate() {
        if weights[r * nc + col] > 0 {
            let (t, d) = if transpose { (col, r) } else { (r, col) };
            pairs.push((tracks[t], detections[d]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(track: usize, detection: usize, margin: f64) -> Candidate {
        Candidate {
            track,
            detection,
            margin,
        }
    }

    /// Greedy would give track 0 its best detection (0, margin 0.9) and leave track 1 with
    /// nothing; the optimum 0–1 + 1–0 sums 0.8 + 0.7 = 1.5 > 0.9.
    #[test]
    fn optimal_beats_greedy() {
        let pairs = assign(2, 2, &[c(0, 0, 0.9), c(0, 1, 0.8), c(1, 0, 0.7)]);
        assert_eq!(pairs, vec![(0, 1), (1, 0)]);
    }

    /// Separate components are solved independently; more tracks than detections transposes.
    #[test]
    fn components_and_transposition() {
        let pairs = assign(
            4,
            3,
            &[c(0, 0, 0.5), c(1, 0, 0.6), c(2, 1, 0.1), c(3, 2, 0.2), c(2, 2, 0.3)],
        );
        assert_eq!(pairs, vec![(1, 0), (2, 1), (3, 2)]);
        assert!(assign(3, 3, &[]).is_empty());
    }
}
