//! Where a path end's or a counter's executions go: PEP's ring, every k-th path end, an
//! array slot or the in-module hash table, and the counters targeted mode adds (cold and
//! obvious paths).

use super::*;

/// `hash_fn(func, r, 1)`: one execution of path `r` of function `func` into the in-module
/// hash table.
fn hash_one(func: u32, r: u32, hash_fn: u32) -> [I<'static>; 4] {
    [
        I::I32Const(func as i32),
        I::LocalGet(r),
        I::I64Const(1),
        I::Call(hash_fn),
    ]
}

impl Emitter<'_> {
    /// `counter += 1` at a constant address.
    pub(super) fn bump(&self, out: &mut Vec<I<'_>>, at: Option<u32>) {
        if let Some(at) = at {
            self.add_to_counter(out, at, false, &[I::I64Const(1)]);
        }
    }

    /// An obvious path's counter: `+= 1`, or `+= r >= 0` where cold flow can arrive (a
    /// poisoned register means a cold path, which the cold counter gets instead).
    pub(super) fn bump_obvious(&self, out: &mut Vec<I<'_>>, o: Option<ObviousCounter>) {
        let Some(o) = o else { return };
        let r = self.locals.path;
        let amount = if o.guarded {
            vec![I::LocalGet(r), I::I64Const(0), I::I64GeS, I::I64ExtendI32U]
        } else {
            vec![I::I64Const(1)]
        };
        self.add_to_counter(out, o.addr, false, &amount);
    }

    /// Code at a recording point (DAG edge into EXIT): `count[r]++` unless only obvious
    /// paths end there. (The counter of an obvious path defined by this very edge is the
    /// caller's: a tail exit's comes with its edge code.)
    pub(super) fn record(&self, out: &mut Vec<I<'_>>, e: Option<DagEdgeId>) {
        let EmitKind::Paths {
            numbered,
            cold_counter,
            ..
        } = &self.kind
        else {
            return;
        };
        if e.is_none_or(|e| numbered.records(e)) {
            self.count(out);
        } else if let (Some(cold), true) =
            (cold_counter, e.is_some_and(|e| numbered.checks_cold(e)))
        {
            // Silent, but cold flow can end here: `if r < 0 { cold++ }`. A branch, not a
            // branch-free add: cold paths are rare, so it is predicted, and the hot path
            // touches no memory here.
            out.extend([
                I::LocalGet(self.locals.path),
                I::I64Const(0),
                I::I64LtS,
                I::If(wasm_encoder::BlockType::Empty),
            ]);
            self.bump(out, Some(*cold));
            out.push(I::End);
        }
    }

    /// Adds `amount` (instructions pushing an i64) to the u64 counter at `base + address`,
    /// where the address is on the stack (`on_stack`) or 0. One load-add-store for every
    /// kind of counter pepper keeps.
    pub(super) fn add_to_counter(
        &self,
        out: &mut Vec<I<'_>>,
        base: u32,
        on_stack: bool,
        amount: &[I<'static>],
    ) {
        let (a, m) = (self.locals.counter_addr, self.mem);
        if on_stack {
            out.extend([I::LocalTee(a), I::LocalGet(a)]);
        } else {
            out.extend([I::I32Const(0), I::I32Const(0)]);
        }
        out.push(I::I64Load(mem64(m, base)));
        out.extend(amount.iter().cloned());
        out.extend([I::I64Add, I::I64Store(mem64(m, base))]);
    }

    /// `count[r]++`: an array slot in profiler memory, or the in-module hash table; under
    /// PEP, hand the path to the sampler instead.
    fn count(&self, out: &mut Vec<I<'_>>) {
        let EmitKind::Paths {
            counting,
            func,
            hash_fn,
            miss_fn,
            layout,
            cold_counter,
            ..
        } = &self.kind
        else {
            return;
        };
        let (r, m) = (self.locals.path, self.mem);
        match *counting {
            Counting::Ring => {
                // ring[h % N] = r; head = ++h. Two stores, no load, no branch: the head
                // lives in a local (see `after_call`), so a tight loop carries no
                // store-to-load dependency through memory. The host sampler thread picks
                // its windows out of the ring asynchronously.
                let (h, mask) = (self.locals.ring_head, (layout.ring_entries - 1) as i32);
                if self.lazy_ring_head() {
                    out.extend([
                        I::I32Const(0),
                        I::I32Load(mem32(m, layout.ring_head)),
                        I::LocalSet(h),
                    ]);
                }
                out.extend([
                    I::LocalGet(h),
                    I::I32Const(mask),
                    I::I32And,
                    I::I32Const(3),
                    I::I32Shl,
                    I::LocalGet(r),
                    I::I64Store(mem64(m, layout.ring_base)),
                    I::I32Const(0),
                    I::LocalGet(h),
                    I::I32Const(1),
                    I::I32Add,
                    I::LocalTee(h),
                    I::I32Store(mem32(m, layout.ring_head)),
                ]);
            }
            Counting::Every { k } => {
                // if --n <= 0 { n = k; count[r]++ (hash) }: deterministic sampling of every
                // k-th path end of the whole module. The countdown lives in a local (see
                // `after_call`), so a path end costs a decrement and a well-predicted branch.
                let n = self.locals.ring_head;
                out.extend([
                    I::LocalGet(n),
                    I::I32Const(1),
                    I::I32Sub,
                    I::LocalTee(n),
                    I::I32Const(0),
                    I::I32LeS,
                    I::If(wasm_encoder::BlockType::Empty),
                    I::I32Const(k as i32),
                    I::LocalSet(n),
                ]);
                out.extend(hash_one(*func, r, *hash_fn));
                out.push(I::End);
            }
            Counting::Array { base } => {
                // The register holds the slot's byte offset (TPP A.1's addressing mode):
                // the path end is one memory increment, no shift. Targeted: a poisoned
                // register lands in the cold slots past the array's `n` path slots (its
                // low bits are `8n` plus hot increments), so unlike TPP A.1 not even a
                // conditional move is needed.
                out.extend([I::LocalGet(r), I::I32WrapI64]);
                self.add_to_counter(out, base, true, &[I::I64Const(1)]);
            }
            Counting::Hash { cache } => {
                if let Some(cold) = cold_counter {
                    out.extend([
                        I::LocalGet(r),
                        I::I64Const(0),
                        I::I64LtS,
                        I::If(wasm_encoder::BlockType::Empty),
                    ]);
                    self.add_to_counter(out, *cold, false, &[I::I64Const(1)]);
                    out.push(I::Else);
                }
                match cache {
                    // No cache: the table call at every path end.
                    None => out.extend(hash_one(*func, r, *hash_fn)),
                    Some(cache) => self.cached_count(out, *func, cache, *miss_fn, layout),
                }
                if cold_counter.is_some() {
                    out.push(I::End);
                }
            }
            Counting::None => {}
        }
    }

    /// `count[r]++` through a hashed function's direct-mapped cache at `cache`: slot =
    /// hash(r); a hit (the slot holds r + 1) is one compare and one increment, a miss
    /// calls `miss_fn`.
    fn cached_count(
        &self,
        out: &mut Vec<I<'_>>,
        func: u32,
        cache: u32,
        miss_fn: u32,
        layout: &MemoryLayout,
    ) {
        let (r, m) = (self.locals.path, self.mem);
        let (a, shift) = (
            self.locals.counter_addr,
            64 - layout.hash_cache_entries.trailing_zeros(),
        );
        out.extend([
            I::LocalGet(r),
            I::I64Const(0x9E37_79B9_7F4A_7C15u64 as i64),
            I::I64Mul,
            I::I64Const(shift as i64),
            I::I64ShrU,
            I::I32WrapI64,
            I::I32Const(4),
            I::I32Shl,
            I::LocalTee(a),
            I::I64Load(mem64(m, cache)),
            I::LocalGet(r),
            I::I64Const(1),
            I::I64Add,
            I::I64Eq,
            I::If(wasm_encoder::BlockType::Empty),
            I::LocalGet(a),
            I::LocalGet(a),
            I::I64Load(mem64(m, cache + 8)),
            I::I64Const(1),
            I::I64Add,
            I::I64Store(mem64(m, cache + 8)),
            I::Else,
            I::I32Const(func as i32),
            I::LocalGet(r),
            I::LocalGet(a),
            I::I32Const(cache as i32),
            I::I32Add,
            I::Call(miss_fn),
            I::End,
        ]);
    }
}
