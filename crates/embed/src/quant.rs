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
        let tile = match kernel() {
            Kernel::Avx512Zmm if w.stride.is_multiple_of(32) => x86::tile_avx512_zmm as x86::Tile,
            Kernel::AvxVnni | Kernel::Avx512Zmm => x86::tile_avx_vnni as x86::Tile,
            Kernel::Avx512Vnni => x86::tile_avx512_vnni as x86::Tile,
            Kernel::Avx2 => x86::tile_avx2 as x86::Tile,
            Kernel::Portable => return portable_dots(xq, rows, w, acc),
        };
        // SAFETY: `kernel()` chose a tile the CPU supports; the assert above keeps every access inside the slices.
        unsafe { x86::dots(xq, rows, w, acc, tile) };
        return;
    }
    #[allow(unreachable_code)]
    portable_dots(xq, rows, w, acc)
}

/// Which k-loop the int8 products use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// `vpdpwssd` on zmm registers (AVX-512 VNNI + BW): 32 products and their sums per instruction (matrices whose
    /// padded width is not a multiple of 32 use `AvxVnni`'s loop).
    Avx512Zmm,
    /// `vpdpwssd` in its VEX form (AVX-VNNI): one instruction per 16 products and their sum.
    AvxVnni,
    /// `vpdpwssd` in its EVEX form on ymm registers (AVX-512 VNNI + VL).
    Avx512Vnni,
    /// `vpmaddwd` + `vpaddd`.
    Avx2,
    Portable,
}

/// Chooses the k-loop by the CPU's features (`AGENT_DISCOVER_EMBED_KERNEL=avx-vnni|avx2|portable` forces an older
/// one for comparisons); every kernel gives the same integer sums.
pub fn kernel() -> Kernel {
    static K: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
    *K.get_or_init(|| {
        let best = best_kernel();
        match std::env::var(ENV_KERNEL).ok().as_deref() {
            Some("portable") => Kernel::Portable,
            Some("avx-vnni") if best == Kernel::Avx512Zmm => Kernel::AvxVnni,
            Some("avx2") if best != Kernel::Portable => Kernel::Avx2,
            _ => best,
        }
    })
}

/// The environment variable that forces an older int8 kernel (`avx-vnni`, `avx2`, `portable`).
pub const ENV_KERNEL: &str = "AGENT_DISCOVER_EMBED_KERNEL";

