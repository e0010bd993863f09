//! First come, first served: one queue in arrival order, preempted requests
//! back at the front (vLLM's default scheduler). Tenants are ignored.

use super::{FairnessPolicy, Waiting};
use crate::request::RequestId;
use std::collections::VecDeque;

/// FCFS: the order every scenario without `[fairness]` has always had.
#[derive(Debug, Default)]
pub struct Fcfs {
    queue: VecDeque<Waiting>,
}

impl FairnessPolicy for Fcfs {
    fn push_back(&mut self, w: Waiting) {
        self.queue.push_back(w);
    }
    fn push_front(&mut self, w: Waiting) {
        self.queue.push_front(w);
    }
    fn front(&self) -> Option<Waiting> {
        self.queue.front().copied()
    }
    fn pop_front(&mut self) -> Option<Waiting> {
        self.queue.pop_front()
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
    fn ids(&self) -> Vec<RequestId> {
        self.queue.iter().map(|w| w.id).collect()
    }
    fn remove(&mut self, id: RequestId) -> Option<Waiting> {
        let i = self.queue.iter().position(|w| w.id == id)?;
        self.queue.remove(i)
    }
}
