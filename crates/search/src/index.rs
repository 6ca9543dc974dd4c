//! The in-memory vector index of `find_tool`'s hybrid search: every stored tool vector of one model, quantised to
//! int8 with a scale per row, scanned whole for a query's cosine top-k (`scan.rs`); rebuilt when the stored tools
//! change (`generation`, `data_version`).

use std::collections::HashMap;

use ad_core::error::Result;
use ad_store::Store;

use crate::scan::{dot_i8, scores};

pub(crate) struct VectorIndex {
    pub(crate) model: String,
    pub(crate) generation: u64,
    pub(crate) data_version: i64,
    dim: usize,
    ids: Vec<i64>,
    /// Row of each id, for scoring BM25 candidates outside the cosine top-k.
    rows: HashMap<i64, usize>,
    /// `ids.len() * dim` values, row-major: each unit vector quantised to int8 with its own scale (a quarter of
    /// f32's memory: 100k tools x 384 dimensions in 39 MB; cosine changes by about 1e-3).
    data: Vec<i8>,
    scales: Vec<f32>,
}

impl VectorIndex {
    pub(crate) fn load(
        store: &Store,
        model: &str,
        generation: u64,
        data_version: i64,
    ) -> Result<VectorIndex> {
        let rows = store.embeddings(model)?;
        let dim = rows.first().map(|(_, v)| v.len()).unwrap_or(0);
        let mut ids = Vec::with_capacity(rows.len());
        let mut data = Vec::with_capacity(rows.len() * dim);
        let mut scales = Vec::with_capacity(rows.len());
        for (id, v) in rows.into_iter().filter(|(_, v)| v.len() == dim) {
            ids.push(id);
            scales.push(quantize(&v, &mut data));
        }
        let rows = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        Ok(VectorIndex {
            model: model.to_owned(),
            generation,
            data_version,
            dim,
            ids,
            rows,
            data,
            scales,
        })
    }

    /// Bytes held: vectors, scales, ids and the row map.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len() + self.scales.len() * 4 + self.ids.len() * 8 + self.rows.capacity() * 24
    }

    pub(crate) fn top(&self, q: &[f32], k: usize) -> Vec<(i64, f64)> {
        if self.dim == 0 || q.len() != self.dim {
            return vec![];
        }
        let mut scored: Vec<(i64, f64)> = scores(&self.data, self.dim, &self.scales, q)
            .into_iter()
            .zip(&self.ids)
            .map(|(c, id)| (*id, c as f64))
            .collect();
        let k = k.min(scored.len());
        if k == 0 {
            return scored;
        }
        scored.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
        scored.truncate(k);
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored
    }

    /// [`VectorIndex::top`] among the ids `keep` accepts.
    pub(crate) fn top_where(
        &self,
        q: &[f32],
        k: usize,
        keep: impl Fn(i64) -> bool,
    ) -> Vec<(i64, f64)> {
        if self.dim == 0 || q.len() != self.dim {
            return vec![];
        }
        let mut scored: Vec<(i64, f64)> = scores(&self.data, self.dim, &self.scales, q)
            .into_iter()
            .zip(&self.ids)
            .filter(|(_, id)| keep(**id))
            .map(|(c, id)| (*id, c as f64))
            .collect();
        let k = k.min(scored.len());
        if k == 0 {
            return scored;
        }
        scored.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
        scored.truncate(k);
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored
    }

    pub(crate) fn cosine_of(&self, id: i64, q: &[f32]) -> Option<f64> {
        let i = *self.rows.get(&id)?;
        Some((dot_i8(&self.data[i * self.dim..(i + 1) * self.dim], q) * self.scales[i]) as f64)
    }
}

/// Appends `v` quantised to int8 (`round(x / scale)`, scale = max |x| / 127) to `out`; returns the scale.
pub(crate) fn quantize(v: &[f32], out: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    out.extend(
        v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

#[cfg(test)]
mod quantize_tests {
    use super::quantize;
    use crate::provider;
    use crate::scan::{dot, dot_i8};

    #[test]
    fn int8_vectors_keep_the_cosine_within_a_hundredth() {
        let mut seed = 7u64;
        let mut unit = || {
            let v: Vec<f32> = (0..384)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            provider::normalize(v)
        };
        for _ in 0..50 {
            let (a, b) = (unit(), unit());
            let mut q = Vec::new();
            let scale = quantize(&a, &mut q);
            let exact = dot(&a, &b);
            let approx = dot_i8(&q, &b) * scale;
            assert!((exact - approx).abs() < 0.01, "{exact} vs {approx}");
        }
        let mut q = Vec::new();
        assert_eq!(quantize(&[0.0; 4], &mut q), 1.0);
        assert_eq!(q, [0; 4]);
    }
}
