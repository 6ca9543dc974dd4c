//! The int8 matrix kernel of the encoder's dense layers: `y = x · wᵀ + b` with w quantised to int8 per output row
//! (symmetric, once at model load) and each row of x quantised on the fly to 13-bit integers held in i16 (symmetric,
//! per row), so every product is an exact i32 sum scaled back once. x86-64 CPUs with AVX2 get an inline-assembly
//! k-loop (`vpmovsxbw` + `vpmaddwd`: 16 products per instruction, no saturation; chosen at run time, fast in debug
//! builds too), others a portable loop. Rows are padded to a multiple of 16 with zeros, so there is no tail; the
//! result for a row of x does not depend on which other rows are in the same call.

// Index loops mirror the shape of the tile.
#![allow(clippy::needless_range_loop)]

use super::kernels::{MR, NR, SPLIT_ROWS, W_BLOCK_BYTES, for_each_tile, threads};

/// Columns are padded to a multiple of this (one k-step of the kernel).
const KSTEP: usize = 16;
/// The largest magnitude of a quantised activation: 13 bits keep the quantisation error of x far below the weights'
/// while `127 · 4095 · k` stays inside an i32 up to k = 4,128 (checked per product: see `act_max`).
const ACT_MAX: i32 = 4095;

/// A weight matrix `[rows][cols]` quantised per row: `w[o][i] ≈ q[o][i] · scale[o]`, rows padded to `stride`.
pub struct QuantMatrix {
    q: Vec<i8>,
    scale: Vec<f32>,
    rows: usize,
    cols: usize,
    stride: usize,
}

impl QuantMatrix {
    /// Quantises `w` (`rows × cols`, row-major): each row's largest magnitude maps to 127, values round to nearest.
    pub fn quantize(w: &[f32], rows: usize, cols: usize) -> QuantMatrix {
        assert_eq!(w.len(), rows * cols, "weight matrix size");
        let stride = cols.div_ceil(KSTEP).max(1) * KSTEP;
        let mut q = vec![0i8; rows * stride];
        let mut scale = vec![0f32; rows];
        for o in 0..rows {
            let row = &w[o * cols..][..cols];
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            if max == 0.0 || !max.is_finite() {
                continue;
            }
            let s = max / 127.0;
            scale[o] = s;
            for (d, v) in q[o * stride..][..cols].iter_mut().zip(row) {
                *d = (v / s).round().clamp(-127.0, 127.0) as i8;
            }
        }
        QuantMatrix {
            q,
            scale,
            rows,
            cols,
            stride,
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }
}

/// The largest activation magnitude for which no sum over `stride` products can leave an i32.
fn act_max(stride: usize) -> i32 {
    let bound = i32::MAX as i64 / (127 * stride.max(1) as i64);
    ACT_MAX.min(bound.max(1) as i32)
}

/// Quantises each row of x (`rows × cols`) to `[-amax, amax]` into `xq` (`rows × stride`, zero padded); returns the
/// per-row scales.
fn quantize_rows(x: &[f32], rows: usize, cols: usize, stride: usize, xq: &mut [i16]) -> Vec<f32> {
    let amax = act_max(stride) as f32;
    let mut scales = vec![0f32; rows];
    for r in 0..rows {
        let row = &x[r * cols..][..cols];
        let out = &mut xq[r * stride..][..stride];
        let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
        if max == 0.0 || !max.is_finite() {
            out.fill(0);
            continue;
        }
        let s = max / amax;
        let inv = 1.0 / s;
        scales[r] = s;
        // Round half away from zero by truncation (`round()` is a libm call on baseline x86-64 and cost more than
        // the int8 kernel saved); |v · inv| <= amax, so no clamp is needed.
        for (d, v) in out[..cols].iter_mut().zip(row) {
            let y = v * inv;
            *d = (y + 0.5f32.copysign(y)) as i16;
        }
        out[cols..].fill(0);
    }
    scales
}

/// `y[r * y_stride + o] = bias[o] + Σ_i x[r][i] · w[o][i]` for the `rows` contiguous rows of x (`rows × w.cols`).
pub fn matmul_q8(
    x: &[f32],
    rows: usize,
    w: &QuantMatrix,
    bias: Option<&[f32]>,
    y: &mut [f32],
    y_stride: usize,
) {
    assert!(x.len() >= rows * w.cols, "x too short");
    assert!(bias.is_none_or(|b| b.len() >= w.rows), "bias too short");
    assert!(
        rows == 0 || (rows - 1) * y_stride + w.rows <= y.len(),
        "output too small"
    );
    assert!(
        w.rows <= y_stride || rows <= 1,
        "output stride shorter than a row"
    );
    if rows == 0 || w.rows == 0 {
        return;
    }
    let mut xq = vec![0i16; rows * w.stride];
    let sx = quantize_rows(x, rows, w.cols, w.stride, &mut xq);
    let mut acc = vec![0i32; rows * w.rows];
    // As `matmul_t`: with AGENT_DISCOVER_EMBED_THREADS=2, both halves of x on two cores (same result bit for bit).
    if rows >= SPLIT_ROWS && threads() >= 2 {
        let half = rows / 2;
        let (a0, a1) = acc.split_at_mut(half * w.rows);
        let (x0, x1) = xq.split_at(half * w.stride);
        std::thread::scope(|s| {
            s.spawn(|| dots(x1, rows - half, w, a1));
            dots(x0, half, w, a0);
        });
    } else {
        dots(&xq, rows, w, &mut acc);
    }
    for r in 0..rows {
        for o in 0..w.rows {
            let v = acc[r * w.rows + o] as f32 * (sx[r] * w.scale[o]);
            y[r * y_stride + o] = v + bias.map_or(0.0, |b| b[o]);
        }
    }
}

/// `acc[r * w.rows + o] = Σ_i xq[r][i] · q[o][i]` (exact).
fn dots(xq: &[i16], rows: usize, w: &QuantMatrix, acc: &mut [i32]) {
    assert!(xq.len() >= rows * w.stride && acc.len() >= rows * w.rows);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2; the assert above keeps every access inside the slices.
            unsafe { x86::dots(xq, rows, w, acc) };
            return;
        }
    }
    portable_dots(xq, rows, w, acc);
}

