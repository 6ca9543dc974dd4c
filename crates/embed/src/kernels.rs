//! The numeric kernel behind every matrix product of the encoder: `y = x · wᵀ + b` with both operands row-major, so
//! every dot product walks contiguous memory. x is f32; w is f32 (attention) or f16 (the weights of the dense layers,
//! which halves the memory a query streams through). Tiles of up to 6 rows of x × 2 rows of w keep up to 12
//! independent accumulators. x86-64 CPUs with AVX2, FMA and F16C get an inline-assembly k-loop (chosen at run time;
//! fast in debug builds too), others a portable version that the compiler vectorises. The result for a row of x does
//! not depend on which other rows are in the same call.

// Index loops mirror the shape of the tile.
#![allow(clippy::needless_range_loop)]

/// Rows of x per tile, at most.
pub(super) const MR: usize = 6;
/// Rows of w per tile.
pub(super) const NR: usize = 2;
/// Bytes of w (as f32) kept hot while all rows of x pass over them.
pub(super) const W_BLOCK_BYTES: usize = 64 * 1024;

/// An IEEE 754 half-precision number, as stored bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct F16(pub u16);

impl F16 {
    /// Rounds to the nearest half-precision value (ties to even); too large becomes infinite.
    pub fn from_f32(x: f32) -> F16 {
        let b = x.to_bits();
        let sign = ((b >> 16) & 0x8000) as u16;
        let exp = ((b >> 23) & 0xff) as i32;
        let man = b & 0x7f_ffff;
        if exp == 0xff {
            return F16(sign | 0x7c00 | if man != 0 { 0x200 } else { 0 });
        }
        // Shift right by s, rounding to nearest even.
        let round = |m: u32, s: u32| -> u32 {
            if s > 31 {
                return 0;
            }
            let (q, r, half) = (m >> s, m & ((1 << s) - 1), 1 << (s - 1));
            if r > half || (r == half && q & 1 == 1) {
                q + 1
            } else {
                q
            }
        };
        let e = exp - 127 + 15;
        if e <= 0 {
            // Subnormal (or zero): units of 2^-24; a carry into 0x400 is the smallest normal, as it should be.
            if exp == 0 {
                return F16(sign); // f32 subnormals are far below f16's range
            }
            return F16(sign | round(man | 0x80_0000, (126 - exp) as u32) as u16);
        }
        // Normal: a carry out of the mantissa bumps the exponent, up to infinity.
        let v = ((e as u32) << 10) + round(man, 13);
        F16(sign | if v >= 0x7c00 { 0x7c00 } else { v as u16 })
    }

    pub fn to_f32(self) -> f32 {
        let h = self.0;
        let sign = u32::from(h >> 15) << 31;
        let exp = u32::from((h >> 10) & 0x1f);
        let frac = u32::from(h & 0x3ff);
        let bits = match (exp, frac) {
            (0, 0) => sign,
            (0, _) => {
                // Subnormal: frac · 2^-24, exact in f32.
                let v = frac as f32 * (1.0 / 16_777_216.0);
                return if sign != 0 { -v } else { v };
            }
            (0x1f, 0) => sign | 0x7f80_0000,
            (0x1f, _) => sign | 0x7fc0_0000 | (frac << 13),
            _ => sign | ((exp + 127 - 15) << 23) | (frac << 13),
        };
        f32::from_bits(bits)
    }
}

/// An element type of w: f32 or F16.
pub trait Weight: Copy + Send + Sync + 'static {
    /// Read by the x86-64 kernels only (their load instruction).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    const HALF: bool;
    fn get(self) -> f32;
}

impl Weight for f32 {
    const HALF: bool = false;
    fn get(self) -> f32 {
        self
    }
}

impl Weight for F16 {
    const HALF: bool = true;
    fn get(self) -> f32 {
        self.to_f32()
    }
}

/// A row-major matrix view: `rows` rows of `cols` values, row `r` starting at `r * stride`. Only `new` makes one,
/// so every row lies inside `data` (the assembly kernel relies on it).
#[derive(Clone, Copy)]
pub struct Mat<'a, T = f32> {
    data: &'a [T],
    rows: usize,
    cols: usize,
    stride: usize,
}

