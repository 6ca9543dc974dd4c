//! The BERT encoder of all-MiniLM-L6-v2, computed in f32 (the dense layers' weights stored in int8 or f16, see
//! `WeightFormat`): embeddings,
//! self-attention layers with exact (erf) GELU, and masked mean pooling. Several sequences run packed into one
//! matrix without padding, so the weights are read once per batch while attention stays within each sequence.

use serde::Deserialize;

use super::EmbedError;
use super::kernels::{F16, Mat, matmul_t};
use super::quant::{Activations, QuantMatrix, activations_of, matmul_q8};
use super::safetensors::SafeTensors;

/// The fields of config.json the encoder needs; defaults are all-MiniLM-L6-v2's.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct Config {
    pub hidden_size: usize,
    pub num_attention_heads: usize,
    pub num_hidden_layers: usize,
    pub intermediate_size: usize,
    pub layer_norm_eps: f64,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    pub type_vocab_size: usize,
    pub hidden_act: String,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            hidden_size: 384,
            num_attention_heads: 12,
            num_hidden_layers: 6,
            intermediate_size: 1536,
            layer_norm_eps: 1e-12,
            max_position_embeddings: 512,
            vocab_size: 30522,
            type_vocab_size: 2,
            hidden_act: "gelu".into(),
        }
    }
}

/// How the dense layers' weights are stored and multiplied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightFormat {
    /// Half precision, products in f32 (cosine of a query's embedding to the f32 model's ≈ 0.9999998).
    F16,
    /// int8 per output channel, activations quantised per row to 13 bits, exact integer sums (`quant`): half the
    /// bytes of f16 and twice the products per instruction.
    Int8,
}

impl WeightFormat {
    /// `f16` or `int8` (any case); `None` for anything else.
    pub fn parse(s: &str) -> Option<WeightFormat> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f16" => Some(WeightFormat::F16),
            "int8" | "i8" => Some(WeightFormat::Int8),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::F16 => "f16",
            WeightFormat::Int8 => "int8",
        }
    }
}

enum Weights {
    /// `[out][in]`, as PyTorch stores it: each output's weights are contiguous.
    F16(Vec<F16>),
    Int8(QuantMatrix),
}

struct Linear {
    w: Weights,
    /// The activations' precision of an int8 product.
    act: Activations,
    b: Vec<f32>,
    n_in: usize,
    n_out: usize,
}

impl Linear {
    fn new(
        w: Vec<f32>,
        b: Vec<f32>,
        (n_in, n_out): (usize, usize),
        format: WeightFormat,
        product: &str,
    ) -> Linear {
        let w = match format {
            WeightFormat::F16 => Weights::F16(w.into_iter().map(F16::from_f32).collect()),
            WeightFormat::Int8 => {
                let mut q = QuantMatrix::quantize(&w, n_out, n_in);
                q.pack(activations_of(product));
                Weights::Int8(q)
            }
        };
        Linear {
            w,
            act: activations_of(product),
            b,
            n_in,
            n_out,
        }
    }

    /// `y = x · wᵀ + b` for `rows` rows of x.
    fn forward(&self, x: &[f32], rows: usize, y: &mut [f32]) {
        match &self.w {
            Weights::F16(w) => matmul_t(
                Mat::new(x, rows, self.n_in, self.n_in),
                Mat::new(w, self.n_out, self.n_in, self.n_in),
                Some(&self.b),
                y,
                self.n_out,
            ),
            Weights::Int8(w) => {
                debug_assert!(w.rows() == self.n_out && w.cols() == self.n_in);
                matmul_q8(
                    &x[..rows * self.n_in],
                    rows,
                    w,
                    Some(&self.b),
                    y,
                    self.n_out,
                    self.act,
                )
            }
        }
    }
}

struct LayerNorm {
    g: Vec<f32>,
    b: Vec<f32>,
    eps: f32,
}

wide_fn!(
    fn layer_norm = layer_norm_impl(norm: &LayerNorm, x: &mut [f32]) -> ()
);

impl LayerNorm {
    fn forward(&self, x: &mut [f32]) {
        layer_norm(self, x)
    }
}