fn portable_dots(xq: &[i16], rows: usize, w: &QuantMatrix, acc: &mut [i32]) {
    let k = w.stride;
    for r in 0..rows {
        let xr = &xq[r * k..][..k];
        for o in 0..w.rows {
            let wr = &w.q[o * k..][..k];
            acc[r * w.rows + o] = xr
                .iter()
                .zip(wr)
                .map(|(&a, &b)| i32::from(a) * i32::from(b))
                .sum();
        }
    }
}

/// Rows of w per block (a multiple of NR): half of `W_BLOCK_BYTES` of int8 weights, so a block and a tile of x (up
/// to 6 rows of i16) stay in cache while every tile passes over the block.
fn block_rows(stride: usize) -> usize {
    (W_BLOCK_BYTES / 2 / stride.max(1)).max(NR) / NR * NR
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The AVX2 k-loop as one inline-assembly block per tile (6 rows of x × 2 rows of w, 12 i32 accumulators).

    use std::arch::asm;

    use super::{KSTEP, MR, NR, QuantMatrix, block_rows, for_each_tile};

    /// How many rows of w ahead of the current pair the k-loop prefetches.
    const PREFETCH_ROWS: usize = 4;

    /// # Safety
    /// The CPU must support AVX2; `xq` holds `rows` rows of `w.stride` and `acc` `rows × w.rows` values.
    #[target_feature(enable = "avx2")]
    pub unsafe fn dots(xq: &[i16], rows: usize, w: &QuantMatrix, acc: &mut [i32]) {
        const _: () = assert!(MR == 6 && NR == 2 && KSTEP == 16);
        let k = w.stride;
        let block = block_rows(k);
        let mut o0 = 0;
        while o0 < w.rows {
            let o1 = (o0 + block).min(w.rows);
            for_each_tile(rows, |r0, r1| {
                let mut o = o0;
                while o < o1 {
                    // An odd last row of w is paired with itself and the second result dropped.
                    let p = if o + 1 < o1 { o + 1 } else { o };
                    // SAFETY: rows r0..r1 of xq and o, p of w lie inside their slices (asserted by the caller).
                    let t = unsafe { tile(xq, w, r0, r1, o, p) };
                    for r in r0..r1 {
                        for j in 0..=(p - o) {
                            acc[r * w.rows + o + j] = t[r - r0][j];
                        }
                    }
                    o = p + 1;
                }
            });
            o0 = o1;
        }
    }

    /// Assembly summing the 8 i32 lanes of `$a` into its lowest lane, with `{t}` as scratch (exact in any order).
    macro_rules! hsum_i32 {
        ($a:ident) => {
            concat!(
                "vextracti128 {t:x}, {",
                stringify!($a),
                ":y}, 1\n",
                "vpaddd {",
                stringify!($a),
                ":x}, {",
                stringify!($a),
                ":x}, {t:x}\n",
                "vpshufd {t:x}, {",
                stringify!($a),
                ":x}, 0x4e\n",
                "vpaddd {",
                stringify!($a),
                ":x}, {",
                stringify!($a),
                ":x}, {t:x}\n",
                "vpshufd {t:x}, {",
                stringify!($a),
                ":x}, 0xb1\n",
                "vpaddd {",
                stringify!($a),
                ":x}, {",
                stringify!($a),
                ":x}, {t:x}"
            )
        };
    }

    /// The k-loop over up to 6 rows of x (i16) and 2 rows of w (i8, widened to i16 as they are loaded).
    macro_rules! k_loop_q8 {
        ($k:expr, $w0:expr, $w1:expr, $pf:expr; $(($x:ident, $a:ident, $b:ident)),+) => {{
            $(let $a: i32; let $b: i32;)+
            // SAFETY (caller): each x pointer is valid for k i16 values, each w pointer for k bytes, k a positive
            // multiple of 16.
            unsafe {
                asm!(
                    $(
                        concat!("vpxor {", stringify!($a), ":x}, {", stringify!($a), ":x}, {", stringify!($a), ":x}"),
                        concat!("vpxor {", stringify!($b), ":x}, {", stringify!($b), ":x}, {", stringify!($b), ":x}"),
                    )+
                    "2:",
                    "vpmovsxbw {wa:y}, xmmword ptr [{w0} + {i}]",
                    "vpmovsxbw {wb:y}, xmmword ptr [{w1} + {i}]",
                    "prefetcht0 [{pf} + {i}*2]",
                    $(
                        concat!("vmovdqu {xv:y}, ymmword ptr [{", stringify!($x), "} + {i}*2]"),
                        concat!("vpmaddwd {t:y}, {xv:y}, {wa:y}"),
                        concat!("vpaddd {", stringify!($a), ":y}, {", stringify!($a), ":y}, {t:y}"),
                        concat!("vpmaddwd {t:y}, {xv:y}, {wb:y}"),
                        concat!("vpaddd {", stringify!($b), ":y}, {", stringify!($b), ":y}, {t:y}"),
                    )+
                    "add {i}, 16",
                    "cmp {i}, {k}",
                    "jb 2b",
                    $(hsum_i32!($a), hsum_i32!($b),)+
                    w0 = in(reg) $w0,
                    w1 = in(reg) $w1,
                    pf = in(reg) $pf,
                    k = in(reg) $k,
                    i = inout(reg) 0usize => _,
                    wa = out(xmm_reg) _,
                    wb = out(xmm_reg) _,
                    xv = out(xmm_reg) _,
                    t = out(xmm_reg) _,
                    $($x = in(reg) $x, $a = out(xmm_reg) $a, $b = out(xmm_reg) $b,)+
                    options(nostack, readonly),
                );
            }
            [$([$a, $b]),+]
        }};
    }

    /// Exact dot products of rows `r0..r1` (1 to 6) of xq with rows `o` and `p` of w.
    ///
    /// # Safety
    /// The CPU must support AVX2; the rows must lie inside the slices.
    #[target_feature(enable = "avx2")]
    unsafe fn tile(
        xq: &[i16],
        w: &QuantMatrix,
        r0: usize,
        r1: usize,
        o: usize,
        p: usize,
    ) -> [[i32; 2]; MR] {
        let mut acc = [[0i32; 2]; MR];
        let k = w.stride;
        let xp = |r: usize| xq[(r0 + r) * k..][..k].as_ptr();
        let w0 = w.q[o * k..][..k].as_ptr();
        let w1 = w.q[p * k..][..k].as_ptr();
        // Rows further on, fetched ahead at twice the pace (a pair per k-loop); a prefetch never faults.
        let pf = w0.wrapping_add(PREFETCH_ROWS * k);
        match (r1 - r0).clamp(1, MR) {
            6 => {
                let (x0, x1, x2, x3, x4, x5) = (xp(0), xp(1), xp(2), xp(3), xp(4), xp(5));
                let t = k_loop_q8!(k, w0, w1, pf;
                    (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3), (x4, a4, b4), (x5, a5, b5));
                acc[..6].copy_from_slice(&t);
            }
            5 => {
                let (x0, x1, x2, x3, x4) = (xp(0), xp(1), xp(2), xp(3), xp(4));
                let t = k_loop_q8!(k, w0, w1, pf;
                    (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3), (x4, a4, b4));
                acc[..5].copy_from_slice(&t);
            }
            4 => {
                let (x0, x1, x2, x3) = (xp(0), xp(1), xp(2), xp(3));
                let t = k_loop_q8!(k, w0, w1, pf; (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3));
                acc[..4].copy_from_slice(&t);
            }
            3 => {
                let (x0, x1, x2) = (xp(0), xp(1), xp(2));
                let t = k_loop_q8!(k, w0, w1, pf; (x0, a0, b0), (x1, a1, b1), (x2, a2, b2));
                acc[..3].copy_from_slice(&t);
            }
            2 => {
                let (x0, x1) = (xp(0), xp(1));
                let t = k_loop_q8!(k, w0, w1, pf; (x0, a0, b0), (x1, a1, b1));
                acc[..2].copy_from_slice(&t);
            }
            _ => {
                let x0 = xp(0);
                let t = k_loop_q8!(k, w0, w1, pf; (x0, a0, b0));
                acc[..1].copy_from_slice(&t);
            }
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simd_and_portable_agree_exactly_and_approximate_the_f32_product() {
        for (n, m, k) in [
            (1, 1, 1),
            (5, 7, 13),
            (4, 2, 16),
            (9, 33, 40),
            (13, 5, 384),
            (7, 3, 1536),
            (0, 3, 8),
        ] {
            let x: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
            let w: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.11).cos() * 0.2).collect();
            let b: Vec<f32> = (0..m).map(|i| i as f32 * 0.1).collect();
            let q = QuantMatrix::quantize(&w, m, k);
            let mut y = vec![0f32; n * m];
            matmul_q8(&x, n, &q, Some(&b), &mut y, m);
            // The same integer sums from the portable loop.
            let mut xq = vec![0i16; n * q.stride];
            quantize_rows(&x, n, k, q.stride, &mut xq);
            let (mut a1, mut a2) = (vec![0i32; n * m], vec![0i32; n * m]);
            dots(&xq, n, &q, &mut a1);
            portable_dots(&xq, n, &q, &mut a2);
            assert_eq!(a1, a2, "{n}x{m}x{k}");
            for r in 0..n {
                for o in 0..m {
                    let exact: f64 = (0..k)
                        .map(|i| f64::from(x[r * k + i]) * f64::from(w[o * k + i]))
                        .sum::<f64>()
                        + f64::from(b[o]);
                    // Bound: k products each off by at most half a weight step times |x| (plus x's rounding).
                    let tol = k as f64 * 3.0 * 0.2 / 127.0 * 0.5 * 1.1 + 1e-4;
                    let got = f64::from(y[r * m + o]);
                    assert!(
                        (got - exact).abs() <= tol,
                        "{n}x{m}x{k} [{r},{o}]: {got} vs {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn extreme_values_do_not_overflow() {
        let k = 1536;
        let x = vec![-1e6f32; 2 * k];
        let w = vec![1.0f32; k];
        let q = QuantMatrix::quantize(&w, 1, k);
        let mut y = vec![0f32; 2];
        matmul_q8(&x, 2, &q, None, &mut y, 1);
        assert!((y[0] / (-1e6 * k as f32) - 1.0).abs() < 1e-3, "{}", y[0]);
        assert_eq!(y[0], y[1]);
        let mut z = vec![1f32; 1];
        matmul_q8(&vec![0f32; k], 1, &q, None, &mut z, 1);
        assert_eq!(z[0], 0.0);
    }

    #[test]
    fn rows_do_not_depend_on_their_neighbours() {
        let (n, m, k) = (13, 9, 72);
        let x: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let w: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.11).cos()).collect();
        let q = QuantMatrix::quantize(&w, m, k);
        let mut all = vec![0.0; n * m];
        matmul_q8(&x, n, &q, None, &mut all, m);
        for r in 0..n {
            let mut one = vec![0.0; m];
            matmul_q8(&x[r * k..(r + 1) * k], 1, &q, None, &mut one, m);
            assert_eq!(one, all[r * m..(r + 1) * m]);
        }
    }
}
