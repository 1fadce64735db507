//! Watching the guest's ring head: how fast it completes path ends (the rate a burst is
//! weighted by), and waiting for it while it runs its instrumented copies.

use super::*;

/// Time between two reads of the head while measuring the rate. Spinning on the head
/// itself would take its cache line away from the guest at every one of its stores, and
/// slow down most the code that completes paths fastest.
pub(super) const RATE_GAP: Duration = Duration::from_micros(1);
/// The longest a rate measurement watches: a guest this slow to complete `span` paths
/// (or in a host call) is measured over this time.
pub(super) const RATE_MAX: Duration = Duration::from_micros(20);

/// Watches the ring head, starting from `(h0, t0)`, until the guest has completed `span`
/// more path ends (a burst's worth) or `RATE_MAX` has passed, and returns the new head and
/// when it was read (and every read in `reads`): the guest's path-end rate is over the
/// whole watch ([`per_second`]), or up to where a stack sample's signal stopped it.
///
/// Why: a tick lands at a random *time*, so a burst taken then comes from code in
/// proportion to the time the guest spends there, not to its path ends. Weighting each
/// burst by the rate at that moment turns the time sample into a count sample (importance
/// weighting). With weights from the path ends of the whole tick interval instead, code
/// that completes paths slowly (long paths, or paths just before a host call) was
/// overcounted, most where fast and slow loops alternate within microseconds (bzip2's
/// sorting).
///
/// The head is read every `RATE_GAP`, so the watch lasts at least a microsecond, in which
/// a fast guest completes a thousand paths or more: the rate is that stretch's, and the
/// caller draws the burst from anywhere in it, so that the burst and its weight describe
/// the same code. (A burst of the newest paths only, a fraction of a microsecond of
/// them, carried the stretch's average rate, which undercounted fast loops next to slow
/// ones.)
///
/// A guest that completes nothing while watched (in a host call, or descheduled) has a
/// zero rate at that moment, and its burst weighs nothing.
///
/// On a busy machine the guest may wait for a core through the whole watch: with its CPU
/// clock (`guest`), the watch goes on until the guest has run `RATE_MAX` (or for at
/// most [`OFF_CPU_PATIENCE`] times that in wall time), and also says how long the guest
/// ran meanwhile, so that a guest that did not run is not taken for an idle one.
pub(super) fn watch_rate(
    head: &dyn Fn() -> u32,
    from: (u32, Instant),
    span: u64,
    guest: Option<(ThreadCpuClock, Duration)>,
    pace: Pace,
    reads: &mut Vec<(u32, Instant)>,
) -> (u32, Instant, Option<Duration>) {
    watch(head, from, span, (RATE_MAX, guest), pace, Some(reads))
}

/// A burst ends in the guest after this many path ends since the sampler last renewed
/// it (see `Bursts::renew`): the sampler's steps take microseconds, in which a fast loop
/// writes a ring or two, and a stack sample taken in the burst needs the guest still in
/// its instrumented copies for its path window. (A lease of one ring lost a third of
/// the bursts on a busy machine, where the sampler waits for a core between its steps.)
pub(super) const BURST_LEASE: u64 = 4 << 14;

/// The burst's limit with the guest's takeover (see `Bursts::renew`).
pub(super) const TAKEOVER_LEASE: u64 = 1 << 30;

/// A watch that found the guest running for less than this (or a quarter of the watch)
/// found it off its CPU.
pub(super) const GUEST_RAN: Duration = Duration::from_micros(2);
/// How much longer than its limit of guest CPU time a watch waits, in wall time, for a
/// guest that is not running.
pub(super) const OFF_CPU_PATIENCE: u32 = 25;

/// Path ends the guest completes in its instrumented copies before a burst is drawn.
pub(super) const SWITCH_WARM_UP: u64 = 256;
/// The longest the sampler waits for the switched guest, per wait.
pub(super) const SWITCH_WAIT: Duration = Duration::from_micros(200);

