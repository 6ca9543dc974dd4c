//! The int8 matrix kernel of the encoder's dense layers: `y = x · wᵀ + b` with w quantised to int8 per output row
//! (symmetric, once at model load) and each row of x quantised on the fly to 13-bit integers held in i16 (symmetric,
//! per row), so every product is an exact i32 sum scaled back once. x86-64 CPUs with AVX2 get an inline-assembly
//! k-loop (`vpmovsxbw` + `vpmaddwd`: 16 products per instruction, no saturation; chosen at run time, fast in debug
//! builds too), others a portable loop. Rows are padded to a multiple of 16 with zeros, so there is no tail; the
//! result for a row of x does not depend on which other rows are in the same call.

// Index loops mirror the shape of the tile.
#![allow(clippy::needless_range_loop)]

#[cfg(target_arch = "x86_64")]
use super::kernels::{MR, for_each_tile};
use super::kernels::{NR, SPLIT_ROWS, W_BLOCK_BYTES, threads};

/// Assembly summing the 8 i32 lanes of `$a` into its lowest lane, with `{t}` as scratch (exact in any order); used
/// by the i16 kernels of `x86` and the 8-bit one of `vnni8`.
#[cfg(target_arch = "x86_64")]
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

mod panel;
mod rows;
#[cfg(target_arch = "x86_64")]
mod vnni8;
use rows::quantize_rows_zp;

/// Columns are padded to a multiple of this (one k-step of the kernel).
const KSTEP: usize = 16;
/// The largest magnitude of a quantised activation: 13 bits keep the quantisation error of x far below the weights'
/// while `127 · 4095 · k` stays inside an i32 up to k = 4,128 (checked per product: see `act_max`).
const ACT_MAX: i32 = 4095;

/// A weight matrix `[rows][cols]` quantised per row: `w[o][i] ≈ q[o][i] · scale[o]`, rows padded to `stride`.
pub struct QuantMatrix {
    pub(super) q: Vec<i8>,
    scale: Vec<f32>,
    /// `Σ_i q[o][i]` per row: the offset an unsigned activation (`x + 128`) adds to a row's sum, removed after.
    pub(super) wsum: Vec<i32>,
    pub(super) rows: usize,
    cols: usize,
    pub(super) stride: usize,
    /// The weights in panels for the AVX-512 VNNI kernel (`panel`), when this CPU has it; `q` is then empty.
    panels: Option<panel::Panels>,
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
        let wsum = q
            .chunks_exact(stride)
            .map(|r| r.iter().map(|&v| i32::from(v)).sum())
            .collect();
        QuantMatrix {
            q,
            scale,
            wsum,
            rows,
            cols,
            stride,
            panels: None,
        }
    }

    /// Repacks the weights for the fastest kernel this CPU has for activations `act` (`panel`: AVX-512 VNNI, unless
    /// `AGENT_DISCOVER_EMBED_KERNEL` forces an older one); the row-major copy is then dropped. The sums do not change.
    pub fn pack(&mut self, act: Activations) {
        if kernel() == Kernel::Avx512Zmm && self.panels.is_none() {
            self.panels = Some(panel::Panels::pack(self, act));
            self.q = Vec::new();
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }
}

/// How finely a row of activations is quantised: 8 or 13 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activations {
    /// Integers in [-127, 127]: one byte, so CPUs with AVX-512 VNNI multiply 64 per instruction (`vpdpbusd`,
    /// `vnni8`); the other kernels take the same values in i16 and give the same sums.
    Bits8,
    /// Integers in [-4095, 4095] in i16 (issue 13).
    Bits13,
    /// One byte with a zero point per row: the row's range `[min(x, 0), max(x, 0)]` maps onto 256 steps, held as
    /// `u − 128` in [-128, 127] (so every kernel takes them as `Bits8` values), and the sums are corrected by
    /// `(128 − z) · Σ_i q[o][i]` after. For a skewed row (GELU's output, never below −0.17) that is up to twice
    /// `Bits8`'s resolution at the same speed.
    Zp8,
}

