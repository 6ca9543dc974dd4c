//! The int8 products' tests: every kernel gives the same integer sums, close to the f32 product.

use super::*;

#[test]
fn simd_and_portable_agree_exactly_and_approximate_the_f32_product() {
    for act in [Activations::Bits13, Activations::Bits8, Activations::Zp8] {
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
            (20, 1152, 384),
            (17, 384, 1536),
        ] {
            agree_and_approximate(n, m, k, act);
        }
    }
}

fn agree_and_approximate(n: usize, m: usize, k: usize, act: Activations) {
    let x: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
    let w: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.11).cos() * 0.2).collect();
    let b: Vec<f32> = (0..m).map(|i| i as f32 * 0.1).collect();
    let q = QuantMatrix::quantize(&w, m, k);
    let mut y = vec![0f32; n * m];
    matmul_q8(&x, n, &q, Some(&b), &mut y, m, act);
    // The same integer sums from the portable loop.
    let mut xq = vec![0i16; n * q.stride];
    match act {
        Activations::Zp8 => {
            let mut zp = Vec::new();
            quantize_rows_zp(&x, n, k, q.stride, &mut xq, &mut zp);
            assert!(
                xq.iter().all(|v| (-128..=127).contains(v)),
                "8 bits with a zero point"
            );
            assert!(zp.iter().all(|z| (-127..=128).contains(z)));
        }
        _ => drop(quantize_rows(&x, n, k, q.stride, &mut xq, act)),
    }
    if act == Activations::Bits8 {
        assert!(xq.iter().all(|v| v.abs() <= 127), "8-bit activations");
    }
    let (mut a1, mut a2) = (vec![0i32; n * m], vec![0i32; n * m]);
    dots(&xq, n, &q, &mut a1, act);
    portable_dots(&xq, n, &q, &mut a2);
    assert_eq!(a1, a2, "{act:?} {n}x{m}x{k}");
    // Every k-loop this CPU runs gives the same sums.
    #[cfg(target_arch = "x86_64")]
    {
        for (name, tile) in x86_tiles() {
            if name == "avx512-zmm" && !q.stride.is_multiple_of(32) {
                continue;
            }
            let mut a3 = vec![0i32; n * m];
            // SAFETY: `x86_tiles` lists only the tiles this CPU supports.
            unsafe { x86::dots(&xq, n, &q, &mut a3, tile) };
            assert_eq!(a3, a2, "{name} {act:?} {n}x{m}x{k}");
        }
        if act != Activations::Bits13 && has_vnni8() && vnni8::fits(&q) {
            let mut a4 = vec![0i32; n * m];
            // SAFETY: the CPU has the features (`has_vnni8`); the values are 8-bit (asserted above).
            unsafe { vnni8::dots(&xq, n, &q, &mut a4) };
            assert_eq!(a4, a2, "vnni8 {n}x{m}x{k}");
        }
        if has_vnni8() {
            // Both panel layouts: the one made for `act` runs the panel kernel, the other (groups of 4 against 13-bit
            // values) the portable loop reading the panels.
            for layout in [Activations::Bits13, Activations::Bits8] {
                let p = packed(&w, m, k, layout);
                let mut a5 = vec![0i32; n * m];
                dots(&xq, n, &p, &mut a5, act);
                assert_eq!(a5, a2, "panels for {layout:?}, {act:?} {n}x{m}x{k}");
            }
            // The whole product, bit for bit.
            let p = packed(&w, m, k, act);
            let mut y2 = vec![0f32; n * m];
            matmul_q8(&x, n, &p, Some(&b), &mut y2, m, act);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&y2), bits(&y), "panels {act:?} {n}x{m}x{k}");
        }
    }
    // Bound: k products each off by at most half a weight step times |x|, plus x's rounding (half an
    // activation step, 3 / amax, times |w|).
    let amax = f64::from(act_max(q.stride, act));
    let tol = k as f64 * (3.0 * 0.2 / 127.0 * 0.5 + 0.2 * 3.0 / amax * 0.5) * 1.1 + 1e-4;
    for r in 0..n {
        for o in 0..m {
            let exact: f64 = (0..k)
                .map(|i| f64::from(x[r * k + i]) * f64::from(w[o * k + i]))
                .sum::<f64>()
                + f64::from(b[o]);
            let got = f64::from(y[r * m + o]);
            assert!(
                (got - exact).abs() <= tol,
                "{act:?} {n}x{m}x{k} [{r},{o}]: {got} vs {exact}"
            );
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn has_vnni8() -> bool {
    use std::arch::is_x86_feature_detected as has;
    has!("avx512f") && has!("avx512bw") && has!("avx512vnni")
}

/// Activations at the ends of the 8-bit range (-127 and 127, so unsigned 1 and 255) against weights at theirs:
/// the offset's correction stays exact.
#[test]
fn eight_bit_extremes_agree_exactly() {
    let (n, m, k) = (7, 5, 1536);
    let x: Vec<f32> = (0..n * k)
        .map(|i| if (i / 3) % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    let w: Vec<f32> = (0..m * k)
        .map(|i| if (i / 5) % 3 == 0 { -1.0 } else { 1.0 })
        .collect();
    let q = QuantMatrix::quantize(&w, m, k);
    let mut xq = vec![0i16; n * q.stride];
    quantize_rows(&x, n, k, q.stride, &mut xq, Activations::Bits8);
    assert!(xq.iter().all(|v| v.abs() == 127));
    let (mut a1, mut a2) = (vec![0i32; n * m], vec![0i32; n * m]);
    dots(&xq, n, &q, &mut a1, Activations::Bits8);
    portable_dots(&xq, n, &q, &mut a2);
    assert_eq!(a1, a2);
    #[cfg(target_arch = "x86_64")]
    if has_vnni8() {
        let mut a3 = vec![0i32; n * m];
        // SAFETY: the CPU has the features; the values are 8-bit (asserted above).
        unsafe { vnni8::dots(&xq, n, &q, &mut a3) };
        assert_eq!(a3, a2);
        let p = packed(&w, m, k, Activations::Bits8);
        let mut a4 = vec![0i32; n * m];
        dots(&xq, n, &p, &mut a4, Activations::Bits8);
        assert_eq!(a4, a2, "panels");
    }
}

/// `w` quantised and in panels for `act` (whatever `AGENT_DISCOVER_EMBED_KERNEL` says; the caller checked the CPU).
#[cfg(target_arch = "x86_64")]
fn packed(w: &[f32], m: usize, k: usize, act: Activations) -> QuantMatrix {
    let mut p = QuantMatrix::quantize(w, m, k);
    p.panels = Some(panel::Panels::pack(&p, act));
    p.q = Vec::new();
    p
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
    for act in [Activations::Bits13, Activations::Bits8] {
        let mut y = vec![0f32; 2];
        matmul_q8(&x, 2, &q, None, &mut y, 1, act);
        assert!((y[0] / (-1e6 * k as f32) - 1.0).abs() < 1e-3, "{}", y[0]);
        assert_eq!(y[0], y[1]);
    }
    let mut z = vec![1f32; 1];
    matmul_q8(&vec![0f32; k], 1, &q, None, &mut z, 1, Activations::Bits8);
    assert_eq!(z[0], 0.0);
}

#[test]
fn rows_do_not_depend_on_their_neighbours() {
    for (n, m, k) in [(13, 9, 72), (13, 9, 384)] {
        let x: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let w: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.11).cos()).collect();
        let q = QuantMatrix::quantize(&w, m, k);
        for act in [Activations::Bits13, Activations::Bits8] {
            let mut all = vec![0.0; n * m];
            matmul_q8(&x, n, &q, None, &mut all, m, act);
            for r in 0..n {
                let mut one = vec![0.0; m];
                matmul_q8(&x[r * k..(r + 1) * k], 1, &q, None, &mut one, m, act);
                assert_eq!(one, all[r * m..(r + 1) * m]);
            }
        }
    }
}

/// A skewed row (GELU's output: never below -0.17, up to 3) loses about half as much to 8 bits with a zero point as
/// to symmetric 8 bits, and a row of zeros (or one value) stays exact.
#[test]
fn a_zero_point_halves_the_error_of_a_skewed_row() {
    let (n, m, k) = (4, 64, 1536);
    let gelu = |v: f32| 0.5 * v * (1.0 + (v * 0.7978846 * (1.0 + 0.044715 * v * v)).tanh());
    let x: Vec<f32> = (0..n * k)
        .map(|i| gelu(((i as f32 * 0.37).sin() + (i as f32 * 0.011).cos()) * 1.5))
        .collect();
    assert!(x.iter().all(|&v| v >= -0.18) && x.iter().any(|&v| v > 2.0));
    let w: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.11).cos() * 0.2).collect();
    let q = QuantMatrix::quantize(&w, m, k);
    // Against the product with the same int8 weights and exact activations, so only the activations' error counts.
    let exact: Vec<f64> = (0..n * m)
        .map(|j| {
            let (r, o) = (j / m, j % m);
            (0..k)
                .map(|i| {
                    f64::from(x[r * k + i])
                        * f64::from(q.q[o * q.stride + i])
                        * f64::from(q.scale[o])
                })
                .sum()
        })
        .collect();
    let err = |act| {
        let mut y = vec![0f32; n * m];
        matmul_q8(&x, n, &q, None, &mut y, m, act);
        y.iter()
            .zip(&exact)
            .map(|(&a, &b)| (f64::from(a) - b).powi(2))
            .sum::<f64>()
            .sqrt()
    };
    let (e8, z8) = (err(Activations::Bits8), err(Activations::Zp8));
    assert!(z8 < 0.65 * e8, "zero point {z8} against symmetric {e8}");
    for row in [vec![0.0f32; k], vec![0.25f32; k], vec![-0.5f32; k]] {
        let mut y = vec![0f32; m];
        matmul_q8(&row, 1, &q, None, &mut y, m, Activations::Zp8);
        for o in 0..m {
            let e: f64 = (0..k)
                .map(|i| {
                    f64::from(row[i]) * f64::from(q.q[o * q.stride + i]) * f64::from(q.scale[o])
                })
                .sum();
            assert!(
                (f64::from(y[o]) - e).abs() <= 1e-3 * (1.0 + e.abs()),
                "{} {o}: {} vs {e}",
                row[0],
                y[o]
            );
        }
    }
}

#[test]
fn the_default_quantises_the_feed_forward_block_to_8_bits_with_zero_points() {
    let default = act8_from(None, None);
    assert_eq!(default, [false; 4]);
    assert_eq!(zp8_from(None, None), [false, false, true, true]);
    assert_eq!(suffix_of(&default), "");
    assert_eq!(act8_from(Some("13"), None), [false; 4]);
    assert_eq!(suffix_of(&[false; 4]), "");
    assert_eq!(act8_from(Some("8"), None), [true; 4]);
    assert_eq!(suffix_of(&[true; 4]), "+a8");
    let some = act8_from(Some("8"), Some("attn, ffn2"));
    assert_eq!(some, [false, true, false, true]);
    assert_eq!(suffix_of(&some), "+a8:attn,ffn2");
    assert_eq!(act8_from(Some("13"), Some("ffn1")), [false; 4]);
    assert_eq!(zp8_from(Some("13"), Some("ffn2")), [false; 4]);
    assert_eq!(zp8_from(None, Some("ffn2")), [false, false, false, true]);
}
