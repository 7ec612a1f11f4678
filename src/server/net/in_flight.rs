//! The requests a connection has read and not yet answered, by correlation
//! id. A stopping shard (a clean stop, or a node that lost its role and
//! restarts in a new one) stops reading, gives them a grace to finish, and
//! answers the rest itself with a retriable error: no client is left waiting
//! on a request the broker read (a paused leader's clients were, with their
//! connections open).

use ringmq_shards::Signal;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a stopping shard's requests in flight have to finish before a
/// connection answers them itself (native) or closes (Kafka, whose clients
/// retry what a closed connection left unanswered). A deposed leader's
/// waiting produces see it within 50 ms; a long poll would wait out its time.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// One connection's unanswered requests.
#[derive(Default)]
pub struct InFlight {
    /// How many requests of each correlation id (a client may repeat one).
    ids: RefCell<BTreeMap<u32, usize>>,
    /// One was answered.
    answered: Signal,
}

impl InFlight {
    /// Request `correlation` was read and is being served.
    pub fn begin(&self, correlation: u32) {
        *self.ids.borrow_mut().entry(correlation).or_default() += 1;
    }

    /// Request `correlation` is answered now; false when the connection
    /// already answered it while stopping (the late answer is dropped).
    pub fn answer(&self, correlation: u32) -> bool {
        let mut ids = self.ids.borrow_mut();
        let was_open = match ids.get_mut(&correlation) {
            Some(1) => ids.remove(&correlation).is_some(),
            Some(n) => {
                *n -= 1;
                true
            }
            None => false,
        };
        self.answered.notify();
        was_open
    }

    pub fn is_empty(&self) -> bool {
        self.ids.borrow().is_empty()
    }

    /// Waits until every request is answered or `grace` passed; then
    /// takes the ones still unanswered (the caller answers them).
    pub async fn settle(&self, grace: Duration) -> Vec<u32> {
        let deadline = std::time::Instant::now() + grace;
        while !self.is_empty() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() || !self.answered.wait_for(left).await {
                break;
            }
        }
        let left = std::mem::take(&mut *self.ids.borrow_mut());
        left.into_iter().flat_map(|(id, n)| std::iter::repeat_n(id, n)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn run<T>(work: impl std::future::Future<Output = T> + 'static) -> T {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound).make().unwrap().run(work)
    }

    #[test]
    fn settling_waits_for_answers_and_hands_over_the_rest() {
        run(async {
            let requests = Rc::new(InFlight::default());
            requests.begin(1);
            requests.begin(2);
            requests.begin(3);
            requests.begin(3);
            glommio::spawn_local({
                let requests = requests.clone();
                async move {
                    glommio::timer::sleep(Duration::from_millis(5)).await;
                    assert!(requests.answer(2));
                }
            })
            .detach();
            let left = requests.settle(Duration::from_millis(50)).await;
            assert_eq!(left, vec![1, 3, 3], "2 was answered in the grace; 3 was asked twice");
            assert!(!requests.answer(1), "1 was handed over: its own answer comes too late");
            assert!(requests.is_empty());
        });
    }

    #[test]
    fn settling_with_nothing_in_flight_returns_at_once() {
        run(async {
            let requests = InFlight::default();
            requests.begin(7);
            assert!(requests.answer(7));
            assert_eq!(requests.settle(Duration::from_secs(3600)).await, Vec::<u32>::new());
        });
    }
}