impl<'a, T> Mat<'a, T> {
    pub fn new(data: &'a [T], rows: usize, cols: usize, stride: usize) -> Mat<'a, T> {
        assert!(
            cols <= stride || rows <= 1,
            "matrix stride shorter than a row"
        );
        assert!(
            rows == 0 || (rows - 1) * stride + cols <= data.len(),
            "matrix view outside its data"
        );
        Mat {
            data,
            rows,
            cols,
            stride,
        }
    }
}

/// `y[r * y_stride + o] = bias[o] + Σ_i x[r][i] · w[o][i]` for every row r of x and row o of w.
pub fn matmul_t<W: Weight + Sync>(
    x: Mat,
    w: Mat<W>,
    bias: Option<&[f32]>,
    y: &mut [f32],
    y_stride: usize,
) {
    assert_eq!(x.cols, w.cols, "inner dimensions differ");
    assert!(bias.is_none_or(|b| b.len() >= w.rows), "bias too short");
    assert!(
        x.rows == 0 || (x.rows - 1) * y_stride + w.rows <= y.len(),
        "output too small"
    );
    assert!(
        w.rows <= y_stride || x.rows <= 1,
        "output stride shorter than a row"
    );
    if x.rows == 0 || w.rows == 0 {
        return;
    }
    // With AGENT_DISCOVER_EMBED_THREADS=2, both halves of x on two cores. Rows are independent (see the module
    // comment), so the result is the same bit for bit. Off by default: on a busy machine a thread started per product
    // waits for a core (measured: a query's embedding went from 7.7 ms to 159 ms at load 13 on 2 vCPUs).
    if x.rows >= SPLIT_ROWS && threads() >= 2 {
        let half = x.rows / 2;
        let (y0, y1) = y.split_at_mut(half * y_stride);
        let x0 = Mat::new(x.data, half, x.cols, x.stride);
        let x1 = Mat::new(&x.data[half * x.stride..], x.rows - half, x.cols, x.stride);
        std::thread::scope(|s| {
            s.spawn(|| matmul_one(x1, w, bias, y1, y_stride));
            matmul_one(x0, w, bias, y0, y_stride);
        });
        return;
    }
    matmul_one(x, w, bias, y, y_stride);
}

/// Rows of x from which a product is split over two threads (below, starting a thread costs more than it saves).
pub(super) const SPLIT_ROWS: usize = 8;
/// Environment variable capping the threads of one product (`1`: single-threaded).
pub const ENV_THREADS: &str = "AGENT_DISCOVER_EMBED_THREADS";

/// Threads one product may use: 1, or 2 when AGENT_DISCOVER_EMBED_THREADS=2 and the machine has two cores.
pub fn threads() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cap = std::env::var(ENV_THREADS)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(1);
        cores.min(cap).clamp(1, 2)
    })
}

fn matmul_one<W: Weight>(x: Mat, w: Mat<W>, bias: Option<&[f32]>, y: &mut [f32], y_stride: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            // SAFETY: the CPU has AVX2, FMA and F16C; the asserts above keep every access inside the slices.
            unsafe { x86::matmul_t(x, w, bias, y, y_stride) };
            return;
        }
    }
    portable_matmul_t(x, w, bias, y, y_stride);
}

/// Rows of w per block, a multiple of NR.
fn block_rows(cols: usize) -> usize {
    (W_BLOCK_BYTES / (4 * cols.max(1))).max(NR) / NR * NR
}

/// The rows of x cut into as few tiles as possible, of even sizes (13 rows: 5, 4, 4), since each tile reads the
/// whole block of w: calls `f(r0, r1)` per tile.
pub(super) fn for_each_tile(rows: usize, mut f: impl FnMut(usize, usize)) {
    let tiles = rows.div_ceil(MR);
    let mut r0 = 0;
    for t in 0..tiles {
        let r1 = r0 + rows / tiles + usize::from(t < rows % tiles);
        f(r0, r1);
        r0 = r1;
    }
}

