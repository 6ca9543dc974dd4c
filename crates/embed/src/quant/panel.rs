//! The int8 products on AVX-512 VNNI with the weights packed in panels of 64 output channels: each vector of weights
//! holds 16 channels' next 4 (or 2) columns, multiplied by one row's same columns broadcast to every lane, so each
//! lane sums one output channel and no horizontal sum is needed at the end (the row-by-row kernels of `vnni8` and
//! `x86` spend as much on those sums as on the products when a row has 384 columns). A tile of up to 6 rows of x
//! keeps 6 × 4 accumulators in registers over the whole k-loop. The sums are the exact integers the other kernels
//! give, so the results are the same bit for bit.
//!
//! Two layouts, chosen by the matrix's activations when the encoder loads: 8-bit activations (`Bits8`, `Zp8`) take
//! groups of 4 columns for `vpdpbusd` (x offset by 128 to make it unsigned, corrected by `128 · Σ q` as `vnni8`
//! does); 13-bit ones groups of 2 columns, widened to i16 as they are loaded, for `vpdpwssd`.

use super::{Activations, QuantMatrix};

/// Output channels per panel: four vectors of 16 lanes.
pub(super) const PANEL: usize = 64;

/// A matrix's weights in panels: for panel `b` and column group `g`, the `PANEL` channels' `group` columns
/// `g · group ..` side by side (channel-major within the group), zero beyond the matrix's rows.
pub(crate) struct Panels {
    pub(super) data: Vec<i8>,
    /// Columns per group: 4 for 8-bit activations, 2 for 13-bit ones.
    pub(super) group: usize,
    /// Column groups per panel: the matrix's stride / `group`.
    pub(super) groups: usize,
}

impl Panels {
    /// `w`'s weights (row-major `q`) in panels for activations `act`.
    pub(super) fn pack(w: &QuantMatrix, act: Activations) -> Panels {
        let group = if act == Activations::Bits13 { 2 } else { 4 };
        let groups = w.stride / group;
        let panels = w.rows.div_ceil(PANEL);
        let mut data = vec![0i8; panels * groups * PANEL * group];
        for o in 0..w.rows {
            let (b, c) = (o / PANEL, o % PANEL);
            let row = &w.q[o * w.stride..][..w.stride];
            for (g, cols) in row.chunks_exact(group).enumerate() {
                let at = ((b * groups + g) * PANEL + c) * group;
                data[at..at + group].copy_from_slice(cols);
            }
        }
        Panels {
            data,
            group,
            groups,
        }
    }

    /// The weight of output `o`, column `i`.
    pub(super) fn at(&self, o: usize, i: usize) -> i8 {
        let (b, c) = (o / PANEL, o % PANEL);
        let (g, e) = (i / self.group, i % self.group);
        self.data[((b * self.groups + g) * PANEL + c) * self.group + e]
    }

    /// Whether this layout multiplies activations `act`: groups of 4 need 8-bit values.
    pub(super) fn takes(&self, act: Activations) -> bool {
        self.group == 2 || act != Activations::Bits13
    }
}

