//! Path windows: call windows read off PEP's ring of path ends instead of a call log.
//!
//! A call window ([`crate::window`]) needs the calls just before a sample in order, which
//! the call log buys with two writes per call. PEP already writes every path end to a ring
//! (a path starts at a function's entry or a loop header and ends at a loop header or the
//! exit), and a path says which call sites it passed, in order. So the newest stretch of
//! that ring, copied with the stack, describes the calls before the sample too, for no
//! cost in the guest: a callee's path ends all come before the path end of the caller's
//! path that called it, and the callee's last one ends at its exit.
//!
//! Read backwards from the sampled stack, each path end is either the previous path of the
//! top frame (it ended at a loop header the current path started from), or the return of a
//! callee of the top frame, called from the last call site of the top frame's path not yet
//! matched. Going back past a callee's first path (one that starts at its entry) with all
//! its call sites matched is that callee's entry. [`path_events`] turns the stretch into
//! the call log it stands for (`site | RET` at each return, `func` at each entry), which
//! [`crate::Pcct::replay_calls`] replays as usual, checking every step again.
//!
//! What a path end cannot say is which call sites the sampled frames' unfinished paths
//! passed. Those returns are held back until the path's start is known: the frame's
//! previous path end (it names the loop header the unfinished path began at), or a path
//! end the frame cannot explain (then the path began at the frame's entry, after it). The
//! [`CallGraph`] then finds the one path from that start to where the frame is whose calls
//! fit the returns, in order; if none or several fit, or the window begins first, the
//! window ends before the first held-back return. It ends there too where another
//! reading fits as well: the frame may have begun after some of the returns (its caller's,
//! then), or a loop path end of its function may be a frame's further down. No call is
//! ever placed by a guess (`tests/path_props.rs` checks it on random programs).

use crate::pcct::Pcct;
use crate::window::{Replay, SiteInfo, RET};

/// Where a path ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PathEnd {
    /// At the function's exit: the activation returned.
    Exit,
    /// At a loop header or a truncation point (the graph's name for it): the activation
    /// goes on with a new path from there.
    Split(u32),
    /// At a tail call or a throw: frames changed in a way paths do not describe.
    Abrupt,
}

/// What one path end in PEP's ring says about calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathCalls {
    pub func: u32,
    /// The call sites the path passed, in order.
    pub sites: Vec<u32>,
    /// Whether the path starts at the function's entry (else at a loop header or a
    /// truncation point).
    pub from_entry: bool,
    pub end: PathEnd,
}

/// A place in a function's code, as the [`CallGraph`] names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pos(pub u64);

impl Pos {
    /// Somewhere in the function.
    pub const UNKNOWN: Pos = Pos(u64::MAX);
}

/// Where an unfinished path began.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Start {
    Entry,
    /// At the split node a [`PathEnd::Split`] names.
    Split(u32),
}

/// What a sampler needs to replay PEP's path words as calls: the calls a word's path
/// makes, where a sampled code offset is, and the [`CallGraph`] questions the replay asks.
/// The rewriter implements it (it knows each path's branches and call sites); the sampler
/// only holds one.
pub trait PathDecoder: CallGraph + Send + Sync + std::fmt::Debug {
    /// The calls of the path a PEP ring word names; `None` if it does not decode.
    fn decode(&self, word: u64) -> Option<PathCalls>;
    /// Where code offset `offset` of function `func` (in the running module) is.
    fn pos_at(&self, func: u32, offset: u64) -> Pos;
}

/// The program's call sites, as the conversion needs them.
pub trait CallGraph {
    /// Just before call site `site` of `func`.
    fn site_pos(&self, func: u32, site: u32) -> Pos;
    /// Whether a call site of `func` that a path may pass before `at` may call `callee`.
    fn may_have_called(&self, func: u32, at: Pos, callee: u32) -> bool;
    /// Whether `at` is in the code that ends a path of `func` the way `end` says (a
    /// sampled leaf there may or may not have written that path end yet).
    fn ends_at(&self, func: u32, at: Pos, end: PathEnd) -> bool;
    /// The call sites that the paths of `func` from `from` to `at` whose calls (sites
    /// that are not silent) are exactly `callees`, in order, pass. Where `at` is unknown,
    /// only no calls resolve (to none).
    fn resolve(&self, func: u32, from: Start, at: Pos, callees: &[u32]) -> Resolution;
    /// Whether `site` may call `callee` (a direct call names it; an indirect one by type).
    fn can_call(&self, site: u32, callee: u32) -> bool;
    /// Whether a call from `site` leaves no path end (an import, an uninstrumented callee).
    fn silent(&self, site: u32) -> bool;
}