fn portable_matmul_t<W: Weight>(
    x: Mat,
    w: Mat<W>,
    bias: Option<&[f32]>,
    y: &mut [f32],
    y_stride: usize,
) {
    let k = x.cols;
    let k8 = k / 8 * 8;
    let block = block_rows(k);
    // The block of w as f32, converted once per block.
    let mut wf = vec![0f32; block.min(w.rows) * k];
    let mut o0 = 0;
    while o0 < w.rows {
        let o1 = (o0 + block).min(w.rows);
        for o in o0..o1 {
            let row = &w.data[o * w.stride..][..k];
            for (d, s) in wf[(o - o0) * k..][..k].iter_mut().zip(row) {
                *d = s.get();
            }
        }
        for_each_tile(x.rows, |r0, r1| {
            for o in (o0..o1).step_by(NR) {
                let on = NR.min(o1 - o);
                let mut acc = [[[0f32; 8]; NR]; MR];
                for i in (0..k8).step_by(8) {
                    for j in 0..on {
                        let wv = &wf[(o - o0 + j) * k + i..][..8];
                        for r in 0..r1 - r0 {
                            let xv = &x.data[(r0 + r) * x.stride + i..][..8];
                            for l in 0..8 {
                                acc[r][j][l] += xv[l] * wv[l];
                            }
                        }
                    }
                }
                for r in 0..r1 - r0 {
                    for j in 0..on {
                        let a = &acc[r][j];
                        let mut s =
                            ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
                        let xr = &x.data[(r0 + r) * x.stride..][..k];
                        let wr = &wf[(o - o0 + j) * k..][..k];
                        for i in k8..k {
                            s += xr[i] * wr[i];
                        }
                        y[(r0 + r) * y_stride + o + j] = s + bias.map_or(0.0, |b| b[o + j]);
                    }
                }
            }
        });
        o0 = o1;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The x86-64 kernel: the k-loop of a tile is one inline-assembly block (AVX2 loads or F16C conversions, FMA),
    //! so it runs at full speed in unoptimised builds too, where intrinsics would each be a function call.

    use std::arch::asm;

    use super::{MR, Mat, NR, Weight, block_rows, for_each_tile};

    /// How many rows of w ahead of the current pair the k-loop prefetches.
    const PREFETCH_ROWS: usize = 4;

    /// Same contract as `super::matmul_t`.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C, and the views must lie inside their slices (checked by the caller).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn matmul_t<W: Weight>(
        x: Mat,
        w: Mat<W>,
        bias: Option<&[f32]>,
        y: &mut [f32],
        y_stride: usize,
    ) {
        const _: () = assert!(MR == 6 && NR == 2);
        let k = x.cols;
        let k8 = k / 8 * 8;
        let block = block_rows(k);
        let mut o0 = 0;
        while o0 < w.rows {
            let o1 = (o0 + block).min(w.rows);
            for_each_tile(x.rows, |r0, r1| {
                let mut o = o0;
                while o < o1 {
                    // An odd last row of w is paired with itself and the second result dropped.
                    let p = if o + 1 < o1 { o + 1 } else { o };
                    // SAFETY: rows r0..r1 of x and o, p of w lie inside their views, so inside their slices.
                    let acc = unsafe { tile(x, w, r0, r1, o, p) };
                    for r in r0..r1 {
                        for j in 0..=(p - o) {
                            let mut s = acc[r - r0][j];
                            if k8 < k {
                                let (xr, wr) = (
                                    &x.data[r * x.stride..][..k],
                                    &w.data[(o + j) * w.stride..][..k],
                                );
                                for t in k8..k {
                                    s += xr[t] * wr[t].get();
                                }
                            }
                            if let Some(b) = bias {
                                s += b[o + j];
                            }
                            y[r * y_stride + o + j] = s;
                        }
                    }
                    o = p + 1;
                }
            });
            o0 = o1;
        }
    }

    /// The k-loop over up to 6 rows of x and 2 rows of w, then each pair's 8 lanes summed: full dot products over
    /// the first k8 columns. `$load` reads 8 values of w into a ymm register from `[row + i * $size]`.
    macro_rules! k_loop {
        ($load:literal, $size:literal, $size2:literal, $k8:expr, $w0:expr, $w1:expr, $pf:expr;
         $(($x:ident, $a:ident, $b:ident)),+) => {{
            $(let $a: f32; let $b: f32;)+
            // SAFETY (caller): each pointer is valid for reading k8 values, k8 is a positive multiple of 8.
            unsafe {
                asm!(
                    $(
                        concat!("vxorps {", stringify!($a), ":x}, {", stringify!($a), ":x}, {", stringify!($a), ":x}"),
                        concat!("vxorps {", stringify!($b), ":x}, {", stringify!($b), ":x}, {", stringify!($b), ":x}"),
                    )+
                    "2:",
                    concat!($load, " {wa:y}, [{w0} + {i}*", $size, "]"),
                    concat!($load, " {wb:y}, [{w1} + {i}*", $size, "]"),
                    concat!("prefetcht0 [{pf} + {i}*", $size2, "]"),
                    $(
                        concat!("vmovups {xv:y}, ymmword ptr [{", stringify!($x), "} + {i}*4]"),
                        concat!("vfmadd231ps {", stringify!($a), ":y}, {xv:y}, {wa:y}"),
                        concat!("vfmadd231ps {", stringify!($b), ":y}, {xv:y}, {wb:y}"),
                    )+
                    "add {i}, 8",
                    "cmp {i}, {k8}",
                    "jb 2b",
                    $(hsum!($a), hsum!($b),)+
                    w0 = in(reg) $w0,
                    w1 = in(reg) $w1,
                    pf = in(reg) $pf,
                    k8 = in(reg) $k8,
                    i = inout(reg) 0usize => _,
                    wa = out(xmm_reg) _,
                    wb = out(xmm_reg) _,
                    xv = out(xmm_reg) _,
                    $($x = in(reg) $x, $a = out(xmm_reg) $a, $b = out(xmm_reg) $b,)+
                    options(nostack, readonly),
                );
            }
            [$([$a, $b]),+]
        }};
    }

    /// Assembly summing the 8 lanes of accumulator `$a` into its lowest lane, with `{wa}` as scratch. The order is
    /// fixed: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
    macro_rules! hsum {
        ($a:ident) => {
            concat!(
                "vextractf128 {wa:x}, {",
                stringify!($a),
                ":y}, 1\n",
                "vaddps {",
                stringify!($a),
                ":x}, {",
                stringify!($a),
                ":x}, {wa:x}\n",
                "vmovhlps {wa:x}, {wa:x}, {",
                stringify!($a),
                ":x}\n",
                "vaddps {",
                stringify!($a),
                ":x}, {",
                stringify!($a),
                ":x}, {wa:x}\n",
                "vmovshdup {wa:x}, {",
                stringify!($a),
                ":x}\n",
                "vaddss {",
                stringify!($a),
                ":x}, {",
                stringify!($a),
                ":x}, {wa:x}"
            )
        };
    }

    /// Every tile height, for one way of loading w.
    macro_rules! tile_rows {
        ($load:literal, $size:literal, $size2:literal, $n:expr, $k8:expr, $xp:expr, $w0:expr, $w1:expr, $pf:expr,
         $acc:expr) => {{
            let xp = $xp;
            match $n {
                6 => {
                    let (x0, x1, x2, x3, x4, x5) = (xp(0), xp(1), xp(2), xp(3), xp(4), xp(5));
                    let t = k_loop!($load, $size, $size2, $k8, $w0, $w1, $pf;
                        (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3), (x4, a4, b4), (x5, a5, b5));
                    $acc[..6].copy_from_slice(&t);
                }
                5 => {
                    let (x0, x1, x2, x3, x4) = (xp(0), xp(1), xp(2), xp(3), xp(4));
                    let t = k_loop!($load, $size, $size2, $k8, $w0, $w1, $pf;
                        (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3), (x4, a4, b4));
                    $acc[..5].copy_from_slice(&t);
                }
                4 => {
                    let (x0, x1, x2, x3) = (xp(0), xp(1), xp(2), xp(3));
                    let t = k_loop!($load, $size, $size2, $k8, $w0, $w1, $pf;
                        (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3));
                    $acc[..4].copy_from_slice(&t);
                }
                3 => {
                    let (x0, x1, x2) = (xp(0), xp(1), xp(2));
                    let t = k_loop!($load, $size, $size2, $k8, $w0, $w1, $pf; (x0, a0, b0), (x1, a1, b1), (x2, a2, b2));
                    $acc[..3].copy_from_slice(&t);
                }
                2 => {
                    let (x0, x1) = (xp(0), xp(1));
                    let t = k_loop!($load, $size, $size2, $k8, $w0, $w1, $pf; (x0, a0, b0), (x1, a1, b1));
                    $acc[..2].copy_from_slice(&t);
                }
                _ => {
                    let x0 = xp(0);
                    let t = k_loop!($load, $size, $size2, $k8, $w0, $w1, $pf; (x0, a0, b0));
                    $acc[..1].copy_from_slice(&t);
                }
            }
        }};
    }

    /// Dot products of rows `r0..r1` (1 to 6) of x with rows `o` and `p` of w, over the first k/8*8 columns.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; the rows must lie inside the views.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile<W: Weight>(
        x: Mat,
        w: Mat<W>,
        r0: usize,
        r1: usize,
        o: usize,
        p: usize,
    ) -> [[f32; 2]; MR] {
        let mut acc = [[0f32; 2]; MR];
        let k8 = x.cols / 8 * 8;
        if k8 == 0 {
            return acc;
        }
        let xp = |r: usize| x.data[(r0 + r) * x.stride..].as_ptr();
        let w0 = w.data[o * w.stride..].as_ptr().cast::<u8>();
        let w1 = w.data[p * w.stride..].as_ptr().cast::<u8>();
        // Rows of w further on, fetched ahead at twice the pace: a pair of adjacent rows per k-loop. A prefetch
        // never faults, so the address may lie past the end.
        let pf = w0.wrapping_add(PREFETCH_ROWS * w.stride * size_of::<W>());
        let n = (r1 - r0).clamp(1, MR);
        if W::HALF {
            tile_rows!("vcvtph2ps", "2", "4", n, k8, xp, w0, w1, pf, acc);
        } else {
            tile_rows!("vmovups", "4", "8", n, k8, xp, w0, w1, pf, acc);
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[f32], n: usize, w: &[f32], m: usize, k: usize, b: &[f32]) -> Vec<f32> {
        let mut y = vec![0.0; n * m];
        for r in 0..n {
            for o in 0..m {
                let s: f64 = (0..k)
                    .map(|i| f64::from(x[r * k + i]) * f64::from(w[o * k + i]))
                    .sum();
                y[r * m + o] = s as f32 + b[o];
            }
        }
        y
    }

    #[test]
    fn matches_naive_product() {
        for (n, m, k) in [
            (1, 1, 1),
            (5, 7, 13),
            (4, 2, 8),
            (9, 33, 40),
            (13, 5, 384),
            (0, 3, 8),
            (7, 1, 16),
        ] {
            let x: Vec<f32> = (0..n * k)
                .map(|i| ((i * 7 % 13) as f32 - 6.0) / 5.0)
                .collect();
            // Values exact in f16, so both weight types give the same products.
            let w: Vec<f32> = (0..m * k)
                .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
                .collect();
            let w16: Vec<F16> = w.iter().map(|&v| F16::from_f32(v)).collect();
            let b: Vec<f32> = (0..m).map(|i| i as f32 * 0.1).collect();
            let want = naive(&x, n, &w, m, k, &b);
            let mut outs = vec![vec![0.0; n * m]; 4];
            matmul_t(
                Mat::new(&x, n, k, k),
                Mat::new(&w, m, k, k),
                Some(&b),
                &mut outs[0],
                m,
            );
            matmul_t(
                Mat::new(&x, n, k, k),
                Mat::new(&w16, m, k, k),
                Some(&b),
                &mut outs[1],
                m,
            );
            portable_matmul_t(
                Mat::new(&x, n, k, k),
                Mat::new(&w, m, k, k),
                Some(&b),
                &mut outs[2],
                m,
            );
            portable_matmul_t(
                Mat::new(&x, n, k, k),
                Mat::new(&w16, m, k, k),
                Some(&b),
                &mut outs[3],
                m,
            );
            for got in &outs {
                for i in 0..n * m {
                    assert!(
                        (want[i] - got[i]).abs() < 1e-4,
                        "{n}x{m}x{k} [{i}]: {} vs {}",
                        want[i],
                        got[i]
                    );
                }
            }
        }
    }

    #[test]
    fn rows_do_not_depend_on_their_neighbours() {
        let (n, m, k) = (13, 9, 72);
        let x: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let w: Vec<F16> = (0..m * k)
            .map(|i| F16::from_f32((i as f32 * 0.11).cos()))
            .collect();
        let mut all = vec![0.0; n * m];
        matmul_t(
            Mat::new(&x, n, k, k),
            Mat::new(&w, m, k, k),
            None,
            &mut all,
            m,
        );
        for r in 0..n {
            let mut one = vec![0.0; m];
            matmul_t(
                Mat::new(&x[r * k..], 1, k, k),
                Mat::new(&w, m, k, k),
                None,
                &mut one,
                m,
            );
            assert_eq!(one, all[r * m..(r + 1) * m]);
        }
    }

    #[test]
    fn half_precision_round_trips() {
        for h in 0..=u16::MAX {
            let v = F16(h).to_f32();
            if !v.is_nan() {
                assert_eq!(F16::from_f32(v), F16(h), "{h:#x} = {v}");
            }
        }
        assert_eq!(F16::from_f32(1.0 + 1.0 / 2048.0), F16(0x3c00)); // tie goes to even
        assert_eq!(F16::from_f32(1.0 + 3.0 / 2048.0), F16(0x3c02));
        assert_eq!(F16::from_f32(65520.0), F16(0x7c00)); // rounds up to infinity
        assert_eq!(F16::from_f32(1e-9), F16(0));
        assert_eq!(F16::from_f32(-3.0e-8).to_f32(), -5.960_464_5e-8); // nearest subnormal
        assert!(F16::from_f32(f32::NAN).to_f32().is_nan());
        assert_eq!(F16(0x0001).to_f32(), 5.960_464_5e-8);
    }
}
