//! Quantising a row of activations: symmetric (`Bits8`, `Bits13`: round half away from zero of `v / s`) and with a
//! zero point (`Activations::Zp8`: a row's range `[min(x, 0), max(x, 0)]` onto 256 steps `u`, held as `u − 128` so
//! that every kernel takes them as 8-bit values; `matmul_q8` adds the zero point's share `(128 − z) · Σ_i q[o][i]` to
//! each sum). The ranges and conversions run on AVX-512 when the CPU has it, with the same IEEE operations in the same
//! order as the portable loops, so the same bytes on every CPU (`rustc` vectorised the portable ones poorly: 11% of a
//! forward pass for the zero-point rows).

/// The largest magnitude in `row`, NaNs left out.
pub(super) fn abs_max(row: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if wide() {
        // SAFETY: the CPU has AVX-512 F (`wide`).
        return unsafe { x86::abs_max(row) };
    }
    row.iter().fold(0f32, |m, v| m.max(v.abs()))
}

/// `out[i]` = `row[i] · inv` rounded half away from zero (by truncation: `round()` is a libm call on baseline x86-64);
/// the caller keeps `|row[i] · inv|` within i16 (a NaN gives 0).
pub(super) fn symmetric(row: &[f32], out: &mut [i16], inv: f32) {
    #[cfg(target_arch = "x86_64")]
    if wide() {
        // SAFETY: the CPU has AVX-512 F (`wide`); `out` is as long as `row` (the caller's slices).
        unsafe { x86::symmetric(row, out, inv) };
        return;
    }
    for (d, &v) in out.iter_mut().zip(row) {
        *d = sym_one(v, inv);
    }
}

#[inline(always)]
fn sym_one(v: f32, inv: f32) -> i16 {
    let y = v * inv;
    (y + 0.5f32.copysign(y)) as i16
}

/// Quantises each row of x (`rows × cols`) into `xq` (`rows × stride`, zero padded); returns the per-row scales and
/// sets `zp` to each row's `128 − z`.
pub(super) fn quantize_rows_zp(
    x: &[f32],
    rows: usize,
    cols: usize,
    stride: usize,
    xq: &mut [i16],
    zp: &mut Vec<i32>,
) -> Vec<f32> {
    let mut scales = vec![0f32; rows];
    zp.clear();
    zp.resize(rows, 0);
    #[cfg(target_arch = "x86_64")]
    let wide = wide();
    for r in 0..rows {
        let row = &x[r * cols..][..cols];
        let out = &mut xq[r * stride..][..stride];
        #[cfg(target_arch = "x86_64")]
        let (lo, hi) = if wide {
            // SAFETY: the CPU has AVX-512 F (`wide`).
            unsafe { x86::range(row) }
        } else {
            range(row)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let (lo, hi) = range(row);
        if hi - lo == 0.0 || !(hi - lo).is_finite() {
            out.fill(0);
            continue;
        }
        let s = (hi - lo) / 255.0;
        let inv = 1.0 / s;
        // lo <= 0 <= hi, so z lies in [0, 255] and 0 is exactly representable (as u = z).
        let z = (-lo * inv + 0.5) as i32;
        scales[r] = s;
        zp[r] = 128 - z;
        let zf = z as f32;
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: the CPU has AVX-512 F (`wide`); `out` is at least `row.len()` long.
            unsafe { x86::convert(row, &mut out[..cols], inv, zf) };
            out[cols..].fill(0);
            continue;
        }
        for (d, &v) in out[..cols].iter_mut().zip(row) {
            *d = one(v, inv, zf);
        }
        out[cols..].fill(0);
    }
    scales
}

/// Whether the AVX-512 loops can run (other architectures take the portable loops).
#[cfg(target_arch = "x86_64")]
fn wide() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// `u − 128` for v: `u = round(v / s) + z`, rounded half up by truncation (v / s + z >= -0.5 for v in the range),
/// at most 255 (the top can round to 256); a NaN fails both compares and becomes `u = 0`.
#[inline(always)]
fn one(v: f32, inv: f32, zf: f32) -> i16 {
    let y = v * inv + zf + 0.5;
    let y = if y > 255.0 {
        255.0
    } else if y >= 0.0 {
        y
    } else {
        0.0
    };
    (y as i32 - 128) as i16
}

