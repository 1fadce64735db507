//! Normalised interval vectors and their distance.

use crate::Counts;

/// An interval's vector normalised to sum to 1 (or empty: an interval where nothing ran).
///
/// Distances are Manhattan (Σ|aᵢ − bᵢ|, in [0, 2]; §3.1.2 of the dissertation): 0 for the
/// same mix of code, 2 for disjoint code. For normalised vectors `1 − D/2` is Σ min(aᵢ, bᵢ),
/// the weighted model's "percentage overlap" (§4.1.2), so one number serves both.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Signature {
    elems: Vec<(u32, f64)>,
}

impl Signature {
    /// The normalised form of `counts` (sorted by element).
    pub fn new(counts: &Counts) -> Signature {
        let total: u64 = counts.iter().map(|&(_, c)| c).sum();
        Signature::from_weights(counts.iter().map(|&(e, c)| (e, c as f64)), total as f64)
    }

    /// Normalises `(element, weight)` pairs sorted by element, whose weights sum to `total`.
    fn from_weights(it: impl Iterator<Item = (u32, f64)>, total: f64) -> Signature {
        if total <= 0.0 {
            return Signature::default();
        }
        Signature {
            elems: it
                .filter(|&(_, w)| w > 0.0)
                .map(|(e, w)| (e, w / total))
                .collect(),
        }
    }

    /// The normalised sum of `counts` (a window of several intervals).
    pub fn of_sum<'a>(counts: impl IntoIterator<Item = &'a Counts>) -> Signature {
        let mut sum: std::collections::BTreeMap<u32, u64> = Default::default();
        for c in counts {
            for &(e, n) in c {
                *sum.entry(e).or_default() += n;
            }
        }
        let total: u64 = sum.values().sum();
        Signature::from_weights(sum.into_iter().map(|(e, n)| (e, n as f64)), total as f64)
    }

    /// True when nothing ran.
    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }

    /// The normalised weights, sorted by element.
    pub fn elems(&self) -> &[(u32, f64)] {
        &self.elems
    }

    /// Manhattan distance in [0, 2]; an empty signature is at distance 2 from any other
    /// and 0 from another empty one.
    pub fn distance(&self, other: &Signature) -> f64 {
        if self.is_empty() || other.is_empty() {
            return if self.is_empty() && other.is_empty() {
                0.0
            } else {
                2.0
            };
        }
        let (a, b) = (&self.elems, &other.elems);
        let (mut i, mut j, mut d) = (0, 0, 0.0);
        while i < a.len() || j < b.len() {
            match (a.get(i), b.get(j)) {
                (Some(&(ea, wa)), Some(&(eb, wb))) if ea == eb => {
                    d += (wa - wb).abs();
                    i += 1;
                    j += 1;
                }
                (Some(&(ea, wa)), Some(&(eb, _))) if ea < eb => {
                    d += wa;
                    i += 1;
                }
                (Some(&(_, wa)), None) => {
                    d += wa;
                    i += 1;
                }
                (_, Some(&(_, wb))) => {
                    d += wb;
                    j += 1;
                }
                (None, None) => unreachable!(),
            }
        }
        d.min(2.0)
    }

    /// Σ min(aᵢ, bᵢ) in [0, 1]: 1 for the same mix.
    pub fn overlap(&self, other: &Signature) -> f64 {
        1.0 - self.distance(other) / 2.0
    }

    /// The elements holding at least `min_share` of the weight (the unweighted model's
    /// working set).
    pub fn working_set(&self, min_share: f64) -> impl Iterator<Item = u32> + '_ {
        self.elems
            .iter()
            .filter(move |&&(_, w)| w >= min_share)
            .map(|&(e, _)| e)
    }

    /// A running mean: `self` stands for `n` signatures, `other` is one more.
    pub fn mean_with(&self, n: u64, other: &Signature) -> Signature {
        let n = n as f64;
        let mut out = Vec::with_capacity(self.elems.len() + other.elems.len());
        let (a, b) = (&self.elems, &other.elems);
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            let (e, wa, wb) = match (a.get(i), b.get(j)) {
                (Some(&(ea, wa)), Some(&(eb, wb))) if ea == eb => {
                    i += 1;
                    j += 1;
                    (ea, wa, wb)
                }
                (Some(&(ea, wa)), Some(&(eb, _))) if ea < eb => {
                    i += 1;
                    (ea, wa, 0.0)
                }
                (Some(&(ea, wa)), None) => {
                    i += 1;
                    (ea, wa, 0.0)
                }
                (_, Some(&(eb, wb))) => {
                    j += 1;
                    (eb, 0.0, wb)
                }
                (None, None) => unreachable!(),
            };
            out.push((e, (wa * n + wb) / (n + 1.0)));
        }
        let total: f64 = out.iter().map(|&(_, w)| w).sum();
        Signature::from_weights(out.into_iter(), total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_is_manhattan_over_normalised_vectors() {
        let a = Signature::new(&[(1, 3), (2, 1)]);
        let b = Signature::new(&[(2, 1), (3, 1)]);
        // a = (.75, .25, 0), b = (0, .5, .5): .75 + .25 + .5
        assert!((a.distance(&b) - 1.5).abs() < 1e-12);
        assert!((b.distance(&a) - 1.5).abs() < 1e-12);
        assert_eq!(a.distance(&a), 0.0);
        assert_eq!(a.distance(&Signature::new(&[(7, 1)])), 2.0);
        assert_eq!(a.distance(&Signature::default()), 2.0);
    }

    #[test]
    fn overlap_is_the_weighted_models_example() {
        // §4.1.2: CW = {a:5, b:3, c:2}, TW = {a:25, b:15, c:10, d:50} gives 0.5.
        let cw = Signature::new(&[(0, 5), (1, 3), (2, 2)]);
        let tw = Signature::new(&[(0, 25), (1, 15), (2, 10), (3, 50)]);
        assert!((cw.overlap(&tw) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn running_mean_of_two_is_their_average() {
        let a = Signature::new(&[(1, 1)]);
        let b = Signature::new(&[(2, 1)]);
        let m = a.mean_with(1, &b);
        assert_eq!(m.elems(), &[(1, 0.5), (2, 0.5)]);
        let s = Signature::of_sum([&[(1, 2)][..], &[(1, 1), (2, 1)][..]]);
        assert_eq!(s.elems(), &[(1, 0.75), (2, 0.25)]);
    }
}