/// `acc[r * w.rows + o] = Σ_i xq[r][i] · q[o][i]`, exact.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI; `p` is `w`'s panels and `p.takes(act)` for the activations in `xq`
/// (values in [-128, 127] for groups of 4); `xq` holds `rows` rows of `w.stride` and `acc` at least `rows × w.rows`.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn dots(xq: &[i16], rows: usize, w: &QuantMatrix, p: &Panels, acc: &mut [i32]) {
    let k = w.stride;
    assert!(xq.len() >= rows * k && acc.len() >= rows * w.rows);
    assert!(
        p.groups * p.group == k
            && p.data.len() >= w.rows.div_ceil(PANEL) * p.groups * PANEL * p.group
    );
    // 8-bit values offset by 128 as bytes (the padding becomes 128, against zero weights), corrected below.
    let xu: Vec<u8> = if p.group == 4 {
        xq[..rows * k]
            .iter()
            .map(|&v| (v as i32 + 128) as u8)
            .collect()
    } else {
        Vec::new()
    };
    let panel_bytes = p.groups * PANEL * p.group;
    // A tile's sums (each tile writes the rows it reads back).
    let mut sums = [[0i32; PANEL]; crate::kernels::MR];
    for b in 0..w.rows.div_ceil(PANEL) {
        let o0 = b * PANEL;
        let n = PANEL.min(w.rows - o0);
        // What the offset adds to each channel's sum: 128 · Σ q.
        let mut off = [0i32; PANEL];
        if p.group == 4 {
            for (d, &s) in off.iter_mut().zip(&w.wsum[o0..o0 + n]) {
                *d = 128 * s;
            }
        }
        let panel = &p.data[b * panel_bytes..][..panel_bytes];
        crate::kernels::for_each_tile(rows, |r0, r1| {
            // SAFETY: rows r0..r1 lie inside xq / xu (asserted), the panel inside p.data; the CPU has the features.
            unsafe {
                match p.group {
                    4 => x86::tile_u8(&xu[r0 * k..r1 * k], k, panel, p.groups, &mut sums),
                    _ => x86::tile_i16(&xq[r0 * k..r1 * k], k, panel, p.groups, &mut sums),
                }
            }
            for (r, s) in (r0..r1).zip(&sums) {
                for ((d, &s), &off) in acc[r * w.rows + o0..][..n].iter_mut().zip(s).zip(&off) {
                    *d = s - off;
                }
            }
        });
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The tiles: up to 6 rows of x against one panel, 4 accumulators per row.

    use std::arch::x86_64::*;

    use super::PANEL;
    use crate::kernels::MR;

    // The tiles below take 1 to 6 rows.
    const _: () = assert!(MR == 6);

    /// Sums of the rows of `xu` (`k` bytes each, 1 to 6 rows, offset by 128) with a panel of groups of 4.
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI; `panel` holds `groups` groups of `PANEL × 4` bytes and each row of `xu` `4 · groups`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn tile_u8(
        xu: &[u8],
        k: usize,
        panel: &[i8],
        groups: usize,
        out: &mut [[i32; PANEL]; MR],
    ) {
        assert!(panel.len() >= groups * PANEL * 4 && k >= groups * 4 && xu.len().is_multiple_of(k));
        let x = |r: usize| xu[r * k..][..groups * 4].as_ptr();
        // SAFETY (all arms): the bounds asserted above.
        unsafe {
            match xu.len() / k {
                6 => rows_u8([x(0), x(1), x(2), x(3), x(4), x(5)], panel, groups, out),
                5 => rows_u8([x(0), x(1), x(2), x(3), x(4)], panel, groups, out),
                4 => rows_u8([x(0), x(1), x(2), x(3)], panel, groups, out),
                3 => rows_u8([x(0), x(1), x(2)], panel, groups, out),
                2 => rows_u8([x(0), x(1)], panel, groups, out),
                1 => rows_u8([x(0)], panel, groups, out),
                _ => {}
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn rows_u8<const R: usize>(
        x: [*const u8; R],
        panel: &[i8],
        groups: usize,
        out: &mut [[i32; PANEL]; MR],
    ) {
        let mut acc = [[_mm512_setzero_si512(); 4]; R];
        let w = panel.as_ptr();
        for g in 0..groups {
            // SAFETY: group g of the panel and columns 4g..4g+4 of each row are in bounds (the caller).
            unsafe {
                let wg = w.add(g * PANEL * 4);
                let mut wv = [_mm512_setzero_si512(); 4];
                for (c, v) in wv.iter_mut().enumerate() {
                    *v = _mm512_loadu_si512(wg.add(c * 64).cast());
                }
                for r in 0..R {
                    let xv = _mm512_set1_epi32(x[r].add(4 * g).cast::<i32>().read_unaligned());
                    for c in 0..4 {
                        acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], xv, wv[c]);
                    }
                }
            }
        }
        // SAFETY: the CPU has the features (the caller).
        unsafe { store(&acc, out) };
    }

    /// Sums of the rows of `xq` (`k` i16 each, 1 to 6 rows) with a panel of groups of 2, widened as loaded.
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI; `panel` holds `groups` groups of `PANEL × 2` bytes and each row of `xq` `2 · groups`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn tile_i16(
        xq: &[i16],
        k: usize,
        panel: &[i8],
        groups: usize,
        out: &mut [[i32; PANEL]; MR],
    ) {
        assert!(panel.len() >= groups * PANEL * 2 && k >= groups * 2 && xq.len().is_multiple_of(k));
        let x = |r: usize| xq[r * k..][..groups * 2].as_ptr();
        // SAFETY (all arms): the bounds asserted above.
        unsafe {
            match xq.len() / k {
                6 => rows_i16([x(0), x(1), x(2), x(3), x(4), x(5)], panel, groups, out),
                5 => rows_i16([x(0), x(1), x(2), x(3), x(4)], panel, groups, out),
                4 => rows_i16([x(0), x(1), x(2), x(3)], panel, groups, out),
                3 => rows_i16([x(0), x(1), x(2)], panel, groups, out),
                2 => rows_i16([x(0), x(1)], panel, groups, out),
                1 => rows_i16([x(0)], panel, groups, out),
                _ => {}
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn rows_i16<const R: usize>(
        x: [*const i16; R],
        panel: &[i8],
        groups: usize,
        out: &mut [[i32; PANEL]; MR],
    ) {
        let mut acc = [[_mm512_setzero_si512(); 4]; R];
        let w = panel.as_ptr();
        for g in 0..groups {
            // SAFETY: group g of the panel and columns 2g..2g+2 of each row are in bounds (the caller).
            unsafe {
                let wg = w.add(g * PANEL * 2);
                let mut wv = [_mm512_setzero_si512(); 4];
                for (c, v) in wv.iter_mut().enumerate() {
                    *v = _mm512_cvtepi8_epi16(_mm256_loadu_si256(wg.add(c * 32).cast()));
                }
                for r in 0..R {
                    let xv = _mm512_set1_epi32(x[r].add(2 * g).cast::<i32>().read_unaligned());
                    for c in 0..4 {
                        acc[r][c] = _mm512_dpwssd_epi32(acc[r][c], xv, wv[c]);
                    }
                }
            }
        }
        // SAFETY: the CPU has the features (the caller).
        unsafe { store(&acc, out) };
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn store<const R: usize>(acc: &[[__m512i; 4]; R], out: &mut [[i32; PANEL]; MR]) {
        for (a, o) in acc.iter().zip(out.iter_mut()) {
            for (c, v) in a.iter().enumerate() {
                // SAFETY: 16 i32 lanes into 16 slots of `o`.
                unsafe { _mm512_storeu_si512(o[c * 16..][..16].as_mut_ptr().cast(), *v) };
            }
        }
    }
}