/// How a watch waits between its reads of the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pace {
    /// Spins, reading every `RATE_GAP` (the ring written all along: a burst is drawn from
    /// the newest path ends, which a slower read would let the guest overwrite).
    Spin,
    /// Spins for [`SWITCH_SPIN`], then sleeps this long between reads (the switch: the
    /// guest writes to the ring only while the flag is set, so nothing is lost by reading
    /// late, and a sampler that spins takes a core from the guest on a busy machine;
    /// but a guest near a check writes a burst's path ends within microseconds, and
    /// every microsecond the flag stays set it runs its slower instrumented copies).
    Nap(Duration),
}

/// A switched burst's first nap.
pub(super) const SWITCH_NAP: Duration = Duration::from_micros(20);
/// How long a switched watch spins before it naps.
pub(super) const SWITCH_SPIN: Duration = Duration::from_micros(25);

/// Reads the head from `(h0, t0)` at `pace` until `span` more path ends are written or
/// `max` has passed; returns the head and when it was read (and with `reads`, every
/// read). With the guest's CPU clock and its reading at `t0`, `max` is the guest's CPU
/// time (up to [`OFF_CPU_PATIENCE`] times `max` in wall time), and the guest's CPU time
/// during the watch is returned too. Spinning, the clock is read only once `max` of wall
/// time has passed, and then every `max`: it costs a system call, and a guest found
/// waiting for a core gets this thread's: it sleeps until the next read. Napping, it is
/// read at every wake, and a nap in which the guest did not run is followed by a
/// longer one.
///
/// The ring's spin: yielding the core while the head does not move moved bursts later
/// into the instrumented stretch even on an idle machine (when the switch's bursts were
/// drawn from the newest path ends).
pub(super) fn watch(
    head: &dyn Fn() -> u32,
    (h0, t0): (u32, Instant),
    span: u64,
    (max, guest): (Duration, Option<(ThreadCpuClock, Duration)>),
    pace: Pace,
    mut reads: Option<&mut Vec<(u32, Instant)>>,
) -> (u32, Instant, Option<Duration>) {
    let mut previous = t0;
    let mut next_check = t0 + max;
    let mut checked = guest.map(|(_, at)| (t0, at));
    let ran = |now: Duration| guest.map(|(_, at)| now.saturating_sub(at));
    let mut nap = match pace {
        Pace::Nap(d) => d,
        Pace::Spin => Duration::ZERO,
    };
    let spin_until = t0 + SWITCH_SPIN;
    loop {
        let mut t = Instant::now();
        if nap.is_zero() || t < spin_until {
            while t - previous < RATE_GAP {
                std::hint::spin_loop();
                t = Instant::now();
            }
        } else {
            std::thread::sleep(nap);
            t = Instant::now();
        }
        previous = t;
        let h = head();
        if let Some(r) = reads.as_deref_mut() {
            r.push((h, t));
        }
        if h.wrapping_sub(h0) as u64 >= span {
            let cpu = guest.and_then(|(clock, _)| clock.now());
            return (h, t, cpu.and_then(ran));
        }
        if t >= next_check || (!nap.is_zero() && t >= spin_until) {
            let Some(cpu) = guest.and_then(|(clock, _)| clock.now()) else {
                if t >= t0 + max {
                    return (h, t, None);
                }
                continue;
            };
            if ran(cpu).unwrap_or(max) >= max || t - t0 >= max * OFF_CPU_PATIENCE {
                return (h, t, ran(cpu));
            }
            if let Some((wall, cpu_then)) = checked {
                let idle = cpu.saturating_sub(cpu_then) * 2 < t - wall;
                match pace {
                    Pace::Spin if idle => std::thread::sleep(max),
                    Pace::Nap(_) if idle => nap = (nap * 2).min(max),
                    Pace::Nap(d) => nap = d,
                    Pace::Spin => {}
                }
            }
            checked = Some((t, cpu));
            previous = Instant::now();
            next_check = previous + max;
        }
    }
}
