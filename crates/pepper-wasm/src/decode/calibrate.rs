//! PEP's sampled path counts scaled to the entries call-site counters counted (see
//! `pepper_sampling::calibrate` for why and how).

use crate::entries::CountedEntries;
use crate::plan::{FunctionPlan, Plan};
use pepper_cfg::DagEdgeKind;
use pepper_layout::read_u64;
use pepper_sampling::calibrate::{calibrate, EntryStratum};
use std::collections::HashMap;

impl Plan {
    /// The calls call site `id` made, from its site counter (a run with counters).
    pub(crate) fn site_calls(&self, mem: &[u8], id: u32) -> u64 {
        let counter = self.counted_at.get(id as usize).copied().unwrap_or(id);
        read_u64(mem, self.layout.site_counters as u64 + 8 * counter as u64)
    }

    /// How often function `f` was entered, where counters say exactly.
    fn counted_entries_of(&self, mem: &[u8], f: u32) -> Option<u64> {
        match self.counted_entries.get(&f)? {
            CountedEntries::Counter(at) => Some(read_u64(mem, *at as u64)),
            CountedEntries::Sites(ids) => {
                Some(ids.iter().map(|&id| self.site_calls(mem, id)).sum())
            }
        }
    }

    /// Scales `samples` ((path word, weighted count) pairs, `taken` samples in all) per
    /// function so that each function's sampled entry paths add up to its counted entries
    /// where enough of them were sampled, and by the overall ratio elsewhere. Returns how
    /// many functions got their own ratio (0: the samples are as they were).
    pub(crate) fn calibrate_samples(
        &self,
        mem: &[u8],
        samples: &mut [(u64, u64)],
        taken: u64,
    ) -> usize {
        let total: f64 = samples.iter().map(|s| s.1 as f64).sum();
        if self.counted_entries.is_empty() || taken == 0 || total <= 0.0 {
            return 0;
        }
        let per_sample = total / taken as f64;
        let funcs: HashMap<u32, &FunctionPlan> =
            self.functions.iter().map(|f| (f.index.0, f)).collect();
        // Per function: its stratum's position, and its sampled entry paths' weight.
        let mut order: HashMap<u32, usize> = HashMap::new();
        let mut entered: Vec<(u32, f64)> = Vec::new();
        for &(word, count) in samples.iter() {
            let Some((f, r)) = pepper_layout::pep_untag(word) else {
                continue;
            };
            let k = *order.entry(f).or_insert_with(|| {
                entered.push((f, 0.0));
                entered.len() - 1
            });
            // Functions without counted entries take the overall ratio: no need to know.
            let from_entry = (funcs.get(&f))
                .filter(|_| self.counted_entries.contains_key(&f))
                .and_then(|fp| fp.numbered.as_ref())
                .and_then(|nd| {
                    let edges = nd.numbering.regenerate(&nd.dag, r).ok()?;
                    Some(nd.dag.edge(*edges.first()?).kind == DagEdgeKind::FunctionEntry)
                });
            if from_entry == Some(true) {
                entered[k].1 += count as f64;
            }
        }
        let strata: Vec<EntryStratum> = (entered.iter())
            .map(|&(f, estimated)| EntryStratum {
                estimated,
                samples: estimated / per_sample,
                counted: self.counted_entries_of(mem, f),
            })
            .collect();
        let Some(c) = calibrate(&strata) else {
            return 0;
        };
        for (word, count) in samples.iter_mut() {
            let scale = pepper_layout::pep_untag(*word)
                .and_then(|(f, _)| order.get(&f))
                .map_or(c.overall, |&k| c.scales[k]);
            *count = ((*count as f64 * scale).round() as u64).max(1);
        }
        c.calibrated
    }
}

#[cfg(test)]
mod tests {
    use crate::{ContextMode, InstrumentOptions};
    use pepper_profile::Mode;

    /// `$leaf` and `$twice` are called only directly, from `_start`'s loop (which the host
    /// calls, so its entries are not counted); `$table` sits in a table.
    const WAT: &str = r#"(module
      (table 1 funcref)
      (elem (i32.const 0) $table)
      (type $t (func (param i32) (result i32)))
      (func $leaf (param i32) (result i32) local.get 0 i32.const 1 i32.add)
      (func $twice (param i32) (result i32) local.get 0 i32.const 2 i32.mul)
      (func $table (param i32) (result i32) local.get 0)
      (func (export "_start") (local i32)
        loop
          local.get 0 call $leaf
          local.tee 0
          i32.const 1
          i32.and
          if
            local.get 0 call $twice local.set 0
          end
          local.get 0
          i32.const 0 call_indirect (type $t)
          local.tee 0
          i32.const 1000
          i32.lt_u
          br_if 0
        end))"#;

    fn plan() -> crate::plan::Plan {
        let opts = InstrumentOptions {
            mode: Mode::Pep,
            contexts: ContextMode::Native,
            ..Default::default()
        };
        crate::instrument(&wat::parse_str(WAT).unwrap(), &opts)
            .unwrap()
            .plan
    }

    #[test]
    fn only_functions_every_entry_of_which_a_counter_sees_are_counted() {
        let p = plan();
        use crate::entries::CountedEntries;
        assert!(
            matches!(p.counted_entries.get(&0), Some(CountedEntries::Sites(s)) if s.len() == 1)
        );
        assert!(
            matches!(p.counted_entries.get(&1), Some(CountedEntries::Sites(s)) if s.len() == 1)
        );
        assert!(matches!(
            p.counted_entries.get(&2),
            Some(CountedEntries::Counter(_))
        ));
        // Exported: the host's calls are counted nowhere.
        assert_eq!(p.counted_entries.get(&3), None);
    }

    #[test]
    fn sampled_paths_are_scaled_to_the_counted_entries() {
        let p = plan();
        let mut mem = vec![0u8; (p.layout.pages() * 65536) as usize];
        let mut put =
            |at: u64, v: u64| mem[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
        let site = |callee: u32| {
            p.call_sites
                .iter()
                .position(|s| s.callee == Some(callee))
                .unwrap()
        };
        let counter = |id: usize| p.layout.site_counters as u64 + 8 * p.counted_at[id] as u64;
        put(counter(site(0)), 3000);
        put(counter(site(1)), 1000);
        let word = |f: u32| pepper_layout::pep_tag(f).unwrap();
        // Both leaves sampled alike though `$leaf` ran three times as often; `_start`'s
        // one path (no counted entries) sampled too.
        let mut samples = vec![(word(0), 500), (word(1), 500), (word(3), 100)];
        assert_eq!(p.calibrate_samples(&mem, &mut samples, 1100), 2);
        assert_eq!(
            samples,
            vec![(word(0), 3000), (word(1), 1000), (word(3), 400)]
        );
        // Too few samples behind the entries: nothing changes.
        let mut few = vec![(word(0), 500), (word(1), 500)];
        assert_eq!(p.calibrate_samples(&mem, &mut few, 3), 0);
        assert_eq!(few, vec![(word(0), 500), (word(1), 500)]);
    }
}
