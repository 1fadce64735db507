//! Call windows: the calls just before a stack sample, each in its exact context.
//!
//! Timer samples see time, not calls, so they cannot say how a call site's calls split
//! among the contexts its function runs in. Bursts of consecutive calls can (Zhuang et al.'s adaptive
//! bursting; the same idea as PEP's bursts of consecutive paths): the guest appends one
//! word per function entry (`func`) and per return to a call site (`site | RET`) to a
//! ring in pepper's memory, and the sample copies the newest stretch of it together with
//! the stack. Replaying that stretch backwards from the sampled stack gives the context of
//! every call in it: going back past a return to site `s` puts the callee's frame back on
//! top of `s`'s function, going back past an entry takes the top frame off, and that entry
//! was one call in the context the stack then shows.
//!
//! Every step is checked against what the stack must look like (a return names its
//! caller's function, an entry the top frame's function); the first event that does not
//! fit (a frame of uninstrumented code, a tail call, an exception that skipped returns)
//! ends the replay there, so a window is a shorter stretch, never a wrong one.

use crate::pcct::Pcct;
use crate::tree::NodeIdx;

/// Event word for a return to call site `site`: `site | RET`.
pub const RET: u32 = 1 << 31;
/// Event word that ends every replay (written where frames change in ways the log does
/// not describe, e.g. tail calls).
pub const STOP: u32 = u32::MAX;
const UNKNOWN: u32 = u32::MAX;

/// What the replay needs to know about a call site.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SiteInfo {
    /// The function the site is in.
    pub caller: u32,
    /// The callee of a direct call; `None` for indirect calls (learned from the log).
    pub callee: Option<u32>,
}

/// One frame during the replay: its node once its function is known.
#[derive(Copy, Clone, Debug)]
struct WFrame {
    node: Option<NodeIdx>,
    func: u32,
    site: u32,
}

/// Reusable state of [`Pcct::replay_calls`].
#[derive(Clone, Debug, Default)]
pub struct Replay {
    frames: Vec<WFrame>,
    placed: Vec<NodeIdx>,
    /// Weighted calls placed, over all replays (over `calls`: the mean weight of one).
    pub weighted: u64,
    /// Calls placed in their context, over all replays.
    pub calls: u64,
    /// Replays that ended at an event that did not fit before reaching the window's start.
    pub cut: u64,
}

impl Pcct {
    /// Replays `events` (oldest first; the newest is the last before the sample just
    /// recorded by [`Pcct::sample`]) backwards from that sample's stack, and adds to
    /// [`crate::tree::Node::window_calls`] of the context of every function entry met.
    /// The stretch replayed stands for `represents` events (those since the previous
    /// window), so each call placed weighs `represents / events replayed`: windows cut
    /// short weigh more, and like PEP's bursts, each tick's window counts for the calls
    /// of its whole interval. Returns how many calls were placed. Nothing happens when the
    /// last sample did not hang from the root (detached, truncated or empty).
    pub fn replay_calls(
        &mut self,
        events: &[u32],
        sites: &[SiteInfo],
        represents: u64,
        r: &mut Replay,
    ) -> u64 {
        let Some(stack) = self.last_stack() else {
            return 0;
        };
        r.frames.clear();
        r.frames.extend(stack.iter().map(|&n| {
            let node = self.tree.node(n);
            WFrame {
                node: Some(n),
                func: node.func,
                site: node.site,
            }
        }));
        r.placed.clear();
        // The sample may have caught the leaf before its entry was logged (in its
        // prologue): then the newest event already belongs to the caller.
        let mut leaf_unlogged = true;
        let mut complete = true;
        let mut k = events.len();
        while k > 0 {
            let e = events[k - 1];
            let ok = match e {
                STOP => false,
                _ if e & RET != 0 => sites
                    .get((e & !RET) as usize)
                    .is_some_and(|&info| self.replay_return(&mut r.frames, e & !RET, info)),
                f => self.replay_entry(&mut r.frames, f, &mut r.placed),
            };
            if !ok {
                if leaf_unlogged && r.frames.len() > 1 && k == events.len() {
                    r.frames.pop();
                    leaf_unlogged = false;
                    continue;
                }
                complete = false;
                break;
            }
            leaf_unlogged = false;
            k -= 1;
            if r.frames.is_empty() {
                break;
            }
        }
        if !complete {
            r.cut += 1;
        }
        let replayed = (events.len() - k) as u64;
        let weight = if replayed == 0 {
            0
        } else {
            (represents.max(replayed) as f64 / replayed as f64).round() as u64
        };
        for &n in &r.placed {
            self.tree.node_mut(n).window_calls += weight;
        }
        let placed = r.placed.len() as u64;
        r.calls += placed;
        r.weighted += placed * weight;
        placed
    }

    /// The top frame runs `func`: learn it if it was unknown (a frame an indirect call
    /// pushed), check it otherwise.
    fn resolve_top(&mut self, frames: &mut [WFrame], func: u32) -> bool {
        let n = frames.len();
        let Some(top) = frames.last() else {
            return false;
        };
        if top.func != UNKNOWN {
            return top.func == func;
        }
        let parent = if n >= 2 { frames[n - 2].node } else { None };
        let Some(parent) = parent else {
            return false;
        };
        let site = top.site;
        let Some(node) = self.tree.child(parent, site, func) else {
            return false;
        };
        let top = frames.last_mut().expect("checked above");
        top.func = func;
        top.node = Some(node);
        true
    }

