//! `wide_fn!`: a loop compiled for AVX-512 F or AVX2 as well as the baseline, chosen at run time, with the same
//! results bit for bit.

/// Defines `$name`, which calls `$imp` (an `#[inline(always)]` function) compiled for AVX-512 F or AVX2 when the CPU
/// has them, else for the baseline: the same IEEE operations in wider registers (Rust never fuses a multiply and an
/// add), so the same values bit for bit; the baseline build vectorises such loops with SSE2 only.
macro_rules! wide_fn {
    ($(#[$m:meta])* fn $name:ident = $imp:ident($($a:ident: $t:ty),*) -> $r:ty) => {
        $(#[$m])*
        fn $name($($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                unsafe fn avx512($($a: $t),*) -> $r {
                    $imp($($a),*)
                }
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($a: $t),*) -> $r {
                    $imp($($a),*)
                }
                use std::arch::is_x86_feature_detected as has;
                if has!("avx512f") {
                    // SAFETY: the CPU has AVX-512 F.
                    return unsafe { avx512($($a),*) };
                }
                if has!("avx2") {
                    // SAFETY: the CPU has AVX2.
                    return unsafe { avx2($($a),*) };
                }
            }
            $imp($($a),*)
        }
    };
}
