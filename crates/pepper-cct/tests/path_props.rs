//! Property: path windows never place a call where it did not happen. Random executions
//! of random programs write what PEP's ring holds (one record per path: the function, the
//! call sites it passed, whether it started at the entry, how it ended); each function is
//! a loop whose every iteration is a path through any subset of its three call sites (so
//! several paths can explain the same returns, and two sites may call the same function).
//! The execution stops at a random point, and the calls the conversion places, replayed
//! from that stack, must all be calls the execution made in exactly those contexts, after
//! the oldest record the window used. A window that used every record places every call
//! entered after the first one.

use pepper_cct::{CallGraph, EdgeMode, PathCalls, PathEnd, Pcct, Pos, Replay, Resolution};
use pepper_cct::{SiteInfo, Start};
use pepper_cct::{VecStack, NO_SITE};
use proptest::prelude::*;
use std::collections::HashMap;

const FUNCS: u32 = 4;
const SLOTS: u32 = 3;
const MAX_DEPTH: usize = 4;

/// Site `f * SLOTS + k` is slot `k` of function `f`; `callee[site]` is what it calls.
struct Model {
    callee: Vec<u32>,
}

impl Model {
    fn slot(site: u32) -> u32 {
        site % SLOTS
    }
    /// Paths of `func` that stop before slot `at`: every subset of the slots before it.
    fn fits(&self, func: u32, at: Pos, callees: &[u32]) -> Vec<Vec<u32>> {
        let end = at.0.min(SLOTS as u64) as u32;
        (0..1u32 << end)
            .map(|mask| {
                (0..end)
                    .filter(|k| mask & (1 << k) != 0)
                    .map(|k| func * SLOTS + k)
                    .collect::<Vec<u32>>()
            })
            .filter(|p| {
                p.len() == callees.len()
                    && p.iter()
                        .zip(callees)
                        .all(|(&s, &c)| self.callee[s as usize] == c)
            })
            .collect()
    }
}

impl CallGraph for Model {
    fn site_pos(&self, _: u32, site: u32) -> Pos {
        Pos(Self::slot(site) as u64)
    }
    fn may_have_called(&self, func: u32, at: Pos, callee: u32) -> bool {
        (0..SLOTS)
            .filter(|&k| (k as u64) < at.0)
            .any(|k| self.callee[(func * SLOTS + k) as usize] == callee)
    }
    fn ends_at(&self, _: u32, _: Pos, _: PathEnd) -> bool {
        false
    }
    fn resolve(&self, func: u32, _: Start, at: Pos, callees: &[u32]) -> Resolution {
        let mut fits = if at == Pos::UNKNOWN {
            if callees.is_empty() {
                vec![vec![]]
            } else {
                vec![]
            }
        } else {
            self.fits(func, at, callees)
        };
        fits.dedup();
        match fits.len() {
            0 => Resolution::NoPath,
            1 => Resolution::One(fits.remove(0)),
            _ => Resolution::Several,
        }
    }
    fn can_call(&self, site: u32, callee: u32) -> bool {
        self.callee[site as usize] == callee
    }
    fn silent(&self, _: u32) -> bool {
        false
    }
}

type Ctx = Vec<(u32, u32)>;

/// Runs the program until `budget` decisions are spent.
struct Sim<'a> {
    m: &'a Model,
    choices: std::slice::Iter<'a, (u8, u8)>,
    records: Vec<PathCalls>,
    /// Every call: its context (site, function per frame, outermost first) and how many
    /// records existed when it was entered.
    calls: Vec<(Ctx, usize)>,
    /// (site, function, next slot) per frame.
    stack: Vec<(u32, u32, u32)>,
}

