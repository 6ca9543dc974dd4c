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

    /// Whether this layout multiplies activations `act`: groups of 4 need 8-bit values (asked by the x86-64 kernels).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
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
                    4 => {
                        x86::tile::<x86::Bytes>(&xu[r0 * k..r1 * k], k, panel, p.groups, &mut sums)
                    }
                    _ => {
                        x86::tile::<x86::Words>(&xq[r0 * k..r1 * k], k, panel, p.groups, &mut sums)
                    }
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

    /// How a layout's groups meet a row: columns per group, the activations' type, the panel's vectors, the product.
    pub(in super::super) trait Group {
        /// Columns per group.
        const COLS: usize;
        /// One activation.
        type X;
        /// The `c`-th vector of 16 channels of the group at `wg`.
        ///
        /// # Safety
        /// AVX-512 F, BW and VNNI; the group lies in its panel.
        unsafe fn weights(wg: *const i8, c: usize) -> __m512i;
        /// `acc` plus the products of `x` (one row's group in every lane) and `w`, summed per lane.
        ///
        /// # Safety
        /// AVX-512 F, BW and VNNI.
        unsafe fn dot(acc: __m512i, x: __m512i, w: __m512i) -> __m512i;
    }

    /// Groups of 4 columns of 8-bit activations (offset by 128, so unsigned): `vpdpbusd`.
    pub(in super::super) struct Bytes;

    impl Group for Bytes {
        const COLS: usize = 4;
        type X = u8;

        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        unsafe fn weights(wg: *const i8, c: usize) -> __m512i {
            // SAFETY: 64 bytes inside the panel (the caller).
            unsafe { _mm512_loadu_si512(wg.add(c * 64).cast()) }
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        unsafe fn dot(acc: __m512i, x: __m512i, w: __m512i) -> __m512i {
            _mm512_dpbusd_epi32(acc, x, w)
        }
    }

    /// Groups of 2 columns of 13-bit activations in i16, the weights widened as loaded: `vpdpwssd`.
    pub(in super::super) struct Words;

    impl Group for Words {
        const COLS: usize = 2;
        type X = i16;

        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        unsafe fn weights(wg: *const i8, c: usize) -> __m512i {
            // SAFETY: 32 bytes inside the panel (the caller).
            unsafe { _mm512_cvtepi8_epi16(_mm256_loadu_si256(wg.add(c * 32).cast())) }
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        unsafe fn dot(acc: __m512i, x: __m512i, w: __m512i) -> __m512i {
            _mm512_dpwssd_epi32(acc, x, w)
        }
    }

    /// Sums of the rows of `x` (`k` values each, 1 to 6 rows) with a panel of `G`'s groups.
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI; `panel` holds `groups` groups of `PANEL × G::COLS` bytes and each row of `x`
    /// `G::COLS · groups` values.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(in super::super) unsafe fn tile<G: Group>(
        x: &[G::X],
        k: usize,
        panel: &[i8],
        groups: usize,
        out: &mut [[i32; PANEL]; MR],
    ) {
        let cols = G::COLS;
        assert!(panel.len() >= groups * PANEL * cols && k >= groups * cols);
        assert!(x.len().is_multiple_of(k));
        let p = |r: usize| x[r * k..][..groups * cols].as_ptr();
        // SAFETY (all arms): the bounds asserted above.
        unsafe {
            match x.len() / k {
                6 => rows::<G, 6>([p(0), p(1), p(2), p(3), p(4), p(5)], panel, groups, out),
                5 => rows::<G, 5>([p(0), p(1), p(2), p(3), p(4)], panel, groups, out),
                4 => rows::<G, 4>([p(0), p(1), p(2), p(3)], panel, groups, out),
                3 => rows::<G, 3>([p(0), p(1), p(2)], panel, groups, out),
                2 => rows::<G, 2>([p(0), p(1)], panel, groups, out),
                1 => rows::<G, 1>([p(0)], panel, groups, out),
                _ => {}
            }
        }
    }

    /// The k-loop of a tile: per group, the panel's 4 vectors and each row's group broadcast (4 bytes either way).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn rows<G: Group, const R: usize>(
        x: [*const G::X; R],
        panel: &[i8],
        groups: usize,
        out: &mut [[i32; PANEL]; MR],
    ) {
        let mut acc = [[_mm512_setzero_si512(); 4]; R];
        let w = panel.as_ptr();
        for g in 0..groups {
            // SAFETY: group g of the panel and columns of group g of each row are in bounds (the caller).
            unsafe {
                let wg = w.add(g * PANEL * G::COLS);
                let mut wv = [_mm512_setzero_si512(); 4];
                for (c, v) in wv.iter_mut().enumerate() {
                    *v = G::weights(wg, c);
                }
                for r in 0..R {
                    let xv =
                        _mm512_set1_epi32(x[r].add(G::COLS * g).cast::<i32>().read_unaligned());
                    for c in 0..4 {
                        acc[r][c] = G::dot(acc[r][c], xv, wv[c]);
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
