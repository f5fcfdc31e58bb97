//! The policy a running sandbox's services consult, replaceable while they run: a settings
//! edit (see `crate::reload`) swaps in a new [`Policy`]; each decision reads the current one,
//! so new connections see the new rules. Session approvals carry over from one policy to the
//! next (an "allow once" given before an edit still holds after it).

use super::merge::Policy;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

#[derive(Debug)]
pub struct LivePolicy {
    current: RwLock<Arc<Policy>>,
    generation: AtomicU64,
}

impl LivePolicy {
    pub fn new(policy: Arc<Policy>) -> Arc<LivePolicy> {
        Arc::new(LivePolicy {
            current: RwLock::new(policy),
            generation: AtomicU64::new(0),
        })
    }

    /// The policy in force now.
    pub fn get(&self) -> Arc<Policy> {
        match self.current.read() {
            Ok(p) => p.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Puts `next` in force, keeping the session approvals of the policy it replaces; returns
    /// the new generation (0 is the policy the run started with).
    pub fn replace(&self, mut next: Policy) -> u64 {
        let mut cur = match self.current.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        next.approvals = cur.approvals.clone();
        *cur = Arc::new(next);
        self.generation.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// How many times the policy was replaced.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}