fn best_kernel() -> Kernel {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("avxvnni") && has!("avx512bw") && has!("avx512vnni") {
            return Kernel::Avx512Zmm;
        }
        if has!("avx2") && has!("avxvnni") {
            return Kernel::AvxVnni;
        }
        if has!("avx2") && has!("avx512vnni") && has!("avx512vl") {
            return Kernel::Avx512Vnni;
        }
        if has!("avx2") {
            return Kernel::Avx2;
        }
    }
    Kernel::Portable
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

    /// One tile's k-loop: exact dot products of rows `r0..r1` (1 to 6) of xq with rows `o` and `p` of w.
    pub type Tile = unsafe fn(&[i16], &QuantMatrix, usize, usize, usize, usize) -> [[i32; 2]; MR];

    /// # Safety
    /// The CPU must support `tile`'s instructions; `xq` holds `rows` rows of `w.stride` and `acc` `rows × w.rows`
    /// values.
    pub unsafe fn dots(xq: &[i16], rows: usize, w: &QuantMatrix, acc: &mut [i32], tile: Tile) {
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

    /// Assembly adding the 16 i16 products of `{xv}` and `$w` pairwise into the i32 lanes of `$acc`: `vpmaddwd` +
    /// `vpaddd` (AVX2), or one `vpdpwssd` (VNNI: VEX or EVEX form). The sums are exact in all three.
    macro_rules! madd {
        (avx2, $acc:ident, $w:ident) => {
            concat!(
                "vpmaddwd {t:y}, {xv:y}, {",
                stringify!($w),
                ":y}\n",
                "vpaddd {",
                stringify!($acc),
                ":y}, {",
                stringify!($acc),
                ":y}, {t:y}"
            )
        };
        (vex, $acc:ident, $w:ident) => {
            concat!(
                "{{vex}} vpdpwssd {",
                stringify!($acc),
                ":y}, {xv:y}, {",
                stringify!($w),
                ":y}"
            )
        };
        (evex, $acc:ident, $w:ident) => {
            concat!(
                "vpdpwssd {",
                stringify!($acc),
                ":y}, {xv:y}, {",
                stringify!($w),
                ":y}"
            )
        };
    }

    /// The k-loop over up to 6 rows of x (i16) and 2 rows of w (i8, widened to i16 as they are loaded).
    macro_rules! k_loop_q8 {
        ($mode:ident; $k:expr, $w0:expr, $w1:expr, $pf:expr; $(($x:ident, $a:ident, $b:ident)),+) => {{
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
                        madd!($mode, $a, wa),
                        madd!($mode, $b, wb),
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

    /// As `k_loop_q8` with AVX-512 (VNNI, BW) on zmm registers: 32 columns per step (`k` a multiple of 32).
    macro_rules! k_loop_zmm {
        ($mode:ident; $k:expr, $w0:expr, $w1:expr, $pf:expr; $(($x:ident, $a:ident, $b:ident)),+) => {{
            $(let $a: i32; let $b: i32;)+
            // SAFETY (caller): each x pointer is valid for k i16 values, each w pointer for k bytes, k a positive
            // multiple of 32.
            unsafe {
                asm!(
                    $(
                        concat!("vpxor {", stringify!($a), ":x}, {", stringify!($a), ":x}, {", stringify!($a), ":x}"),
                        concat!("vpxor {", stringify!($b), ":x}, {", stringify!($b), ":x}, {", stringify!($b), ":x}"),
                    )+
                    "2:",
                    "vpmovsxbw {wa:z}, ymmword ptr [{w0} + {i}]",
                    "vpmovsxbw {wb:z}, ymmword ptr [{w1} + {i}]",
                    "prefetcht0 [{pf} + {i}*2]",
                    $(
                        concat!("vmovdqu16 {xv:z}, zmmword ptr [{", stringify!($x), "} + {i}*2]"),
                        concat!("vpdpwssd {", stringify!($a), ":z}, {xv:z}, {wa:z}"),
                        concat!("vpdpwssd {", stringify!($b), ":z}, {xv:z}, {wb:z}"),
                    )+
                    "add {i}, 32",
                    "cmp {i}, {k}",
                    "jb 2b",
                    $(
                        concat!("vextracti64x4 {t:y}, {", stringify!($a), ":z}, 1"),
                        concat!("vpaddd {", stringify!($a), ":y}, {", stringify!($a), ":y}, {t:y}"),
                        concat!("vextracti64x4 {t:y}, {", stringify!($b), ":z}, 1"),
                        concat!("vpaddd {", stringify!($b), ":y}, {", stringify!($b), ":y}, {t:y}"),
                        hsum_i32!($a), hsum_i32!($b),
                    )+
                    // The sums sit in the low lanes, which this keeps; code after it may be SSE-encoded.
                    "vzeroupper",
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

    /// Defines a [`Tile`] whose k-loop uses `madd!`'s `$mode`.
    macro_rules! tile_fn {
        ($(#[$doc:meta])* $name:ident, $kl:ident, $mode:ident, $feat:literal) => {
    $(#[$doc])*
    /// # Safety
    /// The CPU must support the features named; the rows must lie inside the slices.
    #[target_feature(enable = $feat)]
    pub unsafe fn $name(
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
                let t = $kl!($mode; k, w0, w1, pf;
                    (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3), (x4, a4, b4), (x5, a5, b5));
                acc[..6].copy_from_slice(&t);
            }
            5 => {
                let (x0, x1, x2, x3, x4) = (xp(0), xp(1), xp(2), xp(3), xp(4));
                let t = $kl!($mode; k, w0, w1, pf;
                    (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3), (x4, a4, b4));
                acc[..5].copy_from_slice(&t);
            }
            4 => {
                let (x0, x1, x2, x3) = (xp(0), xp(1), xp(2), xp(3));
                let t = $kl!($mode; k, w0, w1, pf; (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3));
                acc[..4].copy_from_slice(&t);
            }
            3 => {
                let (x0, x1, x2) = (xp(0), xp(1), xp(2));
                let t = $kl!($mode; k, w0, w1, pf; (x0, a0, b0), (x1, a1, b1), (x2, a2, b2));
                acc[..3].copy_from_slice(&t);
            }
            2 => {
                let (x0, x1) = (xp(0), xp(1));
                let t = $kl!($mode; k, w0, w1, pf; (x0, a0, b0), (x1, a1, b1));
                acc[..2].copy_from_slice(&t);
            }
            _ => {
                let x0 = xp(0);
                let t = $kl!($mode; k, w0, w1, pf; (x0, a0, b0));
                acc[..1].copy_from_slice(&t);
            }
        }
        acc
    }
        };
    }

    tile_fn!(
        /// Exact dot products of rows `r0..r1` (1 to 6) of xq with rows `o` and `p` of w (AVX2).
        tile_avx2, k_loop_q8, avx2, "avx2"
    );
    tile_fn!(
        /// As `tile_avx2`, with AVX-VNNI's `vpdpwssd`.
        tile_avx_vnni, k_loop_q8, vex, "avx2"
    );
    tile_fn!(
        /// As `tile_avx2`, with AVX-512 VNNI's `vpdpwssd` on ymm registers.
        tile_avx512_vnni, k_loop_q8, evex, "avx2"
    );
    tile_fn!(
        /// As `tile_avx512_vnni` on zmm registers, 32 products per instruction; `w.stride` must be a multiple of 32.
        tile_avx512_zmm, k_loop_zmm, evex, "avx512f,avx512bw,avx512vnni"
    );
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
            (6, 4, 64),
            (7, 3, 96),
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
            // Every k-loop this CPU runs gives the same sums.
            #[cfg(target_arch = "x86_64")]
            for (name, tile) in x86_tiles() {
                if name == "avx512-zmm" && !q.stride.is_multiple_of(32) {
                    continue;
                }
                let mut a3 = vec![0i32; n * m];
                // SAFETY: `x86_tiles` lists only the tiles this CPU supports.
                unsafe { x86::dots(&xq, n, &q, &mut a3, tile) };
                assert_eq!(a3, a2, "{name} {n}x{m}x{k}");
            }
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

    /// The x86 tiles this CPU supports, by name.
    #[cfg(target_arch = "x86_64")]
    fn x86_tiles() -> Vec<(&'static str, x86::Tile)> {
        use std::arch::is_x86_feature_detected as has;
        let mut v: Vec<(&'static str, x86::Tile)> = Vec::new();
        if has!("avx2") {
            v.push(("avx2", x86::tile_avx2));
            if has!("avxvnni") {
                v.push(("avx-vnni", x86::tile_avx_vnni));
            }
            if has!("avx512vnni") && has!("avx512vl") {
                v.push(("avx512-vnni", x86::tile_avx512_vnni));
            }
            if has!("avx512vnni") && has!("avx512bw") {
                v.push(("avx512-zmm", x86::tile_avx512_zmm));
            }
        }
        v
    }

    #[test]
    fn the_chosen_kernel_is_the_best_this_cpu_has() {
        #[cfg(target_arch = "x86_64")]
        if std::env::var(ENV_KERNEL).is_err() && std::arch::is_x86_feature_detected!("avxvnni") {
            assert!(matches!(kernel(), Kernel::AvxVnni | Kernel::Avx512Zmm));
        }
        assert_eq!(
            kernel() == Kernel::Portable,
            best_kernel() == Kernel::Portable
                || std::env::var(ENV_KERNEL).is_ok_and(|v| v == "portable")
        );
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
