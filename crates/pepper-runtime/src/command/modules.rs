//! A run's core modules: the file's, or a component's selected ones, each instrumented,
//! found in the running component, decoded and joined into one profile.

use super::*;

/// The core modules of one run, instrumented: the file's (or its component's primary
/// profiled module), and a component's other profiled modules. `pepper run` builds one
/// per run; a harness that times many runs of one instrumentation builds it with
/// [`Modules::for_command`] and runs [`Modules::wasm`] with [`Modules::configure`]'s
/// configuration.
pub struct Modules {
    pub(crate) primary: Arc<Instrumented>,
    /// Inside a component with other profiled modules: the primary's place in it.
    pub(crate) primary_module: Option<CoreModule>,
    pub(crate) others: Vec<(CoreModule, Arc<Instrumented>)>,
}

impl Modules {
    /// Instruments `unit`'s modules as [`profile_command`](crate::profile_command) would
    /// for `opts` with `instrument` (its guide is the primary module's; a component's
    /// other modules are profiled where `opts`' sampling reads them).
    pub fn for_command(
        unit: &Unit,
        opts: &CommandOptions,
        instrument: &InstrumentOptions,
    ) -> Result<Modules> {
        let multi = others_supported(opts, instrument);
        Modules::instrument(unit, (instrument, multi), &|_| None)
    }

    /// The primary module, instrumented.
    pub fn primary(&self) -> &Arc<Instrumented> {
        &self.primary
    }

    /// The other core modules profiled with the primary, instrumented.
    pub fn others(&self) -> impl Iterator<Item = &Instrumented> {
        self.others.iter().map(|(_, i)| &**i)
    }

    /// Instruments `unit`'s profiled modules with `opts`, each with its own guide
    /// (`guide(None)` the primary's, `guide(Some(k))` core module `k`'s).
    pub(super) fn instrument(
        unit: &Unit,
        (opts, multi): (&InstrumentOptions, bool),
        guide: &dyn Fn(Option<usize>) -> Option<Arc<Guide>>,
    ) -> Result<Modules> {
        let frame = unit.component.as_ref();
        let mut primary_opts = opts.clone();
        primary_opts.module_slot = frame.map_or(0, |c| c.profiled_module as u32);
        primary_opts.guide = guide(None).or(primary_opts.guide);
        let primary = Arc::new(pepper_wasm::instrument(&unit.core, &primary_opts)?);
        let others = match frame.filter(|_| !unit.others.is_empty()) {
            Some(_) if !multi => Vec::new(),
            Some(_) => (unit.others.iter())
                .map(|o| {
                    let mut io = opts.clone();
                    io.module_slot = o.index as u32;
                    io.guide = guide(Some(o.index));
                    // Calling contexts come from native stacks across every module; a
                    // shadow stack is one module's alone.
                    if io.contexts.shadow() {
                        io.contexts = pepper_layout::ContextMode::Off;
                    }
                    let inst = pepper_wasm::instrument(&o.bytes, &io)
                        .with_context(|| format!("core module {}", o.name))?;
                    Ok((core_module(o.index, &o.name, &o.bytes), Arc::new(inst)))
                })
                .collect::<Result<Vec<_>>>()?,
            None => Vec::new(),
        };
        let primary_module = frame
            .filter(|_| !others.is_empty())
            .map(|c| core_module(c.profiled_module, &c.modules[c.profiled_module], &unit.core));
        Ok(Modules {
            primary,
            primary_module,
            others,
        })
    }

