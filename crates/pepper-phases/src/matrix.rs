//! The similarity matrix (§3.2.1 of the dissertation) and its picture.

use crate::Signature;

/// Distances between every pair of intervals (symmetric, so only i ≤ j is stored).
#[derive(Clone, Debug)]
pub struct Matrix {
    n: usize,
    upper: Vec<f32>,
}

impl Matrix {
    /// All pairwise Manhattan distances: O(n²) signatures compared, so callers keep `n`
    /// to a few thousand intervals.
    pub fn new(sigs: &[Signature]) -> Matrix {
        let n = sigs.len();
        let mut upper = Vec::with_capacity(n * (n + 1) / 2);
        for i in 0..n {
            for j in i..n {
                upper.push(sigs[i].distance(&sigs[j]) as f32);
            }
        }
        Matrix { n, upper }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The distance between intervals `i` and `j`, in [0, 2].
    pub fn distance(&self, i: usize, j: usize) -> f64 {
        let (i, j) = if i <= j { (i, j) } else { (j, i) };
        self.upper[self.row_start(i) + (j - i)] as f64
    }

    /// Where row `i` (entries i..n) starts: after rows 0..i of n, n−1, ... entries.
    fn row_start(&self, i: usize) -> usize {
        i * self.n - i * i.saturating_sub(1) / 2
    }

    /// The matrix as a PNG: both axes are intervals in execution order, darker is more
    /// similar (black = identical, white = disjoint: the dissertation's gray levels), the
    /// full square (the dissertation drew the upper triangle; the lower one mirrors it and
    /// reads more easily), `boundaries` (interval indices where a phase starts) marked in
    /// red on both axes' edges and as thin lines across. Each interval is `scale` pixels.
    pub fn png(&self, boundaries: &[usize], scale: usize) -> Vec<u8> {
        let scale = scale.max(1);
        let side = (self.n * scale).max(1);
        let mut rgb = vec![255u8; side * side * 3];
        let mut put = |x: usize, y: usize, c: [u8; 3]| {
            let o = (y * side + x) * 3;
            rgb[o..o + 3].copy_from_slice(&c);
        };
        for i in 0..self.n {
            for j in 0..self.n {
                let d = self.distance(i, j);
                let g = (d / 2.0 * 255.0).round().clamp(0.0, 255.0) as u8;
                for dy in 0..scale {
                    for dx in 0..scale {
                        put(j * scale + dx, i * scale + dy, [g, g, g]);
                    }
                }
            }
        }
        for &b in boundaries.iter().filter(|&&b| b > 0 && b < self.n) {
            let at = b * scale;
            for k in 0..side {
                // Dotted, so the matrix stays visible under the line.
                if k % 4 < 2 {
                    put(at, k, [220, 30, 30]);
                    put(k, at, [220, 30, 30]);
                }
            }
        }
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, side as u32, side as u32);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            let mut w = enc.write_header().expect("writing to a Vec");
            w.write_image_data(&rgb).expect("writing to a Vec");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_and_picture() {
        let a = Signature::new(&[(1, 1)]);
        let b = Signature::new(&[(2, 1)]);
        let m = Matrix::new(&[a.clone(), a, b]);
        assert_eq!(m.distance(0, 1), 0.0);
        assert_eq!(m.distance(2, 0), 2.0);
        assert_eq!(m.distance(1, 2), 2.0);
        assert_eq!(m.distance(2, 2), 0.0);
        let png = m.png(&[2], 4);
        let dec = png::Decoder::new(&png[..]);
        let mut r = dec.read_info().unwrap();
        let mut buf = vec![0; r.output_buffer_size()];
        let info = r.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (12, 12));
        // (0,0) black: identical; (row 0, col 2) white: disjoint; the boundary at 8 is red.
        let px = |x: usize, y: usize| &buf[(y * 12 + x) * 3..(y * 12 + x) * 3 + 3];
        assert_eq!(px(0, 0), &[0, 0, 0]);
        assert_eq!(px(10, 1), &[255, 255, 255]);
        assert_eq!(px(8, 0), &[220, 30, 30]);
    }
}
