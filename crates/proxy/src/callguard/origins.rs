//! Where credentials that reached the agent came from: a result guard in `warn` passes a credential on as it is, and
//! the argument guard then lets it go back to the server whose result carried it ("a secret may go back where it
//! came from"), and to no other. Kept in memory only, as keyed hashes (SipHash with this process's random key, never
//! the value), at most [`MAX`] of them, the oldest forgotten first.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};

/// Credentials remembered at most.
pub(super) const MAX: usize = 4096;
/// Servers remembered per credential at most (the same token in several servers' results).
const MAX_SERVERS: usize = 4;

pub(crate) struct Origins {
    key: RandomState,
    servers: HashMap<u64, Vec<i64>>,
    order: VecDeque<u64>,
}

impl Default for Origins {
    fn default() -> Origins {
        Origins {
            key: RandomState::new(),
            servers: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl Origins {
    /// Notes that `value` reached the agent in a result of `server_id`.
    pub(crate) fn remember(&mut self, value: &str, server_id: i64) {
        let h = self.key.hash_one(value);
        match self.servers.get_mut(&h) {
            Some(list) => {
                if !list.contains(&server_id) && list.len() < MAX_SERVERS {
                    list.push(server_id);
                }
            }
            None => {
                self.servers.insert(h, vec![server_id]);
                self.order.push_back(h);
                while self.order.len() > MAX {
                    if let Some(old) = self.order.pop_front() {
                        self.servers.remove(&old);
                    }
                }
            }
        }
    }

    /// Whether `value` reached the agent in a result of `server_id`.
    pub(crate) fn came_from(&self, value: &str, server_id: i64) -> bool {
        self.servers
            .get(&self.key.hash_one(value))
            .is_some_and(|l| l.contains(&server_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_goes_back_only_where_it_came_from_and_old_ones_are_forgotten() {
        let mut o = Origins::default();
        let token = "ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        assert!(!o.came_from(token, 1));
        o.remember(token, 1);
        assert!(o.came_from(token, 1));
        assert!(!o.came_from(token, 2), "another server's");
        assert!(!o.came_from("ghp_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 1));
        for i in 0..MAX {
            o.remember(&format!("value-{i}"), 3);
        }
        assert!(!o.came_from(token, 1), "the oldest is forgotten");
        assert!(o.came_from(&format!("value-{}", MAX - 1), 3));
        assert_eq!(o.servers.len(), MAX);
    }
}
