//! The embeddings of recent queries: agents repeat and retry them.

use std::collections::HashMap;

/// Queries whose embedding is remembered, at most.
pub(crate) const RECENT_QUERIES: usize = 512;

/// A small least-recently-used map from (model, query) to its embedding.
#[derive(Default)]
pub(crate) struct RecentQueries {
    pub(crate) map: HashMap<(String, String), (Vec<f32>, u64)>,
    tick: u64,
}

impl RecentQueries {
    pub(crate) fn get(&mut self, model: &str, query: &str) -> Option<Vec<f32>> {
        self.tick += 1;
        let tick = self.tick;
        let e = self.map.get_mut(&(model.to_owned(), query.to_owned()))?;
        e.1 = tick;
        Some(e.0.clone())
    }

    pub(crate) fn put(&mut self, model: &str, query: &str, v: Vec<f32>) {
        if self.map.len() >= RECENT_QUERIES
            && let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone())
        {
            self.map.remove(&oldest);
        }
        self.tick += 1;
        self.map
            .insert((model.to_owned(), query.to_owned()), (v, self.tick));
    }
}

#[cfg(test)]
mod recent_tests {
    use super::*;

    #[test]
    fn recent_queries_keep_the_most_recently_used() {
        let mut r = RecentQueries::default();
        for i in 0..RECENT_QUERIES {
            r.put("m", &format!("q{i}"), vec![i as f32]);
        }
        // Touch q0 so q1 is the oldest, then overflow by one.
        assert_eq!(r.get("m", "q0"), Some(vec![0.0]));
        r.put("m", "new", vec![-1.0]);
        assert_eq!(r.map.len(), RECENT_QUERIES);
        assert_eq!(r.get("m", "q1"), None);
        assert_eq!(r.get("m", "q0"), Some(vec![0.0]));
        assert_eq!(r.get("m", "new"), Some(vec![-1.0]));
        assert_eq!(r.get("other-model", "q0"), None);
    }
}
