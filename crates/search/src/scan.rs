//! The cosine scan of the in-memory vector index: each stored int8 row against the query's f32 vector. Compiled for
//! AVX-512 F or AVX2 too and chosen at run time: the same operations per row in wider registers (Rust never
//! reorders or fuses float operations), so the same scores bit for bit as the baseline build's SSE2 loop.

/// `dot_i8(row, q) · scale` for every row of `data` (rows of `dim` values, one scale each).
pub(crate) fn scores(data: &[i8], dim: usize, scales: &[f32], q: &[f32]) -> Vec<f32> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") {
            // SAFETY: the CPU has AVX-512 F.
            return unsafe { scores_avx512(data, dim, scales, q) };
        }
        if has!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { scores_avx2(data, dim, scales, q) };
        }
    }
    scores_impl(data, dim, scales, q)
}

#[inline(always)]
fn scores_impl(data: &[i8], dim: usize, scales: &[f32], q: &[f32]) -> Vec<f32> {
    data.chunks_exact(dim)
        .zip(scales)
        .map(|(row, s)| dot_i8(row, q) * s)
        .collect()
}

/// # Safety
/// The CPU must support AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn scores_avx512(data: &[i8], dim: usize, scales: &[f32], q: &[f32]) -> Vec<f32> {
    scores_impl(data, dim, scales, q)
}

/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn scores_avx2(data: &[i8], dim: usize, scales: &[f32], q: &[f32]) -> Vec<f32> {
    scores_impl(data, dim, scales, q)
}

/// Dot product of an int8 row and an f32 query (eight accumulators, so the compiler vectorises it).
#[inline(always)]
pub(crate) fn dot_i8(a: &[i8], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| f32::from(*x) * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for j in 0..8 {
            acc[j] += f32::from(x[j]) * y[j];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Dot product with eight independent accumulators so the compiler vectorises it.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for j in 0..8 {
            acc[j] += x[j] * y[j];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wide_scan_gives_the_baseline_scores_bit_for_bit() {
        let dim = 384;
        let rows = 301;
        let data: Vec<i8> = (0..rows * dim).map(|i| ((i * 7919) % 255) as i8).collect();
        let scales: Vec<f32> = (0..rows).map(|i| 0.001 + i as f32 * 1e-5).collect();
        let q: Vec<f32> = (0..dim).map(|i| (i as f32 * 0.37).sin() / 14.0).collect();
        let want = scores_impl(&data, dim, &scales, &q);
        let got = scores(&data, dim, &scales, &q);
        assert_eq!(want.len(), rows);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            let avx2 = unsafe { scores_avx2(&data, dim, &scales, &q) };
            assert_eq!(bits(&avx2), bits(&want));
        }
    }
}