/// The dense products of an encoder layer, by the names `AGENT_DISCOVER_EMBED_ACT8_PRODUCTS` uses: the stacked query,
/// key and value projections, the attention output, and the feed-forward block's two products.
pub const PRODUCTS: [&str; 4] = ["qkv", "attn", "ffn1", "ffn2"];
/// The products whose activations are symmetric 8-bit by default: none (the feed-forward block's two take
/// `DEFAULT_ZP8`'s zero points instead). `ffn1` alone was the default before ("find_tool, third pass").
const DEFAULT_ACT8: [&str; 0] = [];

/// The environment variable choosing the activations' precision: `13` everywhere, `8` everywhere (with zero points
/// in `DEFAULT_ZP8`), or unset for the defaults (`DEFAULT_ACT8`, `DEFAULT_ZP8`).
pub const ENV_ACTIVATIONS: &str = "AGENT_DISCOVER_EMBED_ACTIVATIONS";
/// The environment variable naming the products with 8-bit activations (comma-separated among `PRODUCTS`), unless
/// `AGENT_DISCOVER_EMBED_ACTIVATIONS=13`; for experiments.
pub const ENV_ACT8_PRODUCTS: &str = "AGENT_DISCOVER_EMBED_ACT8_PRODUCTS";

/// The products whose 8-bit activations have a zero point per row (`Activations::Zp8`) by default: the feed-forward
/// block's two. With them every query set of BENCHMARKS.md keeps its figures but the golden set's R@5, 0.7 points
/// lower (one query), inside the 1 point allowed; symmetric 8 bits for `ffn2` lost a refusal ("find_tool, fourth
/// pass").
const DEFAULT_ZP8: [&str; 2] = ["ffn1", "ffn2"];
/// The environment variable naming the products with 8-bit activations with a zero point (comma-separated among
/// `PRODUCTS`; `none` for no product), unless `AGENT_DISCOVER_EMBED_ACTIVATIONS=13`; for experiments.
pub const ENV_ZP8_PRODUCTS: &str = "AGENT_DISCOVER_EMBED_ZP8_PRODUCTS";

/// Which of `PRODUCTS` have 8-bit activations with a zero point in this process (read once).
fn zp8() -> &'static [bool; 4] {
    static A: std::sync::OnceLock<[bool; 4]> = std::sync::OnceLock::new();
    A.get_or_init(|| from_env(ENV_ZP8_PRODUCTS, zp8_from))
}

/// Which of `PRODUCTS` have 8-bit activations in this process (read once).
fn act8() -> &'static [bool; 4] {
    static A: std::sync::OnceLock<[bool; 4]> = std::sync::OnceLock::new();
    A.get_or_init(|| from_env(ENV_ACT8_PRODUCTS, act8_from))
}

/// `read` given `AGENT_DISCOVER_EMBED_ACTIVATIONS` and the list variable `list`.
fn from_env(list: &str, read: fn(Option<&str>, Option<&str>) -> [bool; 4]) -> [bool; 4] {
    read(
        std::env::var(ENV_ACTIVATIONS).ok().as_deref(),
        std::env::var(list).ok().as_deref(),
    )
}

/// Which of `PRODUCTS` have a zero point given `AGENT_DISCOVER_EMBED_ACTIVATIONS` and
/// `AGENT_DISCOVER_EMBED_ZP8_PRODUCTS`.
fn zp8_from(setting: Option<&str>, list: Option<&str>) -> [bool; 4] {
    products_from(setting, list, false, &DEFAULT_ZP8)
}

/// Which of `PRODUCTS` have 8-bit activations given `AGENT_DISCOVER_EMBED_ACTIVATIONS` and
/// `AGENT_DISCOVER_EMBED_ACT8_PRODUCTS`.
fn act8_from(setting: Option<&str>, list: Option<&str>) -> [bool; 4] {
    products_from(setting, list, true, &DEFAULT_ACT8)
}

/// The products a list names: none under the setting `13`, else those of the list when it is given, else all of them
/// under the setting `8` when `all_at_8`, else `default`.
fn products_from(
    setting: Option<&str>,
    list: Option<&str>,
    all_at_8: bool,
    default: &[&str],
) -> [bool; 4] {
    PRODUCTS.map(|p| match (setting.map(str::trim), list) {
        (Some("13"), _) => false,
        (_, Some(list)) => list.split(',').any(|x| x.trim() == p),
        (Some("8"), None) if all_at_8 => true,
        _ => default.contains(&p),
    })
}

