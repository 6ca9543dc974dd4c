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

/// Four rows at a time, each summed exactly as `dot_i8` sums it (so the same scores bit for bit): one row's
/// additions form a chain, each waiting for the last, and four independent chains keep the adder busy (at 2k tools
/// a row at a time took about 0.1 ms, bound by that latency).
#[inline(always)]
fn scores_impl(data: &[i8], dim: usize, scales: &[f32], q: &[f32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(scales.len());
    let n = (data.len() / dim.max(1)).min(scales.len());
    if dim == 0 {
        return vec![0.0; n];
    }
    let full = dim / 8 * 8;
    let mut r = 0;
    while r + 4 <= n {
        let rows: [&[i8]; 4] = std::array::from_fn(|k| &data[(r + k) * dim..][..dim]);
        let mut acc = [[0.0f32; 8]; 4];
        for c in (0..full).step_by(8) {
            let y = &q[c..c + 8];
            for k in 0..4 {
                let x = &rows[k][c..c + 8];
                for j in 0..8 {
                    acc[k][j] += f32::from(x[j]) * y[j];
                }
            }
        }
        for k in 0..4 {
            let tail: f32 = rows[k][full..]
                .iter()
                .zip(&q[full..dim])
                .map(|(x, y)| f32::from(*x) * y)
                .sum();
            out.push((acc[k].iter().sum::<f32>() + tail) * scales[r + k]);
        }
        r += 4;
    }
    for k in r..n {
        out.push(dot_i8(&data[k * dim..][..dim], q) * scales[k]);
    }
    out
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
        // Four rows at a time give each row's own `dot_i8`, whatever the width (tails of rows and of columns).
        for (dim, rows) in [(384, 301), (13, 9), (8, 4), (5, 3)] {
            let data: Vec<i8> = (0..rows * dim).map(|i| ((i * 7919) % 255) as i8).collect();
            let scales: Vec<f32> = (0..rows).map(|i| 0.001 + i as f32 * 1e-5).collect();
            let q: Vec<f32> = (0..dim).map(|i| (i as f32 * 0.37).sin() / 14.0).collect();
            let one: Vec<f32> = (0..rows)
                .map(|r| dot_i8(&data[r * dim..][..dim], &q) * scales[r])
                .collect();
            assert_eq!(
                bits(&scores(&data, dim, &scales, &q)),
                bits(&one),
                "{dim} x {rows}"
            );
            assert_eq!(bits(&scores_impl(&data, dim, &scales, &q)), bits(&one));
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            let avx2 = unsafe { scores_avx2(&data, dim, &scales, &q) };
            assert_eq!(bits(&avx2), bits(&want));
        }
    }
}