/// `(min(row, 0), max(row, 0))`, NaNs left out (an infinity makes the range infinite: the caller checks).
fn range(row: &[f32]) -> (f32, f32) {
    row.iter().fold((0f32, 0f32), |(lo, hi), &v| {
        (if v < lo { v } else { lo }, if v > hi { v } else { hi })
    })
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// `super::abs_max` on 16 lanes: `_mm512_max_ps(|v|, m)` returns m when v is NaN, as `f32::max` does.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn abs_max(row: &[f32]) -> f32 {
        let mut m = _mm512_setzero_ps();
        let mut chunks = row.chunks_exact(16);
        for c in &mut chunks {
            // SAFETY: c holds 16 floats.
            let v = unsafe { _mm512_loadu_ps(c.as_ptr()) };
            m = _mm512_max_ps(_mm512_abs_ps(v), m);
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            // SAFETY: the mask reads only the tail's floats; the other lanes are 0.
            let v = unsafe { _mm512_maskz_loadu_ps((1u16 << tail.len()) - 1, tail.as_ptr()) };
            m = _mm512_max_ps(_mm512_abs_ps(v), m);
        }
        // A max is exact in any order.
        _mm512_reduce_max_ps(m)
    }

    /// `out[i] = super::sym_one(row[i], inv)` on 16 lanes: the same multiply, `±0.5` by y's sign bit, the add,
    /// truncation to i32 (a NaN gives i32::MIN, whose low 16 bits are 0, as `as i16` gives) and narrowing.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F; `out` is at least `row.len()` long.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn symmetric(row: &[f32], out: &mut [i16], inv: f32) {
        assert!(out.len() >= row.len());
        let vinv = _mm512_set1_ps(inv);
        let (sign, half) = (
            _mm512_set1_epi32(i32::MIN),
            _mm512_set1_epi32(0.5f32.to_bits() as i32),
        );
        let step = |v: __m512| {
            let y = _mm512_mul_ps(v, vinv);
            let h = _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(y), sign), half);
            _mm512_cvttps_epi32(_mm512_add_ps(y, _mm512_castsi512_ps(h)))
        };
        // SAFETY: the CPU has AVX-512 F (the caller); `out` is long enough (asserted).
        unsafe { map16(row, out, step) };
    }

    /// `out[i]` = `step` of `row[i]` narrowed to i16, 16 lanes at a time, the tail masked.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F; `out` is at least `row.len()` long.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn map16(row: &[f32], out: &mut [i16], step: impl Fn(__m512) -> __m512i) {
        assert!(out.len() >= row.len());
        let n = row.len();
        let mut i = 0;
        while i + 16 <= n {
            // SAFETY: 16 floats from i are inside row, 16 i16 from i inside out (asserted).
            unsafe {
                let u = step(_mm512_loadu_ps(row.as_ptr().add(i)));
                _mm256_storeu_si256(out.as_mut_ptr().add(i).cast(), _mm512_cvtepi32_epi16(u));
            }
            i += 16;
        }
        if i < n {
            let mask = (1u16 << (n - i)) - 1;
            // SAFETY: the mask reads and writes only the n − i elements left.
            unsafe {
                let u = step(_mm512_maskz_loadu_ps(mask, row.as_ptr().add(i)));
                _mm512_mask_cvtepi32_storeu_epi16(out.as_mut_ptr().add(i).cast(), mask, u);
            }
        }
    }

    /// `super::range` on 16 lanes. `_mm512_min_ps(v, lo)` returns `lo` when v is NaN, as the compare does.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn range(row: &[f32]) -> (f32, f32) {
        let (mut lo, mut hi) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        let mut chunks = row.chunks_exact(16);
        for c in &mut chunks {
            // SAFETY: c holds 16 floats.
            let v = unsafe { _mm512_loadu_ps(c.as_ptr()) };
            lo = _mm512_min_ps(v, lo);
            hi = _mm512_max_ps(v, hi);
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            let mask = (1u16 << tail.len()) - 1;
            // SAFETY: the mask reads only the tail's floats; the other lanes are 0, inside the range already.
            let v = unsafe { _mm512_maskz_loadu_ps(mask, tail.as_ptr()) };
            lo = _mm512_min_ps(v, lo);
            hi = _mm512_max_ps(v, hi);
        }
        // Min and max are exact in any order.
        (_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi))
    }

    /// `out[i] = super::one(row[i], inv, zf)` on 16 lanes: the same multiply and two adds, then the compares as
    /// `max(y, 0)` (0 for a NaN: the second operand) and `min(·, 255)`, truncation to i32 and narrowing to i16.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F; `out` is at least `row.len()` long.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn convert(row: &[f32], out: &mut [i16], inv: f32, zf: f32) {
        assert!(out.len() >= row.len());
        let (vinv, vzf, half) = (_mm512_set1_ps(inv), _mm512_set1_ps(zf), _mm512_set1_ps(0.5));
        let (zero, top, off) = (
            _mm512_setzero_ps(),
            _mm512_set1_ps(255.0),
            _mm512_set1_epi32(128),
        );
        let step = |v: __m512| {
            let y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(v, vinv), vzf), half);
            let y = _mm512_min_ps(_mm512_max_ps(y, zero), top);
            _mm512_sub_epi32(_mm512_cvttps_epi32(y), off)
        };
        // SAFETY: the CPU has AVX-512 F (the caller); `out` is long enough (asserted).
        unsafe { map16(row, out, step) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX-512 loops give the portable loops' bytes, NaNs, infinities, ties and the ends included.
    #[test]
    fn the_wide_loops_equal_the_portable_ones() {
        assert_eq!(sym_one(f32::NAN, 1.0), 0);
        // The portable loops' ends, on every CPU.
        assert_eq!(one(f32::NAN, 1.0, 0.0), -128);
        assert_eq!(
            (one(f32::INFINITY, 1.0, 0.0), one(-3.0, 1.0, 0.0)),
            (127, -128)
        );
        assert_eq!(range(&[-1.5, f32::NAN, 2.0, -0.0]), (-1.5, 2.0));
        if !wide() {
            eprintln!("this CPU has no AVX-512 F: only the portable loops ran");
            return;
        }
        let mut rows: Vec<Vec<f32>> = Vec::new();
        for len in [1, 5, 16, 17, 31, 384, 1536, 1541] {
            rows.push(
                (0..len)
                    .map(|i| ((i as f32) * 0.37).sin() * 3.0 - 0.4)
                    .collect(),
            );
            rows.push(
                (0..len)
                    .map(|i| ((i as f32) * 0.011).cos().max(0.0) * 7.0)
                    .collect(),
            );
        }
        let mut odd: Vec<f32> = (0..40).map(|i| i as f32 * 0.25 - 2.0).collect();
        odd[3] = f32::NAN;
        odd[17] = -0.0;
        rows.push(odd);
        for row in &rows {
            // SAFETY: the CPU has AVX-512 F (checked above).
            let (lo, hi) = unsafe { x86::range(row) };
            assert_eq!((lo.to_bits(), hi.to_bits()), {
                let (a, b) = range(row);
                (a.to_bits(), b.to_bits())
            });
            let inv = 255.0 / (hi - lo);
            let zf = (-lo * inv + 0.5) as i32 as f32;
            let mut wide_out = vec![0i16; row.len()];
            // SAFETY: as above; the output is as long as the row.
            unsafe { x86::convert(row, &mut wide_out, inv, zf) };
            let plain: Vec<i16> = row.iter().map(|&v| one(v, inv, zf)).collect();
            assert_eq!(wide_out, plain, "row of {}", row.len());
            assert!(plain.iter().all(|v| (-128..=127).contains(v)));
            // The symmetric loops, at 8 and 13 bits.
            // SAFETY: as above.
            let max = unsafe { x86::abs_max(row) };
            assert_eq!(
                max.to_bits(),
                row.iter().fold(0f32, |m, v| m.max(v.abs())).to_bits()
            );
            for amax in [127.0, 4095.0] {
                let inv = 1.0 / (max / amax);
                // SAFETY: as above.
                unsafe { x86::symmetric(row, &mut wide_out, inv) };
                let plain: Vec<i16> = row.iter().map(|&v| sym_one(v, inv)).collect();
                assert_eq!(wide_out, plain, "symmetric row of {}", row.len());
            }
        }
        // A NaN converts to u = 0, infinities to the ends.
        let mut ends = [0i16; 3];
        // SAFETY: as above.
        unsafe {
            x86::convert(
                &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY],
                &mut ends,
                1.0,
                0.0,
            )
        };
        assert_eq!(ends, [-128, 127, -128]);
    }
}