/// The activations' precision of one of `PRODUCTS` (13 bits for any other name).
pub fn activations_of(product: &str) -> Activations {
    match PRODUCTS.iter().position(|p| *p == product) {
        Some(i) if zp8()[i] => Activations::Zp8,
        Some(i) if act8()[i] => Activations::Bits8,
        _ => Activations::Bits13,
    }
}

/// What the local model's id gains for vectors of this process's encoder: `""` with 13-bit activations everywhere
/// (issue 13's encoder, so vectors stored before keep their id), `+a8` with symmetric 8 bits everywhere, else `+a8:`
/// and the products with symmetric 8 bits, then `+z8:` and those with zero points (`+z8:ffn1,ffn2` by default).
pub fn encoder_suffix() -> String {
    let zp: Vec<&str> = PRODUCTS
        .iter()
        .zip(zp8())
        .filter(|(_, on)| **on)
        .map(|(p, _)| *p)
        .collect();
    // A product with a zero point is named there, whatever `act8` says of it.
    let act8 = std::array::from_fn(|i| act8()[i] && !zp8()[i]);
    let mut suffix = suffix_of(&act8);
    if !zp.is_empty() {
        suffix.push_str(&format!("+z8:{}", zp.join(",")));
    }
    suffix
}

fn suffix_of(act8: &[bool; 4]) -> String {
    let on: Vec<&str> = PRODUCTS
        .iter()
        .zip(act8)
        .filter(|(_, on)| **on)
        .map(|(p, _)| *p)
        .collect();
    match on.len() {
        0 => String::new(),
        n if n == PRODUCTS.len() => "+a8".into(),
        _ => format!("+a8:{}", on.join(",")),
    }
}

/// The largest activation magnitude of `act` for which no sum over `stride` products can leave an i32.
fn act_max(stride: usize, act: Activations) -> i32 {
    let bound = i32::MAX as i64 / (127 * stride.max(1) as i64);
    let cap = match act {
        Activations::Bits8 => 127,
        Activations::Zp8 => 128,
        Activations::Bits13 => ACT_MAX,
    };
    cap.min(bound.max(1) as i32)
}

wide_fn!(
    /// Quantises each row of x (`rows × cols`) to `[-amax, amax]` into `xq` (`rows × stride`, zero padded); returns
    /// the per-row scales.
    fn quantize_rows = quantize_rows_impl(
        x: &[f32],
        rows: usize,
        cols: usize,
        stride: usize,
        xq: &mut [i16],
        act: Activations
    ) -> Vec<f32>
);

wide_fn!(
    /// `y[r * y_stride + o] = acc[r][o] · sx[r] · w.scale[o] + bias[o]`.
    fn rescale = rescale_impl(
        acc: &[i32],
        sx: &[f32],
        w: &QuantMatrix,
        bias: Option<&[f32]>,
        y: &mut [f32],
        y_stride: usize
    ) -> ()
);

#[inline(always)]
fn rescale_impl(
    acc: &[i32],
    sx: &[f32],
    w: &QuantMatrix,
    bias: Option<&[f32]>,
    y: &mut [f32],
    y_stride: usize,
) {
    let n = w.rows;
    for (r, &s) in sx.iter().enumerate() {
        let out = &mut y[r * y_stride..][..n];
        let a = &acc[r * n..][..n];
        match bias {
            Some(b) => {
                for (((d, &a), &ws), &b) in out.iter_mut().zip(a).zip(&w.scale[..n]).zip(&b[..n]) {
                    *d = a as f32 * (s * ws) + b;
                }
            }
            None => {
                for ((d, &a), &ws) in out.iter_mut().zip(a).zip(&w.scale[..n]) {
                    *d = a as f32 * (s * ws) + 0.0;
                }
            }
        }
    }
}