#[inline(always)]
fn layer_norm_impl(norm: &LayerNorm, x: &mut [f32]) {
    let n = norm.g.len();
    for row in x.chunks_exact_mut(n) {
        let mean = sum8(row, |v| v) / n as f64;
        let var = sum8(row, |v| (v - mean) * (v - mean)) / n as f64;
        let inv = (1.0 / (var + f64::from(norm.eps)).sqrt()) as f32;
        let mean = mean as f32;
        for ((v, g), b) in row.iter_mut().zip(&norm.g).zip(&norm.b) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// `Σ f(v)` over `row` in f64, in eight interleaved partial sums (one add chain would take a cycle count of four per
/// value; the order changes the f64 sum in its last bits, which rounding to f32 afterwards almost never shows).
#[inline(always)]
fn sum8(row: &[f32], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0f64; 8];
    let chunks = row.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f(f64::from(v));
        }
    }
    for (a, &v) in acc.iter_mut().zip(tail) {
        *a += f(f64::from(v));
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

struct Layer {
    /// Query, key and value projections stacked: `[3 × hidden][hidden]`.
    qkv: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    out_norm: LayerNorm,
}

pub struct Bert {
    cfg: Config,
    word: Vec<f32>,
    position: Vec<f32>,
    /// Token type 0's embedding (a single sentence never has another type).
    token_type: Vec<f32>,
    emb_norm: LayerNorm,
    layers: Vec<Layer>,
}

impl Bert {
    /// Builds the encoder from the tensors, with or without the `bert.` name prefix.
    pub fn load(st: &SafeTensors, cfg: Config, format: WeightFormat) -> Result<Bert, EmbedError> {
        let bad = |m: String| EmbedError::BadFormat(m);
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        if h == 0 || cfg.num_attention_heads == 0 || h % cfg.num_attention_heads != 0 || i == 0 {
            return Err(bad(format!(
                "config.json: hidden_size {h} is not a multiple of num_attention_heads {}",
                cfg.num_attention_heads
            )));
        }
        if !matches!(cfg.hidden_act.as_str(), "gelu" | "gelu_python") {
            return Err(bad(format!(
                "config.json: activation {} is not supported (need gelu)",
                cfg.hidden_act
            )));
        }
        let prefix = if st.contains("bert.embeddings.word_embeddings.weight") {
            "bert."
        } else {
            ""
        };
        let t = |name: &str, shape: &[usize]| st.f32(&format!("{prefix}{name}"), shape);
        let eps = cfg.layer_norm_eps as f32;
        let norm = |name: &str| -> Result<LayerNorm, EmbedError> {
            Ok(LayerNorm {
                g: t(&format!("{name}.weight"), &[h])?,
                b: t(&format!("{name}.bias"), &[h])?,
                eps,
            })
        };
        let raw =
            |name: &str, n_out: usize, n_in: usize| -> Result<(Vec<f32>, Vec<f32>), EmbedError> {
                Ok((
                    t(&format!("{name}.weight"), &[n_out, n_in])?,
                    t(&format!("{name}.bias"), &[n_out])?,
                ))
            };
        let linear = |name: &str, n_out: usize, n_in: usize, product: &str| {
            let (w, b) = raw(name, n_out, n_in)?;
            Ok::<_, EmbedError>(Linear::new(w, b, (n_in, n_out), format, product))
        };
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for l in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            let (q, k, v) = (
                raw(&format!("{p}.attention.self.query"), h, h)?,
                raw(&format!("{p}.attention.self.key"), h, h)?,
                raw(&format!("{p}.attention.self.value"), h, h)?,
            );
            let qkv = Linear::new(
                [q.0, k.0, v.0].concat(),
                [q.1, k.1, v.1].concat(),
                (h, 3 * h),
                format,
                "qkv",
            );
            layers.push(Layer {
                qkv,
                attn_out: linear(&format!("{p}.attention.output.dense"), h, h, "attn")?,
                attn_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                intermediate: linear(&format!("{p}.intermediate.dense"), i, h, "ffn1")?,
                output: linear(&format!("{p}.output.dense"), h, i, "ffn2")?,
                out_norm: norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        let mut token_type = t(
            "embeddings.token_type_embeddings.weight",
            &[cfg.type_vocab_size, h],
        )?;
        token_type.truncate(h);
        if token_type.len() != h {
            return Err(bad("config.json: type_vocab_size must be at least 1".into()));
        }
        Ok(Bert {
            word: t("embeddings.word_embeddings.weight", &[cfg.vocab_size, h])?,
            position: t(
                "embeddings.position_embeddings.weight",
                &[cfg.max_position_embeddings, h],
            )?,
            token_type,
            emb_norm: norm("embeddings.LayerNorm")?,
            layers,
            cfg,
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Mean-pooled last hidden states (not normalised), one per sequence. Every id must be below `vocab_size` and
    /// every sequence at most `max_position_embeddings` long (the caller guarantees both).
    pub fn forward(&self, seqs: &[&[u32]]) -> Vec<Vec<f32>> {
        let h = self.cfg.hidden_size;
        let heads = self.cfg.num_attention_heads;
        let hd = h / heads;
        let n: usize = seqs.iter().map(|s| s.len()).sum();
        let longest = seqs.iter().map(|s| s.len()).max().unwrap_or(0);

        // Embeddings.
        let mut x = vec![0f32; n * h];
        let mut row = 0;
        for seq in seqs {
            for (pos, &id) in seq.iter().enumerate() {
                let out = &mut x[row * h..(row + 1) * h];
                let word = &self.word[id as usize * h..][..h];
                let position = &self.position[pos * h..][..h];
                for j in 0..h {
                    out[j] = word[j] + position[j] + self.token_type[j];
                }
                row += 1;
            }
        }
        self.emb_norm.forward(&mut x);

        let mut qkv = vec![0f32; n * 3 * h];
        let mut ctx = vec![0f32; n * h];
        let mut tmp = vec![0f32; n * h];
        let mut inter = vec![0f32; n * self.cfg.intermediate_size];
        let mut scores = vec![0f32; longest.div_ceil(LANES) * LANES];
        let mut k_t = vec![0f32; hd * longest.div_ceil(LANES) * LANES];
        let scale = 1.0 / (hd as f32).sqrt();
        for layer in &self.layers {
            layer.qkv.forward(&x, n, &mut qkv);
            let mut start = 0;
            for seq in seqs {
                let len = seq.len();
                attend(
                    &qkv[start * 3 * h..(start + len) * 3 * h],
                    (len, heads, scale),
                    &mut ctx[start * h..(start + len) * h],
                    &mut scores,
                    &mut k_t,
                );
                start += len;
            }
            layer.attn_out.forward(&ctx, n, &mut tmp);
            add(&mut x, &tmp);
            layer.attn_norm.forward(&mut x);
            layer.intermediate.forward(&x, n, &mut inter);
            gelu_all(&mut inter);
            layer.output.forward(&inter, n, &mut tmp);
            add(&mut x, &tmp);
            layer.out_norm.forward(&mut x);
        }

        // Mean pooling: every token of a sequence is real (no padding), so the mask is all ones.
        let mut start = 0;
        seqs.iter()
            .map(|seq| {
                let mut sum = vec![0f64; h];
                for r in start..start + seq.len() {
                    for (s, &v) in sum.iter_mut().zip(&x[r * h..(r + 1) * h]) {
                        *s += f64::from(v);
                    }
                }
                start += seq.len();
                let count = seq.len().max(1) as f64;
                sum.into_iter().map(|s| (s / count) as f32).collect()
            })
            .collect()
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// In place: `s = softmax(scale · s)`.
#[inline(always)]
fn softmax(s: &mut [f32], scale: f32) {
    let max = s.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) * scale;
    let mut sum = 0f32;
    for v in s.iter_mut() {
        *v = (*v * scale - max).exp();
        sum += *v;
    }
    let inv = 1.0 / sum;
    s.iter_mut().for_each(|v| *v *= inv);
}

wide_fn!(
    /// Self-attention of one sequence of `len` rows (`rows`: its query, key and value projections, `3 × hidden` per
    /// row), every head: `ctx_i = Σ_j softmax_j(scale · q_i · k_j) v_j`, written to the head's columns of `ctx`.
    /// `scores` holds `len` values and `k_t` `len × hidden / heads`.
    fn attend = attend_impl(
        rows: &[f32],
        shape: (usize, usize, f32),
        ctx: &mut [f32],
        scores: &mut [f32],
        k_t: &mut [f32]
    ) -> ()
);

/// A short sequence's heads are tiny products (a query's 16 tokens: 16 × 16 × 32 per head), so they are written
/// out here rather than given to `matmul_t`, whose tiling costs more than their arithmetic: the scores of a row are
/// summed over the head's dimensions with the keys transposed (one vector of scores per step), and its context over
/// the value rows (one vector of the head's dimensions per step).
#[inline(always)]
fn attend_impl(
    rows: &[f32],
    (len, heads, scale): (usize, usize, f32),
    ctx: &mut [f32],
    scores: &mut [f32],
    k_t: &mut [f32],
) {
    if len == 0 {
        return;
    }
    let h = ctx.len() / len;
    let hd = h / heads;
    // The keys' columns padded to a multiple of 16 (zeros), so a row's scores are whole vectors.
    let lenp = len.div_ceil(LANES) * LANES;
    let (scores, k_t) = (&mut scores[..lenp], &mut k_t[..hd * lenp]);
    k_t.fill(0.0);
    for head in 0..heads {
        let seq = Seq {
            rows,
            stride: 3 * h,
            len,
            lenp,
            offs: (head * hd, h + head * hd, 2 * h + head * hd),
            scale,
        };
        let out = |i: usize| i * h + head * hd;
        match hd {
            32 => attend_head(&seq, Fixed::<32>, ctx, out, scores, k_t),
            64 => attend_head(&seq, Fixed::<64>, ctx, out, scores, k_t),
            _ => attend_head(&seq, hd, ctx, out, scores, k_t),
        }
    }
}

/// Scores computed per vector of this many keys.
const LANES: usize = 16;

/// One head's view of a sequence's projections: query, key and value columns (`offs`) of rows `stride` apart.
struct Seq<'a> {
    rows: &'a [f32],
    stride: usize,
    len: usize,
    /// `len` padded to a multiple of [`LANES`].
    lenp: usize,
    offs: (usize, usize, usize),
    scale: f32,
}

/// A head's width: a constant the compiler unrolls by (MiniLM's 32), or read at run time.
trait Width: Copy {
    fn get(self) -> usize;
}

#[derive(Clone, Copy)]
struct Fixed<const N: usize>;

impl<const N: usize> Width for Fixed<N> {
    #[inline(always)]
    fn get(self) -> usize {
        N
    }
}

impl Width for usize {
    #[inline(always)]
    fn get(self) -> usize {
        self
    }
}

/// One head: each row's scores are [`LANES`] keys at a time, summed over the head's dimensions in registers, and its
/// context one vector of the head's dimensions summed over the value rows.
#[inline(always)]
fn attend_head(
    seq: &Seq,
    hd: impl Width,
    ctx: &mut [f32],
    out: impl Fn(usize) -> usize,
    scores: &mut [f32],
    k_t: &mut [f32],
) {
    let hd = hd.get();
    let (len, lenp) = (seq.len, seq.lenp);
    let (q_off, k_off, v_off) = seq.offs;
    let row = |j: usize, off: usize| &seq.rows[j * seq.stride + off..][..hd];
    for j in 0..len {
        for (d, &v) in row(j, k_off).iter().enumerate() {
            k_t[d * lenp + j] = v;
        }
    }
    for i in 0..len {
        let q = row(i, q_off);
        for (j0, s) in scores.chunks_exact_mut(LANES).enumerate() {
            let mut acc = [0f32; LANES];
            for (d, &qd) in q.iter().enumerate() {
                let k: &[f32; LANES] = k_t[d * lenp + j0 * LANES..][..LANES]
                    .try_into()
                    .expect("a padded row of keys");
                for (a, &k) in acc.iter_mut().zip(k) {
                    *a += qd * k;
                }
            }
            s.copy_from_slice(&acc);
        }
        let p = &mut scores[..len];
        softmax(p, seq.scale);
        // Summed in a local vector (registers, for a width known when compiled), or in place when wider.
        let mut local = [0f32; 64];
        let out = &mut ctx[out(i)..][..hd];
        let acc = if hd <= local.len() {
            &mut local[..hd]
        } else {
            out.fill(0.0);
            &mut *out
        };
        for (j, &p) in p.iter().enumerate() {
            for (a, &v) in acc.iter_mut().zip(row(j, v_off)) {
                *a += p * v;
            }
        }
        if hd <= local.len() {
            out.copy_from_slice(&local[..hd]);
        }
    }
}

/// erf(x) ≈ x·P(x²)/Q(x²) for |x| ≤ 4 and ±1 beyond: a rational fit (iteratively reweighted least squares on
/// Chebyshev nodes against math.erf; degrees 5 and 6 in x²) with max abs error 1.4e-8 (erfc(4) = 1.5e-8
/// included), evaluated in f64. Branch-free, so the GELU loop vectorises.
const ERF_P: [f64; 6] = [
    1.1283791830672498,
    0.19268992503447255,
    0.0558569324681647,
    0.004235998861849492,
    0.00041720941408541004,
    7.026123520104122e-06,
];
const ERF_Q: [f64; 7] = [
    1.0,
    0.504100577567122,
    0.11753427985326474,
    0.016334118034951453,
    0.0014307645612932755,
    7.426760999158788e-05,
    2.732080570388984e-07,
];

#[inline(always)]
pub fn erf(x: f64) -> f64 {
    let a = x.clamp(-4.0, 4.0);
    let z = a * a;
    // Horner, written out (fast in debug builds too).
    let [p0, p1, p2, p3, p4, p5] = ERF_P;
    let [q0, q1, q2, q3, q4, q5, q6] = ERF_Q;
    let p = p0 + z * (p1 + z * (p2 + z * (p3 + z * (p4 + z * p5))));
    let q = q0 + z * (q1 + z * (q2 + z * (q3 + z * (q4 + z * (q5 + z * q6)))));
    let r = (a * p / q).clamp(-1.0, 1.0);
    if x.abs() >= 4.0 { 1f64.copysign(x) } else { r }
}

/// Exact GELU: `x · Φ(x) = x/2 · (1 + erf(x/√2))`.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    let x = f64::from(x);
    (0.5 * x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
}

wide_fn!(
    /// `gelu` over a slice (4 to 8 at a time instead of the baseline build's 2).
    fn gelu_all = gelu_scalar(v: &mut [f32]) -> ()
);

#[inline(always)]
fn gelu_scalar(v: &mut [f32]) {
    v.iter_mut().for_each(|x| *x = gelu(*x));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_gelu_equals_the_scalar_loop_bit_for_bit() {
        let mut xs: Vec<f32> = (0..40_000)
            .map(|i| (i as f32 - 20_000.0) * 0.000_37)
            .collect();
        xs.extend([
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            3.999_999,
            4.0,
            -4.0,
            1e30,
            -1e30,
            f32::MAX,
            f32::MIN,
        ]);
        let mut want = xs.clone();
        gelu_scalar(&mut want);
        let mut got = xs.clone();
        gelu_all(&mut got);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
    }

    #[test]
    fn erf_is_accurate() {
        // Reference values of erf (to 1e-12).
        let known = [
            (0.0, 0.0),
            (0.1, 0.112462916018285),
            (0.5, 0.520499877813047),
            (1.0, 0.842700792949715),
            (1.5, 0.966105146475311),
            (2.0, 0.995322265018953),
            (2.5, 0.999593047982555),
            (3.0, 0.999977909503001),
            (3.5, 0.999999256901628),
            (5.0, 1.0),
        ];
        for (x, want) in known {
            assert!(
                (erf(x) - want).abs() < 2e-8,
                "erf({x}) = {} want {want}",
                erf(x)
            );
            assert!((erf(-x) + want).abs() < 2e-8);
            assert!(erf(x) <= 1.0);
        }
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-6);
        assert!((gelu(-3.0) + 0.004_049_69).abs() < 1e-6);
        assert_eq!(gelu(-10.0), 0.0);
        assert_eq!(gelu(10.0), 10.0);
    }

    #[test]
    fn wide_layer_norm_equals_the_baseline_bit_for_bit() {
        let h = 384;
        let norm = LayerNorm {
            g: (0..h).map(|i| 1.0 + (i as f32 * 0.7).sin() * 0.3).collect(),
            b: (0..h).map(|i| (i as f32 * 0.3).cos() * 0.1).collect(),
            eps: 1e-12,
        };
        let x: Vec<f32> = (0..17 * h)
            .map(|i| (i as f32 * 0.013).sin() * 4.0 + 0.5)
            .collect();
        let (mut want, mut got) = (x.clone(), x);
        layer_norm_impl(&norm, &mut want);
        norm.forward(&mut got);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
        let mean = got[..h].iter().sum::<f32>() / h as f32;
        assert!(mean.abs() < 0.2, "{mean}");
    }

    /// The attention of a sequence (every length around a vector of 16 keys) against a plain f64 loop, for MiniLM's
    /// head width (a constant when compiled) and a width summed in place (80); and the constant width against the
    /// same width read at run time, bit for bit.
    #[test]
    fn attention_matches_a_plain_loop_and_both_widths_agree() {
        for (heads, hd, len) in [1usize, 2, 5, 15, 16, 17, 33]
            .into_iter()
            .map(|len| (3, 32, len))
            .chain([(2, 80, 5), (2, 80, 17)])
        {
            let h = heads * hd;
            let rows: Vec<f32> = (0..len * 3 * h)
                .map(|i| ((i as f32) * 0.731).sin() * 1.7)
                .collect();
            let scale = 1.0 / (hd as f32).sqrt();
            let lenp = len.div_ceil(LANES) * LANES;
            let mut ctx = vec![0f32; len * h];
            let (mut scores, mut k_t) = (vec![0f32; lenp], vec![0f32; hd * lenp]);
            attend(&rows, (len, heads, scale), &mut ctx, &mut scores, &mut k_t);
            for head in 0..heads {
                for i in 0..len {
                    let at = |j: usize, part: usize, d: usize| {
                        f64::from(rows[j * 3 * h + part * h + head * hd + d])
                    };
                    let s: Vec<f64> = (0..len)
                        .map(|j| (0..hd).map(|d| at(i, 0, d) * at(j, 1, d)).sum::<f64>())
                        .map(|v| v * f64::from(scale))
                        .collect();
                    let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = s.iter().map(|v| (v - max).exp()).collect();
                    let sum: f64 = e.iter().sum();
                    for d in 0..hd {
                        let want: f64 = (0..len).map(|j| e[j] / sum * at(j, 2, d)).sum();
                        let got = f64::from(ctx[i * h + head * hd + d]);
                        assert!(
                            (got - want).abs() < 1e-5,
                            "len {len} head {head} [{i},{d}]: {got} vs {want}"
                        );
                    }
                }
                // The width read at run time gives the same bits.
                let seq = Seq {
                    rows: &rows,
                    stride: 3 * h,
                    len,
                    lenp,
                    offs: (head * hd, h + head * hd, 2 * h + head * hd),
                    scale,
                };
                let mut any = vec![0f32; len * h];
                attend_head(
                    &seq,
                    hd,
                    &mut any,
                    |i| i * h + head * hd,
                    &mut scores,
                    &mut k_t,
                );
                for i in 0..len {
                    let (a, b) = (
                        &any[i * h + head * hd..][..hd],
                        &ctx[i * h + head * hd..][..hd],
                    );
                    assert_eq!(
                        a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        b.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "len {len} head {head} row {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn softmax_sums_to_one() {
        let mut s = [1.0, 2.0, 3.0, 1000.0];
        softmax(&mut s, 0.5);
        assert!((s.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(s[3] > 0.999);
    }
}
