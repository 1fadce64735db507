//! pprof's `profile.proto`, written with prost from hand-declared messages (the schema is
//! small and stable; no protoc needed).
//! <https://github.com/google/pprof/blob/main/proto/profile.proto>

use crate::{contexts, frame_name, unit};
use pepper_profile::Profile;
use prost::Message;
use std::collections::HashMap;

#[derive(Clone, PartialEq, Message)]
struct PProfile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, repeated, tag = "13")]
    comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

#[derive(Clone, PartialEq, Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
    #[prost(int64, tag = "3")]
    num: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Mapping {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    memory_start: u64,
    #[prost(uint64, tag = "3")]
    memory_limit: u64,
    #[prost(uint64, tag = "4")]
    file_offset: u64,
    #[prost(int64, tag = "5")]
    filename: i64,
    #[prost(int64, tag = "6")]
    build_id: i64,
    #[prost(bool, tag = "7")]
    has_functions: bool,
    #[prost(bool, tag = "8")]
    has_filenames: bool,
    #[prost(bool, tag = "9")]
    has_line_numbers: bool,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    mapping_id: u64,
    #[prost(uint64, tag = "3")]
    address: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
    #[prost(int64, tag = "5")]
    start_line: i64,
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.get("");
        s
    }
    fn get(&mut self, v: &str) -> i64 {
        if let Some(&i) = self.index.get(v) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(v.to_string());
        self.index.insert(v.to_string(), i);
        i
    }
}

