//! Calibrating sampled path counts with entry counts known exactly.
//!
//! A burst is weighted by the guest's path-end rate where it lands, so an error in that
//! rate (the instrumented copies run at another speed than the clean code, and by a
//! different factor in different parts of a run) moves whole functions' estimates up or
//! down together: on an interpreter, the functions of one phase came out at less than
//! half the scale of another phase's. Where call-site counters (which
//! count every call, in clean code too) say exactly how often a function was entered,
//! the function's paths that start at its entry must add up to that many: scaling all of
//! its sampled paths by the ratio is survey sampling's ratio estimator, with the entry
//! count as the auxiliary variable known for the whole population.
//!
//! The ratio is only as good as the sampled entries behind it: a function entered a few
//! thousand times that loops for long has its entry paths in a handful of samples, and a
//! ratio from them would scale its loops by noise. Functions with fewer sampled entry
//! paths than [`MIN_ENTRY_SAMPLES`], and functions whose entries no counter gives, are
//! scaled by the ratio over all calibrated functions together, so that the profile's
//! shares between the two kinds stay comparable.

/// Sampled entry paths a function needs before its own ratio is used.
pub const MIN_ENTRY_SAMPLES: f64 = 300.0;

/// One function's entry paths, as sampled and as counted.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct EntryStratum {
    /// The weighted count of its sampled paths that start at its entry.
    pub estimated: f64,
    /// How many samples (unweighted) those are.
    pub samples: f64,
    /// Its entries as counters give them exactly, where they do.
    pub counted: Option<u64>,
}

/// What to multiply each function's sampled path counts by.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// Per stratum, in the order given.
    pub scales: Vec<f64>,
    /// How many functions got their own ratio.
    pub calibrated: usize,
    /// The ratio over those, which the others get.
    pub overall: f64,
}

/// The scales for `strata`; `None` when no function has enough sampled entries and a
/// counted entry total (the estimate then stays as it is).
pub fn calibrate(strata: &[EntryStratum]) -> Option<Calibration> {
    let own = |s: &EntryStratum| {
        s.counted
            .filter(|&c| c > 0 && s.samples >= MIN_ENTRY_SAMPLES && s.estimated > 0.0)
            .map(|c| c as f64)
    };
    let (mut counted, mut estimated, mut calibrated) = (0.0, 0.0, 0);
    for s in strata {
        if let Some(c) = own(s) {
            counted += c;
            estimated += s.estimated;
            calibrated += 1;
        }
    }
    if calibrated == 0 || counted <= 0.0 {
        return None;
    }
    let overall = counted / estimated;
    let scales = (strata.iter())
        .map(|s| own(s).map_or(overall, |c| c / s.estimated))
        .collect();
    Some(Calibration {
        scales,
        calibrated,
        overall,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(estimated: f64, samples: f64, counted: Option<u64>) -> EntryStratum {
        EntryStratum {
            estimated,
            samples,
            counted,
        }
    }

    #[test]
    fn well_sampled_functions_get_their_own_ratio_and_the_rest_the_overall_one() {
        let c = calibrate(&[
            s(250.0, 1000.0, Some(1000)),
            s(600.0, 2000.0, Some(1000)),
            // Too few samples behind its entries: the overall ratio.
            s(10.0, 5.0, Some(1000)),
            // No counted entries.
            s(50.0, 5000.0, None),
        ])
        .unwrap();
        assert_eq!(c.calibrated, 2);
        assert!((c.overall - 2000.0 / 850.0).abs() < 1e-12);
        assert!((c.scales[0] - 4.0).abs() < 1e-12);
        assert!((c.scales[1] - 1000.0 / 600.0).abs() < 1e-12);
        assert_eq!(c.scales[2], c.overall);
        assert_eq!(c.scales[3], c.overall);
    }

    #[test]
    fn nothing_to_calibrate_by_leaves_the_estimate() {
        assert_eq!(calibrate(&[]), None);
        assert_eq!(calibrate(&[s(100.0, 10.0, Some(50))]), None);
        assert_eq!(calibrate(&[s(100.0, 1000.0, None)]), None);
        assert_eq!(calibrate(&[s(0.0, 1000.0, Some(5))]), None);
        assert_eq!(calibrate(&[s(100.0, 1000.0, Some(0))]), None);
    }
}