    /// Going back past a return to `site`: its callee's frame was on top of the caller.
    fn replay_return(&mut self, frames: &mut Vec<WFrame>, site: u32, info: SiteInfo) -> bool {
        if !self.resolve_top(frames, info.caller) {
            return false;
        }
        let parent = frames.last().and_then(|f| f.node);
        let (node, func) = match (info.callee, parent) {
            (Some(g), Some(p)) => match self.tree.child(p, site, g) {
                Some(c) => (Some(c), g),
                None => return false,
            },
            (None, Some(_)) => (None, UNKNOWN),
            _ => return false,
        };
        frames.push(WFrame { node, func, site });
        true
    }

    /// Going back past the entry of `func`: that was one call in the top frame's context.
    fn replay_entry(
        &mut self,
        frames: &mut Vec<WFrame>,
        func: u32,
        placed: &mut Vec<NodeIdx>,
    ) -> bool {
        if !self.resolve_top(frames, func) {
            return false;
        }
        let Some(node) = frames.pop().and_then(|f| f.node) else {
            return false;
        };
        placed.push(node);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcct::{EdgeMode, VecStack};
    use crate::tree::{NO_SITE, ROOT};

    // main (0) calls a (1) from site 0 and b (2) from site 1; a calls b from site 2;
    // site 3 in main is indirect.
    fn sites() -> Vec<SiteInfo> {
        vec![
            SiteInfo {
                caller: 0,
                callee: Some(1),
            },
            SiteInfo {
                caller: 0,
                callee: Some(2),
            },
            SiteInfo {
                caller: 1,
                callee: Some(2),
            },
            SiteInfo {
                caller: 0,
                callee: None,
            },
        ]
    }

    fn sampled(frames: &[(u32, u32)]) -> Pcct {
        let mut p = Pcct::new(100, 64, EdgeMode::StrictNewEdges, 8);
        // (function, the site it calls from) per frame, outermost first.
        let mut s = VecStack::default();
        s.push(frames[0].0);
        for w in frames.windows(2) {
            s.call(w[0].1, w[1].0);
        }
        assert!(p.sample(&mut s, 1));
        p
    }

    fn calls_at(p: &Pcct, path: &[(u32, u32)]) -> u64 {
        let mut n = ROOT;
        for &(site, func) in path {
            n = p.tree.find_child(n, site, func).expect("context exists");
        }
        p.tree.node(n).window_calls
    }

    #[test]
    fn replays_calls_into_their_contexts() {
        // Sample: main -> a (site 0) -> b (site 2), b is the leaf.
        let mut p = sampled(&[(0, 0), (1, 2), (2, 0)]);
        // Log, oldest first: main calls b from site 1 (entry, return), then a (entry),
        // a calls b twice (entry + return, then the sampled entry).
        let log = [2, 1 | RET, 1, 2, 2 | RET, 2];
        let mut r = Replay::default();
        // Six events replayed standing for 60: each call weighs 10.
        assert_eq!(p.replay_calls(&log, &sites(), 60, &mut r), 4);
        assert_eq!((r.calls, r.weighted), (4, 40));
        assert_eq!(r.cut, 0);
        assert_eq!(calls_at(&p, &[(NO_SITE, 0), (0, 1), (2, 2)]), 20);
        assert_eq!(calls_at(&p, &[(NO_SITE, 0), (0, 1)]), 10);
        assert_eq!(calls_at(&p, &[(NO_SITE, 0), (1, 2)]), 10);
    }

    #[test]
    fn indirect_callees_are_learned_from_the_log() {
        // Sample in main; before it, main called through site 3 something that called b
        // from site 2: so it was a (function 1).
        let mut p = sampled(&[(0, 0)]);
        let log = [1, 2, 2 | RET, 3 | RET];
        let mut r = Replay::default();
        assert_eq!(p.replay_calls(&log, &sites(), 1, &mut r), 2);
        assert_eq!(calls_at(&p, &[(NO_SITE, 0), (3, 1)]), 1);
        assert_eq!(calls_at(&p, &[(NO_SITE, 0), (3, 1), (2, 2)]), 1);
    }

    #[test]
    fn a_leaf_caught_before_its_entry_is_logged_is_skipped() {
        let mut p = sampled(&[(0, 0), (1, 0)]);
        // a's entry is not logged yet; the newest event is main's return from b.
        let log = [2, 1 | RET];
        let mut r = Replay::default();
        assert_eq!(p.replay_calls(&log, &sites(), 1, &mut r), 1);
        assert_eq!(calls_at(&p, &[(NO_SITE, 0), (1, 2)]), 1);
        assert_eq!(r.cut, 0);
    }

    #[test]
    fn an_event_that_does_not_fit_ends_the_replay() {
        let p = sampled(&[(0, 0), (1, 2), (2, 0)]);
        // Oldest first: an entry of b from nowhere (mismatch), then b's sampled entry.
        // Walking back: b's entry fits, then `1 | RET` says the top frame (a) is main:
        // wrong, cut there. STOP cuts too.
        for log in [vec![2, 1 | RET, 2], vec![0, STOP, 2]] {
            let mut q = p.clone();
            let mut r = Replay::default();
            assert_eq!(q.replay_calls(&log, &sites(), 1, &mut r), 1);
            assert_eq!(r.cut, 1);
        }
        // Nothing recorded for an empty stack.
        let mut empty = Pcct::new(10, 8, EdgeMode::StrictNewEdges, 4);
        assert!(empty.sample(&mut VecStack::default(), 1));
        assert_eq!(
            empty.replay_calls(&[0], &sites(), 1, &mut Replay::default()),
            0
        );
    }
}