impl Sim<'_> {
    /// One activation of the top frame's function; `false` once the choices run out
    /// (the sample: the stack stays as it is).
    fn run(&mut self) -> bool {
        let depth = self.stack.len();
        let func = self.stack[depth - 1].1;
        let Some(&(iterations, _)) = self.choices.next() else {
            return false;
        };
        let iterations = 1 + iterations as usize % 3;
        for it in 0..iterations {
            let mut sites = Vec::new();
            for k in 0..SLOTS {
                self.stack[depth - 1].2 = k;
                let Some(&(_, take)) = self.choices.next() else {
                    return false;
                };
                if take % 2 == 0 || depth >= MAX_DEPTH {
                    continue;
                }
                let site = func * SLOTS + k;
                let callee = self.m.callee[site as usize];
                self.stack.push((site, callee, 0));
                let ctx: Ctx = self.stack.iter().map(|f| (f.0, f.1)).collect();
                self.calls.push((ctx, self.records.len()));
                if !self.run() {
                    return false;
                }
                self.stack.pop();
                sites.push(site);
            }
            self.stack[depth - 1].2 = SLOTS;
            self.records.push(PathCalls {
                func,
                sites,
                from_entry: it == 0,
                end: if it + 1 == iterations {
                    PathEnd::Exit
                } else {
                    PathEnd::Split(0)
                },
            });
        }
        true
    }
}

proptest! {
    #[test]
    fn path_windows_place_only_calls_that_happened(
        callee in prop::collection::vec(1u32..FUNCS, (FUNCS * SLOTS) as usize),
        choices in prop::collection::vec((0u8..6, 0u8..4), 1..400),
        window in 1usize..300,
    ) {
        let m = Model { callee };
        let mut sim = Sim {
            m: &m,
            choices: choices.iter(),
            records: Vec::new(),
            calls: Vec::new(),
            stack: vec![(NO_SITE, 0, 0)],
        };
        // main runs again and again until the choices run out (each run is an entry).
        loop {
            sim.calls.push((vec![(NO_SITE, 0)], sim.records.len()));
            if !sim.run() {
                break;
            }
            sim.stack.truncate(1);
            sim.stack[0].2 = 0;
        }
        let mut p = Pcct::new(1 << 16, 1 << 10, EdgeMode::StrictNewEdges, FUNCS as usize);
        let mut s = VecStack::default();
        s.push(sim.stack[0].1);
        for f in &sim.stack[1..] {
            s.call(f.0, f.1);
        }
        prop_assert!(p.sample(&mut s, 1));
        let top = Pos(sim.stack.last().unwrap().2 as u64);
        let from = sim.records.len().saturating_sub(window);
        let records: Vec<Option<&PathCalls>> = sim.records[from..].iter().map(Some).collect();
        let sites: Vec<SiteInfo> = (0..FUNCS * SLOTS)
            .map(|s| SiteInfo { caller: s / SLOTS, callee: Some(m.callee[s as usize]) })
            .collect();
        let mut events = Vec::new();
        let used = pepper_cct::path_events(&records, &p_stack(&sim), top, &m, &mut events);
        let placed = p.replay_paths(&records, top, &m, &sites, 0, &mut Replay::default(), &mut Vec::new());
        // Calls entered after the record before the oldest one used (a sampled frame's
        // entry is known from the record just older than it).
        let oldest = sim.records.len() - used;
        let mut possible: HashMap<Ctx, u64> = HashMap::new();
        for (ctx, at) in &sim.calls {
            if *at + 1 >= oldest {
                *possible.entry(ctx.clone()).or_default() += 1;
            }
        }
        let mut got: HashMap<Ctx, u64> = HashMap::new();
        for (i, n) in p.tree.nodes().skip(1) {
            if n.window_calls > 0 {
                got.insert(p.tree.context(i), n.window_calls);
            }
        }
        for (ctx, n) in &got {
            prop_assert!(
                possible.get(ctx).copied().unwrap_or(0) >= *n,
                "placed {} calls in {:?}, which had {:?}", n, ctx, possible.get(ctx)
            );
        }
        prop_assert_eq!(placed, got.values().sum::<u64>());
        if used == sim.records.len() && from == 0 {
            // The whole execution replayed: every call entered after the first path end
            // is placed (one entered before it is known only from a path from its entry).
            let after_first = sim.calls.iter().filter(|c| c.1 >= 1).count();
            prop_assert!(placed as usize >= after_first, "placed {} of {:?}", placed, sim.calls);
        }
    }
}

/// The sampled stack as `path_events` takes it: (function, site it was called from).
fn p_stack(sim: &Sim<'_>) -> Vec<(u32, u32)> {
    sim.stack.iter().map(|f| (f.1, f.0)).collect()
}
