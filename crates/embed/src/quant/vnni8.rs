//! The int8 products with 8-bit activations on AVX-512 VNNI: `vpdpbusd` multiplies 64 unsigned bytes by 64 signed
//! bytes and adds each group of four into an i32 lane, in one instruction (twice `vpdpwssd`'s 32 products, and no
//! widening of the weights). The activations (integers in [-127, 127], `quant::Activations::Bits8`) are offset by 128
//! to make them unsigned, and each sum is corrected by `128 · Σ_i q[o][i]` (kept with the weights): the result is the
//! exact integer sum the i16 kernels give for the same values. Rows of w must be a multiple of 64 bytes wide (all of
//! MiniLM's are); `quant` uses the i16 kernels otherwise.

use std::arch::asm;

use super::{QuantMatrix, block_rows};
use crate::kernels::{MR, NR, for_each_tile};

/// Columns per k-step.
const KSTEP: usize = 64;
/// How many rows of w ahead of the current pair the k-loop prefetches.
const PREFETCH_ROWS: usize = 4;

/// Whether `w`'s rows suit this kernel.
pub(super) fn fits(w: &QuantMatrix) -> bool {
    w.stride.is_multiple_of(KSTEP)
}

/// `acc[r * w.rows + o] = Σ_i xq[r][i] · q[o][i]`, exact.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI; every value of `xq` must lie in [-128, 127]; `xq` holds `rows` rows of
/// `w.stride` values and `acc` at least `rows × w.rows`; `fits(w)`.
pub(super) unsafe fn dots(xq: &[i16], rows: usize, w: &QuantMatrix, acc: &mut [i32]) {
    const _: () = assert!(MR == 6 && NR == 2);
    let k = w.stride;
    assert!(fits(w) && xq.len() >= rows * k && acc.len() >= rows * w.rows);
    // x + 128 as bytes (the padding becomes 128, against zero weights).
    let xu: Vec<u8> = xq[..rows * k]
        .iter()
        .map(|&v| (v as i32 + 128) as u8)
        .collect();
    let block = block_rows(k);
    let mut o0 = 0;
    while o0 < w.rows {
        let o1 = (o0 + block).min(w.rows);
        for_each_tile(rows, |r0, r1| {
            let mut o = o0;
            while o < o1 {
                // An odd last row of w is paired with itself and the second result dropped.
                let p = if o + 1 < o1 { o + 1 } else { o };
                // SAFETY: rows r0..r1 of xu and o, p of w lie inside their slices (asserted above); the CPU has the
                // features (the caller).
                let t = unsafe { tile(&xu, w, r0, r1, o, p) };
                let (c0, c1) = (128 * w.wsum[o], 128 * w.wsum[p]);
                let out = acc[r0 * w.rows..r1 * w.rows].chunks_exact_mut(w.rows);
                if p > o {
                    for (row, s) in out.zip(&t) {
                        let pair = &mut row[o..o + 2];
                        pair[0] = s[0] - c0;
                        pair[1] = s[1] - c1;
                    }
                } else {
                    for (row, s) in out.zip(&t) {
                        row[o] = s[0] - c0;
                    }
                }
                o = p + 1;
            }
        });
        o0 = o1;
    }
}

/// The k-loop over up to 6 rows of x (u8) and 2 rows of w (i8): `vpdpbusd` into 12 zmm accumulators, each summed
/// to one i32 at the end.
macro_rules! k_loop_u8 {
    ($k:expr, $w0:expr, $w1:expr, $pf:expr; $(($x:ident, $a:ident, $b:ident)),+) => {{
        $(let $a: i32; let $b: i32;)+
        // SAFETY (caller): each x pointer is valid for k bytes, each w pointer for k bytes, k a positive multiple of
        // 64.
        unsafe {
            asm!(
                $(
                    concat!("vpxor {", stringify!($a), ":x}, {", stringify!($a), ":x}, {", stringify!($a), ":x}"),
                    concat!("vpxor {", stringify!($b), ":x}, {", stringify!($b), ":x}, {", stringify!($b), ":x}"),
                )+
                "2:",
                "vmovdqu8 {wa:z}, zmmword ptr [{w0} + {i}]",
                "vmovdqu8 {wb:z}, zmmword ptr [{w1} + {i}]",
                "prefetcht0 [{pf} + {i}*2]",
                "prefetcht0 [{pf} + {i}*2 + 64]",
                $(
                    concat!("vmovdqu8 {xv:z}, zmmword ptr [{", stringify!($x), "} + {i}]"),
                    concat!("vpdpbusd {", stringify!($a), ":z}, {xv:z}, {wa:z}"),
                    concat!("vpdpbusd {", stringify!($b), ":z}, {xv:z}, {wb:z}"),
                )+
                "add {i}, 64",
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

/// Sums (with the +128 offset) of rows `r0..r1` (1 to 6) of xu with rows `o` and `p` of w.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI; the rows must lie inside the slices; `fits(w)`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn tile(
    xu: &[u8],
    w: &QuantMatrix,
    r0: usize,
    r1: usize,
    o: usize,
    p: usize,
) -> [[i32; 2]; MR] {
    let mut acc = [[0i32; 2]; MR];
    let k = w.stride;
    let xp = |r: usize| xu[(r0 + r) * k..][..k].as_ptr();
    let w0 = w.q[o * k..][..k].as_ptr();
    let w1 = w.q[p * k..][..k].as_ptr();
    // Rows further on, fetched ahead at twice the pace (a pair per k-loop); a prefetch never faults.
    let pf = w0.wrapping_add(PREFETCH_ROWS * k);
    match (r1 - r0).clamp(1, MR) {
        6 => {
            let (x0, x1, x2, x3, x4, x5) = (xp(0), xp(1), xp(2), xp(3), xp(4), xp(5));
            let t = k_loop_u8!(k, w0, w1, pf;
                (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3), (x4, a4, b4), (x5, a5, b5));
            acc[..6].copy_from_slice(&t);
        }
        5 => {
            let (x0, x1, x2, x3, x4) = (xp(0), xp(1), xp(2), xp(3), xp(4));
            let t = k_loop_u8!(k, w0, w1, pf;
                (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3), (x4, a4, b4));
            acc[..5].copy_from_slice(&t);
        }
        4 => {
            let (x0, x1, x2, x3) = (xp(0), xp(1), xp(2), xp(3));
            let t =
                k_loop_u8!(k, w0, w1, pf; (x0, a0, b0), (x1, a1, b1), (x2, a2, b2), (x3, a3, b3));
            acc[..4].copy_from_slice(&t);
        }
        3 => {
            let (x0, x1, x2) = (xp(0), xp(1), xp(2));
            let t = k_loop_u8!(k, w0, w1, pf; (x0, a0, b0), (x1, a1, b1), (x2, a2, b2));
            acc[..3].copy_from_slice(&t);
        }
        2 => {
            let (x0, x1) = (xp(0), xp(1));
            let t = k_loop_u8!(k, w0, w1, pf; (x0, a0, b0), (x1, a1, b1));
            acc[..2].copy_from_slice(&t);
        }
        _ => {
            let x0 = xp(0);
            let t = k_loop_u8!(k, w0, w1, pf; (x0, a0, b0));
            acc[..1].copy_from_slice(&t);
        }
    }
    acc
}
