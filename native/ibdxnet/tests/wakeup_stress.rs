//! The sleep/wake protocol of the engine threads (`sys::doorbell`) under
//! stress: a producer hands items to a sleeper with random delays
//! (spins, yields, short sleeps), so the sleeper catches up and goes to
//! sleep again and again. A wake-up is lost if the sleeper's wait ends by
//! its timeout while an item was waiting: that must never happen.
//! CI runs 10^6 hand-offs (~10 s here); `IBDXNET_WAKEUP_HANDOFFS=10000000`
//! the long run (`bench/HISTORY.md` has its result).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::records::Rng;
use ibdxnet::sys::doorbell::Doorbell;

#[test]
fn no_wakeup_is_lost_in_a_million_handoffs() {
    let total: u64 = std::env::var("IBDXNET_WAKEUP_HANDOFFS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let door = Doorbell::new().unwrap();
    let produced = AtomicU64::new(0);
    // Long enough that only a lost wake-up ends a wait by timeout.
    let timeout = Duration::from_secs(10);
    let t0 = Instant::now();
    let (sleeps, lost) = std::thread::scope(|s| {
        s.spawn(|| {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
            for _ in 0..total {
                match rng.next() % 1024 {
                    0 => std::thread::sleep(Duration::from_micros(rng.next() % 50)),
                    1..=7 => std::thread::yield_now(),
                    8..=63 => {
                        for _ in 0..rng.next() % 2000 {
                            std::hint::spin_loop();
                        }
                    }
                    _ => {}
                }
                produced.fetch_add(1, Ordering::Release);
                door.wake_if_sleeping();
            }
        });
        let sleeper = s.spawn(|| {
            let (mut consumed, mut sleeps, mut lost) = (0u64, 0u64, 0u64);
            while consumed < total {
                let now = produced.load(Ordering::Acquire);
                if now > consumed {
                    consumed = now;
                    continue;
                }
                // A short busy phase first, as the engine threads have.
                if (0..64).any(|_| {
                    std::hint::spin_loop();
                    produced.load(Ordering::Acquire) > consumed
                }) {
                    continue;
                }
                door.announce();
                if produced.load(Ordering::Acquire) > consumed {
                    door.retract();
                    continue;
                }
                sleeps += 1;
                let woken = door.wait(&[], timeout).unwrap();
                door.retract();
                if !woken.rung && produced.load(Ordering::Acquire) > consumed {
                    lost += 1;
                }
            }
            (sleeps, lost)
        });
        sleeper.join().unwrap()
    });
    println!(
        "{total} hand-offs in {:.2} s: the sleeper slept {sleeps} times, {lost} wake-ups lost",
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(lost, 0, "wake-ups lost");
    assert!(sleeps >= total / 1000, "the sleeper slept only {sleeps} times: the protocol was hardly exercised");
}