/// What [`CallGraph::resolve`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// No path fits.
    NoPath,
    /// The paths that fit all pass these sites.
    One(Vec<u32>),
    /// Paths that fit pass different sites.
    Several,
}

/// A return whose call site is not known yet.
const HELD: u32 = u32::MAX - 1;

/// A frame during the conversion.
struct Seg<'a> {
    func: u32,
    /// Whether `pending` is the path the frame is in (else it is a sampled frame whose
    /// unfinished path is not known).
    known: bool,
    /// Call sites of the path not yet matched to a return, the newest last.
    pending: &'a [u32],
    from_entry: bool,
    /// Unknown paths: where the frame is, and the returns held back (callee, index of its
    /// `HELD` event), newest first, with the events and records used before the first.
    at: Pos,
    held: Vec<(u32, usize)>,
    cut: (usize, usize),
}

impl Seg<'_> {
    fn known<'a>(rec: &'a PathCalls) -> Seg<'a> {
        Seg {
            func: rec.func,
            known: true,
            pending: &rec.sites,
            from_entry: rec.from_entry,
            at: Pos::UNKNOWN,
            held: Vec::new(),
            cut: (0, 0),
        }
    }
}

fn skip_silent(pending: &mut &[u32], g: &(impl CallGraph + ?Sized)) {
    while let Some((&s, rest)) = pending.split_last() {
        if !g.silent(s) {
            break;
        }
        *pending = rest;
    }
}

/// Converts path ends (`records`, oldest first; `None` for one that does not decode) into
/// the call log they stand for, oldest first, in `out`, going back from `stack` ((function,
/// call site it was called from) per frame, outermost first) until a path end does not fit.
/// `top` is where the top frame is (if known). Returns how many of the newest records the
/// log stands for.
pub fn path_events(
    records: &[Option<&PathCalls>],
    stack: &[(u32, u32)],
    top: Pos,
    g: &(impl CallGraph + ?Sized),
    out: &mut Vec<u32>,
) -> usize {
    let mut frames: Vec<Seg<'_>> = stack
        .iter()
        .enumerate()
        .map(|(j, &(func, _))| Seg {
            func,
            known: false,
            pending: &[],
            from_entry: false,
            at: stack
                .get(j + 1)
                .map_or(top, |&(_, site)| g.site_pos(func, site)),
            held: Vec::new(),
            cut: (0, 0),
        })
        .collect();
    out.clear();
    let mut used = 0;
    'records: for (k, rec) in records.iter().rev().enumerate() {
        let Some(rec) = *rec else { break };
        if rec.end == PathEnd::Abrupt {
            break;
        }
        let before = (out.len(), used);
        loop {
            let Some(top) = frames.last_mut() else {
                break 'records;
            };
            if top.known {
                skip_silent(&mut top.pending, g);
                if let PathEnd::Split(_) = rec.end {
                    // The frame's previous path, which ended where its current one began.
                    if top.func != rec.func || !top.pending.is_empty() || top.from_entry {
                        break 'records;
                    }
                    top.pending = &rec.sites;
                    top.from_entry = rec.from_entry;
                    break;
                }
                // A callee returned: called from the frame's newest unmatched site.
                let Some((&s, rest)) = top.pending.split_last() else {
                    break 'records;
                };
                if !g.can_call(s, rec.func) {
                    break 'records;
                }
                top.pending = rest;
                out.push(s | RET);
                frames.push(Seg::known(rec));
                break;
            }
            if k == 0 && rec.func == top.func && g.ends_at(top.func, top.at, rec.end) {
                // The leaf is in the code that ends its path, and has written that path
                // end already: it is the leaf's own path (unless it may have called
                // itself: then the path end may be that call's return).
                if rec.end == PathEnd::Exit && g.may_have_called(top.func, top.at, top.func) {
                    break 'records;
                }
                top.known = true;
                top.pending = &rec.sites;
                top.from_entry = rec.from_entry;
                break;
            }
            if rec.end == PathEnd::Exit && g.may_have_called(top.func, top.at, rec.func) {
                // A return to the unfinished path: its site is known once its start is.
                if top.held.is_empty() {
                    top.cut = before;
                }
                top.held.push((rec.func, out.len()));
                out.push(HELD);
                frames.push(Seg::known(rec));
                break;
            }
            match begin_unfinished(&mut frames, rec, g, out) {
                Found::Stop => break 'records,
                Found::Entry => continue,
                Found::Split => break,
            }
        }
        used += 1;
        // An activation whose first path has all its calls matched began here.
        while let Some(top) = frames.last_mut() {
            if !top.known || !top.from_entry {
                break;
            }
            skip_silent(&mut top.pending, g);
            if !top.pending.is_empty() {
                break;
            }
            out.push(top.func);
            frames.pop();
        }
    }
    // Returns still held back: the window ends before them.
    if let Some(f) = frames.iter().find(|f| !f.held.is_empty()) {
        out.truncate(f.cut.0);
        used = f.cut.1;
    }
    debug_assert!(!out.contains(&HELD));
    out.reverse();
    used
}