/// The hottest path of each function (its count and a description), for a sample label.
fn hottest_paths(p: &Profile) -> HashMap<u32, (u64, String)> {
    let mut hot_path: HashMap<u32, (u64, String)> = HashMap::new();
    for path in &p.paths {
        let e = hot_path.entry(path.func).or_default();
        if path.count > e.0 {
            *e = (
                path.count,
                format!(
                    "{:?} -> {:?}, {} branches, blocks at {}",
                    path.start,
                    path.end,
                    path.steps.len(),
                    path.blocks
                        .iter()
                        .map(|b| format!("{b:#x}"))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            );
        }
    }
    hot_path
}

/// Where a function's source is, from the DWARF lines of its branches and call sites: its
/// file, its first line, and the line of its most executed branch.
struct FunctionLines {
    file: String,
    first: i64,
    busiest: i64,
}

fn function_lines(p: &Profile, c: &pepper_profile::Contexts) -> HashMap<u32, FunctionLines> {
    let mut out: HashMap<u32, (FunctionLines, u64)> = HashMap::new();
    let branches = p
        .branches
        .iter()
        .map(|b| (b.func, b.location.as_deref(), b.total()));
    let sites = c
        .call_sites
        .iter()
        .map(|s| (s.func, s.location.as_deref(), 0));
    for (func, loc, executed) in branches.chain(sites) {
        let Some((file, line)) = loc.and_then(file_line) else {
            continue;
        };
        let e = out.entry(func).or_insert_with(|| {
            (
                FunctionLines {
                    file: file.to_string(),
                    first: line,
                    busiest: line,
                },
                0,
            )
        });
        if e.0.file == file {
            e.0.first = e.0.first.min(line);
            if executed > e.1 {
                e.0.busiest = line;
                e.1 = executed;
            }
        }
    }
    out.into_iter().map(|(f, (l, _))| (f, l)).collect()
}

/// Splits `file:line` into its parts.
fn file_line(loc: &str) -> Option<(&str, i64)> {
    let (f, l) = loc.rsplit_once(':')?;
    Some((f, l.parse().ok()?))
}

/// The gzipped pprof encoding of the profile's calling contexts: one mapping for the
/// module (build id = its SHA-256), one function per wasm function, one location per call
/// site (address = the call instruction's offset in the module, line from DWARF when
/// present) plus one per leaf function, and one sample per context with a value. Each
/// sample carries the leaf function's hottest path as a label, when the profile has paths.
pub fn pprof(p: &Profile) -> anyhow::Result<Vec<u8>> {
    let c = contexts(p)?;
    let func_lines = function_lines(p, &c);
    let mut s = Strings::new();
    let (vname, vunit) = unit(p, &c);
    let sampled = c.kind == pepper_profile::ContextKind::Sampled;
    let mut sample_type = vec![ValueType {
        r#type: s.get(vname),
        unit: s.get(vunit),
    }];
    if sampled {
        sample_type.push(ValueType {
            r#type: s.get("calls"),
            unit: s.get("count"),
        });
    }
    let mapping = Mapping {
        id: 1,
        memory_start: 0,
        memory_limit: p.module.size,
        file_offset: 0,
        filename: s.get(&p.module.path),
        build_id: s.get(&p.module.sha256),
        has_functions: true,
        has_filenames: !func_lines.is_empty(),
        has_line_numbers: !func_lines.is_empty(),
    };
    let mut functions: Vec<Function> = Vec::new();
    let mut function_ids: HashMap<u32, u64> = HashMap::new();
    let mut locations: Vec<Location> = Vec::new();
    // Locations by (function, call site).
    let mut location_ids: HashMap<(u32, Option<u32>), u64> = HashMap::new();
    let mut location = |func: u32, site: Option<u32>, s: &mut Strings| -> u64 {
        if let Some(&id) = location_ids.get(&(func, site)) {
            return id;
        }
        let cs = site.and_then(|x| c.call_sites.get(x as usize));
        let lines = func_lines.get(&func);
        // A caller frame is at its call site; a leaf at its function's busiest branch.
        let file = match cs {
            Some(cs) => cs.location.as_deref().and_then(file_line),
            None => lines.map(|l| (l.file.as_str(), l.busiest)),
        };
        let fid = *function_ids.entry(func).or_insert_with(|| {
            let id = functions.len() as u64 + 1;
            let name = s.get(&frame_name(p, func));
            functions.push(Function {
                id,
                name,
                system_name: name,
                filename: lines.map_or(0, |l| s.get(&l.file)),
                start_line: lines.map_or(0, |l| l.first),
            });
            id
        });
        let id = locations.len() as u64 + 1;
        locations.push(Location {
            id,
            mapping_id: 1,
            address: cs.map_or(0, |cs| cs.offset),
            line: vec![Line {
                function_id: fid,
                line: file.map_or(0, |f| f.1),
            }],
        });
        location_ids.insert((func, site), id);
        id
    };
    let hot_path = hottest_paths(p);
    let hot_key = s.get("pepper.hottest_path");
    let count_key = s.get("pepper.hottest_path_count");
    let mut samples = Vec::new();
    for (i, v) in c.valued() {
        // pprof lists the leaf first; a caller frame's location is its call site.
        let chain = c.ancestry(i);
        let mut ids = Vec::with_capacity(chain.len());
        for (k, &n) in chain.iter().enumerate().rev() {
            let site = chain.get(k + 1).and_then(|&child| c.nodes[child].site);
            ids.push(location(c.nodes[n].func, site, &mut s));
        }
        let mut value = vec![v as i64];
        if sampled {
            value.push(c.nodes[i].calls as i64);
        }
        let mut label = Vec::new();
        if let Some((count, text)) = hot_path.get(&c.nodes[i].func) {
            label.push(Label {
                key: hot_key,
                str: s.get(text),
                num: 0,
            });
            label.push(Label {
                key: count_key,
                str: 0,
                num: *count as i64,
            });
        }
        samples.push(Sample {
            location_id: ids,
            value,
            label,
        });
    }
    let period = c.sampling.as_ref().map_or(1, |x| x.interval_us as i64);
    let comment = vec![s.get(&format!(
        "pepper {} profile of {}",
        if sampled { "sampled" } else { "exact" },
        p.module.path
    ))];
    let msg = PProfile {
        sample_type: sample_type.clone(),
        sample: samples,
        mapping: vec![mapping],
        location: locations,
        function: functions,
        string_table: Vec::new(),
        time_nanos: 0,
        duration_nanos: (p.run.run_ms * 1e6) as i64,
        period_type: Some(sample_type[0].clone()),
        period,
        comment,
        default_sample_type: sample_type[0].r#type,
    };
    let msg = PProfile {
        string_table: s.table,
        ..msg
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &msg.encode_to_vec())?;
    Ok(gz.finish()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile with one function whose two branches have DWARF lines: the leaf location
    /// is at the busier branch's line, the function starts at the first line.
    fn two_branches() -> Profile {
        let branch = |id: u32, loc: &str, counts: [u64; 2]| {
            serde_json::json!({"id": id, "func": 1, "offset": 40 + id, "kind": "br_if",
                "outcomes": ["taken", "not-taken"], "counts": counts, "location": loc})
        };
        crate::testing::one_function(
            "exact-edges",
            vec![
                branch(0, "/src/a.c:10", [2, 3]),
                branch(1, "/src/a.c:7", [40, 10]),
            ],
        )
    }

    #[test]
    fn leaves_carry_the_busiest_line_and_functions_their_file() {
        let p = two_branches();
        let bytes = pprof(&p).unwrap();
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut raw)
            .unwrap();
        let msg = PProfile::decode(&raw[..]).unwrap();
        let f = &msg.function[0];
        assert_eq!(msg.string_table[f.filename as usize], "/src/a.c");
        assert_eq!(f.start_line, 7);
        let leaf = &msg.location[msg.sample[0].location_id[0] as usize - 1];
        assert_eq!(
            leaf.line[0].line, 7,
            "the branch run 50 times, not the one run 5"
        );
    }
}