    /// The file to run.
    pub fn wasm<'a>(&'a self, unit: &Unit) -> std::borrow::Cow<'a, [u8]> {
        if self.others.is_empty() {
            return unit.wrap(&self.primary.wasm);
        }
        let others: Vec<&[u8]> = self.others.iter().map(|(_, i)| &i.wasm[..]).collect();
        unit.wrap_all(&self.primary.wasm, &others)
    }

    /// The other modules with a memory of pepper's, in the order the run finds them
    /// ([`crate::RunConfig::module_tags`]).
    pub(super) fn with_memory(&self) -> impl Iterator<Item = &(CoreModule, Arc<Instrumented>)> {
        (self.others.iter()).filter(|(_, i)| i.counters_export().is_some())
    }

    /// `cfg` (the primary module's) with the other modules' memories: found by their
    /// tags, their rings read in PEP's bursts, their windows opened with the primary's.
    pub fn configure(&self, cfg: &mut RunConfig) {
        cfg.module_tags = (self.with_memory())
            .map(|(_, i)| crate::MemoryTag::of(&i.guest))
            .collect();
        if cfg.module_tags.is_empty() {
            return;
        }
        if let Some(s) = cfg.attach.sampler.as_mut().filter(|s| s.entries > 0) {
            let rings: Option<Vec<_>> = (self.with_memory())
                .map(|(m, i)| crate::ModuleRing::of(m.index as usize, &i.guest))
                .collect();
            // On the ring (no switch) a fast guest overwrites a stretch of several rings
            // before it is read: one module's ring only.
            s.modules = rings.filter(|_| s.switch.is_some()).unwrap_or_default();
            if let Some(st) = s.stacks.as_mut().filter(|_| !s.modules.is_empty()) {
                // A path window replays one ring; the guest's calls run through every
                // module's.
                st.path_windows = None;
            }
        }
        if let Some(e) = cfg.attach.ephemeral.as_mut() {
            e.modules = (self.with_memory())
                .map(|(_, i)| {
                    let functions = i.guest.num_funcs - i.guest.num_imports;
                    (i.guest.layout.switch_flag, functions as u32)
                })
                .collect();
        }
    }

    /// The profile of a run: the primary module's, merged with the others' (from
    /// `module_counters`, in the order [`Modules::configure`] lists their tags), every
    /// function named by its core module inside a component.
    pub fn decode(
        &self,
        unit: Option<&ComponentFrame>,
        (results, module_counters): (decode::Results<'_>, &[Option<Vec<u8>>]),
        (module, run): (ModuleInfo, RunInfo),
        settings: &decode::Settings,
        sampler: Option<&SamplerConfig>,
        lines: &dyn Fn(u64) -> Option<String>,
    ) -> Profile {
        let (primary, settings_) = (&self.primary, settings);
        let mut profile = decode::profile(
            primary,
            results,
            module.clone(),
            run.clone(),
            settings_,
            sampler,
            lines,
        );
        let Some(frame) = unit else {
            return profile;
        };
        name_by_module(&mut profile, &frame.modules[frame.profiled_module], primary);
        let Some(first) = self.primary_module.clone() else {
            name_foreign_frames(&mut profile, frame);
            return profile;
        };
        // Each module's memory, and its words from PEP's bursts.
        let mut k = 0;
        let others = (self.others.iter())
            .map(|(m, inst)| {
                let (memory, words) = match inst.counters_export() {
                    Some(_) => {
                        k += 1;
                        let words = results.samples.and_then(|s| s.module_words.get(k - 1));
                        (module_counters.get(k - 1).and_then(Option::as_deref), words)
                    }
                    None => (None, None),
                };
                let sampled = words.map(|w| crate::SamplerResult {
                    words: w.clone(),
                    ..Default::default()
                });
                let results = decode::Results {
                    counters: memory,
                    samples: sampled.as_ref(),
                    epochs: results.epochs,
                    windows: results.windows,
                    window_groups: &[],
                };
                let info = ModuleInfo {
                    sha256: m.sha256.clone(),
                    size: m.size,
                    ..module.clone()
                };
                // (`merge_modules` names its functions by its module.)
                let p =
                    decode::profile(inst, results, info, run.clone(), settings, None, &|_| None);
                (m.clone(), p)
            })
            .collect();
        let mut merged = Profile::merge_modules((first, profile), others);
        name_foreign_frames(&mut merged, frame);
        // Blind spots over every module's functions together (the primary's were judged
        // against its own alone).
        merged
            .functions
            .iter_mut()
            .for_each(|f| f.under_sampled = None);
        merged.warnings.retain(|w| !w.starts_with("under-sampled"));
        pepper_profile::blind::mark_blind_spots(&mut merged);
        merged
    }
}

/// Whether a run with these options profiles a component's other core modules too: the
/// exact modes, PEP's bursts on the switch and ephemeral instrumentation do. PEP on the
/// ring (a fast guest overwrites a stretch of several rings before it is read), every-K,
/// time lines and interval sampling read one module's ring, and a switch set once for
/// the whole run is one module's.
pub(super) fn others_supported(opts: &CommandOptions, iopts: &InstrumentOptions) -> bool {
    let s = &opts.sampling;
    let sampler_driven = s.switch == SwitchDrive::Sampler && !iopts.switch_chaos;
    if iopts.mode.samples_paths() {
        iopts.switch.is_some()
            && iopts.pep_every.is_none()
            && s.intervals.is_none()
            && sampler_driven
    } else if iopts.mode.samples_edges() {
        sampler_driven
    } else {
        true
    }
}

/// A component's core module as a profile lists it.
fn core_module(index: usize, name: &str, bytes: &[u8]) -> CoreModule {
    CoreModule {
        index: index as u32,
        name: name.to_string(),
        sha256: pepper_profile::module_hash(bytes),
        size: bytes.len() as u64,
    }
}
