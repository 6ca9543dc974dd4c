//! A candidate measured for issue 13 and not shipped (see BENCHMARKS.md): a static embedding table distilled from
//! all-MiniLM-L6-v2 (the model2vec recipe): every vocabulary token is run
//! through the encoder once, alone (`[CLS] token [SEP]`), and its pooled output kept; a text's embedding is then the
//! weighted mean of its tokens' rows, which costs microseconds instead of a forward pass.
//!
//! Weights follow the smooth-inverse-frequency rule `a / (a + p(token))` with `p` from Zipf's law over the
//! vocabulary's order (BERT's WordPiece list is, past its single characters, roughly in corpus-frequency order), and
//! the table's mean row is removed (its common direction carries no meaning and inflates every cosine).

use agent_discover::embed::{DIM, MiniLm};

/// First id of the frequency-ordered word pieces in BERT uncased's vocabulary ("the" is 1996).
const FIRST_WORD: u32 = 1996;
/// Sequences distilled per forward pass (3 tokens each).
const DISTIL_BATCH: usize = 170;

/// How token rows are weighted when a text is pooled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Weighting {
    /// Every token counts the same.
    Uniform,
    /// Smooth inverse frequency with Zipf's law over the vocabulary order: `a / (a + 1 / (rank · H))`.
    Sif(f32),
}

/// The distilled table: one unit-free row of `dim` floats per vocabulary id.
pub struct StaticTable {
    dim: usize,
    rows: Vec<f32>,
    weights: Vec<f32>,
}

impl std::fmt::Debug for StaticTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticTable")
            .field("dim", &self.dim)
            .field("tokens", &self.weights.len())
            .finish()
    }
}

impl StaticTable {
    /// A table from raw rows (`tokens x dim`, row-major): centres the rows and sets the weights.
    pub fn from_rows(dim: usize, mut rows: Vec<f32>, weighting: Weighting) -> StaticTable {
        let n = rows.len() / dim.max(1);
        if n > 0 {
            let mut mean = vec![0f64; dim];
            for r in rows.chunks_exact(dim) {
                for (m, x) in mean.iter_mut().zip(r) {
                    *m += f64::from(*x);
                }
            }
            let mean: Vec<f32> = mean.iter().map(|m| (*m / n as f64) as f32).collect();
            for r in rows.chunks_exact_mut(dim) {
                for (x, m) in r.iter_mut().zip(&mean) {
                    *x -= m;
                }
            }
        }
        let weights = weights(n, weighting);
        StaticTable { dim, rows, weights }
    }

    /// The unit-length embedding of a text given its word-piece ids (`[CLS]`/`[SEP]` excluded); zero if none.
    pub fn embed_ids(&self, ids: &[u32]) -> Vec<f32> {
        let mut out = vec![0f32; self.dim];
        for &id in ids {
            let i = id as usize;
            if i >= self.weights.len() {
                continue;
            }
            let w = self.weights[i];
            for (o, x) in out
                .iter_mut()
                .zip(&self.rows[i * self.dim..(i + 1) * self.dim])
            {
                *o += w * x;
            }
        }
        let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            out.iter_mut().for_each(|x| *x /= norm);
        }
        out
    }

    /// The embedding of `text`, tokenised by `model`'s WordPiece vocabulary.
    pub fn embed(&self, model: &MiniLm, text: &str) -> Vec<f32> {
        let ids = model.tokenize(text);
        let inner = if ids.len() >= 2 {
            &ids[1..ids.len() - 1]
        } else {
            &[][..]
        };
        self.embed_ids(inner)
    }
}

/// Every vocabulary token's pooled output of `[CLS] token [SEP]`, uncentred (`vocab x DIM`, row-major).
pub fn distil_rows(model: &MiniLm) -> Vec<f32> {
    let (cls, sep) = model.cls_sep();
    let seqs: Vec<[u32; 3]> = (0..model.vocab_len() as u32)
        .map(|id| [cls, id, sep])
        .collect();
    let mut rows = Vec::with_capacity(seqs.len() * DIM);
    for chunk in seqs.chunks(DISTIL_BATCH) {
        let refs: Vec<&[u32]> = chunk.iter().map(|s| &s[..]).collect();
        for v in model.pooled(&refs) {
            rows.extend_from_slice(&v);
        }
    }
    rows
}

fn weights(n: usize, weighting: Weighting) -> Vec<f32> {
    match weighting {
        Weighting::Uniform => vec![1.0; n],
        Weighting::Sif(a) => {
            // Zipf: p(rank) = 1 / (rank · H_n).
            let words = n.saturating_sub(FIRST_WORD as usize).max(1);
            let h: f64 = (1..=words).map(|r| 1.0 / r as f64).sum();
            (0..n)
                .map(|id| {
                    // Characters and unused slots are rare as tokens of their own: rank them last.
                    let rank = if id >= FIRST_WORD as usize {
                        id - FIRST_WORD as usize + 1
                    } else {
                        words
                    };
                    let p = 1.0 / (rank as f64 * h);
                    (f64::from(a) / (f64::from(a) + p)) as f32
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_is_the_weighted_centred_mean() {
        // Three tokens of two dimensions; the mean row (1, 1) is removed.
        let t = StaticTable::from_rows(2, vec![2.0, 1.0, 0.0, 1.0, 1.0, 1.0], Weighting::Uniform);
        assert_eq!(t.embed_ids(&[0]), vec![1.0, 0.0]);
        assert_eq!(t.embed_ids(&[1]), vec![-1.0, 0.0]);
        // Token 2 is the mean itself: nothing left, a zero vector rather than NaN.
        assert_eq!(t.embed_ids(&[2]), vec![0.0, 0.0]);
        assert_eq!(t.embed_ids(&[]), vec![0.0, 0.0]);
        // Ids past the table are ignored.
        assert_eq!(t.embed_ids(&[0, 99]), vec![1.0, 0.0]);
    }

    #[test]
    fn sif_weights_frequent_words_down() {
        let w = weights(FIRST_WORD as usize + 1000, Weighting::Sif(1e-3));
        let the = w[FIRST_WORD as usize];
        let rare = w[FIRST_WORD as usize + 900];
        assert!(the < rare, "{the} {rare}");
        assert!(w.iter().all(|x| *x > 0.0 && *x <= 1.0));
    }
}