#[inline(always)]
fn quantize_rows_impl(
    x: &[f32],
    rows: usize,
    cols: usize,
    stride: usize,
    xq: &mut [i16],
    act: Activations,
) -> Vec<f32> {
    let amax = act_max(stride, act) as f32;
    let mut scales = vec![0f32; rows];
    for r in 0..rows {
        let row = &x[r * cols..][..cols];
        let out = &mut xq[r * stride..][..stride];
        let max = rows::abs_max(row);
        if max == 0.0 || !max.is_finite() {
            out.fill(0);
            continue;
        }
        let s = max / amax;
        let inv = 1.0 / s;
        scales[r] = s;
        rows::symmetric(row, &mut out[..cols], inv);
        out[cols..].fill(0);
    }
    scales
}

/// `y[r * y_stride + o] = bias[o] + Σ_i x[r][i] · w[o][i]` for the `rows` contiguous rows of x (`rows × w.cols`),
/// the activations quantised as `act` says.
pub(super) fn matmul_q8(
    x: &[f32],
    rows: usize,
    w: &QuantMatrix,
    bias: Option<&[f32]>,
    y: &mut [f32],
    y_stride: usize,
    act: Activations,
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
    let mut zp = Vec::new();
    let sx = match act {
        Activations::Zp8 => quantize_rows_zp(x, rows, w.cols, w.stride, &mut xq, &mut zp),
        _ => quantize_rows(x, rows, w.cols, w.stride, &mut xq, act),
    };
    let mut acc = vec![0i32; rows * w.rows];
    // As `matmul_t`: with AGENT_DISCOVER_EMBED_THREADS=2, both halves of x on two cores (same result bit for bit).
    if rows >= SPLIT_ROWS && threads() >= 2 {
        let half = rows / 2;
        let (a0, a1) = acc.split_at_mut(half * w.rows);
        let (x0, x1) = xq.split_at(half * w.stride);
        std::thread::scope(|s| {
            s.spawn(|| dots(x1, rows - half, w, a1, act));
            dots(x0, half, w, a0, act);
        });
    } else {
        dots(&xq, rows, w, &mut acc, act);
    }
    // Σ (u − z) · q = Σ (u − 128) · q + (128 − z) · Σ q, exact in i32 (|Σ q| <= 127 · cols).
    for (row, &off) in acc.chunks_exact_mut(w.rows).zip(&zp) {
        if off != 0 {
            for (a, &ws) in row.iter_mut().zip(&w.wsum) {
                *a += off * ws;
            }
        }
    }
    rescale(&acc, &sx, w, bias, y, y_stride);
}

/// `acc[r * w.rows + o] = Σ_i xq[r][i] · q[o][i]` (exact; xq in `act`'s range).
// Elsewhere than on x86-64 every layout takes the portable loop, whatever `act` and the panels.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn dots(xq: &[i16], rows: usize, w: &QuantMatrix, acc: &mut [i32], act: Activations) {
    assert!(xq.len() >= rows * w.stride && acc.len() >= rows * w.rows);
    if let Some(p) = &w.panels {
        #[cfg(target_arch = "x86_64")]
        if p.takes(act) {
            // SAFETY: panels exist only when the CPU has AVX-512 F, BW and VNNI (`pack`); `p` takes `act`'s values.
            unsafe { panel::dots(xq, rows, w, p, acc) };
            return;
        }
        // Activations the layout was not made for (the encoder never asks this): one weight at a time.
        return portable_dots(xq, rows, w, acc);
    }
    #[cfg(target_arch = "x86_64")]
    {
        if act != Activations::Bits13 && kernel() == Kernel::Avx512Zmm && vnni8::fits(w) {
            // SAFETY: the CPU has AVX-512 BW + VNNI (`kernel()`); xq holds 8-bit values; sizes asserted above.
            unsafe { vnni8::dots(xq, rows, w, acc) };
            return;
        }
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
    if let Some(p) = &w.panels {
        for r in 0..rows {
            for o in 0..w.rows {
                acc[r * w.rows + o] = (0..k)
                    .map(|i| i32::from(xq[r * k + i]) * i32::from(p.at(o, i)))
                    .sum();
            }
        }
        return;
    }
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
/// to 6 rows of i16) stay in cache while every tile passes over the block. Used by the x86-64 kernels only.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) fn block_rows(stride: usize) -> usize {
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
mod tests;
