//! Binary PCD (v0.7) with fields `x y z i`, float32: the one flavour Xtreme1's point-cloud tool
//! parses besides ASCII. Written here rather than through `pcd-rs`'s per-record writer: the
//! header is ten lines and the body one copy, and the tests read it back with `pcd-rs`.

/// A binary PCD of `xyz` and `intensity` (same length).
pub fn binary_xyzi(xyz: &[[f32; 3]], intensity: &[f32]) -> Vec<u8> {
    let n = xyz.len().min(intensity.len());
    let header = format!(
        "# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\nFIELDS x y z i\nSIZE 4 4 4 4\nTYPE F F F F\n\
         COUNT 1 1 1 1\nWIDTH {n}\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS {n}\nDATA binary\n"
    );
    let mut bytes = Vec::with_capacity(header.len() + 16 * n);
    bytes.extend_from_slice(header.as_bytes());
    for (p, i) in xyz.iter().zip(intensity).take(n) {
        for v in [p[0], p[1], p[2], *i] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcd_rs_reads_it_back() {
        let xyz = [[1.0f32, 2.0, 3.0], [-4.5, 0.25, 1e-3]];
        let intensity = [7.0f32, 255.0];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.pcd");
        std::fs::write(&path, binary_xyzi(&xyz, &intensity)).unwrap();
        let reader = pcd_rs::DynReader::open(&path).unwrap();
        let meta = reader.meta().clone();
        assert_eq!(meta.num_points, 2);
        assert_eq!(meta.data, pcd_rs::DataKind::Binary);
        let names: Vec<&str> = meta.field_defs.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["x", "y", "z", "i"]);
        let points: Vec<pcd_rs::DynRecord> = reader.collect::<Result<_, _>>().unwrap();
        let values: Vec<Vec<f32>> = points
            .into_iter()
            .map(|r| r.to_xyz::<f32>().map(|p| p.to_vec()).unwrap())
            .collect();
        assert_eq!(values, [vec![1.0, 2.0, 3.0], vec![-4.5, 0.25, 1e-3]]);
    }
}
