//! The in-module hash table's functions: a hashed function's cache miss and the table's
//! insert (see `HashTable`).

use crate::emit::memarg;
use pepper_layout::HashTable;
use wasm_encoder::{BlockType, Function, Instruction as I, ValType};

/// A hashed function's cache miss, `(func, r, slot)`: the entry at `slot` (absolute
/// address) moves its count to the hash table, and path `r` claims it with a count of 1.
pub(super) fn cache_miss_function(mem: u32, hash_fn: u32) -> Function {
    let m64 = |o: u32| memarg(mem, o, 3);
    let (f, r, slot, old) = (0u32, 1u32, 2u32, 3u32);
    let mut func = Function::new([(1, ValType::I64)]);
    for i in [
        I::LocalGet(slot),
        I::I64Load(m64(0)),
        I::LocalTee(old),
        I::I64Eqz,
        I::I32Eqz,
        I::If(BlockType::Empty),
        I::LocalGet(f),
        I::LocalGet(old),
        I::I64Const(1),
        I::I64Sub,
        I::LocalGet(slot),
        I::I64Load(m64(8)),
        I::Call(hash_fn),
        I::End,
        I::LocalGet(slot),
        I::LocalGet(r),
        I::I64Const(1),
        I::I64Add,
        I::I64Store(m64(0)),
        I::LocalGet(slot),
        I::I64Const(1),
        I::I64Store(m64(8)),
        I::End,
    ] {
        func.instruction(&i);
    }
    func
}

/// The in-module hash table for functions with too many paths to give each an array
/// (TPP §2.2: PP's hashed routines). Open addressing, linear probing; entries are
/// `[r: u64][count: u64][func + 1: u32][pad]`. When 3/4 full, further new paths are counted
/// in `hash_overflow` and reported, never silently dropped.
///
/// With `node`, the function returns the entry's index + 1 (0 when the table is full):
/// the exact context table, where the key is the caller's context and call site.
pub(super) fn hash_function(mem: u32, l: &HashTable, node: bool) -> Function {
    let m64 = |o: u32| memarg(mem, o, 3);
    let m32 = |o: u32| memarg(mem, o, 2);
    // The path table adds its third parameter; the context table counts one call.
    let (f, r) = (0u32, 1u32);
    let (amount, h, p, key) = if node {
        (I::I64Const(1), 2u32, 3u32, 4u32)
    } else {
        (I::LocalGet(2), 3u32, 4u32, 5u32)
    };
    let mask = (l.capacity - 1) as i32;
    let limit = (l.capacity / 4 * 3) as i32;
    let tb = l.base;
    let mut func = Function::new([(3, ValType::I32)]);
    let ins = [
        I::LocalGet(r),
        I::LocalGet(f),
        I::I64ExtendI32U,
        I::I64Const(0x9E37_79B9_7F4A_7C15u64 as i64),
        I::I64Mul,
        I::I64Xor,
        I::I64Const(0xFF51_AFD7_ED55_8CCDu64 as i64),
        I::I64Mul,
        I::I64Const(32),
        I::I64ShrU,
        I::I32WrapI64,
        I::I32Const(mask),
        I::I32And,
        I::LocalSet(h),
        I::Loop(BlockType::Empty),
        I::LocalGet(h),
        I::I32Const(24),
        I::I32Mul,
        I::LocalSet(p),
        I::LocalGet(p),
        I::I32Load(m32(tb + 16)),
        I::LocalTee(key),
        I::LocalGet(f),
        I::I32Const(1),
        I::I32Add,
        I::I32Eq,
        I::If(BlockType::Empty),
        I::LocalGet(p),
        I::I64Load(m64(tb)),
        I::LocalGet(r),
        I::I64Eq,
        I::If(BlockType::Empty),
        I::LocalGet(p),
        I::LocalGet(p),
        I::I64Load(m64(tb + 8)),
        amount.clone(),
        I::I64Add,
        I::I64Store(m64(tb + 8)),
        I::Return,
        I::End,
        I::End,
        I::LocalGet(key),
        I::I32Eqz,
        I::If(BlockType::Empty),
        I::I32Const(0),
        I::I32Load(m32(l.used)),
        I::I32Const(limit),
        I::I32GeU,
        I::If(BlockType::Empty),
        I::I32Const(0),
        I::I32Const(0),
        I::I64Load(m64(l.overflow)),
        amount.clone(),
        I::I64Add,
        I::I64Store(m64(l.overflow)),
        I::Return,
        I::End,
        I::I32Const(0),
        I::I32Const(0),
        I::I32Load(m32(l.used)),
        I::I32Const(1),
        I::I32Add,
        I::I32Store(m32(l.used)),
        I::LocalGet(p),
        I::LocalGet(f),
        I::I32Const(1),
        I::I32Add,
        I::I32Store(m32(tb + 16)),
        I::LocalGet(p),
        I::LocalGet(r),
        I::I64Store(m64(tb)),
        I::LocalGet(p),
        amount.clone(),
        I::I64Store(m64(tb + 8)),
        I::Return,
        I::End,
        I::LocalGet(h),
        I::I32Const(1),
        I::I32Add,
        I::I32Const(mask),
        I::I32And,
        I::LocalSet(h),
        I::Br(0),
        I::End,
        I::End,
    ];
    let mut returns = 0;
    for i in &ins {
        if node && matches!(i, I::Return) {
            // Found or inserted: the entry's index + 1; the table was full (the second
            // return): 0, the root, so the call is still counted somewhere.
            if returns == 1 {
                func.instruction(&I::I32Const(0));
            } else {
                func.instruction(&I::LocalGet(h));
                func.instruction(&I::I32Const(1));
                func.instruction(&I::I32Add);
            }
            returns += 1;
        }
        if node && matches!(i, I::End) && std::ptr::eq(i, ins.last().unwrap()) {
            func.instruction(&I::Unreachable);
        }
        func.instruction(i);
    }
    func
}
