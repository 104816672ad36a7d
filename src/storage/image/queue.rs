//! The image threads' queue, fair between clients: each client's jobs wait in a line of their
//! own, and a free thread takes the next job of the next client in turn, so a client with many
//! jobs waiting delays another's by one job at most, never by its whole line.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Condvar, Mutex};

/// A piece of image work.
pub type Job = Box<dyn FnOnce() + Send>;

/// Jobs by client, taken in turn.
pub struct FairQueue {
    state: Mutex<Lines>,
    ready: Condvar,
    /// Jobs waiting at most, over all clients.
    capacity: usize,
}

#[derive(Default)]
struct Lines {
    /// Each client's waiting jobs (no empty line is kept).
    lines: HashMap<IpAddr, VecDeque<Job>>,
    /// The clients with jobs waiting, in the order they are served.
    turns: VecDeque<IpAddr>,
    waiting: usize,
    /// Its renderer is gone: the threads stop once the queue is empty.
    closed: bool,
}

impl FairQueue {
    /// A queue of at most `capacity` waiting jobs.
    pub fn new(capacity: usize) -> FairQueue {
        FairQueue { state: Mutex::default(), ready: Condvar::new(), capacity }
    }

    /// Queues `job` of `client`; gives it back if the queue is full.
    pub fn push(&self, client: IpAddr, job: Job) -> Result<(), Job> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.waiting >= self.capacity {
            return Err(job);
        }
        let line = s.lines.entry(client).or_default();
        let was_empty = line.is_empty();
        line.push_back(job);
        if was_empty {
            s.turns.push_back(client);
        }
        s.waiting += 1;
        drop(s);
        self.ready.notify_one();
        Ok(())
    }

    /// Lets the threads stop once the jobs waiting are done.
    pub fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.ready.notify_all();
    }

    /// The next job, in the clients' turn (waiting for one); none once closed and empty.
    pub fn pop(&self) -> Option<Job> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(client) = s.turns.pop_front() {
                let line = s.lines.get_mut(&client).expect("a client in turn has a line");
                let job = line.pop_front().expect("no empty line is kept");
                match line.is_empty() {
                    true => {
                        s.lines.remove(&client);
                    }
                    false => s.turns.push_back(client),
                }
                s.waiting -= 1;
                return Some(job);
            }
            if s.closed {
                return None;
            }
            s = self.ready.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn clients_are_served_in_turn_and_the_queue_is_bounded() {
        let q = FairQueue::new(5);
        let served = Arc::new(Mutex::new(Vec::new()));
        let job = |name: &'static str| -> Job {
            let served = Arc::clone(&served);
            Box::new(move || served.lock().unwrap().push(name))
        };
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        for name in ["a1", "a2", "a3"] {
            assert!(q.push(a, job(name)).is_ok());
        }
        assert!(q.push(b, job("b1")).is_ok());
        assert!(q.push(b, job("b2")).is_ok());
        assert!(q.push(b, job("b3")).is_err(), "past its capacity");
        for _ in 0..5 {
            q.pop().unwrap()();
        }
        q.close();
        assert!(q.pop().is_none());
        assert_eq!(*served.lock().unwrap(), ["a1", "b1", "a2", "b2", "a3"]);
    }
}
