//! Radius neighbourhoods of box centres, as MS3D's `get_matching_boxes` forms them: every box's
//! ball of radius r (inclusive, 3D distance, itself included) is a candidate cluster; identical
//! member sets are kept once and sets smaller than the minimum are dropped. Clusters may overlap
//! (a box can belong to several); the NMS after fusion resolves their fused boxes.

use kiddo::{ImmutableKdTree, SquaredEuclidean};

use super::FuseError;

/// The distinct radius neighbourhoods with at least `min_members` members, each as ascending
/// indices into `centres`, ordered lexicographically (deterministic).
pub fn radius_clusters(centres: &[[f64; 3]], radius_m: f64, min_members: usize) -> Result<Vec<Vec<usize>>, FuseError> {
    let mut clusters: Vec<Vec<usize>> = Vec::new();
    if centres.len() < min_members.max(1) {
        return Ok(clusters);
    }
    let tree: ImmutableKdTree<f64, 3> = ImmutableKdTree::new_from_slice(centres).map_err(|e| FuseError::Index {
        reason: format!("cannot build the k-d tree over {} centres: {e:?}", centres.len()),
    })?;
    let radius_squared = radius_m * radius_m;
    for centre in centres {
        let mut members: Vec<usize> = Vec::new();
        tree.query(centre)
            .within::<SquaredEuclidean<f64>>(radius_squared)
            .unsorted()
            .visit(|hit| members.push(hit.item as usize));
        if members.len() >= min_members {
            members.sort_unstable();
            clusters.push(members);
        }
    }
    clusters.sort_unstable();
    clusters.dedup();
    Ok(clusters)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbourhoods_match_brute_force() {
        // A chain 0 — 1 — 2 spaced 1 m (0 and 2 are 2 m apart), a tight triple and a loner.
        let centres = [
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [2.0, 0.0, 0.0],
            [10.0, 10.0, 0.0],
            [10.1, 10.0, 0.0],
            [10.0, 10.1, 0.1],
            [-20.0, 5.0, 1.0],
        ];
        let clusters = radius_clusters(&centres, 1.0, 1).unwrap();
        // Radius is inclusive: 0 and 1 are exactly 1 m apart.
        assert_eq!(
            clusters,
            vec![vec![0, 1], vec![0, 1, 2], vec![1, 2], vec![3, 4, 5], vec![6]]
        );
        let big = radius_clusters(&centres, 1.0, 3).unwrap();
        assert_eq!(big, vec![vec![0, 1, 2], vec![3, 4, 5]]);
        // Brute force agreement on a random cloud.
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let cloud: Vec<[f64; 3]> = (0..300).map(|_| [next() * 30.0, next() * 30.0, next()]).collect();
        let got = radius_clusters(&cloud, 1.5, 2).unwrap();
        let mut want: Vec<Vec<usize>> = cloud
            .iter()
            .map(|a| {
                (0..cloud.len())
                    .filter(|&j| {
                        let b = cloud[j];
                        (a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2) <= 1.5 * 1.5
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|m| m.len() >= 2)
            .collect();
        want.sort();
        want.dedup();
        assert_eq!(got, want);
        assert!(radius_clusters(&[], 1.0, 1).unwrap().is_empty());
    }
}