/// What [`begin_unfinished`] found out about the top frame's unfinished path.
enum Found {
    /// Nothing that fits: the window ends here.
    Stop,
    /// It began at the frame's entry: the frame is done, the record goes to the one below.
    Entry,
    /// It began where the record's path (the frame's previous one) ended.
    Split,
}

/// The top frame's unfinished path began where the frame's previous path ended, or (a
/// path end the frame cannot explain) at its entry, after that path end: resolves the
/// returns held back for it.
fn begin_unfinished<'r>(
    frames: &mut Vec<Seg<'r>>,
    rec: &'r PathCalls,
    g: &(impl CallGraph + ?Sized),
    out: &mut Vec<u32>,
) -> Found {
    // (a path end the frame cannot explain) at its entry, after that path end.
    let n = frames.len();
    let (below, top) = frames.split_at_mut(n - 1);
    let top = &mut top[0];
    let callees: Vec<u32> = top.held.iter().rev().map(|h| h.0).collect();
    // Whether the frame may have begun after the older returns, made by a frame
    // below it, its path calling only the newest `mine`.
    let began_later = |mine: usize| {
        let (older, newest) = callees.split_at(callees.len() - mine);
        g.resolve(top.func, Start::Entry, top.at, newest) != Resolution::NoPath
            && older
                .iter()
                .all(|&h| below.iter().any(|f| g.may_have_called(f.func, f.at, h)))
    };
    let from = match rec.end {
        PathEnd::Split(h) if rec.func == top.func => {
            // Its own previous path, unless a frame below runs the same function
            // and this one may have begun after that frame's path end.
            if below.iter().any(|f| f.func == rec.func) && (0..=callees.len()).any(began_later) {
                return Found::Stop;
            }
            Start::Split(h)
        }
        _ if below.is_empty() => return Found::Stop,
        _ => {
            // Some of the returns may be the caller's, from before the frame began.
            if (0..callees.len()).any(began_later) {
                return Found::Stop;
            }
            Start::Entry
        }
    };
    // Returns that do not resolve stay held back: the window ends before them.
    let Resolution::One(sites) = g.resolve(top.func, from, top.at, &callees) else {
        return Found::Stop;
    };
    for (&(_, at), s) in top.held.iter().rev().zip(sites) {
        out[at] = s | RET;
    }
    top.held.clear();
    if from == Start::Entry {
        out.push(top.func);
        frames.pop();
        return Found::Entry;
    }
    top.known = true;
    top.pending = &rec.sites;
    top.from_entry = rec.from_entry;
    Found::Split
}

impl Pcct {
    /// [`Pcct::replay_calls`] for the call log that the newest path ends (`records`,
    /// oldest first) stand for, going back from the last sample's stack. The records used
    /// stand for `represents` path ends (those since the previous window). Returns how
    /// many calls were placed. `top`: as for [`path_events`].
    #[allow(clippy::too_many_arguments)]
    pub fn replay_paths(
        &mut self,
        records: &[Option<&PathCalls>],
        top: Pos,
        g: &(impl CallGraph + ?Sized),
        sites: &[SiteInfo],
        represents: u64,
        r: &mut Replay,
        events: &mut Vec<u32>,
    ) -> u64 {
        let Some(stack) = self.last_stack() else {
            return 0;
        };
        let stack: Vec<(u32, u32)> = stack
            .iter()
            .map(|&n| {
                let node = self.tree.node(n);
                (node.func, node.site)
            })
            .collect();
        let used = path_events(records, &stack, top, g, events);
        if used == 0 || events.is_empty() {
            return 0;
        }
        // Each event stands for as many as the path ends used stand for.
        let scale = represents.max(used as u64) as f64 / used as f64;
        let represents_events = (events.len() as f64 * scale).round() as u64;
        self.replay_calls(events, sites, represents_events, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcct::{EdgeMode, VecStack};
    use crate::tree::{NO_SITE, ROOT};

    /// main (0): one path through sites 0 -> a, 1 -> b, 2 -> an import, 3 indirect (a or
    /// b), 8 -> c. a (1): one path through 4 -> b, 5 -> b. b (2): no calls. c (3): two
    /// paths (the arms of an `if`), through 6 -> b or 7 -> b. A position is the site the
    /// frame is at (`END`: past them all; `EXITING`: in the code that ends its path at
    /// the exit).
    struct G;
    const END: Pos = Pos(100);
    const EXITING: Pos = Pos(200);
    fn paths(func: u32) -> &'static [&'static [u32]] {
        match func {
            0 => &[&[0, 1, 2, 3, 8]],
            1 => &[&[4, 5]],
            3 => &[&[6], &[7]],
            _ => &[&[]],
        }
    }
    impl CallGraph for G {
        fn site_pos(&self, _: u32, site: u32) -> Pos {
            Pos(site as u64)
        }
        fn may_have_called(&self, func: u32, at: Pos, callee: u32) -> bool {
            paths(func)
                .iter()
                .flat_map(|p| p.iter())
                .any(|&s| (s as u64) < at.0 && !self.silent(s) && self.can_call(s, callee))
        }
        fn ends_at(&self, _: u32, at: Pos, end: PathEnd) -> bool {
            at == EXITING && end == PathEnd::Exit
        }
        fn resolve(&self, func: u32, _: Start, at: Pos, callees: &[u32]) -> Resolution {
            if at == Pos::UNKNOWN {
                return if callees.is_empty() {
                    Resolution::One(Vec::new())
                } else {
                    Resolution::NoPath
                };
            }
            let mut fits = paths(func).iter().filter_map(|p| {
                let calls: Vec<u32> = p
                    .iter()
                    .copied()
                    .filter(|&s| (s as u64) < at.0 && !self.silent(s))
                    .collect();
                let ok = calls.len() == callees.len()
                    && calls
                        .iter()
                        .zip(callees)
                        .all(|(&s, &c)| self.can_call(s, c));
                ok.then_some(calls)
            });
            match (fits.next(), fits.next()) {
                (None, _) => Resolution::NoPath,
                (Some(f), None) => Resolution::One(f),
                _ => Resolution::Several,
            }
        }
        fn can_call(&self, site: u32, callee: u32) -> bool {
            match site {
                0 => callee == 1,
                1 | 4..=7 => callee == 2,
                3 => callee == 1 || callee == 2,
                8 => callee == 3,
                _ => false,
            }
        }
        fn silent(&self, site: u32) -> bool {
            site == 2
        }
    }
    fn site_infos() -> Vec<SiteInfo> {
        let callees = [Some(1), Some(2), Some(9), None, Some(2), Some(2)];
        callees
            .iter()
            .enumerate()
            .map(|(s, &callee)| SiteInfo {
                caller: [0, 0, 0, 0, 1, 1][s],
                callee,
            })
            .collect()
    }
    fn rec(func: u32, sites: &[u32], from_entry: bool, end: PathEnd) -> PathCalls {
        PathCalls {
            func,
            sites: sites.to_vec(),
            from_entry,
            end,
        }
    }
    fn events(records: &[PathCalls], stack: &[(u32, u32)], top: Pos) -> (Vec<u32>, usize) {
        let refs: Vec<Option<&PathCalls>> = records.iter().map(Some).collect();
        let mut out = Vec::new();
        let used = path_events(&refs, stack, top, &G, &mut out);
        (out, used)
    }
    const LOOP: PathEnd = PathEnd::Split(0);

    #[test]
    fn nested_calls_and_loops_become_the_log_they_stand_for() {
        use PathEnd::*;
        // main's loop: each iteration calls a (site 0), which calls b twice (4, 5) in a
        // loop of two paths, then b from site 1 and the import. The sample is in main's
        // third iteration, before any call of it.
        let iteration = [
            rec(2, &[], true, Exit),
            rec(1, &[4], true, LOOP),
            rec(2, &[], true, Exit),
            rec(1, &[5], false, Exit),
            rec(2, &[], true, Exit),
            rec(0, &[0, 1, 2], false, LOOP),
        ];
        let records: Vec<PathCalls> = iteration.iter().chain(&iteration).cloned().collect();
        let (log, used) = events(&records, &[(0, NO_SITE)], Pos(0));
        assert_eq!(used, 12);
        // Oldest first: a's entry, b (4), b (5), a's return, b (1).
        let one = [1, 2, 4 | RET, 2, 5 | RET, RET, 2, 1 | RET];
        let want: Vec<u32> = one.iter().chain(&one).copied().collect();
        assert_eq!(log, want);
    }

    #[test]
    fn returns_to_unfinished_paths_wait_for_the_path_start() {
        use PathEnd::*;
        // Sample: main -> a (site 0) -> b (site 5). main's previous loop path, then a
        // called b from 4 before the sampled call from 5.
        let records = [rec(0, &[], false, LOOP), rec(2, &[], true, Exit)];
        let stack = [(0, NO_SITE), (1, 0), (2, 5)];
        let (log, used) = events(&records, &stack, Pos::UNKNOWN);
        // The newest: the sampled b calls nothing, so it began after that return; a may
        // have called b before 5: held back. main's path end: a cannot explain it, so a
        // began after it, and its one path to 5 calls b once, from 4. main's previous path
        // ended where its unfinished one (no calls before site 0) began.
        assert_eq!(used, 2);
        assert_eq!(log, vec![1, 2, 4 | RET, 2]);
        // Without main's path end the start of a's path is never known: nothing.
        assert_eq!(events(&records[1..], &stack, Pos::UNKNOWN), (vec![], 0));
        // b sampled in the code that ends its path, which it has written: the newest
        // path end is b's own, and the one before it a's call from 4.
        let exiting = [records[0].clone(), records[1].clone(), records[1].clone()];
        let (log, used) = events(&exiting, &stack, EXITING);
        assert_eq!((log, used), (vec![1, 2, 4 | RET, 2], 3));
        // Taken for a return to a's unfinished path, b's own path end makes two returns
        // that a's one path to 5 cannot fit: nothing (never a misplaced call).
        assert_eq!(events(&exiting, &stack, Pos::UNKNOWN), (vec![], 0));
    }

    #[test]
    fn ambiguous_or_contradicting_path_ends_end_the_window() {
        use PathEnd::*;
        // Sample at the end of c (called from main's site 8): b returned from site 6 or
        // 7, the two arms: the window ends before it, nothing used.
        let records = [rec(0, &[], false, LOOP), rec(2, &[], true, Exit)];
        let (log, used) = events(&records, &[(0, NO_SITE), (3, 8)], END);
        assert_eq!((log, used), (vec![], 0));
        // A loop path of main while a (known from its own loop path) still has a site to
        // match: cut after the one record that fits.
        let records = [rec(0, &[0], false, LOOP), rec(1, &[4], false, LOOP)];
        let (_, used) = events(&records, &[(0, NO_SITE), (1, 0)], Pos::UNKNOWN);
        assert_eq!(used, 1);
        // A tail call or a throw ends it too.
        let (_, used) = events(&[rec(2, &[], true, Abrupt)], &[(0, NO_SITE)], END);
        assert_eq!(used, 0);
    }

    #[test]
    fn replayed_path_windows_count_calls_in_their_contexts() {
        use PathEnd::*;
        let mut p = Pcct::new(100, 64, EdgeMode::StrictNewEdges, 8);
        let mut s = VecStack::default();
        s.push(0);
        assert!(p.sample(&mut s, 1));
        // main's previous loop iteration called a through the indirect site 3; a called
        // b from 4 and 5.
        let records = [
            rec(2, &[], true, Exit),
            rec(2, &[], true, Exit),
            rec(1, &[4, 5], true, Exit),
            rec(0, &[3], false, LOOP),
        ];
        let refs: Vec<Option<&PathCalls>> = records.iter().map(Some).collect();
        let (mut r, mut ev) = (Replay::default(), Vec::new());
        // Four path ends standing for 40: each of the six events stands for ten.
        let placed = p.replay_paths(&refs, Pos(0), &G, &site_infos(), 40, &mut r, &mut ev);
        assert_eq!(ev, vec![1, 2, 4 | RET, 2, 5 | RET, 3 | RET]);
        assert_eq!(placed, 3);
        let at = |path: &[(u32, u32)]| {
            let mut n = ROOT;
            for &(site, func) in path {
                n = p.tree.find_child(n, site, func).expect("context exists");
            }
            p.tree.node(n).window_calls
        };
        assert_eq!(at(&[(NO_SITE, 0), (3, 1)]), 10);
        assert_eq!(at(&[(NO_SITE, 0), (3, 1), (4, 2)]), 10);
        assert_eq!(at(&[(NO_SITE, 0), (3, 1), (5, 2)]), 10);
    }
}
